// Protocol v1's verbs, all in this file: `Request` (a case per request), `VerbSpec.all` (the
// one table: a row per verb, what it is on the wire) and `Request.line` (each request said as
// its line). The parser (`RequestParser`), the connection's turns (`VerbSpec.cost`), and the
// checks of the docs and the completions are derived from the table. A new verb is its case,
// its row and its line here, its handler in CuedServer's `VerbTable` and its wording in
// `Replies`: three places, and the compiler asks for each switch that lacks it (the line, the
// handler, DaemonVerbTests' expected reply). cuectl offers it once CuectlCommands' `CuectlVerb`
// has words for it, keyed by its name; the tests then ask for its row in the protocol docs and
// its completions.

/// A request, parsed: a case per verb (two for some: `status wait`, `mute app NAME`), made by
/// its row of the table below and said again as a line by `line` (at the end of this file).
public enum Request: Equatable, Sendable {
    case ping
    /// A cue of the bank, else a sound of the desktop's sound theme.
    case play(cue: String, options: PlayOptions)
    /// A sound file by absolute path (decoded once, cached by identity).
    case playFile(path: String, options: PlayOptions)
    /// Fades out voices: this connection's app's, one cue of them, one voice, or all.
    case stop(StopTarget)
    /// Whether this connection gets an `end ID REASON` line when a voice it started ends.
    case events(Bool)
    /// `quiet`: set the state without any cue (forced state).
    case state(RefreshState, quiet: Bool)
    /// Binds the connection to a named session; nil asks which session it is in.
    case session(String?)
    /// Current pull distance in points (≥ 0).
    case drag(Double)
    /// The finger lifted.
    case drop
    /// The session's release threshold in points.
    case threshold(Double)
    /// The session's detent ticks: every N points of pull (0: none), nil to ask; `config`:
    /// back to the config's `[pull] detent_points`.
    case detent(DetentChoice?)
    case mute
    case unmute
    /// Declares the connection's app (a label for per-app mute and counts); `via`: the
    /// bridge its cues come through (`libcanberra`), shown in `status`.
    case app(String, via: String? = nil)
    case muteApp(String)
    case unmuteApp(String)
    /// The global profile: nil asks, else sets it.
    case profile(Profile?)
    /// One app's profile: nil asks (the profile its plays get), else sets it or forgets it.
    case profileApp(String, ProfileChoice?)
    /// Re-read the config and every cue; swap them in only if all load.
    case reload
    /// The loaded cues; `theme`: the sound theme's names instead; `variants`: each cue with
    /// its variants' count.
    case cues(theme: Bool, variants: Bool = false)
    /// Decodes a sound of the theme (or a named one) ahead, into the cache, without playing it.
    case preload(cue: String, theme: ThemeChoice?)
    case status
    /// `status wait`: the status once cued's audio thread has taken every request queued
    /// before it (a cue just queued has started or its output failed), at most 3 s later.
    case statusWait
    /// Every reason the next `play CUE` of this connection's app would not be heard, in order (`WhyReport`).
    case why(cue: String)
}

/// One verb of the protocol: its name, how many words follow it, its usage (as `err
/// bad-argument usage: …` says it), what a line of it costs the event loop, and how its
/// words are parsed into its `Request`.
public struct VerbSpec: Sendable {
    public let name: String
    let minArgs: Int
    let maxArgs: Int
    /// The protocol's usage, as `err bad-argument usage: …` says it.
    public let usage: String
    /// What a line of it costs the event loop, in pings (about 2 µs each), as measured by
    /// bench's fairness rows: what a connection's turn spends on it (ConnectionMachine).
    public let cost: Cost
    /// A valid line of it, for the tests that check everything derived from the table.
    public let example: String
    let parse: @Sendable ([Substring]) throws(ProtocolError) -> Request

    public struct Cost: Sendable, Equatable {
        /// The line alone (`status`).
        public let alone: Int
        /// With arguments (`status wait` only queues a sync; its reply is charged when rendered).
        public let withArguments: Int
        public init(_ alone: Int, withArguments: Int? = nil) { self.alone = alone; self.withArguments = withArguments ?? alone }
    }

    init(_ name: String, args: ClosedRange<Int>, usage: String, cost: Cost = Cost(1), example: String,
         parse: @escaping @Sendable ([Substring]) throws(ProtocolError) -> Request) {
        self.name = name; minArgs = args.lowerBound; maxArgs = args.upperBound; self.usage = usage
        self.cost = cost; self.example = example; self.parse = parse
    }

    public static func named(_ name: Substring) -> VerbSpec? { all.first { $0.name == name } }

    /// The usages the parser's errors repeat.
    static let playUsage = "play CUE \(RequestParser.playUsage) [theme=NAME[:PROFILE]]"
    static let playFileUsage = "play-file PATH \(RequestParser.playUsage)"

