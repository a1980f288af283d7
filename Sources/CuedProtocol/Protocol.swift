// Protocol v1: one UTF-8 line per request, one line per reply.

/// cued's version, shared by cued and cuectl.
public enum CuedVersion {
    public static let string = "0.2.0"
}

/// The states of a pull-to-refresh view.
public enum RefreshState: String, Sendable, CaseIterable {
    case idle, pull, release, loading
}

extension Request {
    public static func play(cue: String, gainDB: Double, wait: Bool) -> Request {
        .play(cue: cue, options: PlayOptions(gainDB: gainDB, wait: wait))
    }
    public static func playFile(path: String, gainDB: Double, wait: Bool) -> Request {
        .playFile(path: path, options: PlayOptions(gainDB: gainDB, wait: wait))
    }
}

/// A sound theme named by a request (`theme=NAME[:PROFILE]`): where a theme sound is
/// looked up instead of the config's theme, as libcanberra's `canberra.xdg-theme.name`
/// and `….output-profile` say.
public struct ThemeChoice: Equatable, Hashable, Sendable {
    public var name: String
    /// The output profile whose directories come first (nil: `stereo`).
    public var profile: String?
    public init(name: String, profile: String? = nil) { self.name = name; self.profile = profile }
    /// `NAME` or `NAME:PROFILE`, as on the wire.
    public var word: String { profile.map { "\(name):\($0)" } ?? name }
}

/// `detent N|off|config`.
public enum DetentChoice: Equatable, Sendable {
    case every(Double)
    case config
    public var word: String {
        switch self {
        case .every(let n): return n == 0 ? "off" : Request.number(n)
        case .config: return "config"
        }
    }
}

/// How a voice is played: `play CUE [GAIN_DB] [wait] [id] [loop[=N|=Ts]] [detach] [priority=P] [important] [theme=NAME[:PROFILE]]`.
public struct PlayOptions: Equatable, Sendable {
    /// Added to the cue's, the app's and the master gain.
    public var gainDB: Double = 0
    /// Reply only once it has sounded (or how it ended).
    public var wait = false
    /// Reply `ok ID` at once: the voice's id, for `stop id ID` and `end ID REASON` lines.
    public var wantsID = false
    public var loop: Loop = .once
    /// The loop goes on after the connection closes (else it ends with it: a client that
    /// crashed leaves no endless sound); stop it with `stop id`.
    public var detach = false
    /// Higher wins a voice slot when all are busy (the lowest, then the oldest, is
    /// taken); a voice finding only higher ones is not started.
    public var priority: Int = 0
    /// Passes the `silent` and `quiet` profiles, if the app is one the config's
    /// `[profiles] important_apps` lists (for any other app it is ignored).
    public var important = false
    /// The theme a theme sound is looked up in (nil: the config's).
    public var theme: ThemeChoice?
    /// Playback speed and pitch together (`rate=`, 0.5…2: SoundPool's rate).
    public var rate: Double = 1
    /// Pitch (and speed) in cents (`pitch=`, −1200…1200), on top of `rate`.
    public var pitchCents: Double = 0

    public static let rateRange: ClosedRange<Double> = 0.5...2
    public static let pitchRange: ClosedRange<Double> = -1_200...1_200

    public enum Loop: Equatable, Sendable {
        case once
        /// N plays in all.
        case times(Int)
        /// Until stopped.
        case forever
        /// Until stopped, at most this many seconds.
        case seconds(Double)
    }

    public static let priorityRange: ClosedRange<Int> = -100...100
    public static let maxLoopTimes = 1_000
    public static let maxLoopSeconds = 3_600.0

    public init(gainDB: Double = 0, wait: Bool = false, wantsID: Bool = false, loop: Loop = .once, detach: Bool = false,
                priority: Int = 0, important: Bool = false, theme: ThemeChoice? = nil) {
        self.gainDB = gainDB; self.wait = wait; self.wantsID = wantsID; self.loop = loop; self.detach = detach
        self.priority = priority; self.important = important; self.theme = theme
    }
}

