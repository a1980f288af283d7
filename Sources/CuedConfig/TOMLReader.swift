// The TOML reader's document level: bytes, lines and comments, keys, `[table]` and
// `[[array]]` headers and the rules on defining a table again. Values are TOMLValues.swift's.

struct TOMLReader {
    let b: [UInt8]
    var i = 0
    var line = 1

    init(_ bytes: [UInt8]) { b = bytes }

    // MARK: bytes

    var atEnd: Bool { i >= b.count }
    func peek(_ k: Int = 0) -> UInt8? { i + k < b.count ? b[i + k] : nil }

    func fail(_ message: String) -> TOMLError { TOMLError(line: line, message: message) }

    func describe(_ c: UInt8?) -> String {
        guard let c else { return "the end of the file" }
        if c == 0x0A { return "the end of the line" }
        if c >= 0x21 && c < 0x7F { return "'\(Character(Unicode.Scalar(c)))'" }
        return "byte 0x\(String(c, radix: 16))"
    }

    mutating func skipSpaces() { while let c = peek(), c == 0x20 || c == 0x09 { i += 1 } }

    /// A comment runs to the end of the line; control characters are not allowed in it.
    mutating func skipComment() throws(TOMLError) {
        guard peek() == UInt8(ascii: "#") else { return }
        while let c = peek(), c != 0x0A {
            if c == 0x0D, peek(1) == 0x0A { return }
            if (c < 0x20 && c != 0x09) || c == 0x7F { throw fail("control character in a comment") }
            i += 1
        }
    }

    /// After a value or header: spaces, a comment, then a newline or the end.
    mutating func endOfLine() throws(TOMLError) {
        skipSpaces()
        try skipComment()
        if atEnd { return }
        if newline() { return }
        throw fail("expected the end of the line, found \(describe(peek()))")
    }

    /// Consumes LF or CRLF.
    mutating func newline() -> Bool {
        if peek() == 0x0A { i += 1; line += 1; return true }
        if peek() == 0x0D, peek(1) == 0x0A { i += 2; line += 1; return true }
        return false
    }

    /// Whitespace, newlines and comments (inside arrays).
    mutating func skipBlank() throws(TOMLError) {
        while true {
            skipSpaces()
            try skipComment()
            if !newline() { return }
        }
    }

    // MARK: document

    mutating func document() throws(TOMLError) -> TOMLTable {
        let root = TOMLBuilderTable(.header, line: 1, depth: 0)
        var current = root
        while true {
            try skipBlank()
            guard let c = peek() else { break }
            let lineNo = line
            if c == UInt8(ascii: "[") {
                if peek(1) == UInt8(ascii: "[") {
                    i += 2
                    let path = try keyPath()
                    guard peek() == UInt8(ascii: "]"), peek(1) == UInt8(ascii: "]") else { throw fail("expected ']]' to close the table-array header") }
                    i += 2
                    current = try arrayTable(root, path, line: lineNo)
                } else {
                    i += 1
                    let path = try keyPath()
                    guard peek() == UInt8(ascii: "]") else { throw fail("expected ']' to close the table header, found \(describe(peek()))") }
                    i += 1
                    current = try headerTable(root, path, line: lineNo)
                }
                try endOfLine()
            } else {
                try keyValue(into: current)
                try endOfLine()
            }
        }
        return root.frozen()
    }

    /// `a.b.c` in a header or before `=`; spaces around dots allowed. A path
    /// longer than the nesting limit is refused as it is read.
    mutating func keyPath() throws(TOMLError) -> [String] {
        var keys: [String] = []
        while true {
            skipSpaces()
            guard keys.count <= TOMLParser.maxDepth else { throw fail(TOMLParser.tooDeep()) }
            keys.append(try simpleKey())
            skipSpaces()
            guard peek() == UInt8(ascii: ".") else { return keys }
            i += 1
        }
    }

    mutating func simpleKey() throws(TOMLError) -> String {
        guard let c = peek() else { throw fail("expected a key, found the end of the file") }
        if c == UInt8(ascii: "\"") {
            if peek(1) == UInt8(ascii: "\""), peek(2) == UInt8(ascii: "\"") { throw fail("a key cannot be a multi-line string") }
            return try basicString()
        }
        if c == UInt8(ascii: "'") {
            if peek(1) == UInt8(ascii: "'"), peek(2) == UInt8(ascii: "'") { throw fail("a key cannot be a multi-line string") }
            return try literalString()
        }
        let start = i
        while let c = peek(), Self.isBare(c) { i += 1 }
        guard i > start else { throw fail("expected a key, found \(describe(peek()))") }
        return String(decoding: b[start..<i], as: UTF8.self)
    }

