import CuedConfig
import Testing

/// cued's own TOML parser. The whole language is also checked against Python's
/// tomllib by `cuedfuzz toml` (FuzzTests, `make fuzz`); these are the cases a
/// reader should see spelled out.
@Suite struct TOMLTests {
    func parse(_ text: String) throws(TOMLError) -> TOMLTable { try TOMLParser.parse(text) }

    func error(_ text: String) -> TOMLError? {
        do { _ = try parse(text); return nil } catch { return error }
    }

    @Test func valuesAndTheirLines() throws {
        let t = try parse("""
            # a comment
            a = "x\\ty"
            b = 'C:\\\\raw'
            c = 0x1F
            d = -3.5e2
            e = true
            f = [1, 2,
                 3]
            g = { h = 1 }
            i = 1979-05-27T07:32:00Z

            [tab."quoted key"]
            j = \"\"\"
            two
            lines\"\"\"
            """)
        guard case .string("x\ty")? = t["a"]?.value else { Issue.record("a"); return }
        guard case .string("C:\\\\raw")? = t["b"]?.value else { Issue.record("b \(String(describing: t["b"]))"); return }
        guard case .integer(31)? = t["c"]?.value else { Issue.record("c"); return }
        guard case .float(-350)? = t["d"]?.value else { Issue.record("d"); return }
        guard case .bool(true)? = t["e"]?.value else { Issue.record("e"); return }
        guard case .array(let f)? = t["f"]?.value, f.count == 3, f[2].line == 8 else { Issue.record("f"); return }
        guard case .table(let g)? = t["g"]?.value, case .integer(1)? = g["h"]?.value else { Issue.record("g"); return }
        guard case .datetime? = t["i"]?.value else { Issue.record("i"); return }
        guard case .table(let tab)? = t["tab"]?.value, case .table(let q)? = tab["quoted key"]?.value,
              case .string("two\nlines")? = q["j"]?.value else { Issue.record("tab"); return }
        #expect(t["a"]?.line == 2)
        #expect(t["f"]?.line == 7)
        #expect(q["j"]?.line == 13)
        #expect(t.keys == ["a", "b", "c", "d", "e", "f", "g", "i", "tab"])
    }

    @Test(arguments: [
        ("a = 1\na = 2", 2, "defined twice"),
        ("[t]\n[t]", 2, "defined twice"),
        ("a = 1\n[a]", 2, "already a value"),
        ("a = {b = 1}\na.c = 2", 2, "inline"),
        ("a.b.c = 1\n[a.b]", 2, "defined twice"),
        ("x = [1,,2]", 1, "expected a value"),
        ("x = \"unterminated", 1, "unterminated"),
        ("x = 01", 1, "not a valid number"),
        ("x = 9223372036854775808", 1, "not a valid number"),
        ("x = 1979-13-01", 1, "month out of range"),
        ("x = \"\\q\"", 1, "unknown escape"),
        ("x = 1 y = 2", 1, "expected the end of the line"),
        ("\n\n[a\nb = 1", 3, "expected ']'"),
        ("x = bare", 1, "a string needs quotes"),
    ])
    func errorsSayWhatAndWhere(text: String, line: Int, words: String) {
        guard let e = error(text) else { Issue.record("accepted: \(text)"); return }
        #expect(e.line == line, "\(e)")
        #expect(e.message.contains(words), "\(e)")
    }

    @Test func nestingIsBounded() {
        let deep = "x = " + String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        #expect(error(deep)?.message.contains("nested deeper than 32") == true)
        let ok = "x = " + String(repeating: "[", count: 32) + String(repeating: "]", count: 32)
        #expect(error(ok) == nil)
    }

    /// Every way of making a level counts, alone or mixed: 40,000 levels of a header or a
    /// dotted key (80 KB) crashed cued on the stack. Each document below makes `n` nested
    /// tables or arrays: at the limit it parses, one more is refused.
    @Test(arguments: ["header", "dotted key", "array of tables", "inline tables", "header, then a dotted key",
                      "dotted keys inside inline tables"])
    func everyKindOfNestingCounts(kind: String) {
        func make(_ n: Int) -> String {
            switch kind {
            case "header": return "[" + path("a", n) + "]\nx = 1"
            case "dotted key": return path("a", n) + ".x = 1"
            case "array of tables": return "[[" + path("a", n) + "]]\nx = 1"
            case "inline tables": return "x = " + String(repeating: "{a = ", count: n) + "1" + String(repeating: "}", count: n)
            case "header, then a dotted key": return "[" + path("a", n / 2) + "]\n" + path("b", n - n / 2) + ".x = 1"
            default: return "x = {a.a = {b.b." + path("c", n - 5) + " = [1]}}"
            }
        }
        #expect(error(make(TOMLParser.maxDepth)) == nil, "\(kind) at the limit: \(String(describing: error(make(TOMLParser.maxDepth))))")
        #expect(error(make(TOMLParser.maxDepth + 1))?.message.contains("nested deeper than 32") == true, "\(kind) past it")
        let e = error(make(40_000))
        #expect(e?.message.contains("nested deeper than 32") == true, "\(kind), 40,000 levels: \(String(describing: e))")
    }

    @Test func crlfAndEmptyDocuments() throws {
        #expect(try parse("").keys.isEmpty)
        #expect(try parse("a = 1\r\nb = 2\r\n")["b"]?.line == 2)
        #expect(error("a = 1\rb = 2") != nil)  // a lone CR is not a newline
    }
}

/// `a.a.a…`, `n` parts.
private func path(_ key: String, _ n: Int) -> String { Array(repeating: key, count: n).joined(separator: ".") }
