import CuedClient
import CuedProtocol
import Foundation
import Testing
import TestSupport

/// Issue 29, problem 2: one memory budget for decoded sound, against the real daemon.
/// Before it, 4,000 distinct files played left cued 1.5 GB larger while `status` said its
/// cache held 16.5 MB, and 300 cues naming one 10 s file held 1.1 GB (2.2 after a reload).
@Suite(.timeLimit(.minutes(2)))
struct MemoryBudgetTests {
    static func rssKiB(_ pid: pid_t) -> Int {
        let text = (try? String(contentsOfFile: "/proc/\(pid)/smaps_rollup", encoding: .utf8)) ?? ""
        for line in text.split(separator: "\n") where line.hasPrefix("Rss:") {
            return Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]) ?? 0
        }
        return 0
    }

    /// Distinct 1 s files, one per second's worth of noise (distinct samples: distinct files).
    static func files(in dir: String, count: Int, seconds: Double = 1, channels: Int = 1) throws -> [String] {
        try (0..<count).map { i in
            let path = dir + "/f\(i).wav"
            try WAV.write(path, int16: Fixture.samples(seed: UInt64(i + 100), frames: Int(seconds * 48_000) * channels),
                          sampleRate: 48_000, channels: channels)
            return path
        }
    }

    /// Played files give their memory back: once the voices have ended, RSS is back within a
    /// few MiB of idle plus what the cache keeps (`status`), whatever the number played.
    @Test func playedFilesGiveTheirMemoryBack() throws {
        let d = try DaemonHarness(args: ["--sink", "null", "--rate-limit", "0"])
        let paths = try Self.files(in: d.dir.path, count: 201)
        let c = try d.client()
        #expect(try c.request("play-file \(FilePath.encode(paths[200]))") == "ok")  // the decoder's first allocations
        // Played out, and what only its voice held given back.
        #expect(try d.quiet())
        #expect(eventually { (try? d.status().memory.playingBytes) == 0 })
        let idle = Self.rssKiB(d.pid)
        for p in paths.prefix(200) {
            let r = try c.request("play-file \(FilePath.encode(p))")
            if r != "ok" { Issue.record("\(r)"); break }
        }
        #expect(eventually(timeout: 5) { (try? d.status().voicesActive) == 0 })
        #expect(eventually { (try? d.status().memory.playingBytes) == 0 })  // what only the voices held, given back
        let after = Self.rssKiB(d.pid)
        let m = try d.status().memory
        #expect(m.limitBytes == 64 << 20 && m.usedBytes <= m.limitBytes && m.cacheBytes <= 16 << 20)
        #expect(m.usedBytes == m.cuesBytes + m.cacheBytes + m.playingBytes + m.decodingBytes)
        // 200 × 192 KB (mono, kept mono) = 38 MB went through; the cache keeps 16 MiB of it.
        #expect(after - idle <= m.usedBytes / 1024 + 8 * 1024, "RSS idle \(idle) KiB → \(after) KiB; \(m)")
        print("MemoryBudgetTests: RSS idle \(idle) KiB, after 200 distinct 1 s files \(after) KiB; budget used \(m.usedBytes / 1024) KiB")
        #expect(d.stop() == 0)
    }

    /// 200 cues naming one 1 s file: decoded once (RSS grows by one file, not 200).
    @Test func aFileNamedByManyCuesIsDecodedOnce() throws {
        let plain = try DaemonHarness(args: ["--sink", "null"])
        _ = try plain.status()
        let idle = Self.rssKiB(plain.pid)
        plain.stop()
        let dir = TempDir()
        let one = try Self.files(in: dir.path, count: 1)[0]
        let config = (0..<200).map { "[cues.c\($0)]\nfile = \"\(one)\"\n" }.joined()
        let d = try DaemonHarness(args: ["--sink", "null"], config: config)
        #expect(try d.request("play c150") == "ok")
        let m = try d.status().memory
        // One decode: 192 KB (mono, kept mono) in whole pages, beside the three fixture cues.
        #expect(m.cuesBytes > 192_000 && m.cuesBytes < 192_000 + 200_000, "\(m)")
        let rss = Self.rssKiB(d.pid)
        #expect(rss - idle < 8 * 1024, "RSS of a plain cued \(idle) KiB, with 200 cues of one file \(rss) KiB")
        #expect(d.stop() == 0)
    }

    /// Past the budget: a sound is refused naming the budget and how to raise it (the cache
    /// gave up first), a reload that does not fit fails whole and the old cues play on, and
    /// a config that raises the budget makes room for its own reload.
    @Test func pastTheBudgetSoundsAndReloadsAreRefusedWithHowToRaiseIt() throws {
        let d = try DaemonHarness(args: ["--sink", "null"], config: "sound_budget_mb = 2\n")
        let big = try Self.files(in: d.dir.path, count: 1, seconds: 6, channels: 2)[0]  // 2.3 MB decoded
        let refused = try d.request("play-file \(FilePath.encode(big))")
        #expect(refused.hasPrefix("err bad-file over-budget \(big): over the memory budget for decoded sound: it needs 2.2 MiB"), "\(refused)")
        #expect(refused.contains("raise sound_budget_mb in cued.toml or cued's --sound-budget-mb"), "\(refused)")
        try d.writeConfig("sound_budget_mb = 2\n[cues.big]\nfile = \"\(big)\"\n")
        let reload = try d.request("reload")
        #expect(reload.hasPrefix("err reload-failed \(big): cue 'big': over the memory budget"), "\(reload)")
        #expect(try d.request("play pop") == "ok")
        #expect(try d.request("play big").hasPrefix("err unknown-cue"))
        var m = try d.status().memory
        #expect(m.limitBytes == 2 << 20 && m.refused == 2 && m.usedBytes <= m.limitBytes, "\(m)")
        let table = try runProcess(TestPaths.binary("cuectl"), ["--socket", d.socketPath, "status"], timeout: 10)
        #expect(table.out.contains("memory ") && table.out.contains("2 refused"), "\(table.out)")
        try d.writeConfig("sound_budget_mb = 8\n[cues.big]\nfile = \"\(big)\"\n")
        #expect(try d.request("reload") == "ok reloaded")
        #expect(try d.request("play big") == "ok")
        m = try d.status().memory
        #expect(m.limitBytes == 8 << 20 && m.cuesBytes > 2_300_000, "\(m)")
        #expect(d.stop() == 0)
    }
}
