import CuedClient
import CuedProtocol
import Foundation
import Testing
import TestSupport

/// Refresh sessions and gesture input, against the real daemon.
@Suite(.timeLimit(.minutes(2))) struct SessionTests {
    /// Sends each line on one connection and returns the replies.
    func replies(_ c: CueClient, _ lines: [String]) throws -> [String] { try lines.map { try c.request($0) } }

    @Test func gesturesOverTheSocket() throws {
        let d = try DaemonHarness(args: ["--sink", "null"])
        let scenarios: [[(String, String)]] = [
            // Slow pull past the threshold and back.
            [("drag 10", "ok -"), ("drag 64", "ok -"), ("drag 65", "ok psst1"), ("drag 70", "ok -"), ("drag 50", "ok pop"),
             ("drop", "ok -")],
            // Pull past and release, then finish.
            [("drag 30", "ok -"), ("drag 80", "ok psst1"), ("drop", "ok psst2"), ("state idle", "ok pop")],
            // Jitter around the threshold: one psst1.
            [("drag 64.9", "ok -"), ("drag 65.1", "ok psst1"), ("drag 64.9", "ok -"), ("drag 65.3", "ok -"),
             ("drag 63.1", "ok -"), ("drop", "ok psst2"), ("state idle", "ok pop")],
            // Drags and drops while loading are ignored.
            [("drag 90", "ok psst1"), ("drop", "ok psst2"), ("drag 10", "ok -"), ("drag 99", "ok -"), ("drop", "ok -"),
             ("state release", "ok -"), ("session", "ok - loading 65"), ("state idle", "ok pop")],
            // A view appearing mid-load: forced loading, then finish (pop only).
            [("state loading quiet", "ok -"), ("drag 100", "ok -"), ("state idle", "ok pop")],
            // A custom threshold.
            [("threshold 100", "ok 100"), ("drag 80", "ok -"), ("drag 100", "ok psst1"), ("session", "ok - release 100")],
        ]
        for steps in scenarios {
            let c = try d.client()  // a fresh private session each
            for (line, expected) in steps { #expect(try c.request(line) == expected, "\(line)") }
        }
    }

    @Test func gestureCuesReachTheSinkInOrder() throws {
        let cues: [String: [Int16]] = [
            "psst1": Fixture.constant(100, frames: 960), "psst2": Fixture.constant(200, frames: 960),
            "pop": Fixture.constant(300, frames: 960),
        ]
        let d = try DaemonHarness(cues: cues, args: ["--sink", "wav:%DIR%/capture.wav"])
        let c = try d.client()
        for line in ["drag 20", "drag 70", "drop", "state idle"] {
            _ = try c.request(line)
            #expect(try d.quiet())  // each cue ends before the next starts
        }
        #expect(eventually { ((try? WAV.read(d.capturePath))?.frames ?? 0) >= 3 * 960 })
        d.stop()
        var order: [Int16] = []
        for v in try WAV.read(d.capturePath).samples where v != 0 && order.last != v { order.append(v) }
        #expect(order == [100, 200, 300])
    }

    @Test func sessionsStayIndependent() throws {
        let d = try DaemonHarness(args: ["--sink", "null"])
        let c = try d.client()
        // Two sessions interleaved on one connection.
        #expect(try replies(c, ["session a", "drag 80", "session b", "drag 30", "session a", "drop", "session b", "drag 80"])
                == ["ok a idle 65", "ok psst1", "ok b idle 65", "ok -", "ok a release 65", "ok psst2", "ok b pull 65", "ok psst1"])
        // Across connections: another connection sees a's and b's state, and its private session is separate.
        let other = try d.client()
        #expect(try replies(other, ["session", "drag 80", "session a", "state idle", "session b"])
                == ["ok - idle 65", "ok psst1", "ok a loading 65", "ok pop", "ok b release 65"])
        let status = try #require(Status.parse(String(try c.request("status").dropFirst(3))))
        #expect(status.sessions == 2)
    }

    @Test func namedSessionSharedBySuccessiveCuectlCalls() throws {
        let d = try DaemonHarness(args: ["--sink", "null"])
        func cuectl(_ args: String...) throws -> String {
            let r = try runProcess(TestPaths.binary("cuectl"), ["--socket", d.socketPath, "--session", "feeds"] + args)
            #expect(r.status == 0, "\(args): \(r.err)")
            return r.out
        }
        #expect(try cuectl("drag", "30") == "-\n")
        #expect(try cuectl("drag", "70") == "psst1\n")
        #expect(try cuectl("drop") == "psst2\n")
        #expect(try cuectl("drag", "5") == "-\n")  // ignored while loading
        #expect(try cuectl("session") == "feeds loading 65\n")
        #expect(try cuectl("state", "idle") == "pop\n")
        // Without --session, cuectl gets a private session every time.
        let r = try runProcess(TestPaths.binary("cuectl"), ["--socket", d.socketPath, "state", "release"])
        #expect(r.out == "psst1\n")
        #expect(try runProcess(TestPaths.binary("cuectl"), ["--socket", d.socketPath, "state", "release"]).out == "psst1\n")
    }

    @Test func idleSessionsExpire() throws {
        let d = try DaemonHarness(args: ["--sink", "null", "--session-ttl-s", "0.3"])
        #expect(try replies(try d.client(), ["session s", "drag 80"]) == ["ok s idle 65", "ok psst1"])
        #expect(eventually { (try? d.status())?.sessions == 0 }, "the idle session never expired")
        #expect(try replies(try d.client(), ["session s"]) == ["ok s idle 65"])  // a fresh one
    }

    @Test func firstPullPrewarmsTheDevice() throws {
        let d = try DaemonHarness(args: ["--sink", "alsa:null"])
        func sinkState() throws -> String { try d.status().sink.state }
        #expect(try sinkState() == "closed")
        let c = try d.client()
        #expect(try c.request("drag 5") == "ok -")
        #expect(eventually { (try? sinkState()) == "idle" })  // opened and prepared, nothing played
        let status = try #require(Status.parse(String(try d.request("status").dropFirst(3))))
        #expect(status.played == 0)
        #expect(try c.request("drag 70") == "ok psst1")
    }
}
