import CuedProtocol
import CuectlCommands
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
        #expect(try cuectl(d, ["play", "pop", "--gain", "loud"]) == (64, "", "cuectl: gain 'loud' is not a number of dB (see cuectl --help)\n"))
        #expect(try cuectl(d, ["dance"]) == (64, "", "cuectl: unknown command 'dance' (see cuectl --help)\n"))
        #expect(try cuectl(nil, []) == (64, "", "cuectl: no command given (see cuectl --help)\n"))
        #expect(try cuectl(d, ["play"]) == (64, "", "cuectl: usage: cuectl play CUE [--gain DB] [--wait] [--id] [--loop[=N|=SECONDSs]] [--priority P] [--important] [--rate R] [--pitch CENTS] [--theme=NAME[:PROFILE]] (see cuectl --help)\n"))
        let help = try cuectl(nil, ["--help"])
        #expect(help.status == 0 && help.out.hasPrefix("usage: cuectl") && help.err.isEmpty)
    }

    /// A ringtone from the shell: `--id --loop` prints the voice's id and it sounds until
    /// `stop id` (another cuectl, another connection) ends it; `--loop=N --wait` returns
    /// once the N plays have sounded.
    @Test func aLoopedVoiceIsStoppedByItsIDFromAnotherCall() throws {
        let d = try DaemonHarness(args: ["--sink", "null"])
        let started = try cuectl(d, ["play", "psst1", "--id", "--loop", "--priority", "5"])
        #expect(started.status == 0 && started.err.isEmpty)
        let id = try #require(UInt64(started.out.dropLast()), "printed «\(started.out)»")
        #expect(eventually { (try? d.status())?.voicesActive == 1 })
        usleep(300_000)  // a span longer than psst1 (180 ms), no event to wait on: still sounding, it loops
        #expect(try d.status().voicesActive == 1)
        #expect(try cuectl(d, ["stop", "id", "\(id)"]) == (0, "1\n", ""))
        #expect(eventually { (try? d.status())?.voicesActive == 0 })
        #expect(try cuectl(d, ["stop", "id", "\(id)"]) == (0, "0\n", ""))  // already gone
        #expect(try cuectl(d, ["play", "pop", "--loop=3", "--wait"]) == (0, "", ""))
        #expect(try d.status().cues["pop"]?.played == 1)  // one voice, three plays
    }

    /// `stop` takes `all`, `id ID` or a cue it knows; anything else is refused, not taken as a
    /// cue name that stops nothing (issue 47: `cuectl stop everything` printed 0, exit 0).
    @Test func stopRefusesWhatIsNeitherAllAVoiceNorAKnownCue() throws {
        let d = try DaemonHarness(args: ["--sink", "null"])
        let typo = try cuectl(d, ["stop", "everything"])
        #expect(typo.status == 1 && typo.out.isEmpty, "\(typo)")
        #expect(typo.err.hasPrefix("cuectl: unknown-cue: no cue or theme sound named 'everything' to stop"), "\(typo)")
        #expect(typo.err.contains("stop all"), "\(typo)")
        let number = try cuectl(d, ["stop", "7"])
        #expect(number.status == 1 && number.err.contains("stop id 7"), "\(number)")
        #expect(try cuectl(d, ["stop", "pop"]) == (0, "0\n", ""))
        #expect(try cuectl(d, ["stop", "bell"]) == (0, "0\n", ""))  // a theme sound
        #expect(try cuectl(d, ["stop", "all"]) == (0, "0\n", ""))
        #expect(try cuectl(d, ["stop"]) == (0, "0\n", ""))
        #expect(try d.request("stop everything").hasPrefix("err unknown-cue "))
    }

    @Test func versionMatchesCued() throws {
        let mine = try cuectl(nil, ["--version"])
        #expect(mine.status == 0)
        #expect(mine.out == "cuectl \(CuectlHelp.version)\n")
        let cued = try runProcess(TestPaths.binary("cued"), ["--version"])
        #expect(cued.out.split(separator: "\n").first?.split(separator: " ").last == Substring(CuectlHelp.version))
    }

    /// Names the user typed are refused with the label rule's words, before
    /// anything is sent; a name derived from the parent process is sanitized.
    @Test func invalidNamesAreRefusedInOneLine() throws {
        let d = try DaemonHarness(args: ["--sink", "null"])
        let app = try cuectl(d, ["--app", "My Tool", "play", "pop"])
        #expect(app == (64, "", "cuectl: \(Label.problem("My Tool", what: "app name")) (see cuectl --help)\n"))
        let session = try cuectl(d, ["--session", "a b", "state", "loading"])
        #expect(session == (64, "", "cuectl: \(Label.problem("a b", what: "session name")) (see cuectl --help)\n"))
        let mute = try cuectl(d, ["mute", "app", "My Tool"])
        #expect(mute == (64, "", "cuectl: \(Label.problem("My Tool", what: "app name")) (see cuectl --help)\n"))
        // Nothing reached the daemon: no app was counted, no session made.
        let s = try #require(Status.parse(String(try d.request("status").dropFirst(3))))
        #expect(s.apps.isEmpty && s.sessions == 0 && s.played == 0)
        // Derived from the parent's name, which the user did not type to cuectl: sanitized.
        let script = "printf 'My Tool' > /proc/$$/comm; \(shellQuoted(TestPaths.binary("cuectl"))) --socket \(d.socketPath) play pop; true"
        let derived = try runProcess("/bin/sh", ["-c", script])
        #expect(derived.status == 0, "\(derived.err)")
        let after = try #require(Status.parse(String(try d.request("status").dropFirst(3))))
        #expect(Array(after.apps.keys) == ["My-Tool"])
    }

    /// $CUED_APP was set long ago, maybe by another tool: a bad one never blocks
    /// the work it labels (`CUED_APP='My Tool' cuectl run -- make` runs make). It is
    /// sanitized as a parent's name is; one with nothing usable left falls back to
    /// the derived name.
    @Test func badCUEDAPPIsSanitizedNotRefused() throws {
        let d = try DaemonHarness(args: ["--sink", "null"])
        var env = d.environment
        env["CUED_APP"] = "My Tool"
        let run = try cuectl(d, ["run", "--", "sh", "-c", "echo ran; exit 3"], env: env)
        #expect(run == (3, "ran\n", ""))
        env["CUED_APP"] = "a/b"
        #expect(try cuectl(d, ["play", "pop"], env: env) == (0, "", ""))
        env["CUED_APP"] = ".."  // no label can be made of it
        #expect(try cuectl(d, ["run", "--", "true"], env: env) == (0, "", ""))
        let s = try #require(Status.parse(String(try d.request("status").dropFirst(3))))
        #expect(Set(s.apps.keys) == ["My-Tool", "a-b", "true"], "\(s.apps.keys)")
        // Without a daemon it runs the command all the same.
        env["CUED_APP"] = "My Tool"
        let alone = try runProcess(TestPaths.binary("cuectl"), ["--socket", d.dir.file("none.sock"), "run", "--", "sh", "-c", "echo ran"], env: env)
        #expect(alone.status == 0 && alone.out == "ran\n", "\(alone)")
    }

    @Test func socketPathOverTheLimitIsRefusedClearly() throws {
        let long = "/tmp/" + String(repeating: "s", count: SocketLocation.maxPathBytes - 4)
        let r = try cuectl(nil, ["--socket", long, "ping"])
        guard case .failure(let e) = SocketLocation.resolve(explicit: long, environment: [:]) else {
            Issue.record("\(long.utf8.count) bytes accepted"); return
        }
        #expect(r.status == 64)
        #expect(r.err == "cuectl: \(e.message)\n")
    }

    @Test func configCheckWithoutAConfigFileSaysItIsOptional() throws {
        let dir = TempDir()
        var env = ProcessInfo.processInfo.environment
        env["XDG_CONFIG_HOME"] = dir.file("config")
        let r = try cuectl(nil, ["config", "check"], env: env)
        #expect(r.status == 0)
        #expect(r.out == "no config file at \(dir.file("config"))/cued/cued.toml: the config is optional, cued runs on its defaults\n")
        // A file named on the command line must exist.
        #expect(try cuectl(nil, ["config", "check", dir.file("missing.toml")], env: env).status == 78)
    }

    @Test func statusTableAndJSON() throws {
        let d = try DaemonHarness(args: ["--sink", "null"])
        let table = try cuectl(d, ["status"])
        #expect(table.status == 0)
        for word in ["cued", "muted", "sink", "null", "latency", "cues", "pop"] { #expect(table.out.contains(word)) }
        let json = try cuectl(d, ["status", "--json"])
        #expect(json.status == 0)
        let v = try #require(Status.parse(json.out.trimmingCharacters(in: .whitespacesAndNewlines)))
        #expect(v.version != "")
        #expect(v.sink.spec == "null")
    }

    /// The hint names systemctl only where cued's units are installed (here: in
    /// the user's own unit directory, $XDG_CONFIG_HOME/systemd/user); else how to
    /// start cued in a terminal.
    @Test(.enabled(if: !NoDaemonHint.unitDirectories(environment: [:]).contains { FileManager.default.fileExists(atPath: $0 + "/cued.socket") },
                   "cued's units are installed system-wide on this machine"))
    func noDaemonExits69WithAHint() throws {
        let dir = TempDir()
        var env = ProcessInfo.processInfo.environment
        env["HOME"] = dir.path
        env.removeValue(forKey: "XDG_CONFIG_HOME")
        env.removeValue(forKey: "XDG_DATA_HOME")
        let r = try cuectl(nil, ["--socket", dir.file("none.sock"), "ping"], env: env)
        #expect(r.status == 69)
        #expect(!r.err.contains("systemctl"), "\(r.err)")
        #expect(r.err.contains("start it in a terminal:  cued"), "\(r.err)")
        #expect(r.err.contains("without a sound card: cued --sink null"))
        try FileManager.default.createDirectory(atPath: dir.file(".config/systemd/user"), withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: dir.file(".config/systemd/user/cued.socket"), contents: nil)
        let installed = try cuectl(nil, ["--socket", dir.file("none.sock"), "ping"], env: env)
        #expect(installed.status == 69)
        #expect(installed.err.contains("start it with:  systemctl --user start cued.socket"), "\(installed.err)")
    }

    /// `cuectl doctor` against real daemons: null is a problem with its fix
    /// (exit 1), a recording is fine (exit 0), no daemon is 69.
    @Test func doctorSaysWhetherACueWouldBeHeard() throws {
        let null = try DaemonHarness(args: ["--sink", "null"])
        let n = try cuectl(null, ["doctor"], env: null.environment)
        #expect(n.status == 1, "\(n)")
        #expect(n.out.hasPrefix("ok  cued \(CuectlHelp.version) answers at \(null.socketPath) (pid \(null.pid))\n"), "\(n.out)")
        #expect(n.out.contains("!!  output null: nothing is heard (cued plays to nothing)\n    fix: "), "\(n.out)")
        let wav = try DaemonHarness(args: ["--sink", "wav:%DIR%/capture.wav"])
        let w = try cuectl(wav, ["doctor"], env: wav.environment)
        #expect(w.status == 0, "\(w)")
        #expect(w.out.contains("ok  output wav:\(wav.capturePath): closed: cues are recorded to \(wav.capturePath)\n"), "\(w.out)")
        let dir = TempDir()
        let none = try cuectl(nil, ["--socket", dir.file("none.sock"), "doctor"])
        #expect(none.status == 69)
        #expect(none.out.hasPrefix("!!  "), "\(none.out)")
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
