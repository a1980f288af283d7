import CuedCore
import Testing

/// The margin against stalls on a fake clock: it starts small, grows after a miss by as
/// much as covers it, stops at its limit, and shrinks a step after a quiet while (longer
/// each time a shrink proved early).
@Suite struct MarginTunerTests {
    let s: UInt64 = 1_000_000_000
    let t0: UInt64 = 1_000 * 1_000_000_000

    @Test func aRingsMarginGrowsAPeriodAMissUpToItsLimit() {
        var t = MarginTuner(.frames(start: 120, step: 240, limit: 600))
        #expect(t.frames == 120 && t.level == 0)
        let r1 = t.missed(now: t0)
        #expect(r1)
        #expect(t.frames == 360 && t.growths == 1)
        let r2 = t.missed(now: t0 + s)
        #expect(r2)
        #expect(t.frames == 600 && t.growths == 2)  // 600 is the limit (not 120 + 2 × 240)
        let r3 = t.missed(now: t0 + 2 * s)
        #expect(!r3)        // at the top: a miss is counted, nothing grows
        #expect(t.misses == 3 && t.growths == 2 && t.frames == 600)
    }

    /// The native stream's cycle doubles; a miss grows it at once by as many doublings as
    /// cover twice the stall it saw: neither the same stall nor a longer next one misses again.
    @Test func aQuantumDoublesAndALongMissGrowsEnoughAtOnce() {
        var t = MarginTuner(.quantum(start: 128, limit: 1_024))
        let r4 = t.missed(cycles: 1, now: t0)
        #expect(r4)
        #expect(t.frames == 512)                     // late by up to 2 cycles of 128 (256): twice that
        var u = MarginTuner(.quantum(start: 128, limit: 4_096))
        let r5 = u.missed(cycles: 3, now: t0)
        #expect(r5)
        #expect(u.frames == 1_024 && u.growths == 1) // late by up to 4 × 128: twice that
        let r6 = u.missed(cycles: 10, now: t0 + s)
        #expect(r6)
        #expect(u.frames == 4_096 && u.maxLevel == 5) // the limit
        let r7 = u.missed(cycles: 1, now: t0 + 2 * s)
        #expect(!r7 && u.misses == 3 && u.growths == 2) // at the top: counted, nothing grows
    }

    /// One stall is found a look at a time (and at the longer cycle once it grew): misses within
    /// a tenth of a second are one, counted once, grown to cover all it missed.
    @Test func aStallFoundInSeveralLooksIsOneMiss() {
        var t = MarginTuner(.quantum(start: 128, limit: 16_384))
        let r1 = t.missed(cycles: 2, now: t0)                   // 256 missed, 384 late: 1,024 is twice that
        #expect(r1 && t.frames == 1_024)
        let r2 = t.missed(cycles: 1, now: t0 + 5_000_000)       // 1,024 more of the same stall: 2 × (1,280 + 128)
        #expect(r2 && t.frames == 4_096)
        #expect(t.misses == 1 && t.growths == 1)
        let r3 = t.missed(cycles: 1, now: t0 + 200_000_000)     // another stall: 2 × (4,096 + 4,096)
        #expect(r3 && t.frames == 16_384 && t.misses == 2 && t.growths == 2)
    }

    @Test func aFixedMarginNeverMoves() {
        var t = MarginTuner(.fixed)
        #expect(t.frames == nil)
        let r7 = t.missed(cycles: 5, now: t0)
        #expect(!r7)
        let r8 = t.tick(now: t0 + 10_000 * s)
        #expect(!r8)
        #expect(t.growths == 0 && t.misses == 1)
    }

    /// A quiet while (10 minutes without a miss) brings it a step down; not before.
    @Test func aQuietWhileShrinksItAStep() {
        var t = MarginTuner(.quantum(start: 128, limit: 1_024))
        _ = t.missed(cycles: 1, now: t0)             // 512
        let r9 = t.tick(now: t0 + 599 * s)
        #expect(!r9)
        let r10 = t.tick(now: t0 + 600 * s)
        #expect(r10)
        #expect(t.frames == 256 && t.shrinks == 1)
        let r11 = t.tick(now: t0 + 1_199 * s)
        #expect(!r11)        // another while from the shrink
        let r12 = t.tick(now: t0 + 1_200 * s)
        #expect(r12)
        #expect(t.frames == 128)
        let r13 = t.tick(now: t0 + 10_000 * s)
        #expect(!r13)       // the start is the floor
    }

    /// A miss soon after a shrink: the shrink was early, so the next waits twice as long.
    @Test func aMissRightAfterAShrinkDoublesTheQuietWhile() {
        var t = MarginTuner(.frames(start: 100, step: 100, limit: 1_000))
        _ = t.missed(now: t0)
        let r14 = t.tick(now: t0 + 600 * s)
        #expect(r14)           // 100 again
        let r15 = t.missed(now: t0 + 700 * s)
        #expect(r15)         // 100 s after the shrink: grows back
        #expect(t.quietNs == 1_200 * s)
        let r16 = t.tick(now: t0 + 700 * s + 1_199 * s)
        #expect(!r16)
        let r17 = t.tick(now: t0 + 700 * s + 1_200 * s)
        #expect(r17)
        // A miss long after a shrink is not its fault: the while stays.
        _ = t.missed(now: t0 + 5_000 * s)
        #expect(t.quietNs == 1_200 * s)
    }

    /// A reopen of the same device keeps what was learnt; another kind of device starts afresh.
    @Test func theLevelLearntSurvivesAReopenOfTheSameDevice() {
        var t = MarginTuner(.quantum(start: 128, limit: 1_024))
        _ = t.missed(cycles: 1, now: t0)
        t.use(.quantum(start: 128, limit: 1_024))
        #expect(t.frames == 512)
        t.use(.frames(start: 240, step: 240, limit: 960))
        #expect(t.frames == 240 && t.growths == 1)   // the count is the daemon's, across devices
    }
}
