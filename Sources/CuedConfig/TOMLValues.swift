// The TOML reader's values: strings of all four kinds, arrays, inline tables, integers
// in four bases, floats, booleans, and dates and times (kept as text).

extension TOMLReader {
    // MARK: values

    /// A value that goes into a container `depth` levels below the document.
    mutating func value(depth: Int) throws(TOMLError) -> TOMLBuilderTable.Entry {
        let lineNo = line
        guard let c = peek() else { throw fail("expected a value, found the end of the file") }
        switch c {
        case UInt8(ascii: "\""):
            if peek(1) == UInt8(ascii: "\""), peek(2) == UInt8(ascii: "\"") { return .value(TOMLNode(value: .string(try multilineBasic()), line: lineNo)) }
            return .value(TOMLNode(value: .string(try basicString()), line: lineNo))
        case UInt8(ascii: "'"):
            if peek(1) == UInt8(ascii: "'"), peek(2) == UInt8(ascii: "'") { return .value(TOMLNode(value: .string(try multilineLiteral()), line: lineNo)) }
            return .value(TOMLNode(value: .string(try literalString()), line: lineNo))
        case UInt8(ascii: "["):
            guard depth < TOMLParser.maxDepth else { throw fail(TOMLParser.tooDeep()) }
            return .value(TOMLNode(value: .array(try array(depth: depth + 1)), line: lineNo))
        case UInt8(ascii: "{"):
            guard depth < TOMLParser.maxDepth else { throw fail(TOMLParser.tooDeep()) }
            return .table(try inlineTable(depth: depth + 1))
        case UInt8(ascii: "t"):
            try word("true"); return .value(TOMLNode(value: .bool(true), line: lineNo))
        case UInt8(ascii: "f"):
            try word("false"); return .value(TOMLNode(value: .bool(false), line: lineNo))
        default:
            return .value(TOMLNode(value: try numberOrDate(), line: lineNo))
        }
    }

    mutating func word(_ w: StaticString) throws(TOMLError) {
        let bytes = UnsafeBufferPointer(start: w.utf8Start, count: w.utf8CodeUnitCount)
        for (k, c) in bytes.enumerated() where peek(k) != c { throw fail("expected a value, found \(describe(peek()))") }
        i += bytes.count
        if let c = peek(), Self.isBare(c) { throw fail("expected a value, found \(describe(c))") }
    }

    mutating func array(depth: Int) throws(TOMLError) -> [TOMLNode] {
        i += 1  // [
        var items: [TOMLNode] = []
        while true {
            try skipBlank()
            if peek() == UInt8(ascii: "]") { i += 1; return items }
            let lineNo = line
            switch try value(depth: depth) {
            case .value(let node): items.append(node)
            case .table(let t): items.append(TOMLNode(value: .table(t.frozen()), line: lineNo))
            case .tables: throw fail("internal: table array in an array")
            }
            try skipBlank()
            if peek() == UInt8(ascii: ",") { i += 1; continue }
            if peek() == UInt8(ascii: "]") { i += 1; return items }
            throw fail("expected ',' or ']' in an array, found \(describe(peek()))")
        }
    }

    /// `{ a = 1, b.c = 2 }`: on one line, no trailing comma, closed after.
    mutating func inlineTable(depth: Int) throws(TOMLError) -> TOMLBuilderTable {
        let t = TOMLBuilderTable(.inline, line: line, depth: depth)
        i += 1  // {
        skipSpaces()
        if peek() == UInt8(ascii: "}") { i += 1; return t }
        while true {
            skipSpaces()
            try keyValue(into: t)
            skipSpaces()
            if peek() == UInt8(ascii: ",") { i += 1; continue }
            if peek() == UInt8(ascii: "}") { i += 1; break }
            throw fail("expected ',' or '}' in an inline table, found \(describe(peek()))")
        }
        seal(t)
        return t
    }

    /// Tables made by dotted keys inside an inline table are closed with it.
    func seal(_ t: TOMLBuilderTable) {
        t.kind = .inline
        for k in t.keys { if case .table(let sub)? = t.entries[k] { seal(sub) } }
    }

    // MARK: strings

