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
    "unmute app mutt", "app dashboard", "reload", "cues", "status",
]
let configSeeds = [
    "sink = \"alsa:default\"\nlatency_ms = 10\nvoices = 16\nidle_close_s = 30\nmaster_gain_db = -3\nmuted = false\n",
    "sounds = [\"/a\", \"rel\", \"~/s\"]\n[cues.pop]\ngain_db = -2\nfile = \"pop.wav\"\n",
    "[transitions]\n\"release->pull\" = \"\"\n\"idle->pull\" = \"pop\"\n",
    "[apps.mutt]\nmuted = true\ngain_db = -6\n[apps.\"x.y\"]\nmuted = false\n",
    "cues.pop.gain_db = 1\napps.a.muted = true\n",
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
            // Every accepted request re-encodes to a line that parses back to itself.
            guard let again = try? RequestParser.parse(r.line), again == r else { fail("round trip of \(input) → \(r.line)") }
            if current.count < 512 { current.append(input) } else { current[i % 512] = input }
        } catch {
            // Every rejection is one reply line: no newline in it, a known code.
            if error.reply.line.contains("\n") { fail("reply with a newline for \(input)") }
        }
    }
} else {
    // toml++ aborts on some inputs (cued contains that with ConfigGuard). The inputs
    // are parsed in a forked worker that reports one byte per input ('A'ccepted,
    // 'R'ejected); when it dies, the input it was on counts as a library abort, the
    // RNG is replayed past it and a new worker goes on from the next one.
    let corpus = configSeeds.map { Array($0.utf8) }
    var aborted = 0
    var next = 0
    while next < n {
        var fds: [Int32] = [0, 0]
        _ = pipe(&fds)
        let pid = fork()
        if pid == 0 {
            close(fds[0])
            // A library abort ends the worker at once (no runtime backtrace, and the
            // library's assertion message stays off the report): exit 86.
            signal(SIGABRT) { _ in _exit(86) }
            let devnull = open("/dev/null", O_WRONLY)
            if devnull >= 0 { dup2(devnull, 2) }
            var r = rng
            for _ in next..<n {
                let input = mutate(corpus[r.below(corpus.count)], corpus, &r)
                var mark = UInt8(ascii: "A")
                do {
                    _ = try ConfigLoader.parse(String(decoding: input, as: UTF8.self), file: "/fuzz/cued.toml")
                } catch {
                    mark = UInt8(ascii: "R")
                    if error.issues.isEmpty { fail("no issue for a rejected config") }
                    for issue in error.issues where issue.file != "/fuzz/cued.toml" || issue.message.isEmpty { fail("issue without a place: \(issue)") }
                }
                _ = write(fds[1], &mark, 1)
            }
            _exit(0)
        }
        close(fds[1])
        var buf = [UInt8](repeating: 0, count: 65536)
        var done = 0
        while true {
            let got = read(fds[0], &buf, buf.count)
            if got <= 0 { break }
            for b in buf[0..<got] where b == UInt8(ascii: "A") { accepted += 1 }
            done += got
        }
        close(fds[0])
        var st: Int32 = 0
        waitpid(pid, &st, 0)
        let code = (st >> 8) & 0xFF, killed = (st & 0x7F) != 0 || code == 86
        if !killed && code != 0 { exit(1) }  // a property failed in the worker
        // Advance our RNG past the inputs the worker handled (and the one it died on).
        let handled = killed ? done + 1 : n - next
        var crashing: [UInt8] = []
        for _ in 0..<handled { crashing = mutate(corpus[rng.below(corpus.count)], corpus, &rng) }
        if killed {
            aborted += 1
            if let save = getenv("CUEDFUZZ_SAVE"), aborted <= 5 {
                let f = fopen(String(cString: save) + ".\(aborted)", "wb")
                _ = crashing.withUnsafeBufferPointer { fwrite($0.baseAddress, 1, $0.count, f) }
                fclose(f)
            }
        }
        next += handled
    }
    print("cuedfuzz config: \(aborted) inputs made the TOML library abort (contained in cued by ConfigGuard)")
}
var endTime = timespec(); clock_gettime(CLOCK_MONOTONIC, &endTime)
let seconds = Double(endTime.tv_sec - startTime.tv_sec) + Double(endTime.tv_nsec - startTime.tv_nsec) / 1e9
print("cuedfuzz \(target): \(n) inputs, \(accepted) accepted, \(n - accepted) rejected, every property held, \(Int(seconds.rounded())) s (seed \(seed))")
