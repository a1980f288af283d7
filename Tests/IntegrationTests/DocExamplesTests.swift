import CuedClient
import CuedConfig
import CuedProtocol
import Foundation
import Testing
import TestSupport

/// README.md and every docs/**/*.md are executed. Their conventions:
/// - ```sh blocks run with bash (stderr merged into stdout) in a scratch
///   directory, against a fresh cued (the repo's Sounds/, null sink) at
///   $XDG_RUNTIME_DIR/cued/cued.sock, with the built cuectl and cued first on
///   PATH. `CMD  # → TEXT` says CMD prints the line TEXT; following lines
///   `# → TEXT` add lines. TEXT ending in `…` matches lines starting with the
///   rest; `…` alone matches any output. A command without `# →` must print
///   nothing.
/// - ```python blocks: the same, run with python3.
/// - ```cued blocks: protocol dialogues, `REQUEST → REPLY  # comment`, sent on one connection;
///   `← LINE  # comment`: the next line cued sends on it by itself (an event).
/// - ```toml blocks must be valid configs (ConfigLoader.parse, as cued reads one).
/// - ```sh skip and every other language (text) are shown, not run.
/// - No indented code blocks: each example is fenced, so none escapes the test.
/// The reference tables (requests, error codes, status fields) are checked
/// against the code wherever they live, and every relative link resolves.
@Suite(.timeLimit(.minutes(3))) struct DocExamplesTests {
    struct Block: CustomTestStringConvertible, Sendable {
        /// The document, relative to the repository (`docs/protocol.md`).
        let file: String
        let language: String
        let skip: Bool
        /// Line number of the block's first line (after the fence).
        let firstLine: Int
        let lines: [String]
        var testDescription: String { "\(file):\(firstLine) (\(language))" }
    }

    static let root = TestPaths.repoRoot.path

    /// README.md, then every Markdown file under docs/, sorted.
    static let files: [String] = {
        var docs: [String] = []
        let walker = FileManager.default.enumerator(atPath: root + "/docs")
        while let path = walker?.nextObject() as? String {
            if path.hasSuffix(".md") { docs.append("docs/" + path) }
        }
        return ["README.md"] + docs.sorted()
    }()

    static func text(_ file: String) -> String { (try? String(contentsOfFile: root + "/" + file, encoding: .utf8)) ?? "" }

    static func lines(_ file: String) -> [Substring] { text(file).split(separator: "\n", omittingEmptySubsequences: false) }

    static func blocks(_ file: String) -> [Block] {
        var out: [Block] = []
        var open: (language: String, skip: Bool, first: Int, lines: [String])?
        for (i, line) in lines(file).enumerated() {
            if line.hasPrefix("```") {
                if let o = open {
                    out.append(Block(file: file, language: o.language, skip: o.skip, firstLine: o.first, lines: o.lines))
                    open = nil
                } else {
                    let info = line.dropFirst(3).split(separator: " ")
                    open = (info.first.map(String.init) ?? "", info.dropFirst().contains("skip"), i + 2, [])
                }
            } else if open != nil {
                open!.lines.append(String(line))
            }
        }
        return out
    }

    static let blocks: [Block] = files.flatMap(blocks)

    static var runnable: [Block] { blocks.filter { !$0.skip && ["sh", "python", "cued"].contains($0.language) } }

    static var configs: [Block] { blocks.filter { !$0.skip && $0.language == "toml" } }

    /// One expectation: a README line and what it says the output is.
    struct Expected {
        let line: Int
        let command: String
        var output: [String]
    }

    /// The expectations of a sh or python block, and the script with a marker
    /// printed after each complete command, so each command's output is its own.
    static func instrument(_ b: Block, marker: (Int, String) -> String) -> (script: String, expected: [Expected]) {
        var expected: [Expected] = []
        var script: [String] = []
        var depth = 0
        let arrow = "# → "
        for (k, line) in b.lines.enumerated() {
            let trimmed = line.drop { $0 == " " }
            if trimmed.hasPrefix(arrow) || trimmed == "# →" {
                // A continuation line: more output of the command before it.
                if !expected.isEmpty { expected[expected.count - 1].output.append(String(trimmed.dropFirst(arrow.count))) }
                continue
            }
            script.append(line)
            let (code, shown) = line.range(of: " " + arrow).map {
                (String(line[..<$0.lowerBound]), [String(line[$0.upperBound...])])
            } ?? (line, [])
            depth += nesting(code)
            let body = code.trimmingCharacters(in: .whitespaces)
            guard depth == 0, !body.isEmpty, !body.hasPrefix("#"), !["\\", "|", "&&", "||", ":", ","].contains(where: { body.hasSuffix($0) }) else { continue }
            let shownCommand = body.range(of: "  #").map { body[..<$0.lowerBound].trimmingCharacters(in: .whitespaces) } ?? body
            expected.append(Expected(line: b.firstLine + k, command: shownCommand, output: shown))
            script.append(marker(b.firstLine + k, String(line.prefix { $0 == " " })))
        }
        return (script.joined(separator: "\n") + "\n", expected)
    }

    /// Brackets a line opens minus those it closes, outside quotes and comments.
    static func nesting(_ line: String) -> Int {
        var depth = 0
        var quote: Character?
        var previous: Character = " "
        for ch in line {
            if let q = quote {
                if ch == q { quote = nil }
            } else if ch == "'" || ch == "\"" {
                quote = ch
            } else if ch == "#" && previous == " " {
                break
            } else if "{([".contains(ch) {
                depth += 1
            } else if "})]".contains(ch) {
                depth -= 1
            }
            previous = ch
        }
        return depth
    }

    /// `got` (the output before a marker) against `want`, or what differs.
    static func mismatch(_ got: [String], _ want: [String]) -> String? {
        var g = got[...]
        for w in want {
            if w == "…" { return nil }
            guard let line = g.popFirst() else { return "expected «\(w)», got nothing more" }
            if w.hasSuffix("…") ? !line.hasPrefix(w.dropLast()) : line != w {
                return "expected «\(w)», got «\(line)»"
            }
        }
        if g.isEmpty { return nil }
        return want.isEmpty ? "printed «\(g.joined(separator: "⏎"))», but the README shows no output (add `# → …`)"
                            : "printed more than shown: «\(g.joined(separator: "⏎"))»"
    }

    static func daemon() throws -> DaemonHarness {
        try DaemonHarness(args: ["--sink", "null", "--sounds", TestPaths.repoRoot.path + "/Sounds"])
    }

    static func environment(_ d: DaemonHarness, _ dir: TempDir) -> [String: String] {
        var env = d.environment
        env["PATH"] = TestPaths.binDir.path + ":" + (env["PATH"] ?? "/usr/bin:/bin")
        env["HOME"] = dir.path
        env.removeValue(forKey: "CUED_APP")
        return env
    }

    @Test(arguments: runnable)
    func example(_ b: Block) throws {
        let d = try Self.daemon()
        let dir = TempDir()
        if b.language == "cued" { return try dialogue(b, d) }
        let isPython = b.language == "python"
        let (body, expected) = Self.instrument(b) { n, indent in
            isPython ? "\(indent)import sys; sys.stdout.write('\\x1e\(n)\\x1e\\n'); sys.stdout.flush()"
                     : "\(indent)__readme_mark \(n)"
        }
        // The marker keeps $? for the next line (`echo $?` examples).
        let prelude = "exec 2>&1\ncd \(dir.path)\n__readme_mark() { local s=$?; printf '\\036%s\\036\\n' \"$1\"; return $s; }\n"
        let script = isPython ? "import os\nos.dup2(1, 2)\n" + body : prelude + body
        try script.write(toFile: dir.file("example"), atomically: true, encoding: .utf8)
        let r = try runProcess(isPython ? "/usr/bin/python3" : "/bin/bash", [dir.file("example")],
                               env: Self.environment(d, dir), timeout: 60)
        // Output split at the markers: segment i belongs to expected[i].
        var segments = r.out.split(separator: "\u{1e}", omittingEmptySubsequences: false).map(String.init)
        var rest = segments.removeFirst()
        for e in expected {
            let lines = rest.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            let got = lines.last == "" ? Array(lines.dropLast()) : lines
            if let problem = Self.mismatch(got, e.output) {
                Issue.record("\(b.file):\(e.line): `\(e.command)`: \(problem)\n(the block at \(b.file):\(b.firstLine) printed:\n\(r.out.replacingOccurrences(of: "\u{1e}", with: "|")))")
            }
            guard segments.count >= 2 else {
                Issue.record("\(b.file):\(e.line): `\(e.command)`: the example stopped before it (exit \(r.status)):\n\(r.out)")
                return
            }
            let number = segments.removeFirst()
            #expect(number == String(e.line))
            rest = String(segments.removeFirst().dropFirst())  // the marker's LF
        }
        if !rest.isEmpty {
            Issue.record("\(b.file):\(b.firstLine): the block printed what it does not show: «\(rest)»")
        }
    }

    func dialogue(_ b: Block, _ d: DaemonHarness) throws {
        let c = try d.client()
        for (k, line) in b.lines.enumerated() where line.contains("→") || line.hasPrefix("←") {
            if line.hasPrefix("←") {
                // A line cued sends on its own (an `end ID REASON` event), next on this connection.
                let want = line.dropFirst().split(separator: "#", maxSplits: 1).first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
                let got = try c.readLine()
                #expect(got == want, "\(b.file):\(b.firstLine + k): expected the line «\(want)», got «\(got)»")
                continue
            }
            let parts = line.split(separator: "→", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            let request = parts[0]
            let reply = parts[1].split(separator: "#", maxSplits: 1).first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
            let got = try c.request(request)
            #expect(got == reply, "\(b.file):\(b.firstLine + k): `\(request)`: expected «\(reply)», got «\(got)»")
        }
    }

    /// A ```toml block is a config `cuectl config check` accepts, as a user has it: saved as
    /// ~/.config/cued/cued.toml, with the sound files it names (the user's own) where it says.
    @Test(arguments: configs)
    func config(_ b: Block) throws {
        let dir = TempDir()
        let home = dir.file("home"), path = home + "/.config/cued/cued.toml"
        try FileManager.default.createDirectory(atPath: home + "/.config/cued", withIntermediateDirectories: true)
        let text = b.lines.joined(separator: "\n")
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        let config: Config
        do {
            config = try ConfigLoader.parse(text, file: path, home: home)
        } catch {
            for issue in error.issues {
                Issue.record("\(b.file):\(b.firstLine + (issue.line ?? 1) - 1): \(issue.key ?? "-"): \(issue.message)")
            }
            return
        }
        for file in config.cues.values.flatMap({ ($0.files ?? []) + ($0.file.map { [$0] } ?? []) }) {
            try FileManager.default.createDirectory(atPath: (file as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try? FileManager.default.removeItem(atPath: file)
            try FileManager.default.copyItem(atPath: TestPaths.repoRoot.path + "/Sounds/pop.wav", toPath: file)
        }
        let check = try runProcess(TestPaths.binary("cuectl"), ["config", "check", path],
                                   env: ["HOME": home, "PATH": "/usr/bin:/bin", "XDG_CONFIG_HOME": home + "/.config"])
        #expect(check.status == 0, "\(b.file):\(b.firstLine): `cuectl config check`: \(check.out)\(check.err)")
    }

    @Test func everyExampleIsFenced() {
        #expect(Self.runnable.count >= 10)
        #expect(Self.configs.count >= 3)
        for file in Self.files {
            var inFence = false, previousBlank = true
            for (i, line) in Self.lines(file).enumerated() {
                if line.hasPrefix("```") { inFence.toggle(); previousBlank = false; continue }
                if !inFence && previousBlank && (line.hasPrefix("    ") || line.hasPrefix("\t")) {
                    Issue.record("\(file):\(i + 1): an indented code block: fence it (```sh, run by DocExamplesTests, or ```sh skip)")
                }
                previousBlank = line.trimmingCharacters(in: .whitespaces).isEmpty
            }
            #expect(!inFence, "\(file): a code fence is not closed")
        }
    }

    /// GitHub's anchor for a heading: lower case, spaces to hyphens, punctuation dropped.
    static func anchor(_ heading: Substring) -> String {
        String(heading.lowercased().compactMap { ch -> Character? in
            ch == " " ? "-" : (ch.isLetter || ch.isNumber || ch == "-" || ch == "_") ? ch : nil
        })
    }

    static func anchors(_ file: String) -> Set<String> {
        var inFence = false
        var out: Set<String> = []
        for line in lines(file) {
            if line.hasPrefix("```") { inFence.toggle(); continue }
            if !inFence, line.hasPrefix("#") { out.insert(anchor(line.drop { $0 == "#" }.dropFirst())) }
        }
        return out
    }

    /// `target` relative to the directory of `file`, both relative to the repository.
    static func resolve(_ target: String, from file: String) -> String {
        var parts = file.split(separator: "/").dropLast().map(String.init)
        for part in target.split(separator: "/") {
            if part == ".." { _ = parts.popLast() } else if part != "." { parts.append(String(part)) }
        }
        return parts.joined(separator: "/")
    }

    /// Every relative link of README and docs names a file that exists, and a heading
    /// that exists when it names one: the reference moved, and moves again.
    @Test func everyLinkResolves() throws {
        let link = try Regex("\\]\\(([^)\\s]+)\\)")
        var checked = 0
        for file in Self.files {
            var inFence = false
            for (i, line) in Self.lines(file).enumerated() {
                if line.hasPrefix("```") { inFence.toggle(); continue }
                if inFence { continue }
                for match in line.matches(of: link) {
                    let target = String(match.output[1].substring ?? "")
                    if target.contains("://") || target.hasPrefix("mailto:") { continue }
                    let parts = target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)
                    let path = parts[0].isEmpty ? file : Self.resolve(String(parts[0]), from: file)
                    checked += 1
                    guard FileManager.default.fileExists(atPath: Self.root + "/" + path) else {
                        Issue.record("\(file):\(i + 1): the link \(target) names no file (\(path))"); continue
                    }
                    if parts.count == 2, path.hasSuffix(".md") {
                        #expect(Self.anchors(path).contains(String(parts[1])), "\(file):\(i + 1): \(path) has no heading #\(parts[1])")
                    }
                }
            }
        }
        #expect(checked >= 30)
    }

    /// The `code` spans in the first column of the table under the heading `heading`,
    /// in whichever document has it (exactly one must).
    static func tableNames(under heading: String) -> [String] {
        func isHeading(_ line: Substring) -> Bool { line.hasPrefix("#") && line.drop { $0 == "#" }.dropFirst() == heading }
        let holders = files.filter { Self.lines($0).contains(where: isHeading) }
        #expect(holders.count == 1, "the heading «\(heading)» is in \(holders), not in exactly one document")
        guard let file = holders.first else { return [] }
        let lines = Self.lines(file)
        guard let start = lines.firstIndex(where: isHeading) else { return [] }
        var names: [String] = []
        var seenTable = false
        for line in lines[(start + 1)...] {
            if line.hasPrefix("|") {
                seenTable = true
                // The first cell: up to the first | that is not escaped (`a\|b`).
                var cell = "", escaped = false
                for ch in line.dropFirst() {
                    if ch == "|" && !escaped { break }
                    escaped = ch == "\\"
                    cell.append(ch)
                }
                let spans = cell.split(separator: "`", omittingEmptySubsequences: false)
                names += stride(from: 1, to: spans.count - 1, by: 2).map { String(spans[$0]) }
            } else if seenTable { break }
        }
        return names
    }

    @Test func errorCodesAreTheProtocols() {
        // Exhaustive: a new ErrorCode case does not compile until it is listed here, and then in the README.
        func listed(_ c: ErrorCode) -> Bool {
            switch c {
            case .unknownVerb, .unknownCue, .badArgument, .lineTooLong, .reloadFailed, .forbidden, .busy,
                 .rateLimited, .badFile, .notPlayed, .tooMany, .internal: return true
            }
        }
        let all: [ErrorCode] = [.unknownVerb, .unknownCue, .badArgument, .lineTooLong, .reloadFailed, .forbidden, .busy,
                                .rateLimited, .badFile, .notPlayed, .tooMany, .internal]
        #expect(all.allSatisfy(listed))
        let documented = Self.tableNames(under: "Error codes")
        #expect(Set(documented) == Set(all.map(\.rawValue)),
                "the error codes documented: missing \(Set(all.map(\.rawValue)).subtracting(documented).sorted()), extra \(Set(documented).subtracting(all.map(\.rawValue)).sorted())")
        #expect(documented.count == Set(documented).count, "listed twice: \(documented)")
    }

    @Test func theWireWordsAreDocumented() {
        let problems = Self.tableNames(under: "Why a file cannot be played")
        #expect(problems == FileProblem.allCases.map(\.rawValue), "the bad-file words documented: \(problems)")
        let reasons = Self.tableNames(under: "Voices: ids, loops, priorities, end events")
        #expect(Set(reasons) == Set(EndReason.allCases.map(\.rawValue)) && reasons.count == EndReason.allCases.count,
                "the end reasons documented: \(reasons)")
    }

    @Test func statusFieldsAreTheStatusType() {
        let documented = Self.tableNames(under: "Status fields")
        let actual = Status.fieldPaths
        #expect(Set(documented) == Set(actual),
                "the status fields documented: missing \(Set(actual).subtracting(documented).sorted()), extra \(Set(documented).subtracting(actual).sorted())")
        #expect(documented.count == Set(documented).count, "listed twice: \(documented)")
    }

    @Test func everyRequestHasARow() {
        let documented = Self.tableNames(under: "Requests").map { String($0.prefix { $0 != " " }) }
        for verb in RequestParser.verbNames {
            #expect(documented.contains(verb), "the protocol's table of requests has no row for `\(verb)`")
        }
    }
}
