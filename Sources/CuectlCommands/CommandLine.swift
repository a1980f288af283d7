// What cuectl's command line asks for, parsed without any I/O so it can be
// tested without a daemon. Requests are built as protocol text and checked by
// the protocol's own parser: cuectl refuses exactly what cued would refuse,
// with the same words, before connecting.
import CuedProtocol

/// The shells `cuectl shell-init` knows.
public enum Shell: String, Sendable, CaseIterable {
    case bash, zsh, fish
}

/// One parsed cuectl invocation.
public struct Invocation: Equatable, Sendable {
    public var socket: String?
    /// `--session NAME`: a checked label.
    public var session: String?
    /// `--app NAME`: a checked label.
    public var app: String?
    public var action: Action

    public enum Action: Equatable, Sendable {
        /// One request on one connection; `render` says how to show its reply.
        case request(Request, render: Render)
        case configCheck(path: String?)
        /// `doctor`: a first-run check (`Doctor`).
        case doctor
        /// `canberra [on|off]`: libcanberra's sounds through cued, or back; nil: say which.
        case canberra(Bool?)
        /// `run -- COMMAND ARGS…`
        case run([String])
        case shellInit(Shell)
        case help
        case version
    }

    /// How a reply's payload is shown.
    public enum Render: Equatable, Sendable {
        case payload
        case statusTable
        case statusJSON
        /// `play`/`play-file`: `ok muted` and friends get a sentence.
        case play(what: String)
    }
}

/// A usage error: one line, exit 64.
public struct UsageError: Error, Equatable, Sendable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

