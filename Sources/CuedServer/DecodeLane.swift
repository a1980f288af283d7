import CuedSystem
import NIOConcurrencyHelpers
import NIOCore
import CuedCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The lane for untrusted work that may take long or never return: decoding a
/// `play-file` or a theme sound, listing the theme. Apart from state saves and
/// reloads (their own lanes), so that neither waits behind a decoder.
///
/// Two pools of workers, under one lock and one set of rules:
///
/// - **Express** (`submit(owner:on:express:)`): a first step that opens the file,
///   answers from the cache if the same file is cached, and decodes at once if its
///   header says it is small (frames × channels, bounded: see
///   `SoundLibrary.expressSamples`); otherwise it hands the job on to the slow pool
///   (`.slow`), keeping its place in time (the deadline runs from the request).
///   So a small or cached sound never waits behind slow decodes: at worst behind
///   other express steps, each a header's read.
/// - **Slow** (`submit(owner:on:cancellable:)`, and jobs handed on): long decodes.
///
/// In each pool:
///
/// - **A share per client**: an owner (an app, else a connection) has at most
///   `perOwner` jobs running; its others wait in order. Every owner with work gets a
///   worker of its own (up to the pool's `maxWorkers`), so one client's slow files
///   never make another's wait: it waits only for CPU. Slow workers run at nice
///   `slowNice` and SCHED_BATCH, express ones at `expressNice`, both relative to
///   cued's own, so below the event loop, the state saver and the audio thread.
/// - **A deadline**: a job not done `timeout` after it was asked for is answered
///   `timedOut` at once, and its work is told to stop (`Cancellation`, which the
///   decoder asks between chunks): a decode that is merely slow ends within a chunk
///   and its worker goes back to its pool.
/// - **Blocked workers are written off, per owner**: a worker whose step has run
///   `blockedAfter` while asleep most of that time (not on a CPU, not waiting for one:
///   a read stuck in the kernel on a hung mount) is written off at once, and so is
///   one whose work has not stopped `cancelGrace` after its deadline. It no longer
///   counts against its pool (a new worker takes its place) but against its owner:
///   an owner with `maxStuckPerOwner` workers written off has its new jobs refused at
///   once (`stuck`) until one comes back; other owners' files and theme sounds are
///   not touched. At most `maxStuck` are written off at a time (all owners): with the
///   pools' sizes, a hard cap on threads; past it a blocked worker keeps its slot. A
///   written-off thread that comes back rejoins its pool if there is room; one that
///   never returns stays blocked in the kernel until cued exits (the process exits
///   regardless: the waits of FUSE and NFS are killable).
///
/// Thread-safe; results complete on the event loop given with each job.
public final class DecodeLane: @unchecked Sendable {
    public struct Limits: Sendable {
        /// The slow pool.
        public var perOwner = 1
        public var maxWorkers = 8
        /// The express pool (one step each: short unless stuck in the kernel).
        public var expressPerOwner = 1
        public var maxExpressWorkers = 4
        /// Workers written off one owner may have; beyond, that owner's jobs are refused at once.
        public var maxStuckPerOwner = 2
        /// Workers written off at most, all owners together.
        public var maxStuck = 16
        /// Jobs one owner may have waiting, in both pools (beyond: refused at once).
        public var maxQueuedPerOwner = 64
        public var timeout: TimeAmount = .seconds(5)
        /// How long a cancelled job's work may take to stop before its worker is written off.
        public var cancelGrace: TimeAmount = .milliseconds(500)
        /// A step running this long, asleep for three quarters of it or more, is taken as
        /// blocked in the kernel. An express step is a header's read and at most 2^19
        /// samples decoded (10–60 ms of CPU); a slow decode is CPU-bound: neither sleeps.
        public var blockedAfter: TimeAmount = .milliseconds(100)
        /// A worker with nothing to do ends after this.
        public var idleSeconds: Int = 5
        /// Nice values of the workers, above cued's own (the event loop's, the state
        /// saver's) when the lane was made: an express step is short and wanted at once, a
        /// slow decode waits for everything else. Slow workers are also SCHED_BATCH (never
        /// preempt on wakeup: they are CPU-bound by nature).
        public var expressNice: Int32 = 2
        public var slowNice: Int32 = 10
        /// The most threads the lane runs at once: both pools and those written off.
        public var maxThreads: Int { maxWorkers + maxExpressWorkers + maxStuck }
        public init() {}
    }

