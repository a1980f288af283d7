@testable import CuedCore
import Testing

@Suite struct SoundCacheTests {
    /// What the cache counts a sound as: its memory, in whole pages.
    static let page = SampleMemory.pageSize
    let P = SoundCacheTests.page
    /// A cue that takes `pages` pages (8 bytes a stereo frame; at least one page).
    func cue(_ name: String, pages: Int) -> Cue {
        Cue(name: name, stereo: [Float](repeating: 0.5, count: max(1, pages * SoundCacheTests.page / 8) * 2))
    }

    @Test func evictsTheLeastRecentlyUsedToFit() {
        var c = SoundCache<String>(limitBytes: 3 * P)
        let kept1 = c.insert(cue("a", pages: 1), for: "a")
        #expect(kept1)
        let kept2 = c.insert(cue("b", pages: 1), for: "b")
        #expect(kept2)
        let kept3 = c.insert(cue("c", pages: 1), for: "c")
        #expect(kept3)
        #expect(c.count == 3 && c.bytes == 3 * P)
        let a = c.get("a")                        // a is now the most recent
        #expect(a?.name == "a")
        #expect(c.keys == ["a", "c", "b"])
        let kept4 = c.insert(cue("d", pages: 2), for: "d")
        #expect(kept4)   // b, then c, make room
        #expect(c.keys == ["d", "a"])
        #expect(c.bytes == 3 * P)
        let b = c.get("b"), cc = c.get("c")
        #expect(b == nil && cc == nil)
    }

    @Test func peekLeavesTheOrder() {
        var c = SoundCache<Int>(limitBytes: 2 * P)
        c.insert(cue("1", pages: 1), for: 1)
        c.insert(cue("2", pages: 1), for: 2)
        #expect(c.peek(1)?.name == "1")
        #expect(c.keys == [2, 1])
        #expect(c.contains(2) && !c.contains(3))
    }

    @Test func aCueLargerThanTheLimitIsNotKeptAndEvictsNothing() {
        var c = SoundCache<String>(limitBytes: 2 * P)
        c.insert(cue("a", pages: 1), for: "a")
        let kept5 = c.insert(cue("big", pages: 3), for: "big")
        #expect(!kept5)
        #expect(c.keys == ["a"] && c.bytes == P)
        let kept6 = c.insert(cue("exact", pages: 2), for: "exact")
        #expect(kept6)  // exactly the limit fits, alone
        #expect(c.keys == ["exact"] && c.bytes == 2 * P)
    }

    @Test func replacingAKeyCountsItsBytesOnce() {
        var c = SoundCache<String>(limitBytes: 10 * P)
        c.insert(cue("a", pages: 1), for: "a")
        c.insert(cue("a2", pages: 2), for: "a")
        let a2 = c.get("a")
        #expect(c.count == 1 && c.bytes == 2 * P && a2?.name == "a2")
        c.remove("a")
        c.remove("missing")
        #expect(c.count == 0 && c.bytes == 0 && c.keys.isEmpty)
        c.insert(cue("x", pages: 0), for: "x")
        c.insert(cue("y", pages: 0), for: "y")
        c.removeAll()
        #expect(c.count == 0 && c.bytes == 0 && c.keys.isEmpty)
        c.insert(cue("z", pages: 0), for: "z")
        #expect(c.keys == ["z"])
    }

    @Test func evictedCuesStayAliveWhilePlaying() {
        var c = SoundCache<String>(limitBytes: P)
        let playing = cue("a", pages: 1)
        c.insert(playing, for: "a")
        c.insert(cue("b", pages: 1), for: "b")   // evicts a
        #expect(c.peek("a") == nil)
        #expect(playing.samples.allSatisfy { $0 == 0.5 })   // the voice's reference keeps the samples
    }

    /// Many keys, random use: the list and the byte count stay consistent.
    @Test func staysConsistentUnderChurn() {
        var c = SoundCache<Int>(limitBytes: 10 * P)
        var rng = SystemRandomNumberGenerator()
        var model: [Int] = []  // most recent first
        for step in 0..<5_000 {
            let k = Int.random(in: 0..<40, using: &rng)
            if step % 3 == 0 {
                c.insert(cue("\(k)", pages: 1), for: k)
                model.removeAll { $0 == k }
                model.insert(k, at: 0)
                if model.count > 10 { model.removeLast(model.count - 10) }
            } else if c.get(k) != nil {
                model.removeAll { $0 == k }
                model.insert(k, at: 0)
            }
            #expect(c.keys == model)
            #expect(c.bytes == c.count * P)
            if c.keys != model { break }
        }
    }

    @Test func entriesAreCappedLeastRecentlyUsedFirst() {
        var c = SoundCache<Int>(limitBytes: 1 << 20, limitEntries: 4)
        for k in 0..<10 { c.insert(cue("\(k)", pages: 0), for: k) }
        #expect(c.count == 4 && c.keys == [9, 8, 7, 6] && c.bytes == 4 * P)
        _ = c.get(6)                                  // 6 is now the most recent: 7 goes next
        c.insert(cue("10", pages: 0), for: 10)
        #expect(c.keys == [10, 6, 9, 8])
        c.insert(cue("9b", pages: 0), for: 9)        // replacing a key evicts nothing
        #expect(c.keys == [9, 10, 6, 8] && c.count == 4)
        #expect(SoundCache<Int>().limitEntries == 4_096)
    }

    @Test func newLimitsEvictOnlyWhatNoLongerFits() {
        var c = SoundCache<Int>(limitBytes: 8 * P, limitEntries: 8)
        for k in 0..<8 { c.insert(cue("\(k)", pages: 1), for: k) }   // a page each, 8 in all
        c.setLimits(bytes: 8 * P, entries: 8)
        #expect(c.count == 8)
        c.setLimits(bytes: 8 * P, entries: 5)
        #expect(c.keys == [7, 6, 5, 4, 3])
        c.setLimits(bytes: 2 * P, entries: 5)         // two pages: two entries
        #expect(c.keys == [7, 6] && c.bytes == 2 * P)
        c.setLimits(bytes: 1 << 20, entries: 100)
        #expect(c.keys == [7, 6])
        for k in 100..<200 { c.insert(cue("\(k)", pages: 0), for: k) }
        #expect(c.count == 100 && c.limitEntries == 100 && c.limitBytes == 1 << 20)
    }
}
