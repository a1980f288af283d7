@testable import CuedCore
import Glibc
import Synchronization
import Testing
import TestSupport

/// The audio thread's command queue: bounded, in order, lock-free; its consumer never waits.
@Suite struct CommandQueueTests {
    @Test func isBoundedAndKeepsOrder() {
        let q = CommandQueue(capacity: 1000)
        #expect(q.capacity == 1024)  // a power of two
        var accepted = 0
        for i in 0..<1500 where q.push(.shutdown(deadline: UInt64(i))) { accepted += 1 }
        #expect(accepted == 1024)  // the rest refused: the queue is bounded
        var next: UInt64 = 0
        while let c = q.pop() {
            guard case .shutdown(let d) = c else { Issue.record("\(c)"); return }
            #expect(d == next)
            next += 1
        }
        #expect(next == 1024)
        #expect(q.isEmpty)
    }

    @Test func wrapsAround() {
        let q = CommandQueue(capacity: 16)
        var pushed: UInt64 = 0, popped: UInt64 = 0
        // Interleave pushes and pops so the ring laps many times, full and empty.
        for round in 0..<500 {
            for _ in 0..<(round % 23) { if q.push(.shutdown(deadline: pushed)) { pushed += 1 } }
            for _ in 0..<(round % 19) {
                guard let c = q.pop(), case .shutdown(let d) = c else { break }
                #expect(d == popped)
                popped += 1
            }
        }
        while let c = q.pop() {
            guard case .shutdown(let d) = c else { return }
            #expect(d == popped)
            popped += 1
        }
        #expect(popped == pushed)
        #expect(pushed > 16 * 100)
    }

    /// The knot of the lock the queue was: a producer held (preempted, or allocating) while
    /// it pushes must not make the audio thread's pop wait. The ring's pop returns at once
    /// and sees the half-pushed command as not there yet; it is there once published.
    @Test func aProducerPausedInsidePushNeverHoldsUpThePop() {
        let gate = Gate()
        let q = CommandQueue(capacity: 64) { gate.pauseOnce(upToSeconds: 1) }
        let producer = onThread { _ = q.push(.shutdown(deadline: 7)) }
        #expect(eventually(timeout: 5, interval: 0.0005) { gate.entered.load(ordering: .acquiring) })
        let t0 = MonotonicClock.now()
        let got = q.pop()
        let waitedNs = MonotonicClock.now() - t0
        gate.open.store(true, ordering: .releasing)
        pthread_join(producer, nil)
        #expect(waitedNs < 20_000_000, "pop waited \(waitedNs / 1000) µs behind a paused producer")
        #expect(got == nil)
        #expect(q.isEmpty == false)
        guard case .shutdown(7)? = q.pop() else { Issue.record("the published command is not there"); return }
    }

    /// Producers on their own threads, contending for a small ring that is often full: the
    /// consumer gets every command once, and each producer's in the order it pushed them.
    @Test func manyProducersLoseNothingAndKeepTheirOrder() {
        let producers = 4, each = 20_000
        let q = CommandQueue(capacity: 32)
        let threads = (0..<producers).map { p in
            onThread {
                var i = 0
                while i < each {
                    if q.push(.shutdown(deadline: UInt64(p) << 32 | UInt64(i))) { i += 1 } else { sched_yield() }
                }
            }
        }
        var next = [Int](repeating: 0, count: producers)
        var taken = 0, outOfOrder = 0
        let limit = MonotonicClock.now() + 60_000_000_000
        while taken < producers * each && MonotonicClock.now() < limit {
            guard let c = q.pop() else { sched_yield(); continue }
            guard case .shutdown(let v) = c else { Issue.record("\(c)"); break }
            let p = Int(v >> 32), i = Int(v & 0xffff_ffff)
            if i != next[p] { outOfOrder += 1 }
            next[p] = i + 1
            taken += 1
        }
        for t in threads { pthread_join(t, nil) }
        #expect(taken == producers * each)
        #expect(outOfOrder == 0)
        #expect(next == [Int](repeating: each, count: producers))
        #expect(q.pop() == nil)
    }

    final class Gate: Sendable {
        let paused = Atomic<Bool>(false)
        let entered = Atomic<Bool>(false)
        let open = Atomic<Bool>(false)

        /// The first caller waits until `open` (or the time is up); later ones go on.
        func pauseOnce(upToSeconds s: Double) {
            guard !paused.exchange(true, ordering: .relaxed) else { return }
            entered.store(true, ordering: .releasing)
            let until = MonotonicClock.now() + UInt64(s * 1e9)
            while !open.load(ordering: .acquiring) && MonotonicClock.now() < until { usleep(100) }
        }
    }
}

/// Runs `body` on a new thread (join it with `pthread_join`).
func onThread(_ body: @escaping @Sendable () -> Void) -> pthread_t {
    final class Box: Sendable {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
    var thread = pthread_t()
    let rc = pthread_create(&thread, nil, { arg in
        Unmanaged<Box>.fromOpaque(arg!).takeRetainedValue().body()
        return nil
    }, Unmanaged.passRetained(Box(body)).toOpaque())
    precondition(rc == 0)
    return thread
}
