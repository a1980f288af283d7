import CuedClient
import CuedProtocol
import Foundation
import Testing
import TestSupport

/// Issue 19, problem 4: the decoded-sound cache is bounded in entries as well
/// as bytes. A file whose mtime changes is a new file to the cache, so playing
/// one 1-frame file over and over with a new mtime each time made a new entry
/// each time (1 M plays: 1,000,007 entries, RSS 12 → 481 MB, and a reload then
/// held the event loop 4.3 s).
@Suite(.timeLimit(.minutes(3)))
struct CacheBoundTests {
    /// SoundCache.defaultLimitEntries (IntegrationTests does not link CuedCore).
    static let entryCap = 4_096

    static func rssKiB(_ pid: pid_t) -> Int {
        let text = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        for line in text.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]) ?? 0
        }
        return 0
    }

    @Test func playedFilesAreCappedInEntriesAndAReloadAnswers() throws {
        let d = try DaemonHarness(args: ["--sink", "null", "--rate-limit", "0"])
        let path = d.dir.file("one-frame.wav")
        try WAV.write(path, int16: [1000], sampleRate: 48_000, channels: 1)
        let c = try d.client()
        let request = "play-file \(FilePath.encode(path))"
        #expect(try c.request(request) == "ok")
        let rssBefore = Self.rssKiB(d.pid)
        let plays = Self.entryCap + 1_000
        var most = 0
        for i in 1...plays {
            // A new mtime each time: a new identity, a new decode, a new entry.
            var times = [timespec(tv_sec: 1_000_000 + i, tv_nsec: 0), timespec(tv_sec: 1_000_000 + i, tv_nsec: 0)]
            #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
            let reply = try c.request(request)
            if reply != "ok" { Issue.record("play \(i): \(reply)"); break }
            if i % 500 == 0 { most = max(most, try d.status().theme.cached) }
        }
        let status = try d.status()
        #expect(status.theme.cached == Self.entryCap, "every play is a distinct file: the cache is full, never over")
        #expect(most <= Self.entryCap)
        #expect(status.theme.cacheBytes <= status.theme.cacheLimitBytes)
        let rssAfter = Self.rssKiB(d.pid)
        // About 500 bytes an entry: a few MB at the cap (it grew without bound before).
        #expect(rssAfter - rssBefore < 32 * 1024, "RSS \(rssBefore) → \(rssAfter) KiB")
        let started = Date()
        #expect(try c.request("reload") == "ok reloaded")
        let took = Date().timeIntervalSince(started)
        #expect(try d.request("ping") == "ok pong")
        #expect(try d.status().theme.cached == Self.entryCap, "files stay cached across a reload")
        print("CacheBoundTests: \(plays) plays, \(status.theme.cached) cached, RSS \(rssBefore) → \(rssAfter) KiB, reload answered in \(Int(took * 1000)) ms")
        #expect(d.stop() == 0)
    }
}
