// cuedfuzz: a seeded, mutational random-input driver for cued's two parsers
// (the protocol line parser and the config file parser). Deterministic for a
// seed, so a crash is reproducible. A crash ends the process (that is the
// finding); properties that must hold for every input are checked too.
//
//   cuedfuzz protocol|config [-n INPUTS] [--seed S]
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
]
let configSeeds = [
    "sink = \"alsa:default\"\nlatency_ms = 10\nvoices = 16\nidle_close_s = 30\nmaster_gain_db = -3\nmuted = false\n",
    "sounds = [\"/a\", \"rel\", \"~/s\"]\n[cues.pop]\ngain_db = -2\nfile = \"pop.wav\"\n",
    "[transitions]\n\"release->pull\" = \"\"\n\"idle->pull\" = \"pop\"\n",
    "[apps.mutt]\nmuted = true\ngain_db = -6\n[apps.\"x.y\"]\nmuted = false\n",
    "cues.pop.gain_db = 1\napps.a.muted = true\n",
    "theme = \"ocean\"\ntheme_cache_mb = 8\n[stream]\n\"media.role\" = \"event\"\n",
    "a = { b = 1, c.d = [1, 2.5, 'x', \"\"\"y\"\"\", 1979-05-27T07:32:00Z] }\n[[t]]\nx = 0x1F\n[[t]]\ny = \'\'\'z\'\'\'\n",
]
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

func fail(_ message: String) -> Never {
    let line = "cuedfuzz: PROPERTY VIOLATED: \(message)\n"
    _ = line.withCString { write(2, $0, strlen($0)) }
    exit(1)
}

var args = CommandLine.arguments.dropFirst()
guard let target = args.popFirst(), target == "protocol" || target == "config" else {
    print("usage: cuedfuzz protocol|config [-n INPUTS] [--seed S]")
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
