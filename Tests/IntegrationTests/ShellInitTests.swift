import CuedProtocol
import Foundation
import Testing
import TestSupport

/// `cuectl shell-init SHELL` in a real interactive shell on a terminal: a
/// command that ran at least $CUED_LONG_SECONDS gets pop (exit 0) or fail, a
/// short one nothing, and without a daemon the terminal shows nothing extra.
@Suite(.timeLimit(.minutes(2))) struct ShellInitTests {
    static let shells: [(name: String, path: String, args: [String])] = [
        ("bash", "/bin/bash", ["--norc", "--noprofile", "-i"]),
        ("zsh", "/usr/bin/zsh", ["-f", "-i"]),
        ("fish", "/usr/bin/fish", ["--no-config", "-i"]),
    ]

    /// The line that loads the snippet, as the help tells users to write it.
    static func load(_ shell: String) -> String {
        let cuectl = TestPaths.binary("cuectl")
        return shell == "fish" ? "\(cuectl) shell-init fish | source\n" : "eval \"$(\(cuectl) shell-init \(shell))\"\n"
    }

    func environment(_ dir: TempDir, socket: String) -> [String: String] {
        var env = ProcessInfo.processInfo.environment
        env["HOME"] = dir.path
        env["XDG_CONFIG_HOME"] = dir.file("config")
        env["XDG_DATA_HOME"] = dir.file("data")
        env["TERM"] = "xterm"
        env["CUED_SOCKET"] = socket
        env["CUED_LONG_SECONDS"] = "1"
        env["PS1"] = "$ "
        env.removeValue(forKey: "PROMPT_COMMAND")
        env.removeValue(forKey: "CUED_APP")
        return env
    }

    /// Types `command`, then a marker whose output (MARK<n>) differs from its echo (MARK%s).
    func run(_ pty: PTY, _ command: String, _ n: Int) -> Bool {
        pty.type(command + "\n")
        pty.type("printf 'MARK%s\\n' \(n)\n")
        return pty.waitFor("MARK\(n)\r\n")
    }

    func status(_ d: DaemonHarness) -> Status? {
        (try? d.request("status")).flatMap { Status.parse(String($0.dropFirst(3))) }
    }

    @Test(arguments: shells.map(\.name))
    func longCommandsGetPopOrFail(shell: String) throws {
        let sh = try #require(Self.shells.first { $0.name == shell })
        let d = try DaemonHarness(cues: CuectlRunTests.cues, args: ["--sink", "null"])
        let dir = TempDir()
        let pty = try PTY(sh.path, sh.args, env: environment(dir, socket: d.socketPath))
        #expect(run(pty, Self.load(shell).dropLast().description, 1), "\(pty.text)")
        #expect(run(pty, "true", 2), "\(pty.text)")  // short: no cue
        #expect(run(pty, "", 3), "\(pty.text)")  // an empty line: no cue
        #expect(run(pty, "sleep 1.5", 4), "\(pty.text)")
        #expect(eventually { status(d)?.cues["pop"]?.played == 1 }, "\(pty.text)")
        #expect(run(pty, "sh -c 'sleep 1.5; exit 3'", 5), "\(pty.text)")
        #expect(eventually { status(d)?.cues["fail"]?.played == 1 }, "\(pty.text)")
        // The status the shell sees is the command's own, not the snippet's.
        // The status the next command sees is the command's own, not the hook's.
        let start = pty.count
        pty.type("sh -c 'exit 7'\n")
        #expect(run(pty, shell == "fish" ? "echo \"st=$status\"" : "echo \"st=$?\"", 6))
        #expect(String(pty.text.dropFirst(start)).contains("st=7\r\n"), "\(pty.text)")
        let s = try #require(status(d))
        #expect(s.played == 2, "cues: \(s.cues)")
        #expect(s.apps[shell]?.played == 2)
        pty.type("exit\n")
        #expect(pty.wait() != nil)
    }

    @Test(arguments: shells.map(\.name))
    func withoutADaemonNothingShows(shell: String) throws {
        let sh = try #require(Self.shells.first { $0.name == shell })
        let dir = TempDir()
        let pty = try PTY(sh.path, sh.args, env: environment(dir, socket: dir.file("none.sock")))
        #expect(run(pty, Self.load(shell).dropLast().description, 1), "\(pty.text)")
        let start = pty.count
        #expect(run(pty, "sleep 1.5", 2), "\(pty.text)")
        #expect(run(pty, "false", 3), "\(pty.text)")
        pty.type("exit\n")
        #expect(pty.wait() != nil)
        let after = String(pty.text.dropFirst(start))
        for word in ["cuectl", "cued", "Done", "Job", "ended", "error"] {
            #expect(!after.contains(word), "'\(word)' on the terminal:\n\(after)")
        }
    }

    /// `cuectl --socket PATH --app NAME shell-init SHELL` writes both into the
    /// snippet: a relative PATH made absolute (the shell moves on), quoted
    /// (a `'` in it), used whatever $CUED_SOCKET says later.
    @Test(arguments: shells.map(\.name))
    func theCommandLinesSocketAndAppAreCarriedIntoTheSnippet(shell: String) throws {
        let sh = try #require(Self.shells.first { $0.name == shell })
        let dir = TempDir()
        mkdir(dir.file("it's"), 0o700)
        let d = try DaemonHarness(cues: CuectlRunTests.cues, args: ["--sink", "null", "--socket", dir.file("it's/c.sock")])
        var env = environment(dir, socket: dir.file("none.sock"))  // $CUED_SOCKET names no daemon
        env["PWD"] = dir.path
        let pty = try PTY(sh.path, sh.args, env: env)
        let cuectl = TestPaths.binary("cuectl")
        let quoted = "\"it's/c.sock\""  // double quotes: the same in all three shells
        #expect(run(pty, "cd '\(dir.path)'", 1), "\(pty.text)")
        let load = shell == "fish" ? "\(cuectl) --socket \(quoted) --app term shell-init fish | source"
                                   : "eval \"$(\(cuectl) --socket \(quoted) --app term shell-init \(shell))\""
        #expect(run(pty, load, 2), "\(pty.text)")
        #expect(run(pty, "cd /", 3), "\(pty.text)")
        #expect(run(pty, "sleep 1.5", 4), "\(pty.text)")
        #expect(eventually { status(d)?.apps["term"]?.played == 1 }, "\(pty.text)")
        pty.type("exit\n")
        #expect(pty.wait() != nil)
    }

    @Test func snippetsAreIdempotentInBash() throws {
        // Loading it twice (a re-sourced ~/.bashrc) must not play twice.
        let d = try DaemonHarness(cues: CuectlRunTests.cues, args: ["--sink", "null"])
        let dir = TempDir()
        let pty = try PTY("/bin/bash", ["--norc", "--noprofile", "-i"], env: environment(dir, socket: d.socketPath))
        #expect(run(pty, Self.load("bash").dropLast().description, 1))
        #expect(run(pty, Self.load("bash").dropLast().description, 2))
        #expect(run(pty, "sleep 1.5", 3))
        #expect(eventually { status(d)?.cues["pop"]?.played == 1 })
        #expect(run(pty, "echo $PROMPT_COMMAND", 4))
        #expect(pty.text.contains("__cued_precmd\r\n"), "\(pty.text)")
    }
}
