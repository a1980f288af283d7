@testable import CuedConfig
import CuedProtocol
import CuectlCommands
import Foundation
import Testing
import TestSupport

/// The man pages and shell completions: in sync with their source, rendered
/// by man without a warning, naming every flag, command and config key, and
/// completing for real in bash, zsh and fish.
@Suite(.timeLimit(.minutes(2))) struct DocsTests {
    static let root = TestPaths.repoRoot.path
    static let pages = ["docs/man/cued.1", "docs/man/cuectl.1", "docs/man/cued.toml.5"]

    func text(_ path: String) throws -> String { try String(contentsOfFile: Self.root + "/" + path, encoding: .utf8) }

    /// PATH with the built binaries first, as after an install.
    var environment: [String: String] {
        var env = ProcessInfo.processInfo.environment
        env["PATH"] = TestPaths.binDir.path + ":" + (env["PATH"] ?? "/usr/bin:/bin")
        env.removeValue(forKey: "CUED_SOCKET")
        env.removeValue(forKey: "CUED_APP")
        return env
    }

    @Test func manPagesAreWhatScdocMakesOfTheirSource() throws {
        let r = try runProcess("/usr/bin/make", ["-s", "-C", Self.root, "man-check"])
        #expect(r.status == 0, "\(r.out)\(r.err)")
    }

    @Test(arguments: pages)
    func manRendersWithoutWarnings(page: String) throws {
        var env = ProcessInfo.processInfo.environment
        env["MANWIDTH"] = "80"
        env["MAN_KEEP_FORMATTING"] = nil
        let r = try runProcess("/usr/bin/man", ["--warnings", "-l", Self.root + "/" + page], env: env)
        #expect(r.status == 0)
        #expect(r.err == "", "\(page): \(r.err)")
        #expect(r.out.contains("NAME") && r.out.contains("SEE ALSO"))
    }

    /// Every flag `cued --help` lists is in cued(1) and cued's completions.
    @Test func everyCuedFlagIsDocumentedAndCompleted() throws {
        let help = try runProcess(TestPaths.binary("cued"), ["--help"])
        let flags = Set(help.out.split(whereSeparator: { !($0.isLetter || $0 == "-") })
            .filter { $0.hasPrefix("--") && $0.count > 2 }.map(String.init))
        #expect(flags.count >= 14, "\(flags.sorted())")
        let page = try text("docs/man/cued.1.scd")
        for flag in flags.sorted() {
            #expect(page.contains("*\(flag)*"), "cued(1) lacks \(flag)")
            for file in ["completions/cued.bash", "completions/_cued", "completions/cued.fish"] {
                let completion = try text(file)
                let name = file.hasSuffix(".fish") ? "-l \(flag.dropFirst(2)) " : flag
                #expect(completion.contains(name), "\(file) lacks \(flag)")
            }
        }
    }

    /// Every command and option of cuectl's help is in cuectl(1) and its completions.
    @Test func everyCuectlCommandIsDocumentedAndCompleted() throws {
        let page = try text("docs/man/cuectl.1.scd")
        for word in CuectlHelp.commands + CuectlHelp.options {
            #expect(CuectlHelp.text.contains(word), "cuectl --help lacks \(word)")
            #expect(page.contains("*\(word)"), "cuectl(1) lacks \(word)")
            for file in ["completions/cuectl.bash", "completions/_cuectl", "completions/cuectl.fish"] {
                let completion = try text(file)
                let name = file.hasSuffix(".fish") && word.hasPrefix("--") ? "-l \(word.dropFirst(2))" : word
                #expect(completion.contains(name), "\(file) lacks \(word)")
            }
        }
        // The lists are the parser's: each command is one it knows.
        for command in CuectlHelp.commands {
            do { _ = try CommandParser.parse([command], cwd: "/") } catch {
                #expect(!error.message.hasPrefix("unknown command"), "\(command): \(error.message)")
            }
        }
    }

    /// Each verb's options as cuectl's words for it (`CuectlVerb`) give them are what the bash completion
    /// offers after it: the options one place spells, the completion spells again (checked here).
    @Test func everyVerbsOptionsAreCompletedAsTheTableSays() throws {
        let bash = try text("completions/cuectl.bash")
        for (name, verb) in CuectlVerb.offered where !verb.options.isEmpty {
            let line = bash.split(separator: "\n").first { $0.trimmingCharacters(in: .whitespaces).hasPrefix("\(name)) options+=") }
            let offered = line.map { Set($0.split(separator: "\"")[1].split(separator: " ").map(String.init)) }
            #expect(offered == Set(verb.options.map(\.name)), "\(name): \(line ?? "no line")")
        }
    }

    /// Every top-level config key the checker accepts is in cued.toml(5).
    @Test func everyConfigKeyIsDocumented() throws {
        let page = try text("docs/man/cued.toml.5.scd")
        for key in Checker.topKeys {
            #expect(page.contains("*\(key)*") || page.contains("*[\(key)"), "cued.toml(5) lacks \(key)")
        }
    }

    /// A file outside the Markdown docs that points at a section, "(FILE.md: Section)", names a
    /// heading that is there (issue 47: the D-Bus service file named a README section that is not).
    @Test func everySectionAFileNamesIsThere() throws {
        let files = try runProcess("/usr/bin/git", ["-C", Self.root, "ls-files", "dbus", "systemd", "packaging", "completions", "canberra", "Makefile"])
        let pattern = try Regex(#"\((README|[A-Za-z0-9_./-]+\.md): ([^)]+)\)"#)
        var named = 0
        for file in files.out.split(separator: "\n").map(String.init) {
            guard let text = try? text(file) else { continue }
            for m in text.matches(of: pattern) {
                let doc = m.output[1].substring.map(String.init) ?? ""
                let section = m.output[2].substring.map(String.init) ?? ""
                let path = doc == "README" ? "README.md" : doc
                let headings = try self.text(path).split(separator: "\n").filter { $0.hasPrefix("#") }
                    .map { $0.drop { $0 == "#" }.trimmingCharacters(in: .whitespaces) }
                #expect(headings.contains(section), "\(file) points at \(path): \(section), which has no such heading")
                named += 1
            }
        }
        #expect(named > 0, "the service file names its section")
    }

    /// cuectl(1) tells doctor's findings in the order doctor prints them: what `why pop` finds,
    /// then, last, the user units (issue 47: the page said `why pop` came last).
    @Test func doctorsFindingsAreDocumentedInTheirOrder() throws {
        var s = Status()
        s.sink.spec = "alsa:default"
        s.sink.state = "idle"
        let units = "/home/u/.config/systemd/user"
        let r = Doctor.report(status: s, noDaemon: nil, socket: "/s", environment: ["HOME": "/home/u", "XDG_RUNTIME_DIR": "/run/user/1"],
                              soundCard: true, exists: { $0 == units + "/cued.socket" }, why: WhyReport(cue: "pop", app: "bash"))
        let why = try #require(r.lines.firstIndex { $0.contains("why pop") })
        #expect(r.lines.last?.hasPrefix("--  units installed in \(units)") == true && why < r.lines.count - 1, "\(r.lines)")
        let page = try text("docs/man/cuectl.1.scd")
        let doctor = try #require(page.range(of: "*doctor*\n"))
        let paragraph = String(page[doctor.upperBound...]).components(separatedBy: "\n\n")[0]
        let whyAt = try #require(paragraph.range(of: "*why pop*"), "\(paragraph)")
        let unitsAt = try #require(paragraph.range(of: "user units"), "\(paragraph)")
        #expect(whyAt.lowerBound < unitsAt.lowerBound, "cuectl(1) says the units before why pop: \(paragraph)")
        #expect(paragraph.contains("and last whether the user units"), "\(paragraph)")
    }

    // MARK: completions, for real

    static let cues: [String: [Int16]] = Fixture.standard.merging(["zzcue": Fixture.constant(100, frames: 480)]) { $1 }

    func bash(_ file: String, _ function: String, _ words: [String]) throws -> [String] {
        let quoted = words.map { "'" + $0 + "'" }.joined(separator: " ")
        let script = "source \(shellQuoted(Self.root + "/completions/" + file)); COMP_WORDS=(\(quoted)); COMP_CWORD=\(words.count - 1); \(function); printf '%s\\n' \"${COMPREPLY[@]}\""
        let r = try runProcess("/bin/bash", ["--norc", "--noprofile", "-c", script], env: environment)
        #expect(r.err == "", "\(r.err)")
        return r.out.split(separator: "\n").map(String.init)
    }

    func fish(_ file: String, _ line: String) throws -> [String] {
        let r = try runProcess("/usr/bin/fish", ["--no-config", "-c", "source \(shellQuoted(Self.root + "/completions/" + file)); complete -C '\(line)'"], env: environment)
        #expect(r.err == "", "\(r.err)")
        return r.out.split(separator: "\n").map { String($0.prefix { $0 != "\t" }) }
    }

    @Test func bashCompletes() throws {
        let d = try DaemonHarness(cues: Self.cues, args: ["--sink", "null"])
        #expect(try bash("cuectl.bash", "_cuectl", ["cuectl", "pl"]) == ["play", "play-file"])
        #expect(try bash("cuectl.bash", "_cuectl", ["cuectl", "--socket", d.socketPath, "play", "zz"]) == ["zzcue"])
        #expect(try bash("cuectl.bash", "_cuectl", ["cuectl", "--socket", d.socketPath, "stop", "a"]) == ["all"])
        #expect(try bash("cuectl.bash", "_cuectl", ["cuectl", "state", "lo"]) == ["loading"])
        #expect(try bash("cuectl.bash", "_cuectl", ["cuectl", "shell-init", "f"]) == ["fish"])
        #expect(try bash("cuectl.bash", "_cuectl", ["cuectl", "status", "--j"]) == ["--json"])
        #expect(try bash("cuectl.bash", "_cuectl", ["cuectl", "profile", "q"]) == ["quiet"])
        #expect(try bash("cuectl.bash", "_cuectl", ["cuectl", "profile", "app", "mutt", "d"]) == ["default"])
        #expect(try bash("cuectl.bash", "_cuectl", ["cuectl", "play", "pop", "--imp"]) == ["--important"])
        // Without a daemon: no names, no error, and no wait beyond the timeout.
        #expect(try bash("cuectl.bash", "_cuectl", ["cuectl", "--socket", d.dir.file("none.sock"), "play", "zz"]) == [])
        #expect(try bash("cued.bash", "_cued", ["cued", "--log-level", "w"]) == ["warning"])
        #expect(try bash("cued.bash", "_cued", ["cued", "--m"]) == ["--max-clients", "--muted"])
    }

    @Test func fishCompletes() throws {
        let d = try DaemonHarness(cues: Self.cues, args: ["--sink", "null"])
        #expect(try fish("cuectl.fish", "cuectl pl") == ["play", "play-file"])
        #expect(try fish("cuectl.fish", "cuectl --socket \(d.socketPath) play zz") == ["zzcue"])
        #expect(try fish("cuectl.fish", "cuectl state lo") == ["loading"])
        #expect(try fish("cuectl.fish", "cuectl status --j") == ["--json"])
        #expect(try fish("cuectl.fish", "cuectl profile q") == ["quiet"])
        #expect(try fish("cuectl.fish", "cuectl --app x profile app mutt d") == ["default"])
        #expect(try fish("cuectl.fish", "cuectl play pop --imp") == ["--important"])
        #expect(try fish("cued.fish", "cued --log-level w") == ["warning"])
        #expect(try fish("cued.fish", "cued --m") == ["--max-clients", "--muted"])
    }

    /// `play` also completes the sound theme's names (`cuectl cues --theme`).
    @Test func themeNamesComplete() throws {
        let d = try DaemonHarness(cues: Self.cues, args: ["--sink", "null"])
        #expect(try bash("cuectl.bash", "_cuectl", ["cuectl", "--socket", d.socketPath, "play", "message-new-i"]) == ["message-new-instant"])
        #expect(try fish("cuectl.fish", "cuectl --socket \(d.socketPath) play message-new-i") == ["message-new-instant"])
    }

    /// zsh completion is only real inside zle: an interactive zsh on a
    /// terminal, Tab typed, and the completed line run.
    @Test func zshCompletes() throws {
        let d = try DaemonHarness(cues: Self.cues, args: ["--sink", "null"])
        let dir = TempDir()
        var env = environment
        env["HOME"] = dir.path
        env["TERM"] = "xterm"
        env["PS1"] = "$ "
        let pty = try PTY("/usr/bin/zsh", ["-f", "-i"], env: env)
        pty.type("fpath=(\(shellQuoted(Self.root + "/completions")) $fpath); autoload -Uz compinit; compinit -u -d \(dir.file("zcompdump")); printf 'MARK%s\\n' 1\n")
        #expect(pty.waitFor("MARK1\r\n"), "\(pty.text)")
        // A cue name from the daemon: the completed command plays it.
        pty.type("cuectl --socket \(d.socketPath) play zz\t")
        pty.type("\n")
        #expect(eventually { ((try? d.request("status")).flatMap { Status.parse(String($0.dropFirst(3))) })?.cues["zzcue"]?.played == 1 },
                "\(pty.text)")
        // The profile's words: the completed commands set it.
        pty.type("cuectl --socket \(d.socketPath) profile qu\t\n")
        #expect(eventually { (try? d.request("profile")) == "ok quiet" }, "\(pty.text)")
        pty.type("cuectl --socket \(d.socketPath) profile app mutt sil\t\n")
        #expect(eventually { (try? d.request("profile app mutt")) == "ok mutt silent" }, "\(pty.text)")
        // Commands and their words: shell-init's snippet shows that both completed.
        pty.type("cuectl shell-i\tzs\t\n")
        #expect(pty.waitFor("zmodload zsh/datetime"), "\(pty.text)")
        let start = pty.count
        pty.type("cued --vers\t\n")
        #expect(pty.waitFor(CuectlHelp.version, from: start), "\(pty.text)")
        pty.type("exit\n")
        #expect(pty.wait() != nil)
    }
}
