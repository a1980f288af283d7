import CuedClient
import CuedProtocol
import Foundation
import Testing
import TestSupport

/// Issues 13 and 14 on the wire: `play … wait` holds only its own
/// connection, `stop` really silences (within 5 ms), dropped cues are counted
/// per app as globally, and a sink that cannot work is a start-up error.
@Suite(.timeLimit(.minutes(2))) struct PlaybackControlTests {
    static let long = Fixture.constant(3000, frames: 48_000)  // 1 s

    func daemon(_ args: [String] = DaemonTests.wavSink) throws -> DaemonHarness {
        var cues = Fixture.standard
        cues["long"] = Self.long
        return try DaemonHarness(cues: cues, args: args)
    }

    func status(_ d: DaemonHarness) throws -> Status {
        try #require(Status.parse(String(try d.request("status").dropFirst(3))))
    }

    /// `status wait`: once the audio thread has taken every cue asked for before it.
    func settled(_ d: DaemonHarness) throws -> Status {
        try #require(Status.parse(String(try d.request("status wait").dropFirst(3))))
    }

    @Test func aWaitedPlayHoldsOnlyItsOwnConnectionAndRepliesWhenItHasSounded() throws {
        let d = try daemon()
        let a = try d.client()
        try a.send(Array("play long wait\nping\n".utf8))
        let b = try d.client()
        for _ in 0..<10 { #expect(try b.request("ping") == "ok pong") }
        #expect(!a.canRead(timeoutMs: 0))  // still sounding: no reply yet, and not the ping's either
        #expect(try a.readLine() == "ok")
        // By the reply the whole cue has reached the device and played out.
        let frames = try WAV.read(d.capturePath).samples.filter { $0 != 0 }.count / 2
        #expect(frames >= Self.long.count, "\(frames) frames sounded at the reply")
        #expect(try a.readLine() == "ok pong")
    }

    @Test func everyWaitedPlayIsAnsweredWhenVoicesAreStolenFasterThanAPeriod() throws {
        // One voice: each play steals the last into the fading slot and pushes out the
        // one fading there, often between two periods. Every waiter still gets its
        // line (the soak found waits that never came back).
        let d = try daemon(DaemonTests.wavSink + ["--voices", "1", "--rate-limit", "0"])
        let clients = try (0..<4).map { _ in try d.client() }
        for c in clients { try c.send(Array(String(repeating: "play long wait\n", count: 25).utf8) + Array("ping\n".utf8)) }
        for c in clients {
            var replies: [String] = []
            for _ in 0..<26 { replies.append(try c.readLine()) }
            #expect(replies.last == "ok pong")
            #expect(replies.dropLast().allSatisfy { $0 == "ok" || $0 == "ok stopped" }, "\(replies)")
        }
    }

    /// 16 loops at priority 100 from one app left every other app's cue answered `ok`
    /// and never heard, and loops outlived their connection (a crashed client left an
    /// endless sound). Now another app gets a voice, and a loop ends with its connection
    /// unless it asked to outlive it (`detach`, which `cuectl play --loop` sends).
    @Test func oneAppCannotSilenceTheOthersAndLoopsEndWithTheirConnection() throws {
        let d = try daemon()
        var kept = ""
        do {
            let hog = try d.client()
            #expect(try hog.request("app hog") == "ok hog")
            for _ in 0..<16 { #expect(try hog.request("play long loop priority=100 id").hasPrefix("ok ")) }
            #expect(try settled(d).voicesActive == 16)
            let other = try d.client()
            #expect(try other.request("app mail") == "ok mail")
            #expect(try other.request("play pop wait") == "ok")  // was: err not-played every voice is taken…
            let keeper = try d.client()
            kept = String(try keeper.request("play long loop detach id").dropFirst(3))
            #expect(try settled(d).voicesActive == 16)
        }  // all three connections close here
        #expect(eventually { (try? status(d).voicesActive) == 1 }, "\((try? status(d).voicesActive) ?? -1) voices left")
        #expect(try d.request("stop id \(kept)") == "ok 1")
        // cuectl play --loop exits at once; its loop goes on until stopped.
        let r = try runProcess(TestPaths.binary("cuectl"), ["--socket", d.socketPath, "--app", "tool", "play", "long", "--loop"])
        #expect(r.status == 0, "\(r)")
        #expect(try settled(d).voicesActive == 1)
        let stop = try runProcess(TestPaths.binary("cuectl"), ["--socket", d.socketPath, "--app", "tool", "stop"])
        #expect(stop.out.trimmingCharacters(in: .whitespacesAndNewlines) == "1", "\(stop)")
    }

    @Test func stopFadesWithinFiveMilliseconds() throws {
        let d = try daemon()
        let c = try d.client()
        #expect(try c.request("app tool") == "ok tool")
        #expect(try c.request("play long") == "ok")
        #expect(eventually { ((try? WAV.read(d.capturePath))?.frames ?? 0) > 9_600 })
        #expect(try c.request("stop") == "ok 1")
        // Once the stream has drained (idle), the fade and everything after it are in the capture.
        #expect(eventually { (try? status(d))?.sink.state == "idle" })
        d.stop()
        let left = try WAV.read(d.capturePath).samples.enumerated().filter { $0.offset % 2 == 0 }.map(\.element)
        // The constant cue, then a fade of at most 5 ms (240 frames), then silence to the end.
        let lastLoud = try #require(left.lastIndex(of: 3000))
        let tail = left[(lastLoud + 1)...]
        let faded = tail.prefix { $0 != 0 }
        #expect(faded.count <= 240, "fade of \(faded.count) frames")
        #expect(faded.allSatisfy { $0 > 0 && $0 < 3000 })
        #expect(tail.dropFirst(faded.count).allSatisfy { $0 == 0 })
        #expect(lastLoud < Self.long.count - 4_800, "the cue was not cut short")
    }

    /// SIGTERM gives a playing cue 500 ms; one still sounding then is cut off.
    /// It started, so its waiter hears `ok stopped` (as from `stop`), and it
    /// is neither logged nor counted as a cue that could not start.
    @Test func aWaitedPlayCutOffBySIGTERMAnswersStoppedNotDropped() throws {
        var cues = Fixture.standard
        cues["long"] = Fixture.constant(3000, frames: 48_000 * 3)  // 3 s: outlasts the grace
        let d = try DaemonHarness(cues: cues, args: DaemonTests.wavSink)
        let c = try d.client(), other = try d.client()
        #expect(try c.request("app tool") == "ok tool")
        try c.send(Array("play long wait\n".utf8))
        #expect(eventually { ((try? WAV.read(d.capturePath))?.frames ?? 0) > 4_800 })
        d.process.signal(SIGTERM)
        // During the grace an open connection is still answered, but a new cue
        // is refused: it would only be cut off.
        #expect(eventually { d.readStderr().contains("stopping") })  // logged once no new cue may start
        #expect(try other.request("play pop wait") == "err not-played shutdown cued is stopping")
        #expect(try other.request("ping") == "ok pong")
        #expect(try c.readLine() == "ok stopped")
        #expect(d.waitForExit(timeout: 5) == 0)
        let log = d.readStderr()
        #expect(!log.contains("cue dropped"), "\(log)")
        // Cut at the grace's end: well into the cue, well before its end.
        let frames = try WAV.read(d.capturePath).samples.enumerated().filter { $0.offset % 2 == 0 && $0.element == 3000 }.count
        #expect(frames > 24_000 && frames < 48_000 * 2, "\(frames) frames sounded")
    }

    @Test func aWaitedPlayWhileMutedOrUnknownAnswersAtOnce() throws {
        let d = try daemon()
        #expect(try d.request("play nosuch wait").hasPrefix("err unknown-cue"))
        #expect(try d.request("mute") == "ok muted")
        #expect(try d.request("play long wait") == "ok muted")
    }

    @Test func aCueTheDeviceNeverStartsAnswersNotPlayed() throws {
        // The device never opens: the cue waits its 250 ms, is dropped, and the waiting client hears why.
        let d = try daemon(["--sink", "fault:open-fail=1000"])
        let c = try d.client()
        #expect(try c.request("app mail") == "ok mail")
        let r = try c.request("play pop wait")
        #expect(r.hasPrefix("err not-played late the device did not start it within 250 ms"), "\(r)")
        let s = try status(d)
        #expect(s.dropped == 1)
        #expect(s.played == 0)
        // Per app and globally the same story: played 0, dropped 1.
        #expect(s.apps["mail"] == Status.App(played: 0, dropped: 1, muted: false))
    }

    @Test func aWavSinkInAMissingDirectoryIsAStartupError() throws {
        let d = try DaemonHarness(args: ["--sink", "wav:/nonexistent/dir/x.wav"], waitReady: false)
        #expect(d.waitForExit() == 78)
        #expect(d.readStderr().contains("/nonexistent/dir"), "\(d.readStderr())")
    }

    @Test func anAlsaNameAlsaDoesNotKnowIsAStartupError() throws {
        let d = try DaemonHarness(args: ["--sink", "alsa:no_such_pcm"], waitReady: false)
        #expect(d.waitForExit() == 78)
        #expect(d.readStderr().contains("no_such_pcm") && d.readStderr().contains("aplay -L"), "\(d.readStderr())")
    }

    @Test func aKnownDeviceThatIsAbsentIsRetriedNotFatal() throws {
        // hw:9 is a name ALSA knows (the hw plugin) for a card this machine does not have.
        let d = try DaemonHarness(args: ["--sink", "alsa:hw:9"])
        #expect(try d.request("play pop") == "ok")
        #expect(eventually { (try? self.status(d))?.sink.state == "failed" })
        #expect(try d.request("ping") == "ok pong")
    }
}
