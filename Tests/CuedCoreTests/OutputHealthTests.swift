@testable import CuedCore
import Synchronization
import Testing

/// An output that takes cues and plays nothing (`OutputHealth`): failing until a cue is heard whole
/// through it, and `--sink auto` (`FollowingSink`) benches such a candidate, takes the next, and
/// tries it again later; all on a fake clock.
@Suite struct OutputHealthTests {
    func bench(_ h: inout OutputHealth, _ now: UInt64) -> Bool { h.benched(now: now) }

    @Test func failingUntilACueIsHeardWhole() {
        var h = OutputHealth()
        #expect(!h.failing && h.summary == nil)
        h.note(.failed("stalled: it took no frames"), now: 1)
        h.note(.lost, now: 2)
        #expect(h.failing)
        #expect(h.summary == "failed once and lost 1 cue since a cue was last heard whole (last: stalled: it took no frames)")
        h.note(.heard, now: 3)
        #expect(h == OutputHealth())
    }

    @Test func twoFaultsOrThreeLostCuesBenchItAndARetryThatFailsBenchesItTwiceAsLong() {
        var h = OutputHealth()
        h.note(.failed("stalled"), now: 0)
        #expect(!bench(&h, 0))
        h.note(.failed("stalled"), now: 10)
        #expect(bench(&h, 10))
        #expect(bench(&h, 10 + OutputHealth.firstBenchNs - 1))
        // Its time is over: tried again, on probation; one more failure benches it at once, for twice as long.
        #expect(!bench(&h, 10 + OutputHealth.firstBenchNs))
        let t = 20 + OutputHealth.firstBenchNs
        h.note(.failed("stalled"), now: t)
        #expect(bench(&h, t + 2 * OutputHealth.firstBenchNs - 1))
        #expect(!bench(&h, t + 2 * OutputHealth.firstBenchNs))

        var lost = OutputHealth()
        for i in 0..<3 { lost.note(.lost, now: UInt64(i)) }
        #expect(bench(&lost, 3))
    }

    @Test func theBenchIsBounded() {
        var h = OutputHealth()
        var now: UInt64 = 0
        for _ in 0..<20 {
            h.note(.failed("x"), now: now)
            h.note(.failed("x"), now: now)
            now += OutputHealth.maxBenchNs
            _ = h.benched(now: now)
        }
        h.note(.failed("x"), now: now)
        #expect(h.retryAt == now + OutputHealth.maxBenchNs)
    }

    final class Clock: Sendable {
        let t = Atomic<UInt64>(0)
        var now: UInt64 { t.load(ordering: .relaxed) }
        func advance(_ ns: UInt64) { t.add(ns, ordering: .relaxed) }
    }

    /// Candidates "better" then "worse" (both open), as auto's order is: the better one fails twice
    /// with no cue heard, the next open takes the worse one and says why; once the bench is over the
    /// better one is tried again, and a cue heard through it keeps it.
    @Test func autoLeavesACandidateThatPlaysNothingAndComesBack() throws {
        let clock = Clock()
        let f = FollowingSink(
            pick: { open in
                guard let why = open("better") else { return ("better", "auto: the better one") }
                guard open("worse") != nil else { return ("worse", "auto: the worse one (the better one did not: \(why))") }
                return ("null", "auto: none")
            },
            make: { NullSink(spec: $0) },
            clock: { clock.now })
        _ = try f.open()
        #expect(f.spec == "better")
        f.note(.failed("stalled: it took no frames"), now: clock.now)
        f.close()
        _ = try f.open()
        #expect(f.spec == "better")  // once is not enough
        f.note(.failed("stalled: it took no frames"), now: clock.now)
        f.close()
        _ = try f.open()
        #expect(f.spec == "worse")
        #expect(f.why?.contains("the better one did not: it opened but played nothing: failed twice since a cue was last heard whole (last: stalled: it took no frames); tried again in 30 s") == true,
                "\(f.why ?? "nil")")
        // The worse one's own record is its own: a cue heard there does not clear the better one's bench.
        f.note(.heard, now: clock.now)
        f.close()
        clock.advance(OutputHealth.firstBenchNs - 1)
        _ = try f.open()
        #expect(f.spec == "worse")
        f.close()
        clock.advance(1)
        _ = try f.open()
        #expect(f.spec == "better")
        f.note(.heard, now: clock.now)
        f.close()
        _ = try f.open()
        #expect(f.spec == "better")
        // Heard: a later failure starts from nothing again (one failure does not bench it).
        f.note(.failed("stalled"), now: clock.now)
        f.close()
        _ = try f.open()
        #expect(f.spec == "better")
    }
}