    /// Why a job was not run to its end.
    public enum Refusal: Error, Sendable, Equatable {
        case timedOut(seconds: Double)
        /// This owner has too many workers stuck (written off).
        case stuck
        /// This owner has too many jobs waiting.
        case queueFull
    }

    /// What a job's work is told: its deadline passed, stop (the answer was given).
    public final class Cancellation: Sendable {
        private let flag = Atomic<Bool>(false)
        public init() {}
        public var isCancelled: Bool { flag.load(ordering: .relaxed) }
        func cancel() { flag.store(true, ordering: .relaxed) }
    }

    /// What an express step found: the answer, or the work to do in the slow pool.
    public enum Step<T: Sendable>: Sendable {
        case done(T)
        case slow(@Sendable (Cancellation) -> T)
    }

    /// A run's outcome, type-erased: how to complete the promise, or the next step.
    private enum Ran {
        case done(@Sendable () -> Void)
        case slow(@Sendable (Cancellation) -> Ran)
    }

    private enum Stage: Int { case express = 0, slow = 1 }

    private final class Job: @unchecked Sendable {
        let owner: String
        let loop: any EventLoop
        let cancellation = Cancellation()
        // Under the lane's lock. `run` and `refuse` hold the promise, so the result: both
        // are let go once the job is answered (its deadline's timer outlives it otherwise).
        var run: (@Sendable (Cancellation) -> Ran)?
        var refuse: (@Sendable (Refusal) -> Void)?
        var deadline: Scheduled<Void>?
        var stage: Stage
        /// Answered (done, or timed out).
        var finished = false
        var running = false
        /// Its work did not stop in time, or blocked: its worker is written off.
        var abandoned = false
        /// While running: when its step started (monotonic ns), and its worker's clock.
        var startedAt: UInt64 = 0
        var clock = ThreadClock()
        var busyAtStart: UInt64 = 0
        init(owner: String, loop: any EventLoop, stage: Stage, run: @escaping @Sendable (Cancellation) -> Ran,
             refuse: @escaping @Sendable (Refusal) -> Void) {
            self.owner = owner; self.loop = loop; self.stage = stage; self.run = run; self.refuse = refuse
        }
    }

    /// One pool's workers and queue; under the lane's lock.
    private final class Pool {
        let stage: Stage
        let perOwner: Int
        let maxWorkers: Int
        let nice: Int32
        let cond = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
        var queue: [Job] = []
        var running: [String: Int] = [:]
        var workers = 0
        var idle = 0
        /// Idle workers signalled and not yet awake: they are not idle any more.
        var signalled = 0
        init(stage: Stage, perOwner: Int, maxWorkers: Int, nice: Int32) {
            self.stage = stage; self.perOwner = perOwner; self.maxWorkers = maxWorkers; self.nice = nice
            pthread_cond_init(cond, nil)
        }
        deinit {
            pthread_cond_destroy(cond)
            cond.deallocate()
        }
        /// The first queued job whose owner is within its share.
        func runnableIndex() -> Int? {
            queue.firstIndex { (running[$0.owner] ?? 0) < perOwner }
        }
        func release(_ owner: String) {
            running[owner, default: 1] -= 1
            if running[owner] == 0 { running[owner] = nil }
        }
    }

    public let limits: Limits
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    // Under `mutex`:
    private let pools: [Pool]
    /// Workers written off, in all and by owner.
    private var stuck = 0
    private var stuckByOwner: [String: Int] = [:]
    /// Jobs running now (for the watch over blocked workers), and whether it is scheduled.
    private var active: [Job] = []
    private var watching = false
    /// The nice value of the thread that made the lane: cued's own.
    private let baseNice: Int32