    mutating func basicString() throws(TOMLError) -> String {
        i += 1
        var out: [UInt8] = []
        while true {
            guard let c = peek() else { throw fail("unterminated string") }
            if c == UInt8(ascii: "\"") { i += 1; return String(decoding: out, as: UTF8.self) }
            if c == 0x0A || c == 0x0D { throw fail("unterminated string (a newline inside \"…\"; use \"\"\"…\"\"\" for several lines)") }
            if c == UInt8(ascii: "\\") { try escape(into: &out); continue }
            if (c < 0x20 && c != 0x09) || c == 0x7F { throw fail("control character in a string (write it as an escape)") }
            out.append(c)
            i += 1
        }
    }

    mutating func escape(into out: inout [UInt8]) throws(TOMLError) {
        i += 1
        guard let e = peek() else { throw fail("unterminated string") }
        i += 1
        switch e {
        case UInt8(ascii: "b"): out.append(0x08)
        case UInt8(ascii: "t"): out.append(0x09)
        case UInt8(ascii: "n"): out.append(0x0A)
        case UInt8(ascii: "f"): out.append(0x0C)
        case UInt8(ascii: "r"): out.append(0x0D)
        case UInt8(ascii: "\""): out.append(0x22)
        case UInt8(ascii: "\\"): out.append(0x5C)
        case UInt8(ascii: "u"), UInt8(ascii: "U"):
            let n = e == UInt8(ascii: "u") ? 4 : 8
            guard i + n <= b.count, let v = UInt32(String(decoding: b[i..<(i + n)], as: UTF8.self), radix: 16),
                  b[i..<(i + n)].allSatisfy({ Self.isHex($0) }), let scalar = Unicode.Scalar(v) else {
                throw fail("invalid \\\(Character(Unicode.Scalar(e))) escape (a Unicode scalar value in \(n) hex digits)")
            }
            out.append(contentsOf: Array(String(Character(scalar)).utf8))
            i += n
        default:
            throw fail("unknown escape \\\(describe(e))")
        }
    }

    static func isHex(_ c: UInt8) -> Bool {
        (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66)
    }

    mutating func literalString() throws(TOMLError) -> String {
        i += 1
        let start = i
        while true {
            guard let c = peek() else { throw fail("unterminated string") }
            if c == UInt8(ascii: "'") { i += 1; return String(decoding: b[start..<(i - 1)], as: UTF8.self) }
            if c == 0x0A || c == 0x0D { throw fail("unterminated string (a newline inside '…')") }
            if (c < 0x20 && c != 0x09) || c == 0x7F { throw fail("control character in a string") }
            i += 1
        }
    }

    /// A newline right after the opening quotes is not part of the string.
    mutating func skipFirstNewline() { _ = newline() }

    mutating func multilineBasic() throws(TOMLError) -> String { try multiline(quote: UInt8(ascii: "\""), escapes: true) }
    mutating func multilineLiteral() throws(TOMLError) -> String { try multiline(quote: UInt8(ascii: "'"), escapes: false) }

    /// `"""…"""` (with escapes and line-ending backslashes) or `'''…'''` (raw).
    mutating func multiline(quote: UInt8, escapes: Bool) throws(TOMLError) -> String {
        let delimiter = String(repeating: Character(Unicode.Scalar(quote)), count: 3)
        i += 3
        skipFirstNewline()
        var out: [UInt8] = []
        while true {
            guard let c = peek() else { throw fail("unterminated \(delimiter) string") }
            if c == quote && peek(1) == quote && peek(2) == quote {
                // Up to two more quotes may end the content: """a"""" is `a"`.
                var quotes = 3
                while peek(quotes) == quote { quotes += 1 }
                guard quotes <= 5 else { throw fail("too many quotes at the end of a \(delimiter) string") }
                out.append(contentsOf: repeatElement(quote, count: quotes - 3))
                i += quotes
                return String(decoding: out, as: UTF8.self)
            }
            if escapes && c == UInt8(ascii: "\\") {
                // A backslash at the end of a line trims the newline and the blanks after it.
                var k = 1
                while let w = peek(k), w == 0x20 || w == 0x09 { k += 1 }
                if peek(k) == 0x0A || (peek(k) == 0x0D && peek(k + 1) == 0x0A) {
                    i += k
                    while true {
                        if newline() { continue }
                        if let w = peek(), w == 0x20 || w == 0x09 { i += 1; continue }
                        break
                    }
                    continue
                }
                try escape(into: &out)
                continue
            }
            if newline() { out.append(0x0A); continue }
            if (c < 0x20 && c != 0x09) || c == 0x7F { throw fail("control character in a string") }
            out.append(c)
            i += 1
        }
    }

