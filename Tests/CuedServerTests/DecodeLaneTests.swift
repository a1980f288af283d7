@testable import CuedServer
import NIOCore
import NIOPosix
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A gate a job waits at until the test opens it (a decoder that takes as long as the test says).
final class Gate: Sendable {
    private let open = Atomic<Bool>(false)
    let entered = Atomic<Int>(0)
    func pass() {
        entered.add(1, ordering: .relaxed)
        while !open.load(ordering: .relaxed) { usleep(1_000) }
    }
    func release() { open.store(true, ordering: .relaxed) }
}

/// The decoding lane: a share per client, a deadline, workers written off when stuck.
@Suite(.timeLimit(.minutes(1))) struct DecodeLaneTests {
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    var loop: any EventLoop { group.next() }

    func eventually(_ condition: () -> Bool) -> Bool {
        for _ in 0..<2_000 { if condition() { return true }; usleep(5_000) }
        return condition()
    }

    /// One client's slow files hold only its share: another client's file is decoded at
    /// once, and the slow client's second file waits for its first.
    @Test func aClientsSlowFilesNeverMakeAnotherWait() throws {
        let lane = DecodeLane()
        let gate = Gate()
        defer { gate.release() }
        let slow1 = lane.submit(owner: "slow", on: loop) { gate.pass(); return 1 }
        let slow2 = lane.submit(owner: "slow", on: loop) { gate.pass(); return 2 }
        #expect(eventually { gate.entered.load(ordering: .relaxed) == 1 })
        let other = try lane.submit(owner: "other", on: loop) { 3 }.wait()
        #expect(other == .success(3))
        #expect(gate.entered.load(ordering: .relaxed) == 1)  // slow's second still waits for its first
        #expect(lane.counts.queued == 1)
        gate.release()
        #expect(try slow1.wait() == .success(1))
        #expect(try slow2.wait() == .success(2))
    }

    /// A file that never comes back (a hung mount) is answered at the deadline; its
    /// worker is written off and replaced, so the next file is decoded; too many stuck
    /// and the lane refuses at once.
    @Test func aStuckJobIsAnsweredAtTheDeadlineAndItsWorkerReplaced() throws {
        var limits = DecodeLane.Limits()
        limits.timeout = .milliseconds(100)
        limits.maxStuck = 2
        let lane = DecodeLane(limits: limits)
        let gate = Gate()
        defer { gate.release() }
        #expect(try lane.submit(owner: "a", on: loop) { gate.pass(); return 0 }.wait() == .failure(.timedOut(seconds: 0.1)))
        #expect(lane.counts.stuck == 1)
        #expect(try lane.submit(owner: "a", on: loop) { 7 }.wait() == .success(7))  // its owner's share is free again
        #expect(try lane.submit(owner: "b", on: loop) { gate.pass(); return 0 }.wait() == .failure(.timedOut(seconds: 0.1)))
        #expect(lane.counts.stuck == 2)
        #expect(try lane.submit(owner: "c", on: loop) { 1 }.wait() == .failure(.stuck))
        // The mount answers again: the stuck workers come back, and the lane takes work.
        gate.release()
        #expect(eventually { lane.counts.stuck == 0 })
        #expect(try lane.submit(owner: "c", on: loop) { 1 }.wait() == .success(1))
    }

    /// A job that waited past its deadline in the queue is answered and never run.
    @Test func aJobTimedOutWhileQueuedNeverRuns() throws {
        var limits = DecodeLane.Limits()
        limits.timeout = .milliseconds(100)
        limits.maxWorkers = 1
        let lane = DecodeLane(limits: limits)
        let gate = Gate()
        defer { gate.release() }
        let ran = Gate()  // `entered` counts runs
        let first = lane.submit(owner: "a", on: loop) { gate.pass(); return 0 }
        let second = lane.submit(owner: "b", on: loop) { ran.entered.add(1, ordering: .relaxed); return 1 }
        #expect(try second.wait() == .failure(.timedOut(seconds: 0.1)))
        #expect(try first.wait() == .failure(.timedOut(seconds: 0.1)))
        gate.release()
        #expect(eventually { lane.counts.stuck == 0 })
        let runs = ran.entered.load(ordering: .relaxed)
        #expect(runs == 0)
    }

    /// One client cannot queue without bound.
    @Test func aClientsQueueIsBounded() throws {
        var limits = DecodeLane.Limits()
        limits.maxQueuedPerOwner = 2
        let lane = DecodeLane(limits: limits)
        let gate = Gate()
        defer { gate.release() }
        let running = lane.submit(owner: "a", on: loop) { gate.pass(); return 0 }
        #expect(eventually { gate.entered.load(ordering: .relaxed) == 1 })
        let queued = [lane.submit(owner: "a", on: loop) { 1 }, lane.submit(owner: "a", on: loop) { 2 }]
        #expect(try lane.submit(owner: "a", on: loop) { 3 }.wait() == .failure(.queueFull))
        gate.release()
        #expect(try running.wait() == .success(0))
        #expect(try queued.map { try $0.wait() } == [.success(1), .success(2)])
    }
}
