/// Protocol v1's verbs: the one table. The parser (`RequestParser`), the event loop's cost
/// of a line (`cost`, the connection's turns), cuectl's grammar (`cuectl`) and its help
/// (`help`), and the checks of the docs and the completions are all derived from it; the
/// daemon answers each `Request` in one handler (`Daemon.respond`). A new verb is one entry
/// here, its `Request` case, and its handler: the compiler then asks for its expected reply
/// in DaemonVerbTests and the tests for its row in the protocol docs and its completions.
public struct VerbSpec: Sendable {
    public let name: String
    let minArgs: Int
    let maxArgs: Int
    /// The protocol's usage, as `err bad-argument usage: …` says it.
    public let usage: String
    /// What a line of it costs the event loop, in pings (about 2 µs each), as measured by
    /// bench's fairness rows: what a connection's turn spends on it (ConnectionMachine).
    public let cost: Cost
    /// How cuectl offers it.
    public let cuectl: Cuectl
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

    public enum Cuectl: Sendable {
        /// `cuectl NAME ARGS…` sends the words as given (the parser checks them).
        case plain(usage: String, help: String)
        /// cuectl builds the line from options of its own (`--wait`, `--theme`…), as `Grammar` says.
        case options(usage: String, help: String, Grammar)
        /// Socket only (`events`; `app` is cuectl's `--app`).
        case none

        public var usage: String? {
            switch self {
            case .plain(let u, _), .options(let u, _, _): return u
            case .none: return nil
            }
        }
        public var help: String? {
            switch self {
            case .plain(_, let h), .options(_, let h, _): return h
            case .none: return nil
            }
        }
        /// The options cuectl takes for the verb (none for a plain one).
        public var options: [CuectlOption] {
            if case .options(_, _, let g) = self { return g.options }
            return []
        }
    }

    /// How cuectl builds an options verb's line: its operands as given (a file's path made
    /// absolute and encoded), then the word of each option it was given, in `options` order.
    public struct Grammar: Sendable {
        public let operands: ClosedRange<Int>
        /// The first operand is a sound file's path.
        public let path: Bool
        public let options: [CuectlOption]
        /// How cuectl shows the reply.
        public let shows: Shows
        public enum Shows: Sendable { case payload, play, status }

        init(operands: ClosedRange<Int>, path: Bool = false, options: [CuectlOption], shows: Shows = .payload) {
            self.operands = operands; self.path = path; self.options = options; self.shows = shows
        }
    }

    init(_ name: String, args: ClosedRange<Int>, usage: String, cost: Cost = Cost(1), cuectl: Cuectl, example: String,
         parse: @escaping @Sendable ([Substring]) throws(ProtocolError) -> Request) {
        self.name = name; minArgs = args.lowerBound; maxArgs = args.upperBound; self.usage = usage
        self.cost = cost; self.cuectl = cuectl; self.example = example; self.parse = parse
    }

    public static func named(_ name: Substring) -> VerbSpec? { all.first { $0.name == name } }