    // MARK: numbers and dates

    /// The token up to a delimiter.
    mutating func token() -> [UInt8] {
        let start = i
        while let c = peek(), !(c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D || c == UInt8(ascii: ",")
                                  || c == UInt8(ascii: "]") || c == UInt8(ascii: "}") || c == UInt8(ascii: "#")) {
            i += 1
        }
        return Array(b[start..<i])
    }

    mutating func numberOrDate() throws(TOMLError) -> TOMLValue {
        if let d = try dateTime() { return .datetime(d) }
        let t = token()
        guard !t.isEmpty else { throw fail("expected a value, found \(describe(peek()))") }
        let s = String(decoding: t, as: UTF8.self)
        if let v = Self.integer(t) { return .integer(v) }
        if let v = Self.float(t) { return .float(v) }
        if t.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "-") }) {
            throw fail("'\(s.prefix(40))' is not a valid number (out of range, or a leading zero)")
        }
        throw fail("expected a value (a string needs quotes), found '\(s.prefix(40))'")
    }

    /// Digits with single underscores between them.
    static func digits(_ d: ArraySlice<UInt8>, _ ok: (UInt8) -> Bool) -> String? {
        guard let f = d.first, let l = d.last, ok(f), ok(l) else { return nil }
        var out = ""
        var prevUnderscore = false
        for c in d {
            if c == UInt8(ascii: "_") {
                if prevUnderscore { return nil }
                prevUnderscore = true
                continue
            }
            guard ok(c) else { return nil }
            prevUnderscore = false
            out.unicodeScalars.append(Unicode.Scalar(c))
        }
        return out
    }

    static func isDigit(_ c: UInt8) -> Bool { c >= 0x30 && c <= 0x39 }

    static func integer(_ t: [UInt8]) -> Int64? {
        var s = t[...]
        if s.count > 2, s.first == UInt8(ascii: "0") {
            let radix: Int
            switch s[s.startIndex + 1] {
            case UInt8(ascii: "x"): radix = 16
            case UInt8(ascii: "o"): radix = 8
            case UInt8(ascii: "b"): radix = 2
            default: radix = 0
            }
            if radix != 0 {
                let ok: (UInt8) -> Bool = { c in
                    radix == 16 ? isHex(c) : radix == 8 ? (c >= 0x30 && c <= 0x37) : (c == 0x30 || c == 0x31)
                }
                guard let d = digits(s.dropFirst(2), ok), let v = UInt64(d, radix: radix), v <= UInt64(Int64.max) else { return nil }
                return Int64(v)
            }
        }
        var negative = false
        if s.first == UInt8(ascii: "+") || s.first == UInt8(ascii: "-") { negative = s.first == UInt8(ascii: "-"); s = s.dropFirst() }
        guard let d = digits(s, isDigit) else { return nil }
        if d.count > 1 && d.hasPrefix("0") { return nil }
        return Int64((negative ? "-" : "") + d)
    }

    static func float(_ t: [UInt8]) -> Double? {
        var s = t[...]
        var sign = ""
        if s.first == UInt8(ascii: "+") || s.first == UInt8(ascii: "-") { sign = s.first == UInt8(ascii: "-") ? "-" : ""; s = s.dropFirst() }
        let word = String(decoding: s, as: UTF8.self)
        if word == "inf" { return sign == "-" ? -.infinity : .infinity }
        if word == "nan" { return .nan }
        // int part, then a fraction and/or an exponent.
        let e = s.firstIndex { $0 == UInt8(ascii: "e") || $0 == UInt8(ascii: "E") }
        let mantissa = s[s.startIndex..<(e ?? s.endIndex)]
        let dot = mantissa.firstIndex(of: UInt8(ascii: "."))
        let intPart = mantissa[mantissa.startIndex..<(dot ?? mantissa.endIndex)]
        guard let whole = digits(intPart, isDigit), !(whole.count > 1 && whole.hasPrefix("0")) else { return nil }
        var text = sign + whole
        if let dot {
            guard let frac = digits(mantissa[(dot + 1)...], isDigit) else { return nil }
            text += "." + frac
        }
        if let e {
            var exp = s[(e + 1)...]
            var expSign = ""
            if exp.first == UInt8(ascii: "+") || exp.first == UInt8(ascii: "-") { expSign = exp.first == UInt8(ascii: "-") ? "-" : "+"; exp = exp.dropFirst() }
            guard let ed = digits(exp, isDigit) else { return nil }
            text += "e" + expSign + ed
        }
        // Like tomllib, a literal too big for a double is infinity (no cued key accepts it).
        guard dot != nil || e != nil, let v = Double(text) else { return nil }
        return v
    }

    /// RFC 3339 as TOML allows it: `1979-05-27`, `07:32:00`, `1979-05-27T07:32:00.999-07:00`,
    /// with `T`, `t` or one space between date and time. nil if this is not a date or time.
    mutating func dateTime() throws(TOMLError) -> String? {
        func d(_ k: Int) -> Bool { peek(k).map(Self.isDigit) ?? false }
        let start = i
        var k = 0
        var sawDate = false
        if d(0), d(1), d(2), d(3), peek(4) == UInt8(ascii: "-") {
            guard d(5), d(6), peek(7) == UInt8(ascii: "-"), d(8), d(9) else { throw fail("malformed date (YYYY-MM-DD)") }
            try check(month: k + 5, day: k + 8)
            k = 10
            sawDate = true
            let sep = peek(k)
            let timeFollows = (sep == UInt8(ascii: "T") || sep == UInt8(ascii: "t") || sep == 0x20) && d(k + 1) && d(k + 2) && peek(k + 3) == UInt8(ascii: ":")
            if !timeFollows {
                i += k
                return String(decoding: b[start..<i], as: UTF8.self)
            }
            k += 1
        } else if !(d(0) && d(1) && peek(2) == UInt8(ascii: ":")) {
            return nil
        }
        // HH:MM:SS[.frac]
        guard d(k), d(k + 1), peek(k + 2) == UInt8(ascii: ":"), d(k + 3), d(k + 4), peek(k + 5) == UInt8(ascii: ":"), d(k + 6), d(k + 7) else {
            throw fail("malformed time (HH:MM:SS)")
        }
        guard Self.two(b, i + k) <= 23, Self.two(b, i + k + 3) <= 59, Self.two(b, i + k + 6) <= 60 else { throw fail("time out of range") }
        k += 8
        if peek(k) == UInt8(ascii: ".") {
            k += 1
            guard d(k) else { throw fail("malformed fraction of a second") }
            while d(k) { k += 1 }
        }
        if sawDate {
            if peek(k) == UInt8(ascii: "Z") || peek(k) == UInt8(ascii: "z") {
                k += 1
            } else if peek(k) == UInt8(ascii: "+") || peek(k) == UInt8(ascii: "-") {
                guard d(k + 1), d(k + 2), peek(k + 3) == UInt8(ascii: ":"), d(k + 4), d(k + 5) else { throw fail("malformed time offset (+HH:MM)") }
                guard Self.two(b, i + k + 1) <= 23, Self.two(b, i + k + 4) <= 59 else { throw fail("time offset out of range") }
                k += 6
            }
        }
        i += k
        return String(decoding: b[start..<i], as: UTF8.self)
    }

    static func two(_ b: [UInt8], _ at: Int) -> Int { Int(b[at] - 0x30) * 10 + Int(b[at + 1] - 0x30) }

    func check(month m: Int, day dd: Int) throws(TOMLError) {
        let year = Int(b[i] - 0x30) * 1000 + Int(b[i + 1] - 0x30) * 100 + Self.two(b, i + 2)
        let month = Self.two(b, i + m), day = Self.two(b, i + dd)
        guard (1...12).contains(month) else { throw fail("month out of range") }
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
        guard (1...days).contains(day) else { throw fail("day out of range") }
    }
}
