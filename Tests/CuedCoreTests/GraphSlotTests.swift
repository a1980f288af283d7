import CuedCore
import Testing

/// The native PipeWire stream's buffer slot against a fake graph on a fake clock: buffers are
/// numbers, a cycle takes the ready one (or plays silence), and the graph's time is what
/// `pw_stream_get_time_n` would say. No PipeWire.
@Suite struct GraphSlotTests {
    typealias Slot = GraphSlot<Int>

    /// A graph that runs cycles of `quantum` frames at 48 kHz and takes the slot's ready buffer
    /// in each (the stream's process callback), as the sink's `dispatch` reports it.
    struct Graph {
        var quantum = 128
        var now: UInt64 = 5_000_000_000
        /// The last cycle's start and position.
        var cycleAt: UInt64 = 0
        var ticks: UInt64 = 0
        var position: UInt64 = 0
        var queuedTotal: UInt64 = 0
        var lastTook: UInt64 = 0
        var deviceDelay: Int64 = 0
        var nextBuffer = 1

        var cycleNs: UInt64 { UInt64(quantum) * 1_000_000_000 / 48_000 }

        /// One cycle: it takes the ready buffer if the stream's node runs in it (else silence).
        mutating func cycle(_ slot: inout Slot, nodeRuns: Bool = true) {
            cycleAt = now
            ticks = position
            position += UInt64(quantum)
            lastTook = 0
            if nodeRuns, slot.ready != nil {
                lastTook = UInt64(slot.holding)
                queuedTotal += lastTook
                slot.taken()
            }
            now += cycleNs
        }

        var time: Slot.GraphTime {
            Slot.GraphTime(now: cycleAt, ticks: ticks, delay: deviceDelay, queuedTotal: queuedTotal, lastTook: lastTook)
        }

        mutating func dequeue(requested: Int = 0) -> (buffer: Int, requested: Int, capacity: Int) {
            defer { nextBuffer += 1 }
            return (nextBuffer, requested, 8_192)
        }

        /// What the sink's write does for `frames` frames: room, fill, and hand over once full.
        @discardableResult
        mutating func write(_ slot: inout Slot, _ frames: Int, want: Int? = nil, requested: Int = 0) -> Int {
            var g = self
            guard slot.room(want: want ?? quantum, dequeue: { g.dequeue(requested: requested) }) > 0,
                  let f = slot.fill(frames) else { self = g; return 0 }
            if f.full { _ = slot.handOver(time: g.time, quantum: g.quantum) }
            self = g
            return f.count
        }
    }

    /// Cued's period (128) is smaller than the graph's cycle (512): the buffer is filled across
    /// writes and handed over only once it holds the whole cycle.
    @Test func aBufferIsFilledAcrossWritesToTheGraphsCycle() {
        var g = Graph(quantum: 512)
        var slot = Slot(quantum: 128)
        for i in 1...4 {
            #expect(g.write(&slot, 128) == 128)
            #expect((slot.ready != nil) == (i == 4), "after \(i) writes: \(slot.state)")
        }
        #expect(slot.state == .ready(1, frames: 512))
        #expect(slot.active)
        #expect(g.write(&slot, 128) == 0)  // one ready is enough until the graph takes it
        g.cycle(&slot)
        #expect(slot.state == .empty && g.lastTook == 512)
    }

    /// The graph's `requested` can be a part-cycle (stale, or the rest of a cycle the converter
    /// is completing): following it lost every other cycle at a quantum above cued's period. A
    /// buffer is never shorter than the cycle asked for or run; more (a resampler's) is kept.
    @Test func aBufferIsNeverShorterThanTheCycle() {
        var g = Graph(quantum: 512)
        var slot = Slot(quantum: 128)
        let r1 = slot.room(want: 512, dequeue: { g.dequeue(requested: 384) })
        #expect(r1 == 512)
        var h = Graph(quantum: 256)
        var other = Slot(quantum: 128)
        let r2 = other.room(want: 256, dequeue: { h.dequeue(requested: 261) })
        #expect(r2 == 261)
        var none = Slot(quantum: 128)
        let r3 = none.room(want: 0, dequeue: { h.dequeue(requested: 0) })
        #expect(r3 == 128)  // nothing known: cued's own
    }

