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
        /// `why`: each reason with its fix (`WhyRender`).
        case why
    }
}

/// A usage error: one line, exit 64.
public struct UsageError: Error, Equatable, Sendable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

public enum CommandParser {
    /// The options of every verb cuectl offers, by name.
    static let verbOptions: [String: CuectlOption] = Dictionary(
        CuectlVerb.offered.flatMap(\.verb.options).map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })

    /// `cwd` makes a relative `play-file` path absolute.
    public static func parse(_ args: [String], cwd: String) throws(UsageError) -> Invocation {
        var inv = Invocation(action: .help)
        var words: [String] = []
        /// The verbs' options given, with their values ("" for a flag), in the order given.
        var given: [(option: CuectlOption, value: String)] = []
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

        /// One of the verbs' options, with its value, if `arg` is one.
        func verbOption(_ arg: String) throws(UsageError) -> (CuectlOption, String)? {
            let name = arg.firstIndex(of: "=").map { String(arg[...$0]) } ?? arg
            if let o = verbOptions[name], case .joined = o.word { return (o, String(arg.dropFirst(name.count))) }
            let bare = name.hasSuffix("=") ? String(name.dropLast()) : name
            guard let o = verbOptions[bare] else { return nil }
            switch o.word {
            case .flag, .none: return arg == bare ? (o, "") : nil
            case .loop: return (o, arg == bare ? "" : String(arg.dropFirst(bare.count + 1)))
            case .value: return try value(arg, bare).map { (o, $0) }
            case .joined: return nil
            }
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
            if let o = try verbOption(arg) { given.append(o); continue }
            if arg == "--" { throw UsageError("'--' goes with run: cuectl run -- COMMAND [ARGS…]") }
            // A negative number is an argument (drag -1 is the protocol's to refuse).
            if arg.hasPrefix("-") && arg.count > 1 && RequestParser.decimal(Substring(arg)) == nil {
                throw UsageError("unknown option '\(arg)'")
            }
            words.append(arg)
        }

        guard let verb = words.first else {
            if args.isEmpty { throw UsageError("no command given") }
            throw UsageError("no command given, only options")
        }
        let operands = Array(words.dropFirst())

        /// Options that go with one verb only.
        func only(_ allowed: [CuectlOption]) throws(UsageError) {
            for (o, _) in given where !allowed.contains(o) { throw UsageError("\(o.name) does not go with \(verb)") }
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

        // Everything else is one protocol request: a verb of the table that cuectl offers. A
        // plain one takes its words as they are; an options one is built as its grammar says.
        // Either way the protocol's parser checks the words.
        guard VerbSpec.named(Substring(verb)) != nil, let offer = CuectlVerb.named(verb) else {
            throw UsageError("unknown command '\(verb)'")
        }
        let oneLineUsage = offer.usage.split(whereSeparator: { $0 == " " || $0 == "\n" }).joined(separator: " ")
        var render = Invocation.Render.payload
        var line = [verb]
        switch offer.form {
        case .plain(let shows):
            try only([])
            line += operands
            if shows == .why { render = .why }
        case .options(let grammar):
            try only(grammar.options)
            try count(grammar.operands, oneLineUsage)
            var words = operands
            if grammar.path, let file = words.first {
                words[0] = FilePath.encode(absolute(file, cwd: cwd))
            }
            line += words
            for option in grammar.options {
                guard let v = given.first(where: { $0.option == option })?.value else { continue }
                switch option.word {
                case .flag(let word): line.append(word)
                case .value(let prefix), .joined(let prefix): line.append(prefix + v)
                case .loop:
                    line.append(v.isEmpty ? "loop" : "loop=" + v)
                    if !given.contains(where: { $0.option.word == .flag("wait") }) { line.append("detach") }
                case .none: break
                }
            }
            switch grammar.shows {
            case .payload: break
            case .play: render = .play(what: grammar.path ? absolute(operands[0], cwd: cwd) : operands[0])
            case .status: render = given.isEmpty ? .statusTable : .statusJSON
            case .why: render = .why
            }
        }

        // The words as given (a name with a space is one word, refused as a name): the
        // verb table's parser checks them; what goes on the wire is the request's own line.
        let request: Request
        do {
            request = try RequestParser.parse(words: line)
        } catch {
            // An options verb's usage is cuectl's (its options), not the protocol's.
            if error.message.hasPrefix("usage: "), case .options = offer.form { throw UsageError("usage: cuectl " + oneLineUsage) }
            let message = error.message.escapingControls()
            throw UsageError(message.hasPrefix("usage: ") ? "usage: cuectl " + message.dropFirst(7) : message)
        }
        guard request.line.utf8.count <= ProtocolLimits.maxLineBytes else {
            throw UsageError("the request is \(request.line.utf8.count) bytes, over the protocol's \(ProtocolLimits.maxLineBytes)")
        }
        inv.action = .request(request, render: render)
        return inv
    }

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