public enum CommandParser {
    /// `cwd` makes a relative `play-file` path absolute.
    public static func parse(_ args: [String], cwd: String) throws(UsageError) -> Invocation {
        var inv = Invocation(action: .help)
        var words: [String] = []
        var gain: String?, loop: String?, priority: String?, themeName: String?, rate: String?, pitch: String?
        var wait = false, quiet = false, json = false, theme = false, wantsID = false, important = false, variants = false
        var command: [String]?
        var rest = args[...]

        /// `--flag VALUE` or `--flag=VALUE`.
        func value(_ arg: String, _ name: String) throws(UsageError) -> String? {
            if arg == name {
                guard let v = rest.popFirst() else { throw UsageError("\(name) needs a value") }
                return v
            }
            if arg.hasPrefix(name + "=") { return String(arg.dropFirst(name.count + 1)) }
            return nil
        }

        while let arg = rest.popFirst() {
            // After `run`'s own options, everything is the command.
            if words.first == "run" {
                if arg == "--" { command = Array(rest); break }
                if !arg.hasPrefix("-") || arg == "-" { command = [arg] + Array(rest); break }
            }
            if arg == "-h" || arg == "--help" { inv.action = .help; return inv }
            if arg == "--version" { inv.action = .version; return inv }
            if let v = try value(arg, "--socket") { inv.socket = v; continue }
            if let v = try value(arg, "--session") { inv.session = try label(v, "session name"); continue }
            if let v = try value(arg, "--app") { inv.app = try label(v, "app name"); continue }
            if let v = try value(arg, "--gain") { gain = v; continue }
            if let v = try value(arg, "--priority") { priority = v; continue }
            if let v = try value(arg, "--rate") { rate = v; continue }
            if let v = try value(arg, "--pitch") { pitch = v; continue }
            // `--loop` alone: until stopped; `--loop=N` or `--loop=2.5s` (one word: a bare
            // `--loop 3` would take the cue's place).
            if arg.hasPrefix("--loop=") { loop = String(arg.dropFirst(7)); continue }
            // `--theme=NAME[:PROFILE]` (play, preload) is one word: bare `--theme` is cues' switch.
            if arg.hasPrefix("--theme=") { themeName = String(arg.dropFirst(8)); continue }
            switch arg {
            case "--loop": loop = ""
            case "--id": wantsID = true
            case "--important": important = true
            case "--wait": wait = true
            case "--quiet": quiet = true
            case "--json": json = true
            case "--theme": theme = true
            case "--variants": variants = true
            case "--": throw UsageError("'--' goes with run: cuectl run -- COMMAND [ARGS…]")
            default:
                // A negative number is an argument (drag -1 is the protocol's to refuse).
                if arg.hasPrefix("-") && arg.count > 1 && RequestParser.decimal(Substring(arg)) == nil {
                    throw UsageError("unknown option '\(arg)'")
                }
                words.append(arg)
            }
        }

        guard let verb = words.first else {
            if args.isEmpty { throw UsageError("no command given") }
            throw UsageError("no command given, only options")
        }
        let operands = Array(words.dropFirst())

        /// Options that go with one verb only.
        func only(_ allowed: Set<String>) throws(UsageError) {
            let given: [(String, Bool)] = [("--gain", gain != nil), ("--wait", wait), ("--quiet", quiet),
                                           ("--json", json), ("--theme", theme), ("--loop", loop != nil),
                                           ("--priority", priority != nil), ("--id", wantsID), ("--important", important),
                                           ("--theme=", themeName != nil), ("--rate", rate != nil), ("--pitch", pitch != nil),
                                           ("--variants", variants)]
            for (flag, set) in given where set && !allowed.contains(flag) {
                throw UsageError("\(flag) does not go with \(verb)")
            }
        }
        func count(_ range: ClosedRange<Int>, _ usage: String) throws(UsageError) {
            guard range.contains(operands.count) else { throw UsageError("usage: cuectl \(usage)") }
        }

        switch verb {
        case "run":
            try only([])
            guard let command, !command.isEmpty else { throw UsageError("run needs a command: cuectl run -- COMMAND [ARGS…]") }
            guard operands.isEmpty else { throw UsageError("usage: cuectl run [--session NAME] [--app NAME] -- COMMAND [ARGS…]") }
            inv.action = .run(command)
            return inv
        case "shell-init":
            try only([])
            try count(1...1, "shell-init bash|zsh|fish")
            guard let shell = Shell(rawValue: operands[0]) else {
                throw UsageError("unknown shell '\(operands[0])' (bash, zsh or fish)")
            }
            inv.action = .shellInit(shell)
            return inv
        case "doctor":
            try only([])
            try count(0...0, "doctor")
            inv.action = .doctor
            return inv
        case "config":
            try only([])
            guard operands.first == "check", operands.count <= 2 else { throw UsageError("usage: cuectl config check [PATH]") }
            inv.action = .configCheck(path: operands.count == 2 ? operands[1] : nil)
            return inv
        case "canberra":
            try only([])
            try count(0...1, "canberra [on|off]")
            switch operands.first {
            case nil: inv.action = .canberra(nil)
            case "on": inv.action = .canberra(true)
            case "off": inv.action = .canberra(false)
            default: throw UsageError("usage: cuectl canberra [on|off]")
            }
            return inv
        case "help":
            inv.action = .help
            return inv
        default: break
        }

        // Everything else is one protocol request: a verb of the table. A plain one
        // takes its words as they are (the parser checks them); the others are built
        // from cuectl's options below.
        var render = Invocation.Render.payload
        var line: [String]
        guard let spec = VerbSpec.named(Substring(verb)), let usage = spec.cuectl.usage else {
            throw UsageError("unknown command '\(verb)'")
        }
        let oneLineUsage = usage.split(whereSeparator: { $0 == " " || $0 == "\n" }).joined(separator: " ")
        switch spec.cuectl {
        case .none:
            throw UsageError("unknown command '\(verb)'")
        case .plain:
            try only([])
            line = [verb] + operands
        case .options:
            switch verb {
            case "play":
                try only(playOptions); try count(1...1, oneLineUsage)
                _ = try label(operands[0], "cue name")
                line = ["play", operands[0]]
                render = .play(what: operands[0])
            case "preload":
                try only(["--theme="]); try count(1...1, oneLineUsage)
                _ = try label(operands[0], "cue name")
                line = ["preload", operands[0]]
            case "play-file":
                try only(fileOptions); try count(1...1, oneLineUsage)
                let path = absolute(operands[0], cwd: cwd)
                line = ["play-file", FilePath.encode(path)]
                render = .play(what: path)
            case "state":
                try only(["--quiet"])
                guard operands.count == 1 || (operands.count == 2 && operands[1] == "quiet") else { throw UsageError("usage: cuectl \(oneLineUsage)") }
                line = ["state", operands[0]] + (quiet || operands.count == 2 ? ["quiet"] : [])
            case "cues":
                try only(["--theme", "--variants"]); try count(0...0, oneLineUsage)
                if theme && variants { throw UsageError("usage: cuectl \(oneLineUsage)") }
                line = theme ? ["cues", "theme"] : variants ? ["cues", "variants"] : ["cues"]
            case "status":
                try only(["--json"]); try count(0...0, oneLineUsage)
                line = ["status"]
                render = json ? .statusJSON : .statusTable
            default:
                throw UsageError("cuectl builds no '\(verb)' line (a verb of the table with options needs its case here)")
            }
        }
        if let gain { line.append(gain) }
        if wait { line.append("wait") }
        if wantsID { line.append("id") }
        if let loop {
            line.append(loop.isEmpty ? "loop" : "loop=" + loop)
            // cuectl's connection closes when it exits, and a loop ends with its connection:
            // without --wait the loop is meant to outlive cuectl (stop it with `cuectl stop`).
            if !wait { line.append("detach") }
        }
        if let priority { line.append("priority=" + priority) }
        if important { line.append("important") }
        if let themeName { line.append("theme=" + themeName) }
        if let rate { line.append("rate=" + rate) }
        if let pitch { line.append("pitch=" + pitch) }

        // The words as given (a name with a space is one word, refused as a name): the
        // verb table's parser checks them; what goes on the wire is the request's own line.
        let request: Request
        do {
            request = try RequestParser.parse(words: line)
        } catch {
            throw UsageError(error.message.hasPrefix("usage: ") ? "usage: cuectl " + error.message.dropFirst(7) : error.message)
        }
        guard request.line.utf8.count <= ProtocolLimits.maxLineBytes else {
            throw UsageError("the request is \(request.line.utf8.count) bytes, over the protocol's \(ProtocolLimits.maxLineBytes)")
        }
        inv.action = .request(request, render: render)
        return inv
    }