    /// A cue mid-stream takes the ready buffer back before its cycle: the graph's cycle must not
    /// run until it is full again (a cycle then would find nothing), then it is handed over again.
    @Test func aRewindTakesTheReadyBufferBackUntilItIsFullAgain() {
        var g = Graph()
        var slot = Slot()
        g.write(&slot, 128)
        #expect(slot.rewindable == 128)
        let r4 = slot.rewind(100)
        #expect(r4 == 100)
        #expect(slot.state == .refilling(1, frames: 28, target: 128))
        #expect(!slot.cycleMayRun && slot.ready == nil)
        #expect(g.write(&slot, 100) == 100)
        #expect(slot.cycleMayRun && slot.state == .ready(1, frames: 128))
        g.cycle(&slot)
        #expect(g.lastTook == 128)
        // Nothing handed over can be given back.
        #expect(slot.rewindable == 0 && slot.rewind(64) == 0)
    }

    /// Frames not heard yet: what cued holds, then what the graph took at its last cycle and the
    /// device's delay, counted down from the cycle's start.
    @Test func theDelayCountsDownFromTheGraphsLastCycle() {
        var g = Graph()
        var slot = Slot()
        g.write(&slot, 128)
        // Made active, no cycle since: only what is held.
        #expect(slot.delay(now: g.now, time: g.time) == 128)
        g.deviceDelay = 256
        g.cycle(&slot)
        g.write(&slot, 128)
        let start = g.cycleAt
        #expect(slot.delay(now: start, time: g.time) == 128 + 128 + 256)
        #expect(slot.delay(now: start + 1_000_000, time: g.time) == 128 + 128 + 256 - 48)  // 1 ms later
        #expect(slot.delay(now: start + 1_000_000_000, time: g.time) == 128)             // all played
        #expect(slot.delay(now: start, time: nil) == 128)
    }

    /// A cycle the stream's node did not run in (its thread late) is found at the next hand-over,
    /// once position and frames taken have moved in step.
    @Test func aCycleWithoutTheStreamIsCountedMissed() {
        var g = Graph()
        var slot = Slot()
        for _ in 0..<4 {
            g.write(&slot, 128)
            g.cycle(&slot)
        }
        g.write(&slot, 128)
        let r5 = slot.takeMissedCycles()
        #expect(r5 == 0)
        g.cycle(&slot, nodeRuns: false)
        g.cycle(&slot, nodeRuns: false)
        g.cycle(&slot)
        g.write(&slot, 128)
        let r6 = slot.takeMissedCycles()
        #expect(r6 == 2)
        let r7 = slot.takeMissedCycles()
        #expect(r7 == 0)
    }

    /// Stopped: the buffer cued holds is kept for the next write, empty, and sized then for the
    /// cycle asked at that time (a margin grown meanwhile); the stream is made active again.
    @Test func aStoppedStreamKeepsItsBufferAndSizesItForTheNextCycle() {
        var g = Graph()
        var slot = Slot()
        g.write(&slot, 128)
        g.cycle(&slot)
        g.write(&slot, 64)
        let r8 = slot.deactivate()
        #expect(r8)
        #expect(slot.state == .filling(2, frames: 0, target: 128) && !slot.active)
        let r9 = slot.deactivate()
        #expect(!r9)
        let r10 = slot.room(want: 256, dequeue: { Issue.record("dequeued again"); return nil })
        #expect(r10 == 256)
        #expect(g.write(&slot, 256, want: 256) == 256)
        #expect(slot.active && slot.ready == 2)
    }

    /// Cued asks for a longer cycle, which the graph may run from its next: the buffer held for the
    /// shorter one gives its frames back (to be written again) and waits, with the graph's cycle, to
    /// be filled to the new length; one long enough already, or frames without their mix, stay.
    @Test func aLongerCycleTakesBackABufferMadeForTheShorterOne() {
        var g = Graph()
        var slot = Slot()
        g.write(&slot, 128)
        #expect(slot.resize(to: 256, canGiveBack: 64) == 0)       // their mix is not all at hand
        #expect(slot.resize(to: 256, canGiveBack: 128) == 128)
        #expect(slot.state == .refilling(1, frames: 0, target: 256) && !slot.cycleMayRun)
        g.write(&slot, 128, want: 256)
        #expect(slot.ready == nil)
        g.write(&slot, 128, want: 256)
        #expect(slot.state == .ready(1, frames: 256))
        #expect(slot.resize(to: 256, canGiveBack: 1_000) == 0)    // long enough already
        #expect(slot.resize(to: 128, canGiveBack: 1_000) == 0)    // a shorter cycle takes what there is
    }

    /// The stream took its buffers away (a renegotiation): nothing is held any more.
    @Test func buffersTakenAwayLeaveTheSlotEmpty() {
        var g = Graph()
        var slot = Slot()
        g.write(&slot, 128)
        slot.buffersGone()
        #expect(slot.state == .empty && slot.holding == 0)
        #expect(g.write(&slot, 128) == 128)
        #expect(slot.ready == 2)
    }
}
