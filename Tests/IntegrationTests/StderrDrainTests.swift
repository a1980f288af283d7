import CuedClient
import CuedProtocol
import Foundation
import Testing
import TestSupport

/// Issue 19, problem 3: descriptor 2 belongs to cued. libmpg123 (through
/// libsndfile) writes a line per damaged frame straight to fd 2 from the
/// decoding thread; with stderr a pipe nobody read, that thread blocked for
/// good and every later `play-file`, `reload` and state save waited behind it.
@Suite(.timeLimit(.minutes(2)))
struct StderrDrainTests {
    /// An MPEG-1 layer III stream whose frames are valid headers and random
    /// bodies: libsndfile opens it, mpg123 prints errors such as "big_values
    /// too large!" for most frames (a few hundred lines, tens of KB, per decode).
    static func damagedMP3(seed: UInt64, frames: Int = 200) -> [UInt8] {
        var s = seed &+ 0x9E37_79B9_7F4A_7C15
        var out: [UInt8] = []
        out.reserveCapacity(frames * 417)
        for _ in 0..<frames {
            out += [0xFF, 0xFB, 0x90, 0xC4]  // MPEG-1 layer III, 128 kbit/s, 44.1 kHz, mono: 417-byte frames
            for _ in 0..<413 {
                s = s &* 6364136223846793005 &+ 1442695040888963407
                out.append(UInt8(truncatingIfNeeded: s >> 56))
            }
        }
        return out
    }

    static func writeDamagedMP3s(in dir: TempDir, count: Int) throws -> [String] {
        try (0..<count).map { i in
            let path = dir.file("damaged\(i).mp3")
            try Data(damagedMP3(seed: UInt64(i))).write(to: URL(fileURLWithPath: path))
            return path
        }
    }

    /// Fills the pipe behind `fifo` (its reader open, never reading) until a write would block.
    static func fill(_ fifo: String) -> Int {
        let w = open(fifo, O_WRONLY | O_NONBLOCK)
        guard w >= 0 else { return 0 }
        defer { close(w) }
        let chunk = [UInt8](repeating: 0x2E, count: 4096)
        var total = 0
        while true {
            let n = chunk.withUnsafeBytes { write(w, $0.baseAddress, $0.count) }
            if n <= 0 { return total }
            total += n
        }
    }

    @Test func aStderrPipeNobodyReadsBlocksNoRequest() throws {
        let dir = TempDir()
        let fifo = dir.file("stderr")
        #expect(mkfifo(fifo, 0o600) == 0)
        let reader = open(fifo, O_RDONLY | O_NONBLOCK)  // held open, never read: the pipe fills
        try #require(reader >= 0)
        defer { close(reader) }
        let d = try DaemonHarness(args: ["--sink", "null", "--rate-limit", "0"], stderrPath: fifo)
        let filled = Self.fill(fifo)
        #expect(filled > 0, "the pipe could be written to")
        // Full now: every write to the original stderr would block from here on.
        let files = try Self.writeDamagedMP3s(in: dir, count: 12)
        let c = try d.client()
        // 12 distinct damaged files, twice over (each a new decode; about a hundred KB of
        // mpg123's lines in all, past the full pipe: its first line would block a decoder).
        for round in 0..<2 {
            for path in files {
                let reply = try c.request("play-file \(FilePath.encode(path))")
                #expect(reply == "ok" || reply.hasPrefix("err bad-file"), "round \(round): \(reply)")
                #expect(try d.request("ping") == "ok pong")
            }
            // Fresh copies (new inodes): decoded again, not taken from the cache.
            for (i, path) in files.enumerated() {
                unlink(path)
                try Data(Self.damagedMP3(seed: UInt64(100 * (round + 1) + i))).write(to: URL(fileURLWithPath: path))
            }
        }
        #expect(try c.request("play pop") == "ok")
        #expect(try c.request("reload") == "ok reloaded")
        #expect(try c.request("mute") == "ok muted")
        #expect(eventually { (try? String(contentsOfFile: d.dir.file("state/cued/state"), encoding: .utf8))?.contains("muted=true") == true })
        #expect(try d.status().stateSaved)
        #expect(d.stop() == 0)
    }

    /// Someone reads stderr: the libraries' lines are in cued's log, as cued's
    /// own lines are, at most 20 a second, and the rest are counted in one line.
    @Test func libraryLinesReachTheLogRateLimited() throws {
        let dir = TempDir()
        let d = try DaemonHarness(args: ["--sink", "null", "--rate-limit", "0"])
        let path = try Self.writeDamagedMP3s(in: dir, count: 1)[0]
        let reply = try d.request("play-file \(FilePath.encode(path))")
        #expect(reply == "ok" || reply.hasPrefix("err bad-file"), "\(reply)")
        #expect(eventually { d.readStderr().contains("suppressed; at most 20 a second are logged") })
        let log = d.readStderr()
        let lines = log.split(separator: "\n")
        #expect(lines.contains { $0.contains("info cued: cued ") && $0.contains("listening") }, "cued's own lines are there too")
        let library = lines.filter { $0.contains("warning cued: stderr: [src/libmpg123/") }
        #expect(!library.isEmpty)
        // Each suppressed line counts what a full second dropped: lines logged
        // plus lines counted are at least a full second's 20 + 1.
        let counted = lines.compactMap { line -> Int? in
            guard let r = line.range(of: "stderr: "), line.contains(" more lines written by C libraries") else { return nil }
            return Int(line[r.upperBound...].prefix { $0.isNumber })
        }
        #expect(!counted.isEmpty && counted.allSatisfy { $0 > 0 })
        #expect(library.count >= 20)
        #expect(try d.request("ping") == "ok pong")
    }

    /// A fatal signal still ends cued by that signal: the handler that copies
    /// what is left in the pipe to the original stderr (a dying process's last
    /// words) hands the signal on. Whether a given line comes out through that
    /// copy or through the drain and the log writer depends on which thread got
    /// to it first, so the line is reported, not asserted. The Swift runtime's
    /// backtracer is off here: in a debug build with the toolchain installed it
    /// hangs on a SIGSEGV sent by kill, with or without the drain.
    @Test(arguments: [SIGSEGV, SIGABRT, SIGBUS])
    func aFatalSignalStillKills(_ sig: Int32) throws {
        let d = try DaemonHarness(args: ["--sink", "null"], extraEnv: ["SWIFT_BACKTRACE": "enable=no"])
        let fd = open("/proc/\(d.pid)/fd/2", O_WRONLY)  // the pipe's write end, as a library in cued holds it
        try #require(fd >= 0)
        let line = "Fatal error: last words before signal \(sig)\n"
        #expect(line.withCString { write(fd, $0, strlen($0)) } == line.utf8.count)
        close(fd)
        d.process.signal(sig)
        #expect(d.waitForExit(timeout: 10) == 128 + sig)
        print("signal \(sig): the line written just before it is on stderr: \(d.readStderr().contains("last words before signal \(sig)"))")
    }
}
