@testable import CuedCore
import Testing

/// `CycleAccount` against a small model of PipeWire 0.3's graph and a playback
/// stream: each cycle plays a quantum from the stream's buffers (taking the next one
/// from the queue when the last is played out) or silence when there is none, and
/// asks the client for the frames of a cycle once its queue is empty; the client
/// answers by queuing a buffer of that size, looking just before it queues, as
/// `PipeWireSink.write` does. A cycle may also run without the stream's node at all
/// (its thread did not get the CPU in time).
@Suite struct CycleAccountTests {
    struct Graph {
        var quantum = 128
        var position: UInt64 = 0
        /// The position of the last cycle's first frame (`pw_time.ticks`).
        var ticks: UInt64 = 0
        var queue: [Int] = []
        /// Frames of the buffer being played that are left for the next cycles.
        var left = 0
        /// Frames taken from the queue (a buffer counts when the graph takes it).
        var taken = 0
        var silentCycles = 0
        /// What the graph asks the client for (`pw_buffer.requested`), nil: nothing yet.
        var asked: Int?
        var account = CycleAccount()
        var found = 0

        mutating func cycle(scheduled: Bool = true) {
            ticks = position
            position += UInt64(quantum)
            guard scheduled else { silentCycles += 1; return }
            var need = quantum
            while need > 0 {
                if left == 0 {
                    guard !queue.isEmpty else { break }
                    left = queue.removeFirst()
                    taken += left
                }
                let n = min(need, left)
                left -= n
                need -= n
            }
            if need == quantum { silentCycles += 1 }
            if left == 0 && queue.isEmpty { asked = quantum }
        }

        /// The client answers what the graph asked (`filledAsAsked` false: with a buffer of
        /// another size, which the sink does not account).
        mutating func answer(filledAsAsked: Bool = true) {
            guard let n = asked else { return }
            asked = nil
            found += account.look(ticks: ticks, taken: taken, quantum: filledAsAsked ? n : nil)
            queue.append(n)
        }

        /// A stream starts: its first buffer is queued before it runs.
        mutating func start() {
            found += account.look(ticks: ticks, taken: taken, quantum: nil)
            queue.append(quantum)
        }
    }

    @Test func aStreamThatKeepsUpMissesNothing() {
        var g = Graph()
        g.start()
        for _ in 0..<500 { g.cycle(); g.answer() }
        #expect(g.silentCycles == 0)
        #expect(g.found == 0 && g.account.missedCycles == 0 && g.account.missedFrames == 0)
    }

    @Test func aBufferQueuedACycleLateIsOneCycleMissed() {
        var g = Graph()
        g.start()
        for _ in 0..<10 { g.cycle(); g.answer() }
        g.cycle()
        g.cycle()  // the client did not answer in time: this cycle found the queue empty
        g.answer()
        for _ in 0..<10 { g.cycle(); g.answer() }
        #expect(g.silentCycles == 1)
        #expect(g.found == 1 && g.account.missedCycles == 1 && g.account.missedFrames == 128)
    }

    @Test func cyclesRunWithoutTheStreamsNodeAreMissed() {
        var g = Graph()
        g.start()
        for _ in 0..<10 { g.cycle(); g.answer() }
        for _ in 0..<6 { g.cycle(scheduled: false) }  // its thread did not run for six cycles
        for _ in 0..<10 { g.cycle(); g.answer() }
        #expect(g.silentCycles == 6)
        #expect(g.found == 6 && g.account.missedCycles == 6)
    }

    @Test func aQuantumSwitchOrABufferOfAnotherSizeIsNotAMiss() {
        var g = Graph(quantum: 1024)
        g.start()
        for _ in 0..<5 { g.cycle(); g.answer() }
        // The graph switches down to 128 (another node asked for it) while a 1024-frame
        // buffer is queued: it plays over eight cycles, then the graph asks for 128.
        g.quantum = 128
        for _ in 0..<20 { g.cycle(); g.answer() }
        g.cycle()
        g.answer(filledAsAsked: false)
        for _ in 0..<5 { g.cycle(); g.answer() }
        // And up again.
        g.quantum = 512
        for _ in 0..<5 { g.cycle(); g.answer() }
        #expect(g.silentCycles == 0)
        #expect(g.found == 0 && g.account.missedCycles == 0)
    }

    /// Looks as a stream that starts takes them (from a trace of the real stream on a graph
    /// idling at 1024): the position of a cycle run before the stream stopped, then a jump
    /// over the graph's first cycle at its idle quantum and the switch, then in step.
    @Test func theFirstCyclesOfAStreamAreNotCounted() {
        var a = CycleAccount()
        #expect(a.look(ticks: 38_400, taken: 128, quantum: 128) == 0)
        #expect(a.look(ticks: 39_552, taken: 256, quantum: 128) == 0)
        #expect(a.look(ticks: 39_808, taken: 384, quantum: 128) == 0)
        #expect(a.look(ticks: 39_936, taken: 512, quantum: 128) == 0)
        #expect(a.missedCycles == 0)
        // In step from here: a cycle without the stream's buffer now counts.
        #expect(a.look(ticks: 40_192, taken: 640, quantum: 128) == 1)
        #expect(a.missedCycles == 1)
    }

    /// A first look known to be in step (the stream's first buffer a whole cycle, a cycle run
    /// since it started: `GraphSlot` knows): the next interval counts, a miss in the stream's
    /// second cycle with it; not known, it waits for a clean interval as above.
    @Test func anAlignedFirstLookCountsFromTheNextCycle() {
        var a = CycleAccount()
        #expect(a.look(ticks: 40_000, taken: 128, quantum: 128, aligned: true) == 0)
        #expect(a.look(ticks: 40_256, taken: 256, quantum: 128) == 1)
        var b = CycleAccount()
        #expect(b.look(ticks: 40_000, taken: 128, quantum: 128) == 0)
        #expect(b.look(ticks: 40_256, taken: 256, quantum: 128) == 0)
    }

    @Test func aRestartedStreamIsNotComparedWithTheOldOne() {
        var a = CycleAccount()
        _ = a.look(ticks: 10_000, taken: 9_000, quantum: 128)
        a.restart()
        // The stream was stopped and flushed: its counters begin again at zero.
        #expect(a.look(ticks: 20_000, taken: 128, quantum: 128) == 0)
        #expect(a.look(ticks: 20_128, taken: 256, quantum: 128) == 0)
        #expect(a.missedCycles == 0)
    }
}
