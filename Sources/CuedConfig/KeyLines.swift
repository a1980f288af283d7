/// Finds the line each key of a TOML document was written on. TOMLKit reports
/// positions only for syntax errors, so the text is scanned for table headers
/// (`[cues.pop]`) and assignments (`gain_db = -3`, `"release->pull" = "pop"`).
/// Only valid TOML reaches here, which keeps the scan simple.
struct KeyLines {
    /// Dotted key path (quoted where not bare) → 1-based line.
    private(set) var lines: [String: Int] = [:]

    init(_ text: String) {
        var table: [String] = []
        for (i, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            if line.hasPrefix("[") {
                let inner = line.hasPrefix("[[") ? line.dropFirst(2) : line.dropFirst()
                guard let keys = Self.parseKey(Substring(inner)).map({ $0.keys }) else { continue }
                table = keys
                record(table, line: i + 1)
                continue
            }
            guard let (keys, rest) = Self.parseKey(Substring(line)), rest.hasPrefix("=") else { continue }
            record(table + keys, line: i + 1)
        }
    }

    private mutating func record(_ path: [String], line: Int) {
        // Every prefix gets a line too (dotted keys and implicit tables), first one wins.
        for n in 1...max(path.count, 1) where n <= path.count {
            let key = Self.join(Array(path.prefix(n)))
            if lines[key] == nil { lines[key] = line }
        }
    }

    /// The line of `key`, else of its nearest parent.
    func line(for key: String) -> Int? {
        var k = key
        while true {
            if let l = lines[k] { return l }
            // Strip an index suffix (`sounds[2]`) or the last dotted component.
            if let b = k.lastIndex(of: "["), k.hasSuffix("]") { k = String(k[..<b]); continue }
            guard let dot = Self.lastDot(k) else { return nil }
            k = String(k[..<dot])
        }
    }

    static func join(_ keys: [String]) -> String { keys.map { isBare($0) ? $0 : "\"\($0)\"" }.joined(separator: ".") }

    static func isBare(_ k: String) -> Bool {
        !k.isEmpty && k.unicodeScalars.allSatisfy { ($0 >= "A" && $0 <= "Z") || ($0 >= "a" && $0 <= "z") || ($0 >= "0" && $0 <= "9") || $0 == "_" || $0 == "-" }
    }

    /// The last dot outside quotes.
    static func lastDot(_ k: String) -> String.Index? {
        var inQuote = false
        var last: String.Index?
        for i in k.indices {
            if k[i] == "\"" { inQuote.toggle() } else if k[i] == "." && !inQuote { last = i }
        }
        return last
    }

    /// Parses `a."b c".'d'` and returns the keys and what follows (trimmed).
    static func parseKey(_ s: Substring) -> (keys: [String], rest: Substring)? {
        var keys: [String] = []
        var i = s.startIndex
        func skipSpace() { while i < s.endIndex, s[i] == " " || s[i] == "\t" { i = s.index(after: i) } }
        while true {
            skipSpace()
            guard i < s.endIndex else { return nil }
            if s[i] == "\"" || s[i] == "'" {
                let q = s[i]
                var j = s.index(after: i)
                var key = ""
                while j < s.endIndex, s[j] != q {
                    if q == "\"", s[j] == "\\", s.index(after: j) < s.endIndex { j = s.index(after: j) }
                    key.append(s[j]); j = s.index(after: j)
                }
                guard j < s.endIndex else { return nil }
                keys.append(key)
                i = s.index(after: j)
            } else {
                let start = i
                while i < s.endIndex, isBare(String(s[i])) { i = s.index(after: i) }
                guard i > start else { return nil }
                keys.append(String(s[start..<i]))
            }
            skipSpace()
            if i < s.endIndex, s[i] == "." { i = s.index(after: i); continue }
            var rest = s[i...]
            if rest.hasPrefix("]") { rest = rest.dropFirst() }
            return (keys, rest.drop { $0 == " " || $0 == "\t" || $0 == "]" })
        }
    }
}
