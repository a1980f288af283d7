// Protocol v1: one UTF-8 line per request, one line per reply.

public enum ProtocolLimits {
    /// Longest accepted request line in bytes, not counting the LF (nor a CR before it).
    public static let maxLineBytes = 512
    public static let version = 1
    /// Accepted range of a per-play gain, dB.
    public static let gainRange: ClosedRange<Double> = -60...12
    /// Accepted pull distances and thresholds, points.
    public static let dragRange: ClosedRange<Double> = 0...100_000
    public static let thresholdRange: ClosedRange<Double> = 1...10_000
}

/// The states of a pull-to-refresh view.
public enum RefreshState: String, Sendable, CaseIterable {
    case idle, pull, release, loading
}

public enum Request: Equatable, Sendable {
    case ping
    case play(cue: String, gainDB: Double)
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
    case mute
    case unmute
    /// Declares the connection's app (a label for per-app mute and counts).
    case app(String)
    case muteApp(String)
    case unmuteApp(String)
    /// Re-read the config and every cue; swap them in only if all load.
    case reload
    case cues
    case status
}

public enum ErrorCode: String, Sendable {
    case unknownVerb = "unknown-verb"
    case unknownCue = "unknown-cue"
    case badArgument = "bad-argument"
    case lineTooLong = "line-too-long"
    case reloadFailed = "reload-failed"
    /// The peer is not the daemon's own user.
    case forbidden = "forbidden"
    /// Too many connections: the new one is closed.
    case busy = "busy"
    /// This connection asked for more cues a second than allowed.
    case rateLimited = "rate-limited"
    case `internal` = "internal"
}

public enum Reply: Equatable, Sendable {
    case ok(String?)
    case err(ErrorCode, String)

    /// The reply line without its LF. Messages never contain a newline.
    public var line: String {
        switch self {
        case .ok(nil): return "ok"
        case .ok(let payload?): return "ok " + payload.replacingNewlines()
        case .err(let code, let message): return "err \(code.rawValue) " + message.replacingNewlines()
        }
    }
}

public struct ProtocolError: Error, Equatable, Sendable {
    public let code: ErrorCode
    public let message: String
    public init(_ code: ErrorCode, _ message: String) { self.code = code; self.message = message }
    public var reply: Reply { .err(code, message) }
}

extension String {
    fileprivate func replacingNewlines() -> String {
        String(unicodeScalars.map { $0 == "\n" || $0 == "\r" ? " " : Character($0) })
    }
}

/// A verb and how many arguments it takes; the table is the grammar.
struct Verb: Sendable {
    let name: String
    let minArgs: Int
    let maxArgs: Int
    let usage: String
    let parse: @Sendable ([Substring]) throws(ProtocolError) -> Request
}

