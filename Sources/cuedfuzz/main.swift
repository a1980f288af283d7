// cuedfuzz: a seeded, mutational random-input driver for cued's two parsers
// (the protocol line parser and the config file parser). Deterministic for a
// seed, so a crash is reproducible. A crash ends the process (that is the
// finding); properties that must hold for every input are checked too.
//
//   cuedfuzz protocol|config|toml|json|status [-n INPUTS] [--seed S]
//
// Every target's seeds include documents nested far past the parsers' limits
// (TOML 32 levels, JSON 64): they are refused with an error, never a crash.
//
// `json` parses feedbackd-theme-like and status-like documents: an accepted one
// encodes to text that parses back to the same value.
//
// `status` builds a status whose cue, app, config and error names are random
// bytes and checks that the reply line is JSON that reads back to the same names.
//
// `toml` is differential: every input is parsed by cued's TOML parser and by
// Python's tomllib (fuzz/toml_oracle.py, in batches); they must agree on
// accepting it and, when both accept, on every value.
import CuedConfig
import CuedProtocol
#if canImport(Glibc)
import Glibc
#endif

struct Rng {
    var s: UInt64
    mutating func next() -> UInt64 {
        s &+= 0x9E37_79B9_7F4A_7C15
        var z = s
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func below(_ n: Int) -> Int { Int(next() % UInt64(max(n, 1))) }
}

let protocolSeeds = [
    "ping", "play pop", "play pop -6", "play psst1 12", "state pull", "state release quiet", "state loading",
    "state idle", "drag 64.5", "drop", "threshold 65", "session feed", "session", "mute", "unmute", "mute app x",
    "unmute app mutt", "app dashboard", "reload", "cues", "status", "play pop wait", "play bell -3 wait",
    "play-file /tmp/a%20b.ogg -6 wait", "stop", "stop all", "stop pop", "cues theme",
    "play ring id loop priority=5", "play ring loop=3 wait", "play ring -3 loop=2.5s", "stop id 42", "events on", "events off",
    "profile", "profile quiet", "profile silent", "profile app clock", "profile app mutt full", "profile app x default",
    "play alarm important wait", "play-file /tmp/a.ogg -6 important",
]
let baseConfigSeeds = [
    "sink = \"alsa:default\"\nlatency_ms = 10\nvoices = 16\nidle_close_s = 30\nmaster_gain_db = -3\nmuted = false\n",
    "sounds = [\"/a\", \"rel\", \"~/s\"]\n[cues.pop]\ngain_db = -2\nfile = \"pop.wav\"\n",
    "[transitions]\n\"release->pull\" = \"\"\n\"idle->pull\" = \"pop\"\n",
    "[apps.mutt]\nmuted = true\ngain_db = -6\n[apps.\"x.y\"]\nmuted = false\n",
    "cues.pop.gain_db = 1\napps.a.muted = true\n",
    "theme = \"ocean\"\ntheme_cache_mb = 8\n[stream]\n\"media.role\" = \"event\"\n",
    "profile = \"quiet\"\n[profiles]\nquiet_gain_db = -20\nimportant_apps = [\"clock\", \"phone\"]\n[apps.mutt]\nprofile = \"silent\"\n",
    "a = { b = 1, c.d = [1, 2.5, 'x', \"\"\"y\"\"\", 1979-05-27T07:32:00Z] }\n[[t]]\nx = 0x1F\n[[t]]\ny = \'\'\'z\'\'\'\n",
]
/// Nested far past the TOML parser's limit, every way a level can be made.
let deepTOML = [
    "[" + Array(repeating: "a", count: 200).joined(separator: ".") + "]\nx = 1\n",
    Array(repeating: "a", count: 200).joined(separator: ".") + " = 1\n",
    "[[" + Array(repeating: "a", count: 200).joined(separator: ".") + "]]\n",
    "x = " + String(repeating: "[", count: 300) + String(repeating: "]", count: 300) + "\n",
    "x = " + String(repeating: "{a = ", count: 100) + "1" + String(repeating: "}", count: 100) + "\n",
    "[" + Array(repeating: "a", count: 20).joined(separator: ".") + "]\n" + Array(repeating: "b", count: 20).joined(separator: ".") + " = [[[[1]]]]\n",
]
let configSeeds = baseConfigSeeds + deepTOML
let tokens: [[UInt8]] = ["\0", "\u{FF}", "\r", "\n", " ", "=", "[", "]", "[[", "\"", "'", "->", ".", "#", "1e309", "-0",
                         "nan", "inf", "9223372036854775808", "\\u0000", "\"\"\"", "\t", "{", "}", ","].map { Array($0.utf8) }
    + [[0xC3], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xFE, 0xFF]]