/// What `stop` silences.
public enum StopTarget: Equatable, Sendable {
    /// What this connection's app (or, without one, this connection) started.
    case mine
    /// One cue (or theme sound) of those.
    case cue(String)
    /// One voice, by the id `play … id` gave (whoever started it).
    case id(UInt64)
    /// Everything that plays.
    case all
}

public enum RequestParser {
    /// The verbs, from the one table (Verbs.swift).
    static var verbs: [VerbSpec] { VerbSpec.all }

    public static var verbNames: [String] { verbs.map(\.name) }

    /// `[]` → nil (everything); `["app", NAME]` → NAME.
    static func appTarget(_ args: [Substring], usage: String) throws(ProtocolError) -> String? {
        guard !args.isEmpty else { return nil }
        guard args.count == 2, args[0] == "app" else { throw ProtocolError(.badArgument, "usage: \(usage)") }
        return try label(args[1], what: "app name")
    }

    static let playUsage = "[GAIN_DB] [wait] [id] [loop|loop=N|loop=SECONDSs] [detach] [priority=P] [important] [rate=R] [pitch=CENTS]"

    static let profileUsage = "profile [full|quiet|silent] | profile app NAME [full|quiet|silent|default]"

    /// `profile [LEVEL]`, `profile app NAME [LEVEL|default]`.
    static func profile(_ args: [Substring]) throws(ProtocolError) -> Request {
        guard let first = args.first else { return .profile(nil) }
        guard first == "app" else {
            guard args.count == 1 else { throw ProtocolError(.badArgument, "usage: \(profileUsage)") }
            guard let p = Profile(rawValue: String(first)) else {
                throw ProtocolError(.badArgument, "unknown profile '\(first.prefix(32))' (\(Profile.names))")
            }
            return .profile(p)
        }
        guard args.count >= 2 else { throw ProtocolError(.badArgument, "usage: \(profileUsage)") }
        let app = try label(args[1], what: "app name")
        guard args.count == 3 else { return .profileApp(app, nil) }
        guard let choice = ProfileChoice(word: args[2]) else {
            throw ProtocolError(.badArgument, "unknown profile '\(args[2].prefix(32))' (full, quiet, silent or default)")
        }
        return .profileApp(app, choice)
    }