    /// In the order cuectl's help lists them.
    public static let all: [VerbSpec] = [
        VerbSpec("ping", args: 0...0, usage: "ping", cuectl: .plain(usage: "ping", help: "check that cued answers"), example: "ping") { _ in .ping },
        VerbSpec("play", args: 1...11, usage: "play CUE \(RequestParser.playUsage) [theme=NAME[:PROFILE]]", cost: Cost(2),
                 cuectl: .options(usage: "play CUE [--gain DB] [--wait] [--id] [--loop[=N|=SECONDSs]] [--priority P] [--important]\n"
                                      + "     [--rate R] [--pitch CENTS] [--theme=NAME[:PROFILE]]",
                                  help: """
                                      play a cue, else a sound of the desktop's sound theme (bell, message-new-instant…); gain \
                                      -60…12 dB; --wait: return only once it has sounded (exit 1 if it could not); --id: print \
                                      the voice's id; --loop: until stopped, N times or for SECONDS (it goes on after cuectl \
                                      exits, but with --wait); --priority: -100…100, the lowest is taken first when all voices \
                                      are busy; --important: through the quiet and silent profiles, for the apps the config's \
                                      [profiles] important_apps lists; --rate: speed and pitch 0.5…2; --pitch: -1200…1200 \
                                      cents; --theme: that sound theme (and output profile) instead of the config's
                                      """, Grammar(operands: 1...1, options: CuectlOption.play, shows: .play)), example: "play pop -6 id loop=2 priority=5 rate=1.5") { args throws(ProtocolError) in
            let cue = try RequestParser.label(args[0], what: "cue name")
            return .play(cue: cue, options: try RequestParser.playOptions(args.dropFirst(),
                                                                           usage: "play CUE \(RequestParser.playUsage) [theme=NAME[:PROFILE]]"))
        },
        VerbSpec("play-file", args: 1...10, usage: "play-file PATH \(RequestParser.playUsage)", cost: Cost(2),
                 cuectl: .options(usage: "play-file PATH [--gain DB] [--wait] [--id] [--loop[=…]] [--priority P] [--important] [--rate R]\n"
                                      + "     [--pitch CENTS]",
                                  help: "play a sound file (relative to the current directory)",
                                  Grammar(operands: 1...1, path: true, options: CuectlOption.playFile, shows: .play)), example: "play-file /tmp/a%20b.wav wait") { args throws(ProtocolError) in
            let path = try RequestParser.filePath(args[0])
            let options = try RequestParser.playOptions(args.dropFirst(), usage: "play-file PATH \(RequestParser.playUsage)")
            guard options.theme == nil else { throw ProtocolError(.badArgument, "a file is no theme's: theme= goes with play and preload") }
            return .playFile(path: path, options: options)
        },
        VerbSpec("preload", args: 1...2, usage: "preload CUE [theme=NAME[:PROFILE]]", cost: Cost(2),
                 cuectl: .options(usage: "preload CUE [--theme=NAME[:PROFILE]]",
                                  help: "decode a theme sound ahead, so its first play is as quick as the next (returns once it is ready)",
                                  Grammar(operands: 1...1, options: [.theme])), example: "preload bell theme=ocean:stereo") {
            args throws(ProtocolError) in
            let cue = try RequestParser.label(args[0], what: "cue name")
            guard args.count == 2 else { return .preload(cue: cue, theme: nil) }
            guard args[1].hasPrefix("theme=") else {
                throw ProtocolError(.badArgument, "unknown option '\(args[1].prefix(32))'; usage: preload CUE [theme=NAME[:PROFILE]]")
            }
            return .preload(cue: cue, theme: try RequestParser.themeChoice(args[1].dropFirst(6)))
        },
        VerbSpec("stop", args: 0...2, usage: "stop [CUE|all|id ID]", cost: Cost(4),
                 cuectl: .plain(usage: "stop [CUE|all|id ID]",
                                help: "fade out what this app started (only CUE, or everything, or the voice ID); prints how many voices stopped"), example: "stop id 7") {
            args throws(ProtocolError) in
            guard let a = args.first else { return .stop(.mine) }
            if args.count == 2 {
                guard a == "id" else { throw ProtocolError(.badArgument, "usage: stop [CUE|all|id ID]") }
                guard let id = RequestParser.voiceID(args[1]) else {
                    throw ProtocolError(.badArgument, "voice id '\(args[1].prefix(32))' is not a whole number from 1 to \(UInt64.max) (what `play … id` answered)")
                }
                return .stop(.id(id))
            }
            if a == "all" { return .stop(.all) }
            return .stop(.cue(try RequestParser.label(a, what: "cue name")))
        },
        VerbSpec("events", args: 1...1, usage: "events on|off", cuectl: .none, example: "events on") { args throws(ProtocolError) in
            switch args[0] {
            case "on": return .events(true)
            case "off": return .events(false)
            default: throw ProtocolError(.badArgument, "usage: events on|off")
            }
        },
        VerbSpec("state", args: 1...2, usage: "state pull|release|loading|idle [quiet]",
                 cuectl: .options(usage: "state pull|release|loading|idle [--quiet]",
                                  help: "drive the refresh state; prints the cue that sounded or - (--quiet: set it without any cue)",
                                  Grammar(operands: 1...2, options: [.flag("--quiet", "quiet")])), example: "state loading quiet") {
            args throws(ProtocolError) in
            guard let s = RefreshState(rawValue: String(args[0])) else {
                throw ProtocolError(.badArgument, "unknown state '\(args[0].prefix(32))' (pull, release, loading or idle)")
            }
            if args.count == 2 && args[1] != "quiet" {
                throw ProtocolError(.badArgument, "unknown option '\(args[1].prefix(32))' (only 'quiet')")
            }
            return .state(s, quiet: args.count == 2)
        },
        VerbSpec("drag", args: 1...1, usage: "drag POINTS", cuectl: .plain(usage: "drag POINTS", help: "report the pull distance; prints the cue or -"), example: "drag 30.5") {
            args throws(ProtocolError) in .drag(try RequestParser.points(args[0], in: ProtocolLimits.dragRange, what: "pull distance"))
        },
        VerbSpec("drop", args: 0...0, usage: "drop", cuectl: .plain(usage: "drop", help: "the finger lifted; prints the cue or -"), example: "drop") { _ in .drop },
        VerbSpec("threshold", args: 1...1, usage: "threshold POINTS",
                 cuectl: .plain(usage: "threshold POINTS", help: "the session's release threshold (default 65)"), example: "threshold 80") { args throws(ProtocolError) in
            .threshold(try RequestParser.points(args[0], in: ProtocolLimits.thresholdRange, what: "threshold"))
        },
        VerbSpec("detent", args: 0...1, usage: "detent [POINTS|off|config]",
                 cuectl: .plain(usage: "detent [POINTS|off|config]", help: """
                     a soft tick every POINTS of pull below the threshold, for this session (config: the config's \
                     [pull] detent_points again)
                     """), example: "detent 10") { args throws(ProtocolError) in
            guard let a = args.first else { return .detent(nil) }
            if a == "off" { return .detent(.every(0)) }
            if a == "config" { return .detent(.config) }
            return .detent(.every(try RequestParser.points(a, in: ProtocolLimits.detentRange, what: "detent")))
        },
        VerbSpec("session", args: 0...1, usage: "session [NAME]",
                 cuectl: .plain(usage: "session [NAME]", help: "show (or bind to) a named session: NAME STATE THRESHOLD"), example: "session mail") {
            args throws(ProtocolError) in
            guard let name = args.first else { return .session(nil) }
            return .session(try RequestParser.label(name, what: "session name"))
        },
        VerbSpec("app", args: 1...2, usage: "app NAME [via=KIND]", cuectl: .none, example: "app mail via=libcanberra") { args throws(ProtocolError) in
            let name = try RequestParser.label(args[0], what: "app name")
            guard args.count == 2 else { return .app(name) }
            guard args[1].hasPrefix("via=") else { throw ProtocolError(.badArgument, "unknown option '\(args[1].prefix(32))'; usage: app NAME [via=KIND]") }
            return .app(name, via: try RequestParser.label(args[1].dropFirst(4), what: "via"))
        },
        VerbSpec("mute", args: 0...2, usage: "mute [app NAME]",
                 cuectl: .plain(usage: "mute [app NAME]", help: "silence all cues, or one app's (persists across restarts)"), example: "mute app mail") {
            args throws(ProtocolError) in try RequestParser.appTarget(args, usage: "mute [app NAME]").map(Request.muteApp) ?? .mute
        },
        VerbSpec("unmute", args: 0...2, usage: "unmute [app NAME]", cuectl: .plain(usage: "unmute [app NAME]", help: "undo mute"), example: "unmute") {
            args throws(ProtocolError) in try RequestParser.appTarget(args, usage: "unmute [app NAME]").map(Request.unmuteApp) ?? .unmute
        },
        VerbSpec("profile", args: 0...3, usage: RequestParser.profileUsage,
                 cuectl: .plain(usage: "profile [full|quiet|silent]\nprofile app NAME [full|quiet|silent|default]", help: """
                     show or set the profile: quiet plays every cue softer, silent none (persists across restarts; mute \
                     still wins); with app NAME, one app's (alone: the profile its cues get; default: the config's again)
                     """), example: "profile app mail quiet") { args throws(ProtocolError) in try RequestParser.profile(args) },
        VerbSpec("reload", args: 0...0, usage: "reload", cost: Cost(4),
                 cuectl: .plain(usage: "reload", help: "re-read the config and cues (all or nothing)"), example: "reload") { _ in .reload },
        VerbSpec("cues", args: 0...1, usage: "cues [theme|variants]", cost: Cost(4),
                 cuectl: .options(usage: "cues [--theme|--variants]", help: """
                     the loaded cues (--theme: the sound theme's names; --variants: each cue with how many variants it \
                     plays in turn)
                     """, Grammar(operands: 0...0, options: [.flag("--theme", "theme"), .flag("--variants", "variants")])), example: "cues variants") { args throws(ProtocolError) in
            guard let a = args.first else { return .cues(theme: false) }
            if a == "variants" { return .cues(theme: false, variants: true) }
            guard a == "theme" else { throw ProtocolError(.badArgument, "usage: cues [theme|variants]") }
            return .cues(theme: true)
        },
        VerbSpec("status", args: 0...1, usage: "status [wait]", cost: Cost(48, withArguments: 1),
                 cuectl: .options(usage: "status [--json]", help: "daemon, device and latency figures",
                                  Grammar(operands: 0...0, options: [CuectlOption(name: "--json", word: .none)], shows: .status)), example: "status wait") { args throws(ProtocolError) in
            guard let a = args.first else { return .status }
            guard a == "wait" else { throw ProtocolError(.badArgument, "unknown option '\(a.prefix(32))' (only 'wait')") }
            return .statusWait
        },
        VerbSpec("why", args: 0...1, usage: "why [CUE]", cost: Cost(8),
                 cuectl: .plain(usage: "why [CUE]", help: """
                     every reason the next play of CUE (default pop) by this app (--app) would not be heard, in the order \
                     they apply, each with its fix: mute, profiles, the cue's cooldown, the memory budget, libcanberra's \
                     routing, the desktop's event sounds and Do Not Disturb, cued's stream and the output on the sound \
                     server, the device; exit 1 if there is one
                     """), example: "why bell") { args throws(ProtocolError) in
            .why(cue: try args.first.map { a throws(ProtocolError) in try RequestParser.label(a, what: "cue name") } ?? WhyReport.defaultCue)
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

/// One of cuectl's options for a verb, and the word it puts on the request line.
public struct CuectlOption: Sendable, Equatable {
    public enum Word: Sendable, Equatable {
        /// `--wait` → `wait`.
        case flag(String)
        /// `--priority P` or `--priority=P` → `priority=P`; prefix "": the value alone (`--gain DB` → `DB`).
        case value(prefix: String)
        /// `--theme=NAME`, one word (a bare `--theme` is another verb's option) → `theme=NAME`.
        case joined(prefix: String)
        /// `--loop` → `loop`, `--loop=X` → `loop=X` (one word: a bare `--loop 3` would take the
        /// cue's place); then `detach` unless `--wait` (cuectl exits, the loop is meant to go on).
        case loop
        /// No word: it changes how cuectl shows the reply (`--json`).
        case none
    }
    /// As typed (`--theme=` for the joined form).
    public let name: String
    public let word: Word

    public init(name: String, word: Word) { self.name = name; self.word = word }

    static func flag(_ name: String, _ word: String) -> CuectlOption { CuectlOption(name: name, word: .flag(word)) }
    static let theme = CuectlOption(name: "--theme=", word: .joined(prefix: "theme="))

    /// `play-file`'s, in the order their words go on the line.
    static let playFile: [CuectlOption] = [
        CuectlOption(name: "--gain", word: .value(prefix: "")), .flag("--wait", "wait"), .flag("--id", "id"),
        CuectlOption(name: "--loop", word: .loop), CuectlOption(name: "--priority", word: .value(prefix: "priority=")),
        .flag("--important", "important"), CuectlOption(name: "--rate", word: .value(prefix: "rate=")),
        CuectlOption(name: "--pitch", word: .value(prefix: "pitch=")),
    ]
    /// `play`'s: `play-file`'s and `--theme=` (before `--rate`, as the line has it).
    static let play: [CuectlOption] = Array(playFile.prefix(6)) + [theme] + Array(playFile.dropFirst(6))
}