func mutate(_ input: [UInt8], _ corpus: [[UInt8]], _ rng: inout Rng) -> [UInt8] {
    var x = input
    for _ in 0...rng.below(4) {
        let at = rng.below(x.count + 1)
        switch rng.below(7) {
        case 0: if !x.isEmpty { x[rng.below(x.count)] ^= UInt8(1 << rng.below(8)) }
        case 1: x.insert(UInt8(rng.below(256)), at: at)
        case 2: if !x.isEmpty { x.remove(at: rng.below(x.count)) }
        case 3: x.insert(contentsOf: tokens[rng.below(tokens.count)], at: at)
        case 4: // splice with another input
            let other = corpus[rng.below(corpus.count)]
            x = Array(x.prefix(at)) + Array(other.suffix(other.count - rng.below(other.count + 1)))
        case 5: if !x.isEmpty { let a = rng.below(x.count); let n = rng.below(min(64, x.count - a) + 1); x.insert(contentsOf: x[a..<(a + n)], at: at) }
        default: x = Array(x.prefix(rng.below(x.count + 1)))
        }
    }
    if x.count > 4096 { x.removeLast(x.count - 4096) }
    return x
}

/// TOML documents that exercise the whole syntax (the differential target's seeds).
let tomlSeeds = [
    "a = \"x\\ty\\u00e9\\U0001F600\"\nb = 'lit\\eral'\nc = \"\"\"\nline1\\\n   line2\"\"\"\nd = '''\nraw\n'''\n",
    "i = [+1, -0, 0x_1, 0xDEAD_beef, 0o17, 0b101, 1_000, 9223372036854775807, -9223372036854775808]\n",
    "f = [1.0, -0.5e-3, 6.02E23, 1e1_0, inf, -inf, nan, +nan, 3_1.4_1, 0.0]\n",
    "d = [1979-05-27T07:32:00Z, 1979-05-27 07:32:00.999+01:30, 1979-05-27T07:32:00, 1979-05-27, 07:32:00.5]\n",
    "[a.b]\nc = 1\n[a]\nd = 2\n[a.\"b\".e]\nf = { g = [1, [2, [3]]], h.i = 'j' }\n",
    "[[x.y]]\nz = 1\n[[x.y]]\nz = 2\n[x.y.w]\nv = true\n[[x.y.u]]\n",
    "fruit.apple.color = \"red\"\nfruit.apple.taste.sweet = true\n[fruit.apple.texture]\nsmooth = true\n",
    "\"quoted key\" = 1\n'single' = 2\n\"\" = 3\n a . b . c = 4 # comment\r\nempty = []\nt = {}\n",
    "arr = [\n  1, # one\n  2,\n]\nq = \"\"\"\"\"quotes\"\"\"\"\"\n",
]

/// cued's TOML tree as the oracle writes it: every value tagged by type.
func tagged(_ v: TOMLValue) -> JSON {
    switch v {
    case .string(let s): return .object([("string", .string(s))])
    case .integer(let i): return .object([("int", .string(String(i)))])
    case .float(let d): return .object([("float", .string(d.isNaN ? "nan" : "\(d)"))])
    case .bool(let b): return .object([("bool", .bool(b))])
    case .datetime: return .object([("datetime", .bool(true))])
    case .array(let items): return .object([("array", .array(items.map { tagged($0.value) }))])
    case .table(let t): return .object([("table", .object(t.keys.map { ($0, tagged(t[$0]!.value)) }))])
    }
}

/// Equal trees; floats compared as numbers (Python and Swift print some differently), tables as sets of keys.
func sameTOML(_ a: JSON, _ b: JSON) -> Bool {
    switch (a, b) {
    case (.null, .null): return true
    case (.object(let x), .object(let y)):
        guard x.count == y.count else { return false }
        if x.count == 1, y.count == 1, x[0].0 == "float", y[0].0 == "float",
           case .string(let p) = x[0].1, case .string(let q) = y[0].1 {
            if p == "nan" || q == "nan" { return p == q }
            if p.contains("inf") || q.contains("inf") { return p.hasPrefix("-") == q.hasPrefix("-") && p.contains("inf") && q.contains("inf") }
            return Double(p) == Double(q)
        }
        for (k, v) in x { guard let w = y.first(where: { $0.0 == k })?.1, sameTOML(v, w) else { return false } }
        return true
    case (.array(let x), .array(let y)):
        return x.count == y.count && zip(x, y).allSatisfy(sameTOML)
    default:
        return a == b
    }
}

