import CuedClient
import CuedProtocol
import Foundation
import Testing
import TestSupport

/// The built `cued`, spawned with a WAV capture sink and a temp socket.
@Suite(.timeLimit(.minutes(2))) struct DaemonTests {
    static let wavSink = ["--sink", "wav:%DIR%/capture.wav"]

    @Test func playPutsCueIntoCaptureSampleExact() throws {
        let d = try DaemonHarness(args: Self.wavSink)
        #expect(try d.request("play pop") == "ok")
        let pop = Fixture.standard["pop"]!
        #expect(eventually { ((try? WAV.read(d.capturePath))?.frames ?? 0) >= pop.count })
        #expect(d.stop() == 0)
        let cap = try WAV.read(d.capturePath)
        #expect(cap.sampleRate == 48_000 && cap.channels == 2)
        #expect(sampleDifference(Array(cap.samples.prefix(pop.count * 2)), pop.stereo) == nil)
        #expect(cap.samples.dropFirst(pop.count * 2).allSatisfy { $0 == 0 })  // padding to the period end
    }

    /// A play is counted as soon as it is answered: `status` right after the reply
    /// has it, in the total, the cue's and the app's counts alike (the total and the
    /// cue's used to be counted on the audio thread, a moment later than the app's).
    @Test func statusCountsAPlayAsSoonAsItIsAnswered() throws {
        let d = try DaemonHarness(args: ["--sink", "null"])
        let c = try d.client()
        #expect(try c.request("app counter") == "ok counter")
        for i in 1...20 {
            #expect(try c.request("play pop") == "ok")
            let reply = try c.request("status")
            let s = try #require(Status.parse(String(reply.dropFirst(3))))
            #expect(s.played == i && s.cues["pop"]?.played == i && s.apps["counter"]?.played == i,
                    "after \(i) plays: played \(s.played), pop \(s.cues["pop"]?.played ?? -1), counter \(s.apps["counter"]?.played ?? -1)")
        }
    }

    @Test func overlappingPlaysAreMixed() throws {
        let long = Fixture.samples(seed: 7, frames: 24_000, amplitude: 4000)   // 500 ms
        let short = Fixture.samples(seed: 8, frames: 2_400, amplitude: 4000)   // 50 ms
        var cues = Fixture.standard
        cues["long"] = long
        cues["short"] = short
        let d = try DaemonHarness(cues: cues, args: Self.wavSink)
        let c = try d.client()
        #expect(try c.request("play long") == "ok")
        // short comes in while long sounds: once its first 50 ms are in the capture.
        #expect(eventually { ((try? WAV.read(d.capturePath))?.frames ?? 0) >= 2_400 })
        #expect(try c.request("play short") == "ok")
        #expect(eventually { ((try? WAV.read(d.capturePath))?.frames ?? 0) >= long.count })
        let status = try #require(Status.parse(String(try d.request("status").dropFirst(3))))
        #expect(status.voicesStolen == 0)
        d.stop()
        let cap = try WAV.read(d.capturePath)
        let left = stride(from: 0, to: cap.samples.count, by: 2).map { Int(cap.samples[$0]) }
        // Where short came in, the capture is exactly long + short.
        guard let k = left.indices.first(where: { $0 < long.count && left[$0] != Int(long[$0]) }) else {
            Issue.record("the second cue never appears in the capture"); return
        }
        #expect(k > 0)
        for i in 0..<long.count {
            let expected = Int(long[i]) + ((i >= k && i - k < short.count) ? Int(short[i - k]) : 0)
            if left[i] != expected { Issue.record("frame \(i): \(left[i]) != \(expected) (short at \(k))"); break }
        }
    }

    @Test func muteSilencesAndPersists() throws {
        var cues = Fixture.standard
        cues["long"] = Fixture.constant(3000, frames: 96_000)  // 2 s
        let d = try DaemonHarness(cues: cues, args: Self.wavSink)
        let c = try d.client()
        #expect(try c.request("play long") == "ok")
        #expect(eventually { ((try? WAV.read(d.capturePath))?.frames ?? 0) > 0 })  // it sounds
        #expect(try c.request("mute") == "ok muted")
        #expect(try c.request("play pop") == "ok muted")
        #expect(try c.request("state release") == "ok muted")
        #expect(try c.request("state release") == "ok -")  // the state advanced while muted
        // The long cue is cut and the stream stops: no voice, the device idle (the
        // sink is clocked in real time: a voice playing on would keep it running).
        #expect(eventually { (try? d.status()).map { $0.voicesActive == 0 && $0.sink.state == "idle" } ?? false })
        let status = try #require(Status.parse(String(try c.request("status").dropFirst(3))))
        #expect(status.muted == true)
        #expect(status.played == 1)  // the long cue only
        #expect(d.stop() == 0)
        // Less than the long cue reached the sink, and nothing of pop (whose
        // samples reach ±8000; the long cue and its fade stay within 0…3000).
        let cap = try WAV.read(d.capturePath)
        #expect(cap.samples.filter { $0 == 3000 }.count < 96_000 * 2, "the long cue played to its end")
        #expect(cap.samples.allSatisfy { $0 >= 0 && $0 <= 3000 }, "something else than the long cue reached the sink")

        // A restart keeps the mute…
        let state = try String(contentsOfFile: d.dir.file("state/cued/state"), encoding: .utf8)
        #expect(state.contains("muted=true"))
        let again = try DaemonHarness(args: ["--sink", "null", "--socket", d.socketPath], extraEnv: ["XDG_STATE_HOME": d.dir.file("state")])
        #expect(try again.request("play pop") == "ok muted")
        again.stop()
        // …and --unmuted overrides it.
        let forced = try DaemonHarness(args: ["--sink", "null", "--unmuted", "--socket", d.socketPath], extraEnv: ["XDG_STATE_HOME": d.dir.file("state")])
        #expect(try forced.request("play pop") == "ok")
    }

    @Test func refreshSequencePlaysPsst1Psst2PopInOrder() throws {
        let cues: [String: [Int16]] = [
            "psst1": Fixture.constant(100, frames: 960), "psst2": Fixture.constant(200, frames: 960),
            "pop": Fixture.constant(300, frames: 960),
        ]
        let d = try DaemonHarness(cues: cues, args: Self.wavSink)
        let c = try d.client()
        var replies: [String] = []
        for s in ["idle", "pull", "release", "loading", "idle"] {
            replies.append(try c.request("state \(s)"))
            #expect(try d.quiet())  // each cue ends before the next starts
        }
        #expect(replies == ["ok -", "ok -", "ok psst1", "ok psst2", "ok pop"])
        #expect(eventually { ((try? WAV.read(d.capturePath))?.frames ?? 0) >= 3 * 960 })
        d.stop()
        let values = try WAV.read(d.capturePath).samples.filter { $0 != 0 }
        var order: [Int16] = []
        for v in values where order.last != v { order.append(v) }
        #expect(order == [100, 200, 300])
    }

    @Test func halfClosedClientGetsItsReply() throws {
        let d = try DaemonHarness(args: ["--sink", "null"])
        let r = try runProcess("/bin/sh", ["-c", "printf 'ping\\ncues\\n' | socat - UNIX-CONNECT:\(d.socketPath)"])
        #expect(r.status == 0)
        #expect(r.out == "ok pong\nok pop psst1 psst2\n")
        // A last line without LF still counts.
        let r2 = try runProcess("/bin/sh", ["-c", "printf 'ping' | socat - UNIX-CONNECT:\(d.socketPath)"])
        #expect(r2.out == "ok pong\n")
    }

    @Test func pipelinedRequestsAreAnsweredInOrder() throws {
        let d = try DaemonHarness(args: ["--sink", "null"])
        let c = try d.client()
        let lines = (0..<200).map { i -> String in ["ping", "cues", "play nope", "state release", "bogus"][i % 5] }
        try c.send(Array(lines.map { $0 + "\n" }.joined().utf8))
        var replies: [String] = []
        for _ in lines { replies.append(try c.readLine()) }
        for (i, r) in replies.enumerated() {
            switch i % 5 {
            case 0: #expect(r == "ok pong")
            case 1: #expect(r == "ok pop psst1 psst2")
            case 2: #expect(r.hasPrefix("err unknown-cue "))
            case 3: #expect(r == (i == 3 ? "ok psst1" : "ok -"))
            default: #expect(r.hasPrefix("err unknown-verb "))
            }
        }
    }

    @Test func badInputGetsErrorsAndNeverDisturbsOthers() throws {
        let d = try DaemonHarness(args: ["--sink", "null"])
        let other = try d.client()
        let c = try d.client()
        try c.send([0xFF, 0xFE, 0x0A])
        #expect(try c.readLine().hasPrefix("err bad-argument "))
        try c.send(Array("\r\n".utf8))
        #expect(try c.readLine().hasPrefix("err unknown-verb "))
        try c.send(Array("play pop 1000\r\n".utf8))
        #expect(try c.readLine().hasPrefix("err bad-argument "))
        try c.send(Array(String(repeating: "x", count: 600).utf8))
        #expect(try c.readLine().hasPrefix("err line-too-long "))
        #expect(throws: ClientError.self) { try c.readLine() }  // closed by the daemon
        #expect(try other.request("ping") == "ok pong")
        #expect(try d.request("ping") == "ok pong")
    }

    @Test func statusHasEveryField() throws {
        let d = try DaemonHarness(args: Self.wavSink)
        #expect(try d.request("play pop") == "ok")
        #expect(eventually { ((try? WAV.read(d.capturePath))?.frames ?? 0) > 0 })
        let reply = try d.request("status")
        #expect(reply.hasPrefix("ok {"))
        // Every field the Status type knows is in the reply, nested as it says.
        let json = try JSON.parse(String(reply.dropFirst(3)))
        for path in Status.fieldPaths where !path.contains("NAME") {
            var v: JSON? = json
            for key in path.split(separator: ".") { v = v?[String(key)] }
            #expect(v != nil, "missing \(path)")
        }
        let s = try #require(Status.parse(String(reply.dropFirst(3))))
        #expect(s.protocolVersion == 1)
        #expect(s.sink.rate == 48_000)
        #expect(s.cues["pop"]?.frames == 2_400)
        #expect(s.cues["pop"]?.played == 1)
        // One cue played: one latency measured (request to its first frame written), so its
        // median is its maximum.
        let p50 = try #require(s.latencyUs.p50, "no latency")
        #expect(s.latencyUs.max == p50 && s.latencyUs.p99 == p50, "\(s.latencyUs)")
    }

    @Test func secondDaemonOnTheSameSocketRefuses() throws {
        let first = try DaemonHarness(args: ["--sink", "null"])
        let second = try DaemonHarness(args: ["--sink", "null", "--socket", first.socketPath], waitReady: false)
        let status = second.waitForExit()
        #expect(status != nil && status != 0)
        #expect(second.readStderr().contains("already running"))
        #expect(!second.readStderr().contains("cues loaded"), "a refused start says only why: \(second.readStderr())")
        #expect(try first.request("ping") == "ok pong")
    }

    @Test func staleSocketIsReplaced() throws {
        let first = try DaemonHarness(args: ["--sink", "null"])
        first.process.signal(SIGKILL)
        first.process.wait()
        #expect(FileManager.default.fileExists(atPath: first.socketPath))
        let second = try DaemonHarness(args: ["--sink", "null", "--socket", first.socketPath])
        #expect(try second.request("ping") == "ok pong")
    }

    @Test func socketAndDirectoryArePrivate() throws {
        let d = try DaemonHarness(args: ["--sink", "null"])
        let sock = try FileManager.default.attributesOfItem(atPath: d.socketPath)
        let dir = try FileManager.default.attributesOfItem(atPath: (d.socketPath as NSString).deletingLastPathComponent)
        #expect((sock[.posixPermissions] as? Int) == 0o600)
        #expect((dir[.posixPermissions] as? Int) == 0o700)
        #expect(d.stop() == 0)
        #expect(!FileManager.default.fileExists(atPath: d.socketPath))  // removed on a clean exit
    }

    @Test func missingRequiredCueExits78() throws {
        var cues = Fixture.standard
        cues.removeValue(forKey: "psst2")
        let d = try DaemonHarness(cues: cues, args: ["--sink", "null"], waitReady: false)
        #expect(d.waitForExit() == 78)
        let err = d.readStderr()
        #expect(err.contains("psst2"))
        #expect(err.split(separator: "\n").filter { $0.hasPrefix("cued:") }.count == 1)
    }

    /// Idle means asleep: after a cue has played and the stream has stopped, no
    /// thread of cued runs at all, not even on a slow timer (a count, not a timing).
    @Test func idleDaemonHasNoWakeups() throws {
        let d = try DaemonHarness(args: ["--sink", "alsa:null"])
        let c = try d.client()  // one connection for every request: no close left to handle
        #expect(try c.request("play pop") == "ok")
        #expect(eventually { (try? c.request("status")).flatMap { Status.parse(String($0.dropFirst(3))) }?.sink.state == "idle" })
        // Per thread: context switches and nanoseconds on a CPU (schedstat).
        let threads = { () -> [String: [Int]] in
            var out: [String: [Int]] = [:]
            for tid in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(d.pid)/task")) ?? [] {
                let task = "/proc/\(d.pid)/task/\(tid)/"
                let status = (try? String(contentsOfFile: task + "status", encoding: .utf8)) ?? ""
                let switches = status.split(separator: "\n").filter { $0.contains("ctxt_switches") }
                    .compactMap { Int($0.split(separator: "\t").last!.trimmingCharacters(in: .whitespaces)) }.reduce(0, +)
                let sched = (try? String(contentsOfFile: task + "schedstat", encoding: .utf8)) ?? ""
                out[tid] = [switches, Int(sched.split(separator: " ").first ?? "") ?? -1]
            }
            return out
        }
        // Settled: the last reply written, every thread back asleep (0.5 s without a switch).
        #expect(eventually(timeout: 20) {
            let before = threads()
            usleep(500_000)  // the span measured: quiet is the absence of events over it
            return threads() == before
        }, "cued never went 0.5 s without waking")
        let before = threads()
        usleep(2_000_000)  // the span measured (no event to wait on): a timer of 1 Hz or faster shows here
        let after = threads()
        // main (signals), audio, the audio thread's relay, event loop, a reload and a save thread, the log writer,
        // the stderr drain, the sample reclaimer: a handful, not one per request.
        #expect(after.count <= 10, "threads: \(after.count)")
        let woke = after.filter { before[$0.key] != $0.value }
        #expect(woke.isEmpty, "threads that ran while idle (switches, ns on a CPU): \(woke) before: \(before)")
    }

    @Test func missingRuntimeDirSaysSo() throws {
        var env = ProcessInfo.processInfo.environment
        env.removeValue(forKey: "XDG_RUNTIME_DIR")
        env.removeValue(forKey: "CUED_SOCKET")
        let r = try runProcess(TestPaths.binary("cued"), ["--sink", "null"], env: env)
        #expect(r.status != 0)
        #expect(r.err.contains("XDG_RUNTIME_DIR") && r.err.contains("--socket"))
    }

    /// What the README says to do without XDG_RUNTIME_DIR (a container, su): one
    /// socket in a directory of your own, named by CUED_SOCKET for both sides.
    @Test func withoutRuntimeDirTheREADMEsCUEDSOCKETWorks() throws {
        let advice = "export CUED_SOCKET=$HOME/.cued.sock"
        let readme = try String(contentsOf: TestPaths.repoRoot.appendingPathComponent("README.md"), encoding: .utf8)
        #expect(readme.contains(advice))
        let dir = TempDir()
        var env = ProcessInfo.processInfo.environment
        env.removeValue(forKey: "XDG_RUNTIME_DIR")
        env.removeValue(forKey: "NOTIFY_SOCKET")
        for key in ["XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME"] { env.removeValue(forKey: key) }
        env["HOME"] = dir.path
        env["CUED_SOCKET"] = dir.file(".cued.sock")
        let cued = try Subprocess(TestPaths.binary("cued"), ["--sink", "null", "--sounds", TestPaths.repoRoot.path + "/Sounds"],
                                  env: env, stderr: dir.file("cued.err"))
        #expect(eventually(timeout: 15) { (try? runProcess(TestPaths.binary("cuectl"), ["ping"], env: env))?.out == "pong\n" },
                "\((try? String(contentsOfFile: dir.file("cued.err"), encoding: .utf8)) ?? "")")
        #expect(try runProcess(TestPaths.binary("cuectl"), ["play", "pop", "--wait"], env: env).status == 0)
        #expect(cued.stop() == 0)
    }
}
