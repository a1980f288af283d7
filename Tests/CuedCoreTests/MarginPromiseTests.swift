import CuedCore
import Testing

/// What the native stream's margin promises, judged here on a fake clock where the model is
/// (the PipeWire tests only check that holes come from the machine): a stall of cued's audio
/// thread is missed cycles when it outlasts a cycle, counted by the slot (`GraphSlot`, its
/// `CycleAccount`), and a miss grows the cycle (`MarginTuner`) so that the same stall, and one
/// up to twice as long, misses nothing after; a stall in a stream's first cycles counts as well.
///
/// The graph: cycles of the margin's frames at 48 kHz, back to back from a timer. In each, cued's
/// thread must answer (hand over the next buffer) before the cycle ends; stalled over a cycle's
/// start, it answers when the stall ends, which misses the cycle if that is past its end.
@Suite struct MarginPromiseTests {
    typealias Slot = GraphSlot<Int>

    struct Stream {
        var slot = Slot()
        var tuner = MarginTuner(.quantum(start: 128, limit: 1_024))
        var now: UInt64 = 1_000_000_000_000
        var position: UInt64 = 0
        var ticks: UInt64 = 0
        var cycleAt: UInt64 = 0
        var queuedTotal: UInt64 = 0
        var lastTook: UInt64 = 0
        var nextBuffer = 1
        var missed = 0
        var silent = 0
        var quantum: Int { tuner.frames ?? 128 }
        var time: Slot.GraphTime { Slot.GraphTime(now: cycleAt, ticks: ticks, queuedTotal: queuedTotal, lastTook: lastTook) }

        /// cued's answer: a buffer of the cycle handed over, the cycles missed counted, the margin grown.
        mutating func answer() {
            var n = nextBuffer
            guard slot.room(want: quantum, dequeue: { defer { n += 1 }; return (n, 0, 8_192) }) > 0 else { return }
            nextBuffer = n
            if let f = slot.fill(quantum), f.full { _ = slot.handOver(time: time, quantum: quantum) }
            let m = slot.takeMissedCycles()
            missed += m
            if m > 0, tuner.missed(cycles: m, now: now), let grown = tuner.frames {
                _ = slot.resize(to: grown, canGiveBack: 0)
            }
        }

        /// `ms` of the graph's time, cued's thread stalled from `stallAt` (ms from now) for `stall` ms.
        mutating func run(ms: Double, stallAt: Double = 0, stall: Double = 0) {
            let end = now + UInt64(ms * 1e6)
            let stallStart = now + UInt64(stallAt * 1e6), stallEnd = stallStart + UInt64(stall * 1e6)
            while now < end {
                let cycleNs = UInt64(quantum) * 1_000_000_000 / 48_000
                cycleAt = now
                ticks = position
                position += UInt64(quantum)
                // Its node runs in this cycle unless the thread sleeps past the cycle's end.
                let answersAt = stall > 0 && now >= stallStart && now < stallEnd ? stallEnd : now
                lastTook = 0
                if answersAt < now + cycleNs, slot.ready != nil {
                    lastTook = UInt64(slot.holding)
                    queuedTotal += lastTook
                    slot.taken()
                } else {
                    silent += 1
                }
                now += cycleNs
                answer()
            }
        }
    }

    @Test func aStallGrowsTheCycleSoThatTheSameStallAndOneTwiceAsLongMissNothing() {
        var s = Stream()
        s.answer()
        s.run(ms: 200)
        #expect(s.missed == 0 && s.silent == 0 && s.quantum == 128)
        // A 5 ms stall at 2.7 ms cycles: missed, counted, and the cycle grown at once.
        s.run(ms: 100, stallAt: 20, stall: 5)
        #expect(s.silent >= 1 && s.missed == s.silent, "silent \(s.silent), counted \(s.missed)")
        #expect(s.tuner.growths == 1 && s.quantum >= 512, "\(s.quantum)")
        let before = (s.silent, s.missed)
        // The same stall, then one twice as long: no cycle missed at the grown cycle.
        s.run(ms: 200, stallAt: 50, stall: 5)
        s.run(ms: 200, stallAt: 50, stall: 10)
        #expect(s.silent == before.0 && s.missed == before.1 && s.tuner.growths == 1, "silent \(s.silent), counted \(s.missed)")
    }

    /// A stall in a stream's first cycles (the server just restarted, the machine busy) is a miss
    /// like any other: counted, and the cycle grown. (It went uncounted: the account waited for a
    /// cycle in step before it counted, and a miss in the first look's cycles was not in step.)
    @Test func aStallInAStreamsFirstCyclesIsCounted() {
        var s = Stream()
        s.answer()
        s.run(ms: 12, stallAt: 2, stall: 4)  // over the second cycle
        s.run(ms: 50)
        #expect(s.silent >= 1 && s.missed == s.silent, "silent \(s.silent), counted \(s.missed)")
        #expect(s.tuner.growths == 1)
    }
}