/// The repository's fuzz/toml_oracle.py (cuedfuzz lives in .build/CONFIG/).
let oraclePath: String = {
    var exe = [CChar](repeating: 0, count: 4096)
    let n = readlink("/proc/self/exe", &exe, exe.count - 1)
    let path = n > 0 ? String(decoding: exe[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
    var dir = path.split(separator: "/", omittingEmptySubsequences: false).dropLast()
    for _ in 0..<6 {
        let candidate = dir.joined(separator: "/") + "/fuzz/toml_oracle.py"
        if access(candidate, R_OK) == 0 { return candidate }
        dir = dir.dropLast()
    }
    return "fuzz/toml_oracle.py"
}()

/// Runs the oracle on a batch of documents.
func tomlOracle(_ docs: [String]) -> [JSON] {
    let input = JSON.array(docs.map(JSON.string)).encoded
    let inPath = "/tmp/cuedfuzz-toml.\(getpid()).in", outPath = "/tmp/cuedfuzz-toml.\(getpid()).out"
    defer { unlink(inPath); unlink(outPath) }
    guard let f = fopen(inPath, "wb") else { fail("cannot write \(inPath)") }
    _ = input.withCString { fputs($0, f) }
    fclose(f)
    let rc = system("/usr/bin/python3 '\(oraclePath)' < \(inPath) > \(outPath)")
    var bytes: [UInt8] = []
    if let g = fopen(outPath, "rb") {
        var buf = [UInt8](repeating: 0, count: 65536)
        while true {
            let got = fread(&buf, 1, buf.count, g)
            if got == 0 { break }
            bytes += buf[0..<got]
        }
        fclose(g)
    }
    let text = String(decoding: bytes, as: UTF8.self)
    // The oracle's trees are tagged (two levels per TOML level) and tomllib nests deeper than cued.
    guard rc == 0, case .array(let results)? = try? JSON.parse(text, maxDepth: 10_000), results.count == docs.count else {
        fail("the TOML oracle (\(oraclePath)) failed; is python3 ≥ 3.11 installed?")
    }
    return results
}

func fail(_ message: String) -> Never {
    let line = "cuedfuzz: PROPERTY VIOLATED: \(message)\n"
    _ = line.withCString { write(2, $0, strlen($0)) }
    exit(1)
}

var args = CommandLine.arguments.dropFirst()
guard let target = args.popFirst(), ["protocol", "config", "toml", "json", "status"].contains(target) else {
    print("usage: cuedfuzz protocol|config|toml|json|status [-n INPUTS] [--seed S]")
    exit(64)
}
var n = 100_000
var seed: UInt64 = 1
while let a = args.popFirst() {
    if a == "-n", let v = args.popFirst().flatMap(Int.init) { n = v }
    else if a == "--seed", let v = args.popFirst().flatMap(UInt64.init) { seed = v }
    else { print("cuedfuzz: unknown argument \(a)"); exit(64) }
}

var rng = Rng(s: seed)
var accepted = 0
var startTime = timespec(); clock_gettime(CLOCK_MONOTONIC, &startTime)
if target == "protocol" {
    let corpus = protocolSeeds.map { Array($0.utf8) }
    var current = corpus
    for i in 0..<n {
        let input = mutate(current[rng.below(current.count)], corpus, &rng)
        do {
            let r = try RequestParser.parse(input)
            accepted += 1
            // Every accepted request re-encodes to a line that parses back to itself
            // (unless escaping a play-file path made the line longer than the limit).
            if r.line.utf8.count <= ProtocolLimits.maxLineBytes {
                guard let again = try? RequestParser.parse(r.line), again == r else { fail("round trip of \(input) → \(r.line)") }
            }
            if current.count < 512 { current.append(input) } else { current[i % 512] = input }
        } catch {
            // Every rejection is one reply line: no newline in it, a known code.
            if error.reply.line.contains("\n") { fail("reply with a newline for \(input)") }
        }
    }
} else if target == "toml" {
    let corpus = (configSeeds + tomlSeeds).map { Array($0.utf8) }
    var batch: [String] = []
    func check() {
        let verdicts = tomlOracle(batch)
        for (doc, verdict) in zip(batch, verdicts) {
            let ours: JSON
            do { let t = try TOMLParser.parse(doc); ours = tagged(.table(t)) } catch {
                // Past cued's nesting limit (32) where tomllib goes on: refused on purpose.
                if error.message.hasPrefix("nested deeper than \(TOMLParser.maxDepth)") { continue }
                ours = .null
            }
            if !sameTOML(ours, verdict) {
                fail("cued and tomllib disagree on \(JSON.string(doc).encoded): cued \(ours.encoded), tomllib \(verdict.encoded)")
            }
            if ours != .null { accepted += 1 }
        }
        batch.removeAll()
    }
    for seed in tomlSeeds { batch.append(seed) }
    for _ in 0..<n {
        batch.append(String(decoding: mutate(corpus[rng.below(corpus.count)], corpus, &rng), as: UTF8.self))
        if batch.count == 5000 { check() }
    }
    check()
} else if target == "json" {
    let seeds = [
        #"{"name": "default", "profiles": [{"name": "full", "feedbacks": [{"event-name": "bell", "type": "Sound", "effect": "bell"}]}]}"#,
        #"{"a": [1, -2.5e3, true, false, null, "x\u00e9\ud83d\ude00\n"], "b": {"c": {}}}"#,
        String(repeating: "[", count: 500) + String(repeating: "]", count: 500),
        String(repeating: #"{"a":"#, count: 200) + "1" + String(repeating: "}", count: 200),
    ]
    let corpus = seeds.map { Array($0.utf8) }
    for _ in 0..<n {
        let text = String(decoding: mutate(corpus[rng.below(corpus.count)], corpus, &rng), as: UTF8.self)
        guard let v = try? JSON.parse(text) else { continue }
        accepted += 1
        guard let again = try? JSON.parse(v.encoded), again == v else { fail("JSON round trip of \(JSON.string(text).encoded) → \(v.encoded)") }
    }
} else if target == "status" {
    // Names as a file system or a client could give them: any bytes, biased to controls.
    let corpus: [[UInt8]] = [Array("pop".utf8), [0x7F], Array("a\u{1B}[31mb".utf8), [0xC2, 0x85], Array("\u{2028}\"\\/".utf8)]
    func name() -> String {
        var b = mutate(corpus[rng.below(corpus.count)], corpus, &rng)
        for _ in 0..<rng.below(3) { b.insert(UInt8(rng.below(0x21)) | (rng.below(2) == 0 ? 0 : 0x60), at: rng.below(b.count + 1)) }
        return String(decoding: b.prefix(300), as: UTF8.self)
    }
    for _ in 0..<n {
        var s = Status()
        for _ in 0..<rng.below(4) { s.cues[name()] = Status.Cue(frames: rng.below(1000)) }
        for _ in 0..<rng.below(4) { s.apps[name()] = Status.App(played: rng.below(9)) }
        s.config = name()
        s.sink.error = name()
        let line = Reply.ok(s.json.encoded).line
        guard line.hasPrefix("ok "), let back = Status.parse(String(line.dropFirst(3))) else { fail("status is not JSON: \(line)") }
        if back.cues.keys.sorted() != s.cues.keys.sorted() || back.apps.keys.sorted() != s.apps.keys.sorted()
            || back.config != s.config || back.sink.error != s.sink.error {
            fail("status names changed on the way: \(line)")
        }
        accepted += 1
    }
} else {
    // cued's own TOML parser runs in-process: a crash here is a bug in it.
    let corpus = configSeeds.map { Array($0.utf8) }
    for _ in 0..<n {
        let input = mutate(corpus[rng.below(corpus.count)], corpus, &rng)
        do {
            _ = try ConfigLoader.parse(String(decoding: input, as: UTF8.self), file: "/fuzz/cued.toml", home: "/home/fuzz")
            accepted += 1
        } catch {
            if error.issues.isEmpty { fail("no issue for a rejected config") }
            for issue in error.issues where issue.file != "/fuzz/cued.toml" || issue.message.isEmpty || issue.line == nil {
                fail("issue without a place: \(issue)")
            }
        }
    }
}
var endTime = timespec(); clock_gettime(CLOCK_MONOTONIC, &endTime)
let seconds = Double(endTime.tv_sec - startTime.tv_sec) + Double(endTime.tv_nsec - startTime.tv_nsec) / 1e9
print("cuedfuzz \(target): \(n) inputs, \(accepted) accepted, \(n - accepted) rejected, every property held, \(Int(seconds.rounded())) s (seed \(seed))")