    static func isBare(_ c: UInt8) -> Bool {
        (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x5F || c == 0x2D
    }

    static func dotted(_ path: [String]) -> String {
        path.map { k in k.utf8.allSatisfy(isBare) && !k.isEmpty ? k : "\"\(k)\"" }.joined(separator: ".")
    }

    /// A new table one level below `parent`, within the nesting limit.
    func subtable(_ kind: TOMLTableKind, of parent: TOMLBuilderTable, line lineNo: Int) throws(TOMLError) -> TOMLBuilderTable {
        guard parent.depth < TOMLParser.maxDepth else { throw fail(TOMLParser.tooDeep()) }
        return TOMLBuilderTable(kind, line: lineNo, depth: parent.depth + 1)
    }

    /// `key = value` into `table`.
    mutating func keyValue(into table: TOMLBuilderTable) throws(TOMLError) {
        let lineNo = line
        let path = try keyPath()
        skipSpaces()
        guard peek() == UInt8(ascii: "=") else { throw fail("expected '=' after the key \(Self.dotted(path)), found \(describe(peek()))") }
        i += 1
        skipSpaces()
        // The value sits below the tables its dotted key makes on the way.
        let value = try value(depth: table.depth + path.count - 1)
        // Dotted keys create (or extend) tables on the way.
        var t = table
        for (n, k) in path.dropLast().enumerated() {
            switch t.entries[k] {
            case nil:
                let sub = try subtable(.dotted, of: t, line: lineNo)
                t.set(k, .table(sub))
                t = sub
            case .table(let sub)?:
                guard sub.kind == .dotted else {
                    throw fail("cannot add to table \(Self.dotted(Array(path[...n]))) with a dotted key: it was defined \(sub.kind == .inline ? "inline" : "by a [header]")")
                }
                t = sub
            default:
                throw fail("key \(Self.dotted(Array(path[...n]))) is already a value, not a table")
            }
        }
        let last = path.last!
        guard t.entries[last] == nil else { throw fail("key \(Self.dotted(path)) is defined twice") }
        t.set(last, value)
        _ = lineNo
    }

    /// `[a.b]`: creates the table, or takes over one created implicitly.
    mutating func headerTable(_ root: TOMLBuilderTable, _ path: [String], line lineNo: Int) throws(TOMLError) -> TOMLBuilderTable {
        var t = root
        for (n, k) in path.enumerated() {
            let last = n == path.count - 1
            switch t.entries[k] {
            case nil:
                let sub = try subtable(last ? .header : .implicit, of: t, line: lineNo)
                t.set(k, .table(sub))
                t = sub
            case .table(let sub)?:
                if last {
                    guard sub.kind == .implicit else { throw fail("table [\(Self.dotted(path))] is defined twice") }
                    sub.kind = .header
                    sub.line = lineNo
                } else if sub.kind == .inline {
                    throw fail("cannot extend the inline table \(Self.dotted(Array(path[...n])))")
                }
                t = sub
            case .tables(let list, _)?:
                guard !last else { throw fail("[\(Self.dotted(path))] is already an array of tables") }
                t = list.last!
            case .value?:
                throw fail("key \(Self.dotted(Array(path[...n]))) is already a value, not a table")
            }
        }
        return t
    }

    /// `[[a.b]]`: appends a new table to the array a.b.
    mutating func arrayTable(_ root: TOMLBuilderTable, _ path: [String], line lineNo: Int) throws(TOMLError) -> TOMLBuilderTable {
        var t = root
        for (n, k) in path.enumerated() {
            let last = n == path.count - 1
            switch t.entries[k] {
            case nil:
                if last {
                    let sub = try subtable(.arrayElement, of: t, line: lineNo)
                    t.set(k, .tables([sub], line: lineNo))
                    return sub
                }
                let sub = try subtable(.implicit, of: t, line: lineNo)
                t.set(k, .table(sub))
                t = sub
            case .tables(let list, let at)?:
                if last {
                    let sub = try subtable(.arrayElement, of: t, line: lineNo)
                    t.entries[k] = .tables(list + [sub], line: at)
                    return sub
                }
                t = list.last!
            case .table(let sub)?:
                guard !last else { throw fail("[[\(Self.dotted(path))]] is already a table, not an array of tables") }
                if sub.kind == .inline { throw fail("cannot extend the inline table \(Self.dotted(Array(path[...n])))") }
                t = sub
            case .value?:
                throw fail("key \(Self.dotted(Array(path[...n]))) is already a value, not an array of tables")
            }
        }
        return t
    }
}
