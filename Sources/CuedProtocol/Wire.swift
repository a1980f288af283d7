// Protocol v1's words and limits: the one table. cued, cuectl and the tests use these
// types; the libcanberra plug-in's C header (canberra/cued-wire.h) and bench's Python
// module (bench/cuedwire.py) are generated from them (`make wire`, WireExport.swift), and
// a test fails when either file drifts from what this table says.

public enum ProtocolLimits {
    /// Longest accepted request line in bytes, not counting the LF (nor a CR before it).
    public static let maxLineBytes = 512
    public static let version = 1
    /// Accepted range of a per-play gain, dB.
    public static let gainRange: ClosedRange<Double> = -60...12
    /// Accepted pull distances and thresholds, points.
    public static let dragRange: ClosedRange<Double> = 0...100_000
    public static let thresholdRange: ClosedRange<Double> = 1...10_000
    /// Points between detent ticks (`detent N`).
    public static let detentRange: ClosedRange<Double> = 1...1_000
}

/// The code of an `err CODE …` reply.
public enum ErrorCode: String, Sendable, CaseIterable {
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
    /// A sound file or theme sound that cannot be played: `err bad-file PROBLEM MESSAGE`.
    case badFile = "bad-file"
    /// The cue was accepted but could not sound: `err not-played REASON MESSAGE`, REASON
    /// the voice's end (`late`, `cut`, `busy`, `shutdown`).
    case notPlayed = "not-played"
    /// A bounded table is full (run-time app mutes or app profiles).
    case tooMany = "too-many"
    case `internal` = "internal"

    /// The machine words the message of this code starts with (nil: the message is prose only).
    public var words: [String]? {
        switch self {
        case .badFile: return FileProblem.allCases.map(\.rawValue)
        case .notPlayed: return EndReason.notPlayedCases.map(\.rawValue)
        default: return nil
        }
    }
}

/// Why a file (`play-file`, a theme sound) cannot be played: the word after `err bad-file`,
/// so that a client tells a missing file from a broken one without reading the prose after it.
public enum FileProblem: String, Sendable, CaseIterable {
    /// No such file (or a dangling symbolic link, a path through a non-directory).
    case notFound = "not-found"
    /// Permission denied.
    case denied
    /// A directory, FIFO, device or socket: only regular files are read.
    case notRegular = "not-regular"
    /// Read, but not a sound cued plays (format, length, channels, a read error).
    case unreadable
    /// The memory budget for decoded sound has no room for it.
    case overBudget = "over-budget"
    /// Its decoding passed the deadline (a file system that does not answer, a file too slow).
    case timedOut = "timed-out"
    /// Not tried: this client's earlier files are stuck on a file system that does not answer.
    case notTried = "not-tried"
}

/// Why a voice ended. Every voice ends exactly once, with one of these: the REASON of an
/// `end ID REASON` line, and of `err not-played REASON …` for those that never sounded.
public enum EndReason: String, Sendable, CaseIterable {
    /// Its last frame (of its last loop, or its time limit) sounded at the device.
    case played
    /// `stop id ID`.
    case stoppedByID = "stopped-id"
    /// `stop` / `stop CUE`: its app's (or connection's) voices.
    case stoppedByOwner = "stopped-app"
    /// `stop all`.
    case stoppedAll = "stopped-all"
    /// A newer voice of the same or a higher priority took its slot.
    case stolen
    /// Global mute faded it out.
    case muted
    /// Every voice was taken by voices of a higher priority: it never started.
    case busy
    /// It could not start within the start deadline (250 ms): dropped, never played late.
    case late
    /// It started, then the device failed and it was too late to start it again.
    case cut
    /// cued stopped: held cues never started; voices still sounding at the grace's end were cut off.
    case shutdown
    /// A loop whose connection closed (one started without `detach`).
    case disconnected

    /// The reasons a `wait`ed play is answered `err not-played REASON …` for.
    public static let notPlayedCases: [EndReason] = [.busy, .late, .cut, .shutdown]
}

/// Why an accepted play makes no sound: the word of its `ok` reply (`ok muted`).
public enum NotSounded: String, Sendable, CaseIterable {
    case muted, silent
    /// The sound theme's `.disabled` file says no sound.
    case disabled
    /// The cue sounded less than its `cooldown_ms` ago.
    case cooldown
}

public enum Reply: Equatable, Sendable {
    case ok(String?)
    case err(ErrorCode, String)

    /// `err bad-file PROBLEM MESSAGE`.
    public static func badFile(_ problem: FileProblem, _ message: String) -> Reply { .err(.badFile, problem.rawValue + " " + message) }
    /// `err not-played REASON MESSAGE`.
    public static func notPlayed(_ reason: EndReason, _ message: String) -> Reply { .err(.notPlayed, reason.rawValue + " " + message) }

