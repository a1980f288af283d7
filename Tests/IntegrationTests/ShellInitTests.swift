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
        let cuectl = shellQuoted(TestPaths.binary("cuectl"))
        return shell == "fish" ? "\(cuectl) shell-init fish | source\n" : "eval \"$(\(cuectl) shell-init \(shell))\"\n"
    }

    /// A fixed prompt and no title, autosuggestion or right prompt: in fish these
    /// show the working directory and history, which differ between two runs.
    static func plainPrompt(_ shell: String) -> String {
        shell == "fish"
            ? "function fish_prompt; printf '$ '; end; function fish_right_prompt; end; function fish_title; end; set -g fish_autosuggestion_enabled 0"
            : "true"
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
        #expect(pty.text(from: start).contains("st=7\r\n"), "\(pty.text)")
        let s = try #require(status(d))
        #expect(s.played == 2, "cues: \(s.cues)")
        #expect(s.apps[shell]?.played == 2)
        pty.type("exit\n")
        #expect(pty.wait() != nil)
    }

    /// The same commands, on the same terminal, as the same shell shows them with
    /// `setup` run first: the run after `sleep 1.5` (a cue without a daemon) and `false`.
    func transcript(_ sh: (name: String, path: String, args: [String]), setup: String) throws -> String {
        let dir = TempDir()
        let pty = try PTY(sh.path, sh.args, env: environment(dir, socket: dir.file("none.sock")))
        #expect(run(pty, Self.plainPrompt(sh.name), 1), "\(pty.text)")
        #expect(run(pty, setup, 2), "\(pty.text)")
        let start = pty.count
        #expect(run(pty, "sleep 1.5", 3), "\(pty.text)")
        #expect(run(pty, "false", 4), "\(pty.text)")
        pty.type("exit\n")
        #expect(pty.wait() != nil)
        return pty.text(from: start)
    }

    /// Without a daemon the snippet shows nothing at all: every piece of text the
    /// terminal shows is one the same shell shows without the snippet, or part of
    /// a line typed or printed by the test. Not a word list: any message counts
    /// (`disown: There are no suitable jobs`, a job's end, cuectl's error).
    @Test(arguments: shells.map(\.name))
    func withoutADaemonNothingShows(shell: String) throws {
        let sh = try #require(Self.shells.first { $0.name == shell })
        let baseline = Set(Self.fragments(try transcript(sh, setup: "true")))
        let shown = try transcript(sh, setup: Self.load(shell).dropLast().description)
        let typed = ["sleep 1.5", "false", "exit"] + (3...4).flatMap { ["printf 'MARK%s\\n' \($0)", "MARK\($0)"] }
        let lines = typed + typed.map { "$ " + $0 }
        let extra = Self.fragments(shown).filter { f in !baseline.contains(f) && !lines.contains { $0.contains(f) } }
        #expect(extra.isEmpty, "not shown without the snippet: \(extra)\n\(shown.debugDescription)")
    }

    /// The text pieces a terminal transcript draws: split at every control
    /// character and escape sequence (CSI, OSC, charset), spaces trimmed. A
    /// redrawn line or a cursor move cuts a line into pieces, never joins two.
    static func fragments(_ text: String) -> [String] {
        var out: [String] = [], current: [UInt8] = []
        func cut() {
            let s = String(decoding: current, as: UTF8.self).trimmingCharacters(in: .whitespaces)
            if !s.isEmpty { out.append(s) }
            current = []
        }
        let b = Array(text.utf8)
        var i = 0
        while i < b.count {
            let c = b[i]
            if c == 0x1B, i + 1 < b.count {
                cut()
                switch b[i + 1] {
                case UInt8(ascii: "["):  // CSI: parameters, then a final byte in @…~
                    i += 2
                    while i < b.count, !(0x40...0x7E).contains(b[i]) { i += 1 }
                    i += 1
                case UInt8(ascii: "]"), UInt8(ascii: "P"), UInt8(ascii: "_"), UInt8(ascii: "^"):  // OSC, DCS…: up to BEL or ESC \\
                    i += 2
                    while i < b.count, b[i] != 0x07, !(b[i] == 0x1B && i + 1 < b.count && b[i + 1] == UInt8(ascii: "\\")) { i += 1 }
                    i += b.count > i && b[i] == 0x1B ? 2 : 1
                case UInt8(ascii: "("), UInt8(ascii: ")"): i += 3  // charset designation
                default: i += 2
                }
            } else if c < 0x20 || c == 0x7F {
                cut(); i += 1
            } else {
                current.append(c); i += 1
            }
        }
        cut()
        return out
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
        let load = shell == "fish" ? "\(shellQuoted(cuectl)) --socket \(quoted) --app term shell-init fish | source"
                                   : "eval \"$(\(shellQuoted(cuectl)) --socket \(quoted) --app term shell-init \(shell))\""
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