    /// What follows a play's sound: the gain first if any, then the words in any order, each once.
    static func playOptions(_ args: ArraySlice<Substring>, usage: String) throws(ProtocolError) -> PlayOptions {
        var o = PlayOptions()
        var seen = Set<Substring>()
        for (i, a) in args.enumerated() {
            let key = a.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).first ?? a
            guard ["wait", "id", "loop", "detach", "priority", "important", "theme", "rate", "pitch"].contains(key) else {
                guard i == 0 else {
                    throw ProtocolError(.badArgument, decimal(a) != nil ? "the gain comes right after the sound; usage: \(usage)"
                                                                      : "unknown option '\(a.prefix(32))'; usage: \(usage)")
                }
                guard let g = decimal(a) else {
                    throw ProtocolError(.badArgument, "gain '\(a.prefix(32))' is not a number of dB")
                }
                guard ProtocolLimits.gainRange.contains(g) else {
                    throw ProtocolError(.badArgument, "gain \(a) dB is outside -60...12")
                }
                o.gainDB = g
                continue
            }
            guard !seen.contains(key) else { throw ProtocolError(.badArgument, "'\(key.prefix(16))' given twice; usage: \(usage)") }
            seen.insert(key)
            let value = a.dropFirst(key.count + 1)
            switch key {
            case "wait" where a == key: o.wait = true
            case "id" where a == key: o.wantsID = true
            case "loop" where a == key: o.loop = .forever
            case "important" where a == key: o.important = true
            case "detach" where a == key: o.detach = true
            case "loop": o.loop = try loop(value)
            case "theme" where a != key: o.theme = try themeChoice(value)
            case "rate" where a != key:
                guard let r = decimal(value), PlayOptions.rateRange.contains(r) else {
                    throw ProtocolError(.badArgument, "rate '\(value.prefix(16))' is not a speed in 0.5...2 (1: as recorded)")
                }
                o.rate = r
            case "pitch" where a != key:
                guard let c = decimal(value), PlayOptions.pitchRange.contains(c) else {
                    throw ProtocolError(.badArgument, "pitch '\(value.prefix(16))' is not a number of cents in -1200...1200")
                }
                o.pitchCents = c
            case "priority" where a != key:
                guard let p = Int(value), PlayOptions.priorityRange.contains(p), value.utf8.count <= 4 else {
                    throw ProtocolError(.badArgument, "priority '\(value.prefix(16))' is not a whole number in -100...100")
                }
                o.priority = p
            default:
                throw ProtocolError(.badArgument, "unknown option '\(a.prefix(32))'; usage: \(usage)")
            }
        }
        if o.wait && o.wantsID {
            throw ProtocolError(.badArgument, "ask for wait or id, not both (with id, `events on` says how the voice ended)")
        }
        return o
    }

    /// `loop=N` (plays in all, 1…1000) or `loop=Ts` (seconds, > 0 and ≤ 3600).
    static func loop(_ v: Substring) throws(ProtocolError) -> PlayOptions.Loop {
        if v.hasSuffix("s"), let t = decimal(v.dropLast()), t > 0, t <= PlayOptions.maxLoopSeconds {
            return .seconds(t)
        }
        if v.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), v.utf8.count <= 4, let n = Int(v), n >= 1, n <= PlayOptions.maxLoopTimes {
            return .times(n)
        }
        throw ProtocolError(.badArgument, "loop '\(v.prefix(16))' is not a count (1...1000) or seconds (e.g. 2.5s, at most 3600s)")
    }

    /// `NAME` or `NAME:PROFILE`, both labels.
    static func themeChoice(_ v: Substring) throws(ProtocolError) -> ThemeChoice {
        let parts = v.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        let name = try label(parts[0], what: "theme")
        return ThemeChoice(name: name, profile: parts.count == 2 ? try label(parts[1], what: "theme output profile") : nil)
    }

    /// A voice id: 1 to 2^53 in plain digits.
    /// Any whole number a voice id can be (ids count from 1; one no voice has is
    /// answered `ok 0` by `stop id`, as for a voice that ended).
    public static func voiceID(_ s: Substring) -> UInt64? {
        guard !s.isEmpty, s.utf8.count <= 20, s.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
              let v = UInt64(s), v >= 1 else { return nil }
        return v
    }

    /// Cue, app and session names are labels, never paths (see `Label`).
    static func label(_ arg: Substring, what: String) throws(ProtocolError) -> String {
        let s = String(arg)
        guard Label.isValid(s) else { throw ProtocolError(.badArgument, Label.problem(s, what: what)) }
        return s
    }

    /// A `play-file` path: absolute, with `%XX` for a space, `%` or a control character.
    static func filePath(_ arg: Substring) throws(ProtocolError) -> String {
        guard let path = FilePath.decode(arg) else {
            throw ProtocolError(.badArgument, "path '\(arg.prefix(64))' has a bad %-escape (write %20 for a space, %25 for %)")
        }
        guard path.hasPrefix("/") else {
            throw ProtocolError(.badArgument, "path '\(path.prefix(64))' is not absolute")
        }
        guard !path.utf8.contains(0) else { throw ProtocolError(.badArgument, "path contains a NUL byte") }
        return path
    }

    /// A plain decimal number: `12`, `-3.5`, `+0.25`. Not hex (`0x10`), not
    /// exponents, not `inf`/`nan`, which `Double.init` would accept.
    public static func decimal(_ s: Substring) -> Double? {
        var digits = 0, dots = 0
        for (i, c) in s.utf8.enumerated() {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digits += 1
            case UInt8(ascii: "."): dots += 1
            case UInt8(ascii: "-"), UInt8(ascii: "+"): if i != 0 { return nil }
            default: return nil
            }
        }
        guard digits > 0, dots <= 1, s.utf8.count <= 32 else { return nil }
        return Double(s)
    }

    static func points(_ arg: Substring, in range: ClosedRange<Double>, what: String) throws(ProtocolError) -> Double {
        guard let v = decimal(arg) else {
            throw ProtocolError(.badArgument, "\(what) '\(arg.prefix(32))' is not a number of points")
        }
        guard range.contains(v) else {
            throw ProtocolError(.badArgument, "\(what) \(arg) is outside \(Int(range.lowerBound))...\(Int(range.upperBound))")
        }
        return v
    }

    /// Parses one line (without its LF; a trailing CR is accepted and dropped).
    public static func parse(_ bytes: some Collection<UInt8>) throws(ProtocolError) -> Request {
        var body = Array(bytes)
        if body.last == UInt8(ascii: "\r") { body.removeLast() }
        guard body.count <= ProtocolLimits.maxLineBytes else {
            throw ProtocolError(.lineTooLong, "line exceeds \(ProtocolLimits.maxLineBytes) bytes")
        }
        guard let line = String(validating: body, as: UTF8.self) else {
            throw ProtocolError(.badArgument, "line is not valid UTF-8")
        }
        let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
        guard let first = words.first else {
            throw ProtocolError(.unknownVerb, "empty request (verbs: \(verbNames.joined(separator: " ")))")
        }
        guard let verb = verbs.first(where: { $0.name == first }) else {
            throw ProtocolError(.unknownVerb, "'\(first.prefix(32))' is not a verb (verbs: \(verbNames.joined(separator: " ")))")
        }
        let args = Array(words.dropFirst())
        guard (verb.minArgs...verb.maxArgs).contains(args.count) else {
            throw ProtocolError(.badArgument, "usage: \(verb.usage)")
        }
        return try verb.parse(args)
    }

    public static func parse(_ line: String) throws(ProtocolError) -> Request {
        try parse(Array(line.utf8))
    }

    /// A request from its words as a program holds them (cuectl's arguments): each is one
    /// word whatever it holds, checked by its verb as on the wire (a word with a space or a
    /// control character is refused by the rule for what it stands for).
    public static func parse(words: [String]) throws(ProtocolError) -> Request {
        guard let first = words.first else { throw ProtocolError(.unknownVerb, "empty request (verbs: \(verbNames.joined(separator: " ")))") }
        guard let verb = VerbSpec.named(Substring(first)) else {
            throw ProtocolError(.unknownVerb, "'\(first.prefix(32))' is not a verb (verbs: \(verbNames.joined(separator: " ")))")
        }
        let args = words.dropFirst().map { Substring($0) }
        guard (verb.minArgs...verb.maxArgs).contains(args.count) else { throw ProtocolError(.badArgument, "usage: \(verb.usage)") }
        return try verb.parse(args)
    }
}

extension PlayOptions {
    /// The options as the words after a play's sound (with a leading space each).
    public var words: String {
        var s = gainDB == 0 ? "" : " \(Request.number(gainDB))"
        if wait { s += " wait" }
        if wantsID { s += " id" }
        switch loop {
        case .once: break
        case .times(let n): s += " loop=\(n)"
        case .forever: s += " loop"
        case .seconds(let t): s += " loop=\(Request.number(t))s"
        }
        if detach { s += " detach" }
        if priority != 0 { s += " priority=\(priority)" }
        if important { s += " important" }
        if let theme { s += " theme=\(theme.word)" }
        if rate != 1 { s += " rate=\(Request.number(rate))" }
        if pitchCents != 0 { s += " pitch=\(Request.number(pitchCents))" }
        return s
    }
}

extension Request {
    /// 65.0 → "65", 64.5 → "64.5".
    public static func number(_ v: Double) -> String {
        v == v.rounded() && abs(v) < 1e15 ? String(Int64(v)) : String(v)
    }
}
