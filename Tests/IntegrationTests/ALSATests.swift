import CuedProtocol
import Foundation
import Testing
import TestSupport

/// cued through real ALSA, with no sound card: a `type file` PCM over `null`
/// records exactly the frames played.
@Suite(.timeLimit(.minutes(2))) struct ALSATests {
    /// ALSA_CONFIG_PATH replaces alsa.conf, so the stock file comes first.
    func alsaConfig(in dir: TempDir, raw: String) throws -> [String: String] {
        let conf = dir.file("test-alsa.conf")
        try """
            pcm.testsink {
                type file
                slave.pcm "null"
                file "\(raw)"
                format "raw"
            }
            """.write(toFile: conf, atomically: true, encoding: .utf8)
        return ["ALSA_CONFIG_PATH": "/usr/share/alsa/alsa.conf:" + conf]
    }

    func status(_ d: DaemonHarness) throws -> Status {
        try #require(Status.parse(String(try d.request("status").dropFirst(3))))
    }

    @Test func filePCMReceivesTheCuesFrames() throws {
        let tmp = TempDir()
        let raw = tmp.file("out.raw")
        let d = try DaemonHarness(args: ["--sink", "alsa:testsink"], extraEnv: try alsaConfig(in: tmp, raw: raw))
        #expect(try d.request("play pop wait") == "ok")  // answered once it has sounded
        let pop = Fixture.standard["pop"]!
        #expect(try status(d).cues["pop"]?.played == 1)
        #expect(eventually { (try? status(d))?.sink.state == "idle" })
        let s = try status(d)
        #expect(s.sink.spec == "alsa:testsink")
        #expect(s.sink.format == "S16_LE")
        #expect(s.sink.rate == 48_000)
        #expect(d.stop() == 0)  // closes the PCM, flushing the file plugin
        let bytes = try Data(contentsOf: URL(fileURLWithPath: raw))
        let samples = bytes.withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
        #expect(samples.count >= pop.count * 2)
        #expect(sampleDifference(Array(samples.prefix(pop.count * 2)), pop.stereo) == nil)
    }

    @Test func alsaNullWorks() throws {
        let d = try DaemonHarness(args: ["--sink", "alsa:null"])
        #expect(try d.request("play pop wait") == "ok")
        #expect(try status(d).played == 1)
        #expect(eventually { (try? status(d))?.sink.state == "idle" })
        #expect(d.stop() == 0)
    }

    @Test func aPCMNameALSADoesNotDefineIsAStartupError() throws {
        let r = try runProcess(TestPaths.binary("cued"), ["--sink", "alsa:no_such_pcm", "--socket", "/tmp/none.sock"])
        #expect(r.status == 78)
        #expect(r.err.contains("no_such_pcm"))
        #expect(r.err.contains("aplay -L"))
    }

    @Test func aDefinedPCMWhoseDeviceIsAbsentKeepsTheDaemonAnswering() throws {
        // hw:9 is defined (pcm.hw) but there is no card 9: not a start-up error; cued runs and retries.
        let d = try DaemonHarness(args: ["--sink", "alsa:hw:9"])
        #expect(try d.request("play pop") == "ok")
        #expect(eventually { (try? status(d))?.sink.state == "failed" })
        let s = try status(d)
        guard let error = s.sink.error else { Issue.record("no error in status"); return }
        #expect(error.contains("hw:9"))
        #expect(eventually { (try? status(d))?.dropped == 1 })  // after waiting its 250 ms
        #expect(try d.request("ping") == "ok pong")
        #expect(try d.request("play pop") == "ok")  // retried on the next cue, still failing, still answering
        #expect(eventually { (try? status(d))?.dropped == 2 })
    }

    @Test func deviceClosesAfterIdleAndReopens() throws {
        let d = try DaemonHarness(args: ["--sink", "alsa:null", "--idle-close-s", "0.3"])
        #expect(try d.request("play pop") == "ok")
        #expect(eventually { (try? status(d))?.sink.state == "closed" })
        #expect(try d.request("play pop wait") == "ok")  // reopened, and it sounded
        #expect(try status(d).played == 2)
    }
}
