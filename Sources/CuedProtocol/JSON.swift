/// A minimal JSON value: enough to encode `status` in the daemon and to read it
/// back in cuectl without Foundation (whose start-up cost cuectl avoids).
public enum JSON: Equatable, Sendable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSON])
    /// Keys keep their order.
    case object([(String, JSON)])

    public static func == (a: JSON, b: JSON) -> Bool { a.encoded == b.encoded }

    public subscript(key: String) -> JSON? {
        if case .object(let pairs) = self { return pairs.first { $0.0 == key }?.1 }
        return nil
    }

    public var encoded: String {
        var out = ""
        encode(into: &out)
        return out
    }

    private func encode(into out: inout String) {
        switch self {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .number(let d):
            if d.isFinite, d == d.rounded(), abs(d) < 1e15 { out += String(Int64(d)) }
            else if d.isFinite { out += String(d) }
            else { out += "null" }
        case .string(let s): JSON.quote(s, into: &out)
        case .array(let items):
            out += "["
            for (i, v) in items.enumerated() { if i > 0 { out += "," }; v.encode(into: &out) }
            out += "]"
        case .object(let pairs):
            out += "{"
            for (i, (k, v)) in pairs.enumerated() {
                if i > 0 { out += "," }
                JSON.quote(k, into: &out); out += ":"; v.encode(into: &out)
            }
            out += "}"
        }
    }

    /// Every control character is escaped: C0, DEL and C1 (and U+2028/2029,
    /// which JavaScript reads as line ends), so the text has no byte that a
    /// line protocol or a terminal would rewrite (a raw DEL became `\x7F`
    /// in the reply line: an invalid JSON escape).
    static func quote(_ s: String, into out: inout String) {
        out += "\""
        for u in s.unicodeScalars {
            switch u {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if u.value < 0x20 || (0x7F...0x9F).contains(u.value) || u.value == 0x2028 || u.value == 0x2029 {
                    let hex = String(u.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else { out.unicodeScalars.append(u) }
            }
        }
        out += "\""
    }

    public struct ParseError: Error, Equatable, CustomStringConvertible {
        public let offset: Int
        /// What is wrong there, when more can be said than "not JSON".
        public var reason = "not valid JSON"
        public var description: String { "\(reason) (at byte \(offset))" }
    }

    /// Arrays and objects nested deeper than this are refused: the parser, the
    /// tree's equality and its release all recurse, and a file of 100,000 `[`
    /// (a feedbackd theme) overflowed the stack. cued's own documents need 4.
    public static let maxDepth = 64

    /// `maxDepth`: only for text cued makes itself and trusts (a test oracle's output).
    public static func parse(_ text: String, maxDepth: Int = JSON.maxDepth) throws(ParseError) -> JSON {
        var p = Parser(bytes: Array(text.utf8), maxDepth: maxDepth)
        let v = try p.value(depth: 0)
        p.skipSpace()
        guard p.i == p.bytes.count else { throw ParseError(offset: p.i) }
        return v
    }

    struct Parser {
        let bytes: [UInt8]
        let maxDepth: Int
        var i = 0

        mutating func skipSpace() { while i < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[i]) { i += 1 } }

        mutating func expect(_ s: String) throws(ParseError) {
            for c in s.utf8 {
                guard i < bytes.count, bytes[i] == c else { throw ParseError(offset: i) }
                i += 1
            }
        }

        /// A value inside `depth` arrays and objects.
        mutating func value(depth: Int) throws(ParseError) -> JSON {
            skipSpace()
            guard i < bytes.count else { throw ParseError(offset: i) }
            if bytes[i] == UInt8(ascii: "[") || bytes[i] == UInt8(ascii: "{"), depth >= maxDepth {
                throw ParseError(offset: i, reason: "arrays and objects nested deeper than \(maxDepth) levels")
            }
            switch bytes[i] {
            case UInt8(ascii: "n"): try expect("null"); return .null
            case UInt8(ascii: "t"): try expect("true"); return .bool(true)
            case UInt8(ascii: "f"): try expect("false"); return .bool(false)
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "["):
                i += 1
                var items: [JSON] = []
                skipSpace()
                if i < bytes.count, bytes[i] == UInt8(ascii: "]") { i += 1; return .array(items) }
                while true {
                    items.append(try value(depth: depth + 1))
                    skipSpace()
                    guard i < bytes.count else { throw ParseError(offset: i) }
                    if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
                    try expect("]"); return .array(items)
                }
            case UInt8(ascii: "{"):
                i += 1
                var pairs: [(String, JSON)] = []
                skipSpace()
                if i < bytes.count, bytes[i] == UInt8(ascii: "}") { i += 1; return .object(pairs) }
                while true {
                    skipSpace()
                    guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw ParseError(offset: i) }
                    let k = try string()
                    skipSpace()
                    try expect(":")
                    pairs.append((k, try value(depth: depth + 1)))
                    skipSpace()
                    guard i < bytes.count else { throw ParseError(offset: i) }
                    if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
                    try expect("}"); return .object(pairs)
                }
            default:
                let start = i
                while i < bytes.count, "+-0123456789.eE".utf8.contains(bytes[i]) { i += 1 }
                guard let d = Double(String(decoding: bytes[start..<i], as: UTF8.self)) else { throw ParseError(offset: start) }
                return .number(d)
            }
        }

        mutating func string() throws(ParseError) -> String {
            i += 1
            var scalars = String.UnicodeScalarView()
            var raw: [UInt8] = []
            func flush() { scalars.append(contentsOf: String(decoding: raw, as: UTF8.self).unicodeScalars); raw = [] }
            while i < bytes.count {
                let c = bytes[i]
                if c == UInt8(ascii: "\"") { i += 1; flush(); return String(scalars) }
                // RFC 8259: control characters must be escaped.
                if c < 0x20 { throw ParseError(offset: i) }
                if c == UInt8(ascii: "\\") {
                    flush()
                    i += 1
                    guard i < bytes.count else { break }
                    switch bytes[i] {
                    case UInt8(ascii: "n"): scalars.append("\n")
                    case UInt8(ascii: "t"): scalars.append("\t")
                    case UInt8(ascii: "r"): scalars.append("\r")
                    case UInt8(ascii: "b"): scalars.append("\u{8}")
                    case UInt8(ascii: "f"): scalars.append("\u{C}")
                    case UInt8(ascii: "u"):
                        var v = try hex4()
                        // A surrogate pair is one scalar; a lone surrogate becomes U+FFFD.
                        if (0xD800..<0xDC00).contains(v), i + 2 < bytes.count, bytes[i + 1] == UInt8(ascii: "\\"),
                           bytes[i + 2] == UInt8(ascii: "u") {
                            let mark = i
                            i += 2
                            let low = try hex4()
                            if (0xDC00..<0xE000).contains(low) { v = 0x10000 + ((v - 0xD800) << 10) + (low - 0xDC00) } else { i = mark }
                        }
                        scalars.append(Unicode.Scalar(v) ?? "\u{FFFD}")
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): scalars.append(Unicode.Scalar(bytes[i]))
                    default: throw ParseError(offset: i)
                    }
                    i += 1
                    continue
                }
                raw.append(c)
                i += 1
            }
            throw ParseError(offset: i)
        }

        /// The 4 hex digits after `\u` (at `i`); leaves `i` on the last digit.
        mutating func hex4() throws(ParseError) -> UInt32 {
            guard i + 4 < bytes.count, bytes[(i + 1)...(i + 4)].allSatisfy({ UInt8(ascii: "0")...UInt8(ascii: "9") ~= $0
                || UInt8(ascii: "a")...UInt8(ascii: "f") ~= $0 || UInt8(ascii: "A")...UInt8(ascii: "F") ~= $0 }),
                let v = UInt32(String(decoding: bytes[(i + 1)...(i + 4)], as: UTF8.self), radix: 16)
            else { throw ParseError(offset: i) }
            i += 4
            return v
        }
    }
}