    /// In the order cuectl's help lists them.
    public static let all: [VerbSpec] = [
        VerbSpec("ping", args: 0...0, usage: "ping", example: "ping") { _ in .ping },
        VerbSpec("play", args: 1...11, usage: playUsage, cost: Cost(2), example: "play pop -6 id loop=2 priority=5 rate=1.5") {
            args throws(ProtocolError) in
            let cue = try RequestParser.label(args[0], what: "cue name")
            return .play(cue: cue, options: try RequestParser.playOptions(args.dropFirst(), usage: playUsage))
        },
        VerbSpec("play-file", args: 1...10, usage: playFileUsage, cost: Cost(2), example: "play-file /tmp/a%20b.wav wait") {
            args throws(ProtocolError) in
            let path = try RequestParser.filePath(args[0])
            let options = try RequestParser.playOptions(args.dropFirst(), usage: playFileUsage)
            guard options.theme == nil else { throw ProtocolError(.badArgument, "a file is no theme's: theme= goes with play and preload") }
            return .playFile(path: path, options: options)
        },
        VerbSpec("preload", args: 1...2, usage: "preload CUE [theme=NAME[:PROFILE]]", cost: Cost(2),
                 example: "preload bell theme=ocean:stereo") {
            args throws(ProtocolError) in
            let cue = try RequestParser.label(args[0], what: "cue name")
            guard args.count == 2 else { return .preload(cue: cue, theme: nil) }
            guard args[1].hasPrefix("theme=") else {
                throw ProtocolError(.badArgument, "unknown option '\(args[1].prefix(32))'; usage: preload CUE [theme=NAME[:PROFILE]]")
            }
            return .preload(cue: cue, theme: try RequestParser.themeChoice(args[1].dropFirst(6)))
        },
        VerbSpec("stop", args: 0...2, usage: "stop [CUE|all|id ID]", cost: Cost(4), example: "stop id 7") { args throws(ProtocolError) in
            guard let a = args.first else { return .stop(.mine) }
            if args.count == 2 {
                guard a == "id" else { throw ProtocolError(.badArgument, "usage: stop [CUE|all|id ID]") }
                guard let id = RequestParser.voiceID(args[1]) else {
                    throw ProtocolError(.badArgument, "voice id '\(args[1].prefix(32))' is not a whole number from 1 to "
                                        + "\(UInt64.max) (what `play … id` answered)")
                }
                return .stop(.id(id))
            }
            if a == "all" { return .stop(.all) }
            return .stop(.cue(try RequestParser.label(a, what: "cue name")))
        },
        VerbSpec("events", args: 1...1, usage: "events on|off", example: "events on") { args throws(ProtocolError) in
            switch args[0] {
            case "on": return .events(true)
            case "off": return .events(false)
            default: throw ProtocolError(.badArgument, "usage: events on|off")
            }
        },
        VerbSpec("state", args: 1...2, usage: "state pull|release|loading|idle [quiet]", example: "state loading quiet") {
            args throws(ProtocolError) in
            guard let s = RefreshState(rawValue: String(args[0])) else {
                throw ProtocolError(.badArgument, "unknown state '\(args[0].prefix(32))' (pull, release, loading or idle)")
            }
            if args.count == 2 && args[1] != "quiet" {
                throw ProtocolError(.badArgument, "unknown option '\(args[1].prefix(32))' (only 'quiet')")
            }
            return .state(s, quiet: args.count == 2)
        },
        VerbSpec("drag", args: 1...1, usage: "drag POINTS", example: "drag 30.5") { args throws(ProtocolError) in
            .drag(try RequestParser.points(args[0], in: ProtocolLimits.dragRange, what: "pull distance"))
        },
        VerbSpec("drop", args: 0...0, usage: "drop", example: "drop") { _ in .drop },
        VerbSpec("threshold", args: 1...1, usage: "threshold POINTS", example: "threshold 80") { args throws(ProtocolError) in
            .threshold(try RequestParser.points(args[0], in: ProtocolLimits.thresholdRange, what: "threshold"))
        },
        VerbSpec("detent", args: 0...1, usage: "detent [POINTS|off|config]", example: "detent 10") { args throws(ProtocolError) in
            guard let a = args.first else { return .detent(nil) }
            if a == "off" { return .detent(.every(0)) }
            if a == "config" { return .detent(.config) }
            return .detent(.every(try RequestParser.points(a, in: ProtocolLimits.detentRange, what: "detent")))
        },
        VerbSpec("session", args: 0...1, usage: "session [NAME]", example: "session mail") { args throws(ProtocolError) in
            guard let name = args.first else { return .session(nil) }
            return .session(try RequestParser.label(name, what: "session name"))
        },
        VerbSpec("app", args: 1...2, usage: "app NAME [via=KIND]", example: "app mail via=libcanberra") { args throws(ProtocolError) in
            let name = try RequestParser.label(args[0], what: "app name")
            guard args.count == 2 else { return .app(name) }
            guard args[1].hasPrefix("via=") else {
                throw ProtocolError(.badArgument, "unknown option '\(args[1].prefix(32))'; usage: app NAME [via=KIND]")
            }
            return .app(name, via: try RequestParser.label(args[1].dropFirst(4), what: "via"))
        },
        VerbSpec("mute", args: 0...2, usage: "mute [app NAME]", example: "mute app mail") { args throws(ProtocolError) in
            try RequestParser.appTarget(args, usage: "mute [app NAME]").map(Request.muteApp) ?? .mute
        },
        VerbSpec("unmute", args: 0...2, usage: "unmute [app NAME]", example: "unmute") { args throws(ProtocolError) in
            try RequestParser.appTarget(args, usage: "unmute [app NAME]").map(Request.unmuteApp) ?? .unmute
        },
        VerbSpec("profile", args: 0...3, usage: RequestParser.profileUsage, example: "profile app mail quiet") {
            args throws(ProtocolError) in try RequestParser.profile(args)
        },
        VerbSpec("reload", args: 0...0, usage: "reload", cost: Cost(4), example: "reload") { _ in .reload },
        VerbSpec("cues", args: 0...1, usage: "cues [theme|variants]", cost: Cost(4), example: "cues variants") {
            args throws(ProtocolError) in
            guard let a = args.first else { return .cues(theme: false) }
            if a == "variants" { return .cues(theme: false, variants: true) }
            guard a == "theme" else { throw ProtocolError(.badArgument, "usage: cues [theme|variants]") }
            return .cues(theme: true)
        },
        VerbSpec("status", args: 0...1, usage: "status [wait]", cost: Cost(48, withArguments: 1), example: "status wait") {
            args throws(ProtocolError) in
            guard let a = args.first else { return .status }
            guard a == "wait" else { throw ProtocolError(.badArgument, "unknown option '\(a.prefix(32))' (only 'wait')") }
            return .statusWait
        },
        VerbSpec("why", args: 0...1, usage: "why [CUE]", cost: Cost(8), example: "why bell") { args throws(ProtocolError) in
            guard let a = args.first else { return .why(cue: WhyReport.defaultCue) }
            return .why(cue: try RequestParser.label(a, what: "cue name"))
        },
    ]

