import CuedProtocol
import Foundation
import Testing
import TestSupport

@Suite(.timeLimit(.minutes(2))) struct CuectlTests {
    func cuectl(_ d: DaemonHarness?, _ args: [String], env: [String: String]? = nil) throws -> (status: Int32, out: String, err: String) {
        let socket = d.map { ["--socket", $0.socketPath] } ?? []
        return try runProcess(TestPaths.binary("cuectl"), socket + args, env: env)
    }

    @Test func commandsAndExitCodes() throws {
        let d = try DaemonHarness(args: ["--sink", "null"])
        #expect(try cuectl(d, ["ping"]) == (0, "pong\n", ""))
        #expect(try cuectl(d, ["play", "pop"]).status == 0)
        #expect(try cuectl(d, ["play", "pop", "--gain", "-6"]).status == 0)
        #expect(try cuectl(d, ["state", "release"]).out == "psst1\n")  // each call is its own connection
        #expect(try cuectl(d, ["cues"]).out == "pop psst1 psst2\n")
        #expect(try cuectl(d, ["mute"]).out == "muted\n")
        #expect(try cuectl(d, ["play", "pop"]).out == "muted: cue not played\n")
        #expect(try cuectl(d, ["unmute"]).out == "unmuted\n")
        let unknown = try cuectl(d, ["play", "nope"])
        #expect(unknown.status == 1)
        #expect(unknown.err.contains("unknown-cue"))
        #expect(try cuectl(d, ["play", "pop", "--gain", "loud"]).status == 1)
        #expect(try cuectl(d, ["dance"]).status == 64)
    }

    @Test func statusTableAndJSON() throws {
        let d = try DaemonHarness(args: ["--sink", "null"])
        let table = try cuectl(d, ["status"])
        #expect(table.status == 0)
        for word in ["cued", "muted", "sink", "null", "latency", "cues", "pop"] { #expect(table.out.contains(word)) }
        let json = try cuectl(d, ["status", "--json"])
        #expect(json.status == 0)
        let v = try JSON.parse(json.out.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(v["version"] != nil)
    }

    @Test func noDaemonExits69WithAHint() throws {
        let dir = TempDir()
        let r = try cuectl(nil, ["--socket", dir.file("none.sock"), "ping"])
        #expect(r.status == 69)
        #expect(r.err.contains("systemctl --user start cued.socket"))
    }

    @Test func socketFromEnvironment() throws {
        let d = try DaemonHarness(args: ["--sink", "null"])
        var env = ProcessInfo.processInfo.environment
        env["CUED_SOCKET"] = d.socketPath
        #expect(try cuectl(nil, ["ping"], env: env).out == "pong\n")
        env.removeValue(forKey: "CUED_SOCKET")
        env["XDG_RUNTIME_DIR"] = d.dir.file("run")
        #expect(try cuectl(nil, ["ping"], env: env).out == "pong\n")
    }
}
