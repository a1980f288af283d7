import CuedAudio
import CuedCore
@testable import CuedServer
import NIOCore
import NIOPosix
import Dispatch
import Synchronization
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A gate a job waits at until the test opens it (a decoder that takes as long as the test says).
final class Gate: Sendable {
    private let opened = DispatchSemaphore(value: 0)
    let entered = Atomic<Int>(0)
    func pass() {
        entered.add(1, ordering: .relaxed)
        opened.wait()
        opened.signal()  // the next one through, once open
    }
    /// Opens it (once; the jobs at it pass one after the other).
    func release() {
        guard !released.exchange(true, ordering: .relaxed) else { return }
        opened.signal()
    }
    private let released = Atomic<Bool>(false)
}

/// The decoding lane: a share per client, a deadline, workers written off when stuck.
@Suite(.timeLimit(.minutes(1))) struct DecodeLaneTests {
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    var loop: any EventLoop { group.next() }

    /// For the tests whose gate stands for work that is only slow: the sleeping gate is
    /// never taken for a worker blocked in the kernel.
    static let never = TimeAmount.seconds(600)

    /// A lane with the default limits but what `set` changes.
    func lane(_ set: (inout DecodeLane.Limits) -> Void) -> DecodeLane {
        var limits = DecodeLane.Limits()
        set(&limits)
        return DecodeLane(limits: limits)
    }


    /// One client's slow files hold only its share: another client's file is decoded at
    /// once, and the slow client's second file waits for its first.
    @Test func aClientsSlowFilesNeverMakeAnotherWait() throws {
        let lane = lane { $0.blockedAfter = Self.never }
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
    /// worker is written off (blocked) and replaced, so the next file is decoded; an owner
    /// with too many stuck has its own files refused at once, and only its own.
    @Test func aStuckJobIsAnsweredAtTheDeadlineAndRefusesOnlyItsOwner() throws {
        var limits = DecodeLane.Limits()
        // 1 s, not less: the jobs that must succeed get the same deadline, and a loaded
        // machine took over 100 ms to start a replacement worker (1 failure in 8 runs at load 5).
        limits.timeout = .seconds(1)
        limits.cancelGrace = .milliseconds(20)
        limits.maxStuckPerOwner = 1
        let lane = DecodeLane(limits: limits)
        let gate = Gate()
        defer { gate.release() }
        // The gate does not heed the cancellation: a read stuck in the kernel.
        #expect(try lane.submit(owner: "a", on: loop) { gate.pass(); return 0 }.wait() == .failure(.timedOut(seconds: 1)))
        #expect(eventually { lane.counts.stuck == 1 && lane.stuck(owner: "a") == 1 })
        #expect(try lane.submit(owner: "a", on: loop) { 7 }.wait() == .failure(.stuck))  // a's own: refused at once
        #expect(try lane.submit(owner: "b", on: loop) { 7 }.wait() == .success(7))       // another owner's: run
        #expect(try lane.submit(owner: "b", on: loop) { gate.pass(); return 0 }.wait() == .failure(.timedOut(seconds: 1)))
        #expect(eventually { lane.counts.stuck == 2 })
        #expect(try lane.submit(owner: "c", on: loop) { 1 }.wait() == .success(1))
        // The mount answers again: the stuck workers come back, and their owners' files are taken.
        gate.release()
        #expect(eventually { lane.counts.stuck == 0 })
        #expect(try lane.submit(owner: "a", on: loop) { 1 }.wait() == .success(1))
    }

    /// Issue 29.4: a worker blocked in the kernel (asleep, not computing) stops holding its
    /// express slot long before its deadline, so another owner's sound is served at once
    /// while every express worker there was sits on a hung mount.
    @Test func aBlockedWorkerGivesUpItsSlotLongBeforeItsDeadline() throws {
        let lane = lane { $0.timeout = .seconds(50); $0.maxExpressWorkers = 2 }
        let gate = Gate()
        defer { gate.release() }
        let hung = (0..<2).map { i in lane.submit(owner: "hung\(i)", on: loop, express: { _ -> DecodeLane.Step<Int> in gate.pass(); return .done(i) }) }
        #expect(eventually { gate.entered.load(ordering: .relaxed) == 2 })
        let t0 = MonotonicClock.now()
        #expect(try lane.submit(owner: "other", on: loop, express: { _ in .done(7) }).wait() == .success(7))
        let waitedMs = (MonotonicClock.now() - t0) / 1_000_000
        #expect(waitedMs < 2_000, "another owner waited \(waitedMs) ms behind blocked workers")
        #expect(eventually { lane.counts.stuck == 2 && lane.stuck(owner: "hung0") == 1 && lane.stuck(owner: "hung1") == 1 })
        gate.release()
        #expect(try hung.map { try $0.wait() } == [.success(0), .success(1)])
        #expect(eventually { lane.counts.stuck == 0 })
    }

    /// A step that computes (on a CPU) for longer than `blockedAfter` is not taken as blocked.
    @Test func aBusyStepKeepsItsSlot() throws {
        let lane = lane { $0.timeout = .seconds(50); $0.blockedAfter = .milliseconds(50) }
        let busy = lane.submit(owner: "a", on: loop) { () -> Int in
            let end = MonotonicClock.now() + 600_000_000
            var x = 0
            while MonotonicClock.now() < end { x &+= 1 }
            return x > 0 ? 1 : 0
        }
        #expect(try busy.wait() == .success(1))
        #expect(lane.counts.stuck == 0 && lane.stuck(owner: "a") == 0)
    }

    /// The threads are bounded: past `maxStuck` written off (all owners), a blocked worker
    /// keeps its pool slot, and the pool does not grow.
    @Test func writtenOffWorkersAreBoundedInAll() throws {
        let lane = lane { $0.timeout = .seconds(30); $0.maxExpressWorkers = 1; $0.maxStuck = 2 }
        let gate = Gate()
        defer { gate.release() }
        let hung = (0..<3).map { i in lane.submit(owner: "hung\(i)", on: loop, express: { _ -> DecodeLane.Step<Int> in gate.pass(); return .done(i) }) }
        #expect(eventually { gate.entered.load(ordering: .relaxed) == 3 })
        #expect(eventually { lane.counts.stuck == 2 })
        let late = lane.submit(owner: "other", on: loop, express: { _ in .done(7) })
        usleep(300_000)  // a span in which nothing may change (many times `blockedAfter`): no event to wait on
        #expect(lane.counts.stuck == 2 && lane.expressWorkers == 1 && lane.counts.queued == 1)
        gate.release()
        #expect(try late.wait() == .success(7))
        #expect(try hung.map { try $0.wait() } == [.success(0), .success(1), .success(2)])
        #expect(eventually { lane.counts.stuck == 0 })
    }

    /// A result is not kept once its job is answered (the deadline's timer once held every
    /// decoded sound for 5 s: at 1,000 `play-file`s a second, 2 GB).
    @Test func anAnsweredJobsResultIsNotKeptUntilItsDeadline() throws {
        final class Result: Sendable {}
        let lane = lane { $0.timeout = .seconds(50) }
        weak var kept: Result?
        do {
            let r = try lane.submit(owner: "a", on: loop, express: { _ in .done(Result()) }).wait()
            guard case .success(let result) = r else { Issue.record("\(r)"); return }
            kept = result
        }
        #expect(eventually { kept == nil }, "the answered job's result is still held")
    }

    /// A job that waited past its deadline in the queue is answered and never run.
    @Test func aJobTimedOutWhileQueuedNeverRuns() throws {
        var limits = DecodeLane.Limits()
        limits.timeout = .milliseconds(100)
        limits.maxWorkers = 1
        limits.blockedAfter = Self.never
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
        limits.blockedAfter = Self.never
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

    /// A job past its deadline is told to stop; work that heeds it (a decode that is only
    /// slow) ends, and its worker goes back to the pool, not written off.
    @Test func aCancelledJobReturnsItsWorker() throws {
        var limits = DecodeLane.Limits()
        limits.timeout = .seconds(1)  // the job that must succeed after it gets the same deadline
        limits.cancelGrace = .seconds(600)  // never written off within the test
        limits.maxWorkers = 1
        let lane = DecodeLane(limits: limits)
        let stopped = Gate()  // `entered` counts works that saw the cancellation
        let busy = lane.submit(owner: "a", on: loop, cancellable: { c in
            while !c.isCancelled { sched_yield() }  // CPU-bound until told to stop
            stopped.entered.add(1, ordering: .relaxed)
            return 0
        })
        #expect(try busy.wait() == .failure(.timedOut(seconds: 1)))
        // The one worker is free again: another owner's job runs on it.
        #expect(try lane.submit(owner: "b", on: loop) { 7 }.wait() == .success(7))
        #expect(stopped.entered.load(ordering: .relaxed) == 1)
        #expect(lane.counts.stuck == 0)
        #expect(lane.counts.workers == 1)
    }

    /// A lane whose slow pool is full: eight owners each hold a slow worker until the gate opens.
    func laneWithAFullSlowPool() -> (DecodeLane, Gate, [EventLoopFuture<Swift.Result<Int, DecodeLane.Refusal>>]) {
        var limits = DecodeLane.Limits()
        limits.timeout = .seconds(50)
        limits.blockedAfter = Self.never
        let lane = DecodeLane(limits: limits)
        let gate = Gate()
        let slow = (0..<limits.maxWorkers).map { i in
            lane.submit(owner: "slow\(i)", on: loop, express: { _ in .slow { _ in gate.pass(); return i } })
        }
        #expect(eventually { gate.entered.load(ordering: .relaxed) == limits.maxWorkers })
        return (lane, gate, slow)
    }

    /// Eight owners each hold a slow worker (the slow pool is full): another owner's
    /// express step is answered at once, and its sound that needs the slow pool waits there.
    @Test func theExpressStepNeverWaitsBehindSlowOwners() throws {
        let (lane, gate, slow) = laneWithAFullSlowPool()
        let limits = lane.limits
        defer { gate.release() }
        #expect(lane.counts.workers == limits.maxWorkers)
        // Their next requests pass the express step too, and queue behind their own.
        let more = (0..<limits.maxWorkers).map { i in
            lane.submit(owner: "slow\(i)", on: loop, express: { _ in .slow { _ in 100 + i } })
        }
        #expect(try lane.submit(owner: "other", on: loop, express: { _ in .done(7) }).wait() == .success(7))
        let long = lane.submit(owner: "other", on: loop, express: { _ in .slow { _ in 8 } })
        #expect(eventually { lane.counts.queued == limits.maxWorkers + 1 })
        #expect(gate.entered.load(ordering: .relaxed) == limits.maxWorkers)
        gate.release()
        #expect(try long.wait() == .success(8))
        #expect(try slow.map { try $0.wait() } == (0..<limits.maxWorkers).map { .success($0) })
        #expect(try more.map { try $0.wait() } == (0..<limits.maxWorkers).map { .success(100 + $0) })
    }

    /// A job handed on to the slow pool keeps its deadline from the request.
    @Test func aHandedOnJobKeepsItsDeadline() throws {
        var limits = DecodeLane.Limits()
        limits.timeout = .milliseconds(100)
        limits.maxWorkers = 1
        limits.blockedAfter = Self.never
        let lane = DecodeLane(limits: limits)
        let gate = Gate()
        defer { gate.release() }
        let first = lane.submit(owner: "a", on: loop) { gate.pass(); return 0 }
        let ran = Gate()
        let handed = lane.submit(owner: "b", on: loop, express: { _ in .slow { _ in ran.entered.add(1, ordering: .relaxed); return 1 } })
        #expect(try handed.wait() == .failure(.timedOut(seconds: 0.1)))
        #expect(try first.wait() == .failure(.timedOut(seconds: 0.1)))
        gate.release()
        #expect(eventually { lane.counts.stuck == 0 && lane.counts.queued == 0 })
        #expect(ran.entered.load(ordering: .relaxed) == 0)
    }

    /// With real files: the slow pool full of other owners' decodes, a cached file is
    /// served from the cache and a small one decoded at once (both in the express step);
    /// a file whose header says it is long goes to the slow pool, and stops when cancelled.
    @Test func cachedAndSmallFilesAreServedWhileTheSlowPoolIsFull() throws {
        let dir = "/tmp/cued-lane-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        mkdir(dir, 0o700)
        defer { for f in ["cached.wav", "small.wav", "big.wav"] { unlink(dir + "/" + f) }; rmdir(dir) }
        let cached = dir + "/cached.wav", small = dir + "/small.wav", big = dir + "/big.wav"
        try writeWAV(cached, channels: 2, rate: 48_000, frames: 4_800)
        try writeWAV(small, channels: 1, rate: 48_000, frames: 4_800)
        // 1 s of 64 channels at 768 kHz: 49 M samples to decode, nothing on disk past the header.
        try writeWAV(big, channels: 64, rate: 768_000, frames: 768_000, sparse: true)
        let library = SoundLibrary(theme: SoundTheme(environment: ["HOME": dir, "XDG_DATA_HOME": dir, "XDG_DATA_DIRS": dir]),
                                   cacheLimitBytes: 1 << 24)
        guard case .done(.cue) = library.fileExpress(cached) else { Issue.record("not decoded in the express step"); return }
        guard case .slow = library.fileExpress(big) else { Issue.record("a long file decoded in the express step"); return }
        guard case .failed(let reply) = library.file(big, cancelled: { true }) else { Issue.record("not cancelled"); return }
        #expect("\(reply)".contains(CueLoader.cancelledReason), "\(reply)")

        let (lane, gate, slow) = laneWithAFullSlowPool()
        let limits = lane.limits
        defer { gate.release() }
        func express(_ path: String) -> EventLoopFuture<Result<String, DecodeLane.Refusal>> {
            lane.submit(owner: "other", on: loop, express: { c in
                switch library.fileExpress(path, cancelled: { c.isCancelled }) {
                case .done(.cue(let cue)): return .done("cue \(cue.frames)")
                case .done(let other): return .done("\(other)")
                case .slow: return .slow { _ in "slow" }
                }
            })
        }
        #expect(try express(cached).wait() == .success("cue 4800"))
        #expect(try express(small).wait() == .success("cue 4800"))  // not cached: decoded in the express step
        let long = express(big)
        #expect(eventually { lane.counts.queued == 1 })  // behind the full slow pool
        gate.release()
        #expect(try long.wait() == .success("slow"))
        #expect(try slow.map { try $0.wait() } == (0..<limits.maxWorkers).map { .success($0) })
    }
}

/// A 16-bit PCM WAV of silence; `sparse`: only the header is written, the file extended.
func writeWAV(_ path: String, channels: Int, rate: Int, frames: Int, sparse: Bool = false) throws {
    func le(_ v: Int, _ n: Int) -> [UInt8] { (0..<n).map { UInt8((v >> (8 * $0)) & 0xFF) } }
    let data = frames * channels * 2
    let header = Array("RIFF".utf8) + le(36 + data, 4) + Array("WAVE".utf8) + Array("fmt ".utf8) + le(16, 4) + le(1, 2)
        + le(channels, 2) + le(rate, 4) + le(rate * channels * 2, 4) + le(channels * 2, 2) + le(16, 2)
        + Array("data".utf8) + le(data, 4)
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    guard fd >= 0 else { throw WAVWriteError() }
    defer { close(fd) }
    let body = sparse ? header : header + [UInt8](repeating: 0, count: data)
    guard body.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) == body.count,
          ftruncate(fd, off_t(header.count + data)) == 0 else { throw WAVWriteError() }
}

struct WAVWriteError: Error {}