    static let fileOptions: Set<String> = ["--gain", "--wait", "--id", "--loop", "--priority", "--important", "--rate", "--pitch"]
    static let fileUsage = "[--gain DB] [--wait] [--id] [--loop[=N|=SECONDSs]] [--priority P] [--important] [--rate R] [--pitch CENTS]"
    static let playOptions = fileOptions.union(["--theme="])
    static let playUsage = fileUsage + " [--theme=NAME[:PROFILE]]"

    /// The one label rule (`Label`), refused with its own words: never rewritten.
    static func label(_ s: String, _ what: String) throws(UsageError) -> String {
        guard Label.isValid(s) else { throw UsageError(Label.problem(s.escapingControls(), what: what)) }
        return s
    }

    /// A path made absolute against `cwd` (`.` and `..` are left to the file system).
    public static func absolute(_ path: String, cwd: String) -> String {
        if path.hasPrefix("/") { return path }
        return cwd.hasSuffix("/") ? cwd + path : cwd + "/" + path
    }

    /// The app when no --app was given: `$CUED_APP` made a label (`My Tool` →
    /// `My-Tool`), else one derived from `fallback`; nil if neither leaves a name.
    public static func appName(environment: String?, fallback: String?) -> String? {
        if let env = environment, let app = sanitizedLabel(env) { return app }
        return fallback.flatMap(derivedAppName)
    }

    /// An app name derived from a process name the user did not type (the
    /// parent's `comm`, a command's file name): anything outside the label
    /// alphabet becomes `-`; nil if nothing usable is left.
    public static func derivedAppName(_ raw: String) -> String? {
        sanitizedLabel(raw.split(separator: "/").last.map(String.init) ?? raw)
    }

    /// `raw` with anything outside the label alphabet made `-`, cut to a label's
    /// length; nil if nothing usable is left.
    public static func sanitizedLabel(_ base: String) -> String? {
        let clean = String(base.unicodeScalars.prefix(Label.maxBytes).map { c -> Character in
            let ascii = c.isASCII && (("a"..."z").contains(c) || ("A"..."Z").contains(c) || ("0"..."9").contains(c)
                                      || c == "." || c == "_" || c == "-")
            return ascii ? Character(c) : "-"
        })
        return Label.isValid(clean) ? clean : nil
    }
}
