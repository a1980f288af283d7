import CuedProtocol

/// cuectl's help: the one list of its commands and options (the man page,
/// the completions and the tests are checked against it).
public enum CuectlHelp {
    /// cued's and cuectl's one version.
    public static var version: String { CuedVersion.string }

    /// The help: the protocol's verbs as cuectl offers them (`CuectlVerb`'s usage and help,
    /// in the verb table's order), then cuectl's own commands and options. Laid out to 100 columns.
    public static var text: String {
        var out = ["usage: cuectl [--socket PATH] [--session NAME] [--app NAME] COMMAND [ARGS]", "commands:"]
        for (_, verb) in CuectlVerb.offered { out += entry(verb.usage, verb.help) }
        for (usage, help) in own { out += entry(usage, help) }
        out.append("options:")
        for (usage, help) in optionHelp { out += entry(usage, help) }
        out.append("exit: 0 ok, 1 error reply, 64 usage, 69 no daemon, 78 bad config; run: the command's status")
        return out.joined(separator: "\n")
    }

    /// cuectl's commands that are not protocol verbs.
    static let own: [(String, String)] = [
        ("config check [PATH]", "validate a config file without a daemon (exit 78 if bad)"),
        ("canberra [on|off]", "libcanberra's event sounds (GNOME Shell, KDE and GTK apps, feedbackd) through cued, or back; "
            + "alone: whether they are, and which apps play through it"),
        ("doctor", "a first-run check: is cued running, where its sound goes, the sound server, theme, config and units, "
            + "a fix for each problem (exit 0 only if a cue would be heard or recorded)"),
        ("run [--session NAME] [--app NAME] -- COMMAND [ARGS…]", "run a command: psst2 as it starts, pop when it exits 0, "
            + "fail otherwise; exits with its status (128+N for signal N)"),
        ("shell-init bash|zsh|fish", "print a snippet for your shell's rc file: pop or fail after every command that ran "
            + "at least $CUED_LONG_SECONDS (10)"),
    ]

    static let optionHelp: [(String, String)] = [
        ("--socket PATH", "cued's socket (default: $CUED_SOCKET, else $XDG_RUNTIME_DIR/cued/cued.sock)"),
        ("--session NAME", "use the shared refresh session NAME (state carries over between cuectl calls)"),
        ("--app NAME", "the app the cues are for (default: $CUED_APP, else the name of cuectl's parent process; for run, "
            + "the command's name)"),
        ("-h, --help", "this help"),
        ("--version", "cuectl's version"),
    ]

    /// `usage` (its lines indented under the first) and `help` wrapped at column 100
    /// from column 36; the help starts beside a usage short enough, else below it.
    static func entry(_ usage: String, _ help: String) -> [String] {
        let lines = usage.split(separator: "\n").map(String.init)
        var out = ["  " + lines[0]] + lines.dropFirst().map { "  " + $0 }
        var words = help.split(separator: " ").map(String.init)
        var current = ""
        var wrapped: [String] = []
        while !words.isEmpty {
            let w = words.removeFirst()
            if !current.isEmpty && current.count + 1 + w.count > 64 { wrapped.append(current); current = w } else {
                current += current.isEmpty ? w : " " + w
            }
        }
        if !current.isEmpty { wrapped.append(current) }
        let pad = String(repeating: " ", count: 36)
        if lines.count == 1, out[0].count < 35, let first = wrapped.first {
            out[0] += String(repeating: " ", count: 36 - out[0].count) + first
            wrapped.removeFirst()
        }
        return out + wrapped.map { pad + $0 }
    }

    /// Every command and option the help names, for checks of the man page and completions.
    public static var commands: [String] {
        CuectlVerb.offered.map(\.name) + own.map { String($0.0.split(separator: " ")[0]) }
    }
    /// cuectl's own options, then those of the verbs it offers (`--theme=` as `--theme`).
    public static var options: [String] {
        let verbs = CuectlVerb.offered.flatMap(\.verb.options).map { $0.name.hasSuffix("=") ? String($0.name.dropLast()) : $0.name }
        var seen: Set<String> = []
        return (["--socket", "--session", "--app"] + verbs + ["--help", "--version"]).filter { seen.insert($0).inserted }
    }
}
