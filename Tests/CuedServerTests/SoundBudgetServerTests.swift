import CuedAudio
import CuedConfig
import CuedCore
@testable import CuedServer
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The budget where the server meets it: the sound cache gives up first, a reload that
/// does not fit beside the old cues fails whole and keeps the old limit.
@Suite struct SoundBudgetServerTests {
    let dir: String = {
        let d = "/tmp/cued-budget-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        mkdir(d, 0o700)
        return d
    }()
    static let noTheme = SoundTheme(environment: ["HOME": "/nonexistent-cued-test", "XDG_DATA_HOME": "/nonexistent-cued-test",
                                                  "XDG_DATA_DIRS": "/nonexistent-cued-test"])

    /// Stereo by default: 384 KB decoded a second (a mono file stays mono: half that).
    func wav(_ name: String, seconds: Double, channels: Int = 2) throws -> String {
        let path = dir + "/" + name
        try writeWAV(path, channels: channels, rate: 48_000, frames: Int(seconds * 48_000))
        return path
    }

    func cleanUp() {
        if let d = opendir(dir) {
            while let e = readdir(d) {
                let name = withUnsafeBytes(of: e.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
                if name != "." && name != ".." { unlink(dir + "/" + name) }
            }
            closedir(d)
        }
        rmdir(dir)
    }

    /// A decode that does not fit makes the cache give up its least recently used sounds
    /// first; with nothing left to give up (a voice holds the rest), it is refused with why.
    @Test func theCacheGivesUpFirstThenASoundIsRefused() throws {
        defer { cleanUp() }
        let budget = SoundBudget(limitBytes: 3 << 20)
        let library = SoundLibrary(theme: Self.noTheme, cacheLimitBytes: 16 << 20, budget: budget)
        let small = try (0..<4).map { try wav("s\($0).wav", seconds: 1) }  // 385 KB decoded each
        for path in small { guard case .cue = library.file(path) else { Issue.record("\(path) not decoded"); return } }
        #expect(library.status().cached == 4)
        // 4 s: 1.5 MB decoded, more than is left: the two oldest go, the newest stay.
        let big = try wav("big.wav", seconds: 4)
        guard case .cue(let playing) = library.file(big) else { Issue.record("not decoded"); return }
        #expect(library.status().cached < 5)
        // The most recent is still cached: served without a new decode.
        let before = budget.used
        if case .done(.cue) = library.fileExpress(small[3]) {} else { Issue.record("not served") }
        #expect(budget.used == before, "the most recent was given up")
        // A voice holds the big one: evicting it gives nothing back. Another of 4 s does not fit.
        let other = try wav("other.wav", seconds: 4)
        guard case .failed(let reply) = library.file(other) else { Issue.record("decoded over the budget"); return }
        #expect("\(reply)".contains("over the memory budget for decoded sound"), "\(reply)")
        #expect("\(reply)".contains("sound_budget_mb"), "\(reply)")
        #expect(budget.refused >= 1 && budget.used <= budget.limit)
        withExtendedLifetime(playing) {}
    }

    /// The budget counts a sound as decoded: a mono file kept mono costs half its stereo copy,
    /// in whole pages, and the cache's bytes say so too.
    @Test func aMonoSoundCostsHalfItsStereoCopy() throws {
        defer { cleanUp() }
        let budget = SoundBudget(limitBytes: 64 << 20)
        let library = SoundLibrary(theme: Self.noTheme, cacheLimitBytes: 16 << 20, budget: budget)
        var cost: [Int] = []
        for channels in [1, 2] {
            let before = budget.used, cachedBefore = library.status().cacheBytes
            guard case .cue(let cue) = library.file(try wav("c\(channels).wav", seconds: 1, channels: channels)) else {
                Issue.record("not decoded"); return
            }
            #expect(cue.channels == channels && cue.frames == 48_000)
            #expect(library.status().cacheBytes - cachedBefore == budget.used - before)
            cost.append(budget.used - before)
        }
        let page = SampleMemory.pageSize
        #expect(cost[0] == (48_000 * 4 + page - 1) / page * page && cost[1] == 2 * cost[0], "mono \(cost[0]) B, stereo \(cost[1]) B")
    }

    func settings(budgetMB: Int, sounds: String) -> Settings {
        var s = Settings()
        s.sounds = [sounds]
        s.soundBudgetBytes = budgetMB << 20
        return s
    }

    func required() throws -> String {
        let d = dir + "/req"
        mkdir(d, 0o700)
        for n in ["psst1", "psst2", "pop"] { try writeWAV(d + "/" + n + ".wav", channels: 1, rate: 48_000, frames: 480) }
        return d
    }

    /// A reload's new cues are charged beside the old ones: one that does not fit fails whole
    /// and the old limit stays; the new config's budget applies to its own reload.
    @Test func aReloadThatDoesNotFitBesideTheOldCuesFailsWhole() throws {
        defer {
            for n in ["psst1", "psst2", "pop"] { unlink(dir + "/req/" + n + ".wav") }
            rmdir(dir + "/req")
            cleanUp()
        }
        let req = try required()
        let budget = SoundBudget()
        var config = Config()
        config.cues["long"] = CueSetting(file: try wav("long1.wav", seconds: 10))  // 3.84 MB
        let env = ["HOME": "/nonexistent-cued-test", "XDG_DATA_DIRS": "/nonexistent-cued-test"]
        let (old, _) = try RuntimeLoader.load(config: config, settings: settings(budgetMB: 6, sounds: req), environment: env,
                                              budget: budget)
        #expect(budget.limit == 6 << 20 && old.bank.bytes < 4 << 20)
        // Unchanged: the old samples are taken as they are, nothing more is charged.
        let used = budget.used
        let (same, _) = try RuntimeLoader.load(config: config, settings: settings(budgetMB: 6, sounds: req), environment: env,
                                               budget: budget, reuse: old.sounds)
        #expect(budget.used == used && same.bank["long"]!.sound === old.bank["long"]!.sound)
        // Another 10 s file: 7.7 MB beside the old one, over 6 MiB.
        config.cues["long"] = CueSetting(file: try wav("long2.wav", seconds: 10))
        do {
            _ = try RuntimeLoader.load(config: config, settings: settings(budgetMB: 5, sounds: req), environment: env,
                                       budget: budget, reuse: old.sounds)
            Issue.record("loaded over the budget")
        } catch {
            #expect(error.description.contains("long2.wav") && error.description.contains("over the memory budget"), "\(error)")
        }
        #expect(budget.limit == 6 << 20 && budget.used == used)  // the old limit is back, nothing is left charged
        // A config that raises the budget makes room for its own reload.
        let (new, _) = try RuntimeLoader.load(config: config, settings: settings(budgetMB: 16, sounds: req), environment: env,
                                              budget: budget, reuse: old.sounds)
        #expect(budget.limit == 16 << 20 && new.bank["long"]!.frames == 480_000)
        withExtendedLifetime((old, same)) {}
    }
}