    public init(limits: Limits = Limits()) {
        self.limits = limits
        errno = 0
        let nice = getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0)
        baseNice = errno == 0 ? nice : 0
        pools = [Pool(stage: .express, perOwner: limits.expressPerOwner, maxWorkers: limits.maxExpressWorkers, nice: limits.expressNice),
                 Pool(stage: .slow, perOwner: limits.perOwner, maxWorkers: limits.maxWorkers, nice: limits.slowNice)]
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        // Only once no worker holds the lane (each retains it while it runs).
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Slow workers now, those written off, and jobs waiting in both pools (for status and tests).
    public var counts: (workers: Int, stuck: Int, queued: Int) {
        locked { (pools[1].workers, stuck, pools[0].queue.count + pools[1].queue.count) }
    }

    /// Express workers now.
    var expressWorkers: Int { locked { pools[0].workers } }

    /// Workers written off of one owner.
    func stuck(owner: String) -> Int { locked { stuckByOwner[owner] ?? 0 } }

    /// Runs `work` in the slow pool for `owner`, within its share and the deadline; completes on `loop`.
    public func submit<T: Sendable>(owner: String, on loop: any EventLoop,
                                    _ work: @escaping @Sendable () -> T) -> EventLoopFuture<Swift.Result<T, Refusal>> {
        submit(owner: owner, on: loop, cancellable: { _ in work() })
    }

    /// Runs `work` in the slow pool; it should stop soon once its `Cancellation` says so.
    public func submit<T: Sendable>(owner: String, on loop: any EventLoop,
                                    cancellable work: @escaping @Sendable (Cancellation) -> T) -> EventLoopFuture<Swift.Result<T, Refusal>> {
        submit(owner: owner, on: loop, stage: .slow, T.self) { promise in
            { c in let r = work(c); return .done { promise.succeed(.success(r)) } }
        }
    }

    /// Runs `express` in the express pool; if it hands on (`.slow`), that work
    /// runs in the slow pool, for the same owner and under the same deadline.
    public func submit<T: Sendable>(owner: String, on loop: any EventLoop,
                                    express: @escaping @Sendable (Cancellation) -> Step<T>) -> EventLoopFuture<Swift.Result<T, Refusal>> {
        submit(owner: owner, on: loop, stage: .express, T.self) { promise in
            { c in
                switch express(c) {
                case .done(let r): return .done { promise.succeed(.success(r)) }
                case .slow(let next): return .slow { c in let r = next(c); return .done { promise.succeed(.success(r)) } }
                }
            }
        }
    }

    private func submit<T: Sendable>(owner: String, on loop: any EventLoop, stage: Stage, _: T.Type,
                                     _ make: (EventLoopPromise<Swift.Result<T, Refusal>>) -> @Sendable (Cancellation) -> Ran)
        -> EventLoopFuture<Swift.Result<T, Refusal>> {
        let promise = loop.makePromise(of: Swift.Result<T, Refusal>.self)
        let job = Job(owner: owner, loop: loop, stage: stage, run: make(promise), refuse: { promise.succeed(.failure($0)) })
        let refused: Refusal? = locked {
            if stuckByOwner[owner, default: 0] >= limits.maxStuckPerOwner { return .stuck }
            let waiting = pools[0].queue.lazy.filter { $0.owner == owner }.count + pools[1].queue.lazy.filter { $0.owner == owner }.count
            if waiting >= limits.maxQueuedPerOwner { return .queueFull }
            pools[stage.rawValue].queue.append(job)
            dispatch(pools[stage.rawValue])
            return nil
        }
        if let refused {
            promise.succeed(.failure(refused))
            return promise.futureResult
        }
        let seconds = Double(limits.timeout.nanoseconds) / 1e9
        let grace = limits.cancelGrace
        let deadline = loop.scheduleTask(in: limits.timeout) { [self] in
            let refuse = locked { () -> (@Sendable (Refusal) -> Void)? in
                guard !job.finished else { return nil }
                if job.running {
                    // Told to stop; written off if it has not stopped after the grace.
                    job.cancellation.cancel()
                } else {
                    pools[job.stage.rawValue].queue.removeAll { $0 === job }
                }
                return finish(job)
            }
            guard let refuse else { return }
            refuse(.timedOut(seconds: seconds))
            loop.scheduleTask(in: grace) { [self] in
                locked {
                    guard job.running, !job.abandoned else { return }
                    // Its worker is stuck in the work (in the kernel): written off, replaced.
                    writeOff(job)
                }
            }
        }
        let answered = locked { () -> Bool in
            if job.finished { return true }
            job.deadline = deadline
            return false
        }
        if answered { deadline.cancel() }
        return promise.futureResult
    }