    /// A line's cost from its verb's bytes (the connection charges it before parsing):
    /// unknown verbs cost a ping, a line over the limit too.
    public static func cost(ofLine bytes: some Collection<UInt8>) -> Int {
        let verb = bytes.prefix { $0 != 0x20 && $0 != 0x0D && $0 != 0x09 }
        guard verb.count <= 10 else { return 1 }
        let hasArguments = verb.count < bytes.count && bytes.dropFirst(verb.count).first != 0x0D
        for spec in costly where spec.bytes.count == verb.count && spec.bytes.elementsEqual(verb) {
            return hasArguments ? spec.cost.withArguments : spec.cost.alone
        }
        return 1
    }

    /// The verbs costing more than a ping, as bytes (no string is made per line).
    private static let costly: [(bytes: [UInt8], cost: Cost)] = all.filter { $0.cost != Cost(1) }.map { (Array($0.name.utf8), $0.cost) }
}

/// Encodes a request as the line a client sends (without LF).
extension Request {
    public var line: String {
        switch self {
        case .ping: return "ping"
        case .play(let cue, let options): return "play \(cue)" + options.words
        case .playFile(let path, let options): return "play-file \(FilePath.encode(path))" + options.words
        case .stop(.mine): return "stop"
        case .stop(.all): return "stop all"
        case .stop(.cue(let name)): return "stop \(name)"
        case .stop(.id(let id)): return "stop id \(id)"
        case .events(let on): return on ? "events on" : "events off"
        case .state(let s, let quiet): return "state \(s.rawValue)" + (quiet ? " quiet" : "")
        case .session(let name): return name.map { "session \($0)" } ?? "session"
        case .drag(let p): return "drag \(Self.number(p))"
        case .drop: return "drop"
        case .threshold(let p): return "threshold \(Self.number(p))"
        case .detent(let d): return "detent" + (d.map { " " + $0.word } ?? "")
        case .mute: return "mute"
        case .unmute: return "unmute"
        case .app(let name, let via): return "app \(name)" + (via.map { " via=\($0)" } ?? "")
        case .muteApp(let name): return "mute app \(name)"
        case .unmuteApp(let name): return "unmute app \(name)"
        case .profile(let p): return "profile" + (p.map { " " + $0.rawValue } ?? "")
        case .profileApp(let name, let choice): return "profile app \(name)" + (choice.map { " " + $0.word } ?? "")
        case .reload: return "reload"
        case .cues(let theme, let variants): return theme ? "cues theme" : variants ? "cues variants" : "cues"
        case .preload(let cue, let theme): return "preload \(cue)" + (theme.map { " theme=\($0.word)" } ?? "")
        case .status: return "status"
        case .statusWait: return "status wait"
        case .why(let cue): return "why \(cue)"
        }
    }
}