    /// The reply line without its LF. Control characters (a client's NUL or
    /// ESC echoed in an error) are written as `\xNN`, so a reply is always one
    /// printable line.
    public var line: String {
        switch self {
        case .ok(nil): return "ok"
        case .ok(let payload?): return "ok " + payload.escapingControls()
        case .err(let code, let message): return "err \(code.rawValue) " + message.escapingControls()
        }
    }
}

/// An `err` reply line as a client reads it: the code, its machine word if the code has
/// words (`err bad-file not-found …`), and the prose.
public struct ErrorReply: Equatable, Sendable {
    /// As sent (a code this build does not know stays readable).
    public var code: String
    public var word: String?
    public var message: String

    /// nil if `line` is not an `err` line.
    public init?(line: String) {
        guard line == "err" || line.hasPrefix("err ") else { return nil }
        let rest = line.dropFirst(4)
        code = String(rest.prefix { $0 != " " })
        var text = rest.dropFirst(code.count).drop { $0 == " " }
        let first = text.prefix { $0 != " " }
        if let words = ErrorCode(rawValue: code)?.words, words.contains(String(first)) {
            word = String(first)
            text = text.dropFirst(first.count).drop { $0 == " " }
        }
        message = String(text)
    }
}

public struct ProtocolError: Error, Equatable, Sendable {
    public let code: ErrorCode
    public let message: String
    public init(_ code: ErrorCode, _ message: String) { self.code = code; self.message = message }
    public var reply: Reply { .err(code, message) }
}

extension String {
    /// C0 controls and DEL as `\xNN`.
    public func escapingControls() -> String {
        guard unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else { return self }
        var out = String.UnicodeScalarView()
        let hex = Array("0123456789abcdef".unicodeScalars)
        for u in unicodeScalars {
            if u.value < 0x20 || u.value == 0x7F {
                out.append(contentsOf: ["\\", "x", hex[Int(u.value >> 4)], hex[Int(u.value & 0xF)]])
            } else {
                out.append(u)
            }
        }
        return String(out)
    }
}

/// The one rule for names a client or a config gives: cues, apps, sessions.
/// Labels, never paths: letters, digits, `.`, `_`, `-`; 1 to 64 bytes; not
/// `.` or `..`. cued, cuectl and the config all check it here.
public enum Label {
    public static let maxBytes = 64
    /// The bytes a label is made of.
    public static let byteRanges: [ClosedRange<UInt8>] = [0x30...0x39, 0x41...0x5A, 0x61...0x7A, 0x2E...0x2E, 0x5F...0x5F, 0x2D...0x2D]
    /// Names that are never labels (a path's).
    public static let refused = [".", ".."]

    public static func isLabelByte(_ c: UInt8) -> Bool { byteRanges.contains { $0.contains(c) } }

    public static func isValid(_ s: String) -> Bool {
        guard !s.isEmpty, s.utf8.count <= maxBytes, !refused.contains(s) else { return false }
        return s.utf8.allSatisfy(isLabelByte)
    }

    /// Why `s` is not a valid `what` (e.g. "app name"), in one line.
    public static func problem(_ s: String, what: String) -> String {
        "\(what) '\(s.prefix(64))' is not a name (letters, digits, . _ -; at most \(maxBytes) bytes)"
    }
}

/// `play-file` paths on the wire: one word, so a space, `%`, a tab or any
/// control character is written `%XX` (hex); everything else as is (UTF-8).
public enum FilePath {
    /// Bytes up to this one (controls and the space) are escaped, and `escapedAlso`.
    public static let escapedUpTo: UInt8 = 0x20
    public static let escapedAlso: [UInt8] = [0x25, 0x7F]

    public static func isEscaped(_ b: UInt8) -> Bool { b <= escapedUpTo || escapedAlso.contains(b) }

    public static func encode(_ path: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var bytes: [UInt8] = []
        for b in path.utf8 {
            if isEscaped(b) {
                bytes += [0x25, hex[Int(b >> 4)], hex[Int(b & 0xF)]]
            } else {
                bytes.append(b)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// nil on a malformed escape or bytes that are not UTF-8.
    public static func decode(_ word: Substring) -> String? {
        var bytes: [UInt8] = []
        var it = Array(word.utf8)[...]
        while let b = it.popFirst() {
            guard b == 0x25 else { bytes.append(b); continue }
            guard it.count >= 2, let v = UInt8(String(decoding: it.prefix(2), as: UTF8.self), radix: 16) else { return nil }
            bytes.append(v)
            it = it.dropFirst(2)
        }
        return String(validating: bytes, as: UTF8.self)
    }
}