public enum RequestParser {
    static let verbs: [Verb] = [
        Verb(name: "app", minArgs: 1, maxArgs: 1, usage: "app NAME") { args throws(ProtocolError) in
            .app(try label(args[0], what: "app name"))
        },
        Verb(name: "cues", minArgs: 0, maxArgs: 0, usage: "cues") { _ in .cues },
        Verb(name: "drag", minArgs: 1, maxArgs: 1, usage: "drag POINTS") { args throws(ProtocolError) in
            .drag(try points(args[0], in: ProtocolLimits.dragRange, what: "pull distance"))
        },
        Verb(name: "drop", minArgs: 0, maxArgs: 0, usage: "drop") { _ in .drop },
        Verb(name: "mute", minArgs: 0, maxArgs: 2, usage: "mute [app NAME]") { args throws(ProtocolError) in
            try appTarget(args, usage: "mute [app NAME]").map(Request.muteApp) ?? .mute
        },
        Verb(name: "ping", minArgs: 0, maxArgs: 0, usage: "ping") { _ in .ping },
        Verb(name: "play", minArgs: 1, maxArgs: 2, usage: "play CUE [GAIN_DB]") { args throws(ProtocolError) in
            let cue = try label(args[0], what: "cue name")
            var gain = 0.0
            if args.count == 2 {
                guard let g = Double(args[1]), g.isFinite else {
                    throw ProtocolError(.badArgument, "gain '\(args[1].prefix(32))' is not a number of dB")
                }
                guard ProtocolLimits.gainRange.contains(g) else {
                    throw ProtocolError(.badArgument, "gain \(args[1]) dB is outside -60...12")
                }
                gain = g
            }
            return .play(cue: cue, gainDB: gain)
        },
        Verb(name: "reload", minArgs: 0, maxArgs: 0, usage: "reload") { _ in .reload },
        Verb(name: "session", minArgs: 0, maxArgs: 1, usage: "session [NAME]") { args throws(ProtocolError) in
            guard let name = args.first else { return .session(nil) }
            return .session(try label(name, what: "session name"))
        },
        Verb(name: "state", minArgs: 1, maxArgs: 2, usage: "state pull|release|loading|idle [quiet]") { args throws(ProtocolError) in
            guard let s = RefreshState(rawValue: String(args[0])) else {
                throw ProtocolError(.badArgument, "unknown state '\(args[0].prefix(32))' (pull, release, loading or idle)")
            }
            if args.count == 2 && args[1] != "quiet" {
                throw ProtocolError(.badArgument, "unknown option '\(args[1].prefix(32))' (only 'quiet')")
            }
            return .state(s, quiet: args.count == 2)
        },
        Verb(name: "status", minArgs: 0, maxArgs: 0, usage: "status") { _ in .status },
        Verb(name: "threshold", minArgs: 1, maxArgs: 1, usage: "threshold POINTS") { args throws(ProtocolError) in
            .threshold(try points(args[0], in: ProtocolLimits.thresholdRange, what: "threshold"))
        },
        Verb(name: "unmute", minArgs: 0, maxArgs: 2, usage: "unmute [app NAME]") { args throws(ProtocolError) in
            try appTarget(args, usage: "unmute [app NAME]").map(Request.unmuteApp) ?? .unmute
        },
    ]

    public static var verbNames: [String] { verbs.map(\.name) }

    /// `[]` → nil (everything); `["app", NAME]` → NAME.
    static func appTarget(_ args: [Substring], usage: String) throws(ProtocolError) -> String? {
        guard !args.isEmpty else { return nil }
        guard args.count == 2, args[0] == "app" else { throw ProtocolError(.badArgument, "usage: \(usage)") }
        return try label(args[1], what: "app name")
    }

    /// App and session names are labels, never paths.
    static func label(_ arg: Substring, what: String) throws(ProtocolError) -> String {
        let s = String(arg)
        guard CueName.isValid(s) else {
            throw ProtocolError(.badArgument, "\(what) '\(s.prefix(64))' is not a name (letters, digits, . _ -; at most 64)")
        }
        return s
    }

    static func points(_ arg: Substring, in range: ClosedRange<Double>, what: String) throws(ProtocolError) -> Double {
        guard let v = Double(arg), v.isFinite else {
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
}

/// Cue names are labels, never paths: a client can only name a cue that is
/// already loaded, and the name cannot smuggle a path.
public enum CueName {
    public static func isValid(_ s: String) -> Bool {
        guard !s.isEmpty, s.utf8.count <= 64, s != ".", s != ".." else { return false }
        return s.utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A)
                || c == UInt8(ascii: "_") || c == UInt8(ascii: "-") || c == UInt8(ascii: ".")
        }
    }
}

/// Encodes a request as the line a client sends (without LF).
extension Request {
    public var line: String {
        switch self {
        case .ping: return "ping"
        case .play(let cue, let gain): return gain == 0 ? "play \(cue)" : "play \(cue) \(Self.number(gain))"
        case .state(let s, let quiet): return "state \(s.rawValue)" + (quiet ? " quiet" : "")
        case .session(let name): return name.map { "session \($0)" } ?? "session"
        case .drag(let p): return "drag \(Self.number(p))"
        case .drop: return "drop"
        case .threshold(let p): return "threshold \(Self.number(p))"
        case .mute: return "mute"
        case .unmute: return "unmute"
        case .app(let name): return "app \(name)"
        case .muteApp(let name): return "mute app \(name)"
        case .unmuteApp(let name): return "unmute app \(name)"
        case .reload: return "reload"
        case .cues: return "cues"
        case .status: return "status"
        }
    }
}

extension Request {
    /// 65.0 → "65", 64.5 → "64.5".
    public static func number(_ v: Double) -> String {
        v == v.rounded() && abs(v) < 1e15 ? String(Int64(v)) : String(v)
    }
}