    // MARK: - Workers

    private func locked<T>(_ body: () -> T) -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return body()
    }

    /// Under the lock: the job is answered; lets go of what holds its promise, and
    /// returns how to refuse it (for a deadline).
    private func finish(_ job: Job) -> (@Sendable (Refusal) -> Void)? {
        job.finished = true
        let refuse = job.refuse
        job.refuse = nil
        job.run = nil
        return refuse
    }

    /// Under the lock: wakes an idle worker, or starts one, if a job can run.
    private func dispatch(_ pool: Pool) {
        guard pool.runnableIndex() != nil else { return }
        if pool.idle > pool.signalled {
            pool.signalled += 1
            pthread_cond_signal(pool.cond)
        } else if pool.workers < pool.maxWorkers {
            pool.workers += 1
            startWorker(pool)
        }
    }

    /// Under the lock: `job`'s worker no longer counts against its pool (a new one may
    /// start) but against its owner, if fewer than `maxStuck` are written off already.
    private func writeOff(_ job: Job) {
        guard stuck < limits.maxStuck else { return }
        let pool = pools[job.stage.rawValue]
        job.abandoned = true
        pool.release(job.owner)
        pool.workers -= 1
        stuck += 1
        stuckByOwner[job.owner, default: 0] += 1
        dispatch(pool)
    }

    /// Under the lock, while a job runs: checks the running jobs every half of
    /// `blockedAfter` (only while any runs: an idle lane has no timer).
    private func watch(on loop: any EventLoop) {
        guard !watching else { return }
        watching = true
        let half = TimeAmount.nanoseconds(max(1, limits.blockedAfter.nanoseconds / 2))
        loop.scheduleTask(in: half) { [self] in
            locked {
                watching = false
                let now = MonotonicClock.now()
                let after = UInt64(max(0, limits.blockedAfter.nanoseconds))
                for job in active where !job.abandoned && now &- job.startedAt >= after {
                    // Asleep: the time it ran less what it spent on a CPU or waiting for one.
                    let elapsed = now &- job.startedAt
                    let busy = job.clock.busyNanoseconds().map { $0 &- job.busyAtStart } ?? 0
                    if busy < elapsed / 4 { writeOff(job) }
                }
                if active.contains(where: { !$0.abandoned }) { watch(on: loop) }
            }
        }
    }

    private func startWorker(_ pool: Pool) {
        let start = Start(lane: self, pool: pool)
        if case .failure = CuedThread.start("cued-decode", { start.lane.work(start.pool) }) { pool.workers -= 1 }
    }

    /// What a new worker takes: its pool is the lane's, behind the lane's lock.
    private final class Start: @unchecked Sendable {
        let lane: DecodeLane
        let pool: Pool
        init(lane: DecodeLane, pool: Pool) { self.lane = lane; self.pool = pool }
    }

    /// A worker: takes runnable jobs from its pool until it has been idle `idleSeconds`, or
    /// was written off and found no room when it came back.
    private func work(_ pool: Pool) {
        // Below the event loop, the state saver and the audio thread: decoding waits for them, not the reverse.
        if pool.stage == .slow {
            var param = sched_param()
            _ = pthread_setschedparam(pthread_self(), 3 /* SCHED_BATCH */, &param)
        }
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(SystemCall.gettid()), min(19, baseNice + pool.nice))
        let clock = ThreadClock.ofCurrentThread()
        defer { clock.close() }
        pthread_mutex_lock(mutex)
        while true {
            guard let i = pool.runnableIndex() else {
                pool.idle += 1
                var deadline = timespec()
                clock_gettime(CLOCK_REALTIME, &deadline)
                deadline.tv_sec += limits.idleSeconds
                let rc = pthread_cond_timedwait(pool.cond, mutex, &deadline)
                pool.idle -= 1
                if pool.signalled > 0 { pool.signalled -= 1 }
                if rc == ETIMEDOUT && pool.runnableIndex() == nil { break }
                continue
            }
            let job = pool.queue.remove(at: i)
            guard let run = job.run else { continue }  // answered (timed out) meanwhile
            job.running = true
            pool.running[job.owner, default: 0] += 1
            job.clock = clock
            job.busyAtStart = clock.busyNanoseconds() ?? 0
            job.startedAt = MonotonicClock.now()
            active.append(job)
            watch(on: job.loop)
            pthread_mutex_unlock(mutex)
            let ran = run(job.cancellation)
            pthread_mutex_lock(mutex)
            job.running = false
            active.removeAll { $0 === job }
            let wasWrittenOff = job.abandoned
            if wasWrittenOff {
                // It counts against its owner no more.
                job.abandoned = false
                stuck -= 1
                stuckByOwner[job.owner, default: 1] -= 1
                if stuckByOwner[job.owner] == 0 { stuckByOwner[job.owner] = nil }
            } else {
                pool.release(job.owner)
            }
            // Answered first (a worker written off as blocked may come back before its deadline).
            if !job.finished {
                switch ran {
                case .done(let complete):
                    let deadline = job.deadline
                    _ = finish(job)
                    job.deadline = nil
                    pthread_mutex_unlock(mutex)
                    complete()
                    deadline?.cancel()
                    pthread_mutex_lock(mutex)
                case .slow(let next):
                    // Handed on: it waits in the slow pool, its deadline running on.
                    let slow = pools[Stage.slow.rawValue]
                    job.run = next
                    job.stage = .slow
                    slow.queue.append(job)
                    dispatch(slow)
                }
            }
            if wasWrittenOff {
                // Back in the pool if there is room.
                guard pool.workers < pool.maxWorkers else {
                    pthread_mutex_unlock(mutex)
                    return
                }
                pool.workers += 1
            }
            if pool.runnableIndex() != nil && pool.idle > pool.signalled {
                pool.signalled += 1
                pthread_cond_signal(pool.cond)
            }
        }
        pool.workers -= 1
        pthread_mutex_unlock(mutex)
    }
}

/// How long a thread has been on a CPU or waiting for one (Linux's
/// /proc/thread-self/schedstat: run time and run-queue wait): what a thread blocked
/// in the kernel does not add to. Opened by the thread itself, readable from any.
struct ThreadClock: @unchecked Sendable {
    private var fd: Int32 = -1

    static func ofCurrentThread() -> ThreadClock {
        ThreadClock(fd: open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC))
    }

    /// nil where the kernel does not say (no schedstat): then a step running
    /// `blockedAfter` is taken as blocked.
    func busyNanoseconds() -> UInt64? {
        guard fd >= 0 else { return nil }
        var buf = [UInt8](repeating: 0, count: 96)
        let n = buf.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { return nil }
        var fields: [UInt64] = [0]
        for b in buf[..<n] {
            if b >= 0x30 && b <= 0x39 {
                fields[fields.count - 1] = fields[fields.count - 1] &* 10 &+ UInt64(b - 0x30)
            } else if fields.count == 2 {
                break
            } else {
                fields.append(0)
            }
        }
        return fields.count == 2 ? fields[0] &+ fields[1] : nil
    }

    func close() { if fd >= 0 { _ = Glibc.close(fd) } }
}
