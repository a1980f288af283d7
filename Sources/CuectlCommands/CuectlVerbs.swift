import CuedProtocol

/// How cuectl offers the protocol's verbs (`VerbSpec`): its usage, its help and how it builds
/// the line, keyed by verb. The help lists them in the verb table's order; a verb of the table
/// missing here is socket only (`events`; `app` is cuectl's `--app`). `CuectlVerbsTests` checks
/// that every key is a verb of the table.
public struct CuectlVerb: Sendable {
    /// As the help shows it (a second line indented under the first).
    public let usage: String
    public let help: String
    public let form: Form

    public enum Form: Sendable {
        /// `cuectl NAME ARGS…` sends the words as given (the parser checks them); `shows`: how
        /// cuectl shows the reply (`.payload` or `.why`).
        case plain(shows: Grammar.Shows)
        /// cuectl builds the line from options of its own (`--wait`, `--theme`…), as `Grammar` says.
        case options(Grammar)
    }

    /// The options cuectl takes for the verb (none for a plain one).
    public var options: [CuectlOption] {
        if case .options(let g) = form { return g.options }
        return []
    }

    static func plain(_ usage: String, _ help: String, shows: Grammar.Shows = .payload) -> CuectlVerb {
        CuectlVerb(usage: usage, help: help, form: .plain(shows: shows))
    }
    static func options(_ usage: String, _ help: String, _ grammar: Grammar) -> CuectlVerb {
        CuectlVerb(usage: usage, help: help, form: .options(grammar))
    }

    /// cuectl's entry for a verb of the table; nil: socket only.
    public static func named(_ verb: String) -> CuectlVerb? { byVerb[verb] }

    /// The verbs cuectl offers, in the table's order (as its help lists them).
    public static var offered: [(name: String, verb: CuectlVerb)] {
        VerbSpec.all.compactMap { spec in byVerb[spec.name].map { (spec.name, $0) } }
    }

    /// Keyed by the verb's name in `VerbSpec.all`.
    public static let byVerb: [String: CuectlVerb] = [
        "ping": .plain("ping", "check that cued answers"),
        "play": .options("play CUE [--gain DB] [--wait] [--id] [--loop[=N|=SECONDSs]] [--priority P] [--important]\n"
                             + "     [--rate R] [--pitch CENTS] [--theme=NAME[:PROFILE]]", """
            play a cue, else a sound of the desktop's sound theme (bell, message-new-instant…); gain \
            -60…12 dB; --wait: return only once it has sounded (exit 1 if it could not); --id: print \
            the voice's id; --loop: until stopped, N times or for SECONDS (it goes on after cuectl \
            exits, but with --wait); --priority: -100…100, the lowest is taken first when all voices \
            are busy; --important: through the quiet and silent profiles, for the apps the config's \
            [profiles] important_apps lists; --rate: speed and pitch 0.5…2; --pitch: -1200…1200 \
            cents; --theme: that sound theme (and output profile) instead of the config's
            """, Grammar(operands: 1...1, options: CuectlOption.play, shows: .play)),
        "play-file": .options("play-file PATH [--gain DB] [--wait] [--id] [--loop[=…]] [--priority P] [--important] [--rate R]\n"
                                  + "     [--pitch CENTS]",
                              "play a sound file (relative to the current directory)",
                              Grammar(operands: 1...1, path: true, options: CuectlOption.playFile, shows: .play)),
        "preload": .options("preload CUE [--theme=NAME[:PROFILE]]",
                            "decode a theme sound ahead, so its first play is as quick as the next (returns once it is ready)",
                            Grammar(operands: 1...1, options: [.theme])),
        "stop": .plain("stop [CUE|all|id ID]",
                       "fade out what this app started (only CUE, or everything, or the voice ID); prints how many voices stopped"),
        "state": .options("state pull|release|loading|idle [--quiet]",
                          "drive the refresh state; prints the cue that sounded or - (--quiet: set it without any cue)",
                          Grammar(operands: 1...2, options: [.flag("--quiet", "quiet")])),
        "drag": .plain("drag POINTS", "report the pull distance; prints the cue or -"),
        "drop": .plain("drop", "the finger lifted; prints the cue or -"),
        "threshold": .plain("threshold POINTS", "the session's release threshold (default 65)"),
        "detent": .plain("detent [POINTS|off|config]", """
            a soft tick every POINTS of pull below the threshold, for this session (config: the config's \
            [pull] detent_points again)
            """),
        "session": .plain("session [NAME]", "show (or bind to) a named session: NAME STATE THRESHOLD"),
        "mute": .plain("mute [app NAME]", "silence all cues, or one app's (persists across restarts)"),
        "unmute": .plain("unmute [app NAME]", "undo mute"),
        "profile": .plain("profile [full|quiet|silent]\nprofile app NAME [full|quiet|silent|default]", """
            show or set the profile: quiet plays every cue softer, silent none (persists across restarts; mute \
            still wins); with app NAME, one app's (alone: the profile its cues get; default: the config's again)
            """),
        "reload": .plain("reload", "re-read the config and cues (all or nothing)"),
        "cues": .options("cues [--theme|--variants]", """
            the loaded cues (--theme: the sound theme's names; --variants: each cue with how many variants it \
            plays in turn)
            """, Grammar(operands: 0...0, options: [.flag("--theme", "theme"), .flag("--variants", "variants")])),
        "status": .options("status [--json]", "daemon, device and latency figures",
                           Grammar(operands: 0...0, options: [CuectlOption(name: "--json", word: .none)], shows: .status)),
        "why": .plain("why [CUE]", """
            every reason the next play of CUE (default pop) by this app (--app) would not be heard, in the order \
            they apply, each with its fix: mute, profiles, the cue's cooldown, the memory budget, libcanberra's \
            routing, the desktop's event sounds and Do Not Disturb, cued's stream and the output on the sound \
            server, the device; exit 1 if there is one
            """, shows: .why),
    ]
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
    /// The payload as it is, a play's (`ok muted` and friends get a sentence), `status`'s
    /// table (or its JSON with `--json`), `why`'s reasons each with its fix (`WhyRender`).
    public enum Shows: Sendable { case payload, play, status, why }

    init(operands: ClosedRange<Int>, path: Bool = false, options: [CuectlOption], shows: Shows = .payload) {
        self.operands = operands; self.path = path; self.options = options; self.shows = shows
    }
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
