import NIOConcurrencyHelpers
import NIOCore
#if canImport(Glibc)
import Glibc
#endif

/// glibc's gettid(3), missing from the Glibc module (a thread's own nice value takes its tid).
@_silgen_name("gettid")
private func lane_gettid() -> Int32

/// The lane for untrusted work that may take long or never return: decoding a
/// `play-file` or a theme sound, listing the theme. Apart from state saves and
/// reloads (their own lanes), so that neither waits behind a decoder.
///
/// - **A share per client**: an owner (an app, else a connection) has at most
///   `perOwner` jobs running; its others wait in order. Every owner with work gets a
///   worker of its own (up to `maxWorkers`), so one client's slow files never make
///   another's wait: it waits only for CPU.
/// - **A deadline**: a job not done `timeout` after it was asked for is answered
///   `timedOut` at once. Its worker, if the job still runs (a read stuck in the kernel
///   on a hung mount), is written off and no longer counts: a new one takes its place.
///   At most `maxStuck` are written off at a time; beyond that the lane refuses work
///   at once (`stuck`) until one comes back. A written-off thread that never returns
///   stays blocked in the kernel until cued exits (the process exits regardless: the
///   waits of FUSE and NFS are killable).
///
/// Thread-safe; results complete on the event loop given with each job.
public final class DecodeLane: @unchecked Sendable {
    public struct Limits: Sendable {
        public var perOwner = 1
        public var maxWorkers = 8
        public var maxStuck = 8
        /// Jobs one owner may have waiting (beyond: refused at once).
        public var maxQueuedPerOwner = 64
        public var timeout: TimeAmount = .seconds(5)
        /// A worker with nothing to do ends after this.
        public var idleSeconds: Int = 5
        public init() {}
    }

    /// Why a job was not run to its end.
    public enum Refusal: Error, Sendable, Equatable {
        case timedOut(seconds: Double)
        /// Too many workers are stuck (written off).
        case stuck
        /// This owner has too many jobs waiting.
        case queueFull
    }

    private final class Job: @unchecked Sendable {
        let owner: String
        /// Runs the work; returns how to complete its promise with the result.
        let run: @Sendable () -> (@Sendable () -> Void)
        let refuse: @Sendable (Refusal) -> Void
        /// Under the lane's lock.
        var finished = false
        var running = false
        /// The deadline passed while it ran: its worker is written off.
        var abandoned = false
        init(owner: String, run: @escaping @Sendable () -> (@Sendable () -> Void), refuse: @escaping @Sendable (Refusal) -> Void) {
            self.owner = owner; self.run = run; self.refuse = refuse
        }
    }

    public let limits: Limits
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let cond = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    // Under `mutex`:
    private var queue: [Job] = []
    private var running: [String: Int] = [:]
    private var workers = 0
    private var idle = 0
    private var stuck = 0

    public init(limits: Limits = Limits()) {
        self.limits = limits
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(cond, nil)
    }

    deinit {
        // Only once no worker holds the lane (each retains it while it runs).
        pthread_cond_destroy(cond)
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
        cond.deallocate()
    }

    /// Workers now, and those written off (for status and tests).
    public var counts: (workers: Int, stuck: Int, queued: Int) {
        locked { (workers, stuck, queue.count) }
    }

    /// Runs `work` for `owner` within its share and the deadline; completes on `loop`.
    public func submit<T: Sendable>(owner: String, on loop: any EventLoop,
                                    _ work: @escaping @Sendable () -> T) -> EventLoopFuture<Swift.Result<T, Refusal>> {
        let promise = loop.makePromise(of: Swift.Result<T, Refusal>.self)
        let job = Job(owner: owner, run: {
            let result = work()
            return { promise.succeed(.success(result)) }
        }, refuse: { promise.succeed(.failure($0)) })
        let refused: Refusal? = locked {
            if stuck >= limits.maxStuck { return .stuck }
            if queue.lazy.filter({ $0.owner == owner }).count >= limits.maxQueuedPerOwner { return .queueFull }
            queue.append(job)
            dispatch()
            return nil
        }
        if let refused {
            promise.succeed(.failure(refused))
            return promise.futureResult
        }
        let seconds = Double(limits.timeout.nanoseconds) / 1e9
        loop.scheduleTask(in: limits.timeout) { [self] in
            let late = locked { () -> Bool in
                guard !job.finished else { return false }
                job.finished = true
                if job.running {
                    // Its worker is stuck in `work`: written off, replaced.
                    job.abandoned = true
                    running[job.owner, default: 1] -= 1
                    if running[job.owner] == 0 { running[job.owner] = nil }
                    workers -= 1
                    stuck += 1
                } else {
                    queue.removeAll { $0 === job }
                }
                dispatch()
                return true
            }
            if late { job.refuse(.timedOut(seconds: seconds)) }
        }
        return promise.futureResult
    }

    // MARK: - Workers

    private func locked<T>(_ body: () -> T) -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return body()
    }

    /// Under the lock: wakes an idle worker, or starts one, if a job can run.
    private func dispatch() {
        guard runnableIndex() != nil else { return }
        if idle > 0 {
            pthread_cond_signal(cond)
        } else if workers < limits.maxWorkers {
            workers += 1
            startWorker()
        }
    }

    /// Under the lock: the first queued job whose owner is within its share.
    private func runnableIndex() -> Int? {
        queue.firstIndex { (running[$0.owner] ?? 0) < limits.perOwner }
    }

    private func startWorker() {
        let box = Unmanaged.passRetained(self)
        var thread = pthread_t()
        let rc = pthread_create(&thread, nil, { arg in
            let lane = Unmanaged<DecodeLane>.fromOpaque(arg!).takeRetainedValue()
            lane.work()
            return nil
        }, box.toOpaque())
        if rc == 0 {
            pthread_detach(thread)
        } else {
            box.release()
            workers -= 1
        }
    }

    /// A worker: takes runnable jobs until it has been idle `idleSeconds`, or was written off.
    private func work() {
        // Below the event loop and the audio thread: decoding waits for them, not the reverse.
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(lane_gettid()), 5)
        pthread_mutex_lock(mutex)
        while true {
            guard let i = runnableIndex() else {
                idle += 1
                var deadline = timespec()
                clock_gettime(CLOCK_REALTIME, &deadline)
                deadline.tv_sec += limits.idleSeconds
                let rc = pthread_cond_timedwait(cond, mutex, &deadline)
                idle -= 1
                if rc == ETIMEDOUT && runnableIndex() == nil { break }
                continue
            }
            let job = queue.remove(at: i)
            job.running = true
            running[job.owner, default: 0] += 1
            pthread_mutex_unlock(mutex)
            let complete = job.run()
            pthread_mutex_lock(mutex)
            if job.abandoned {
                // Written off while it ran: it no longer counts; its answer was given.
                stuck -= 1
                pthread_mutex_unlock(mutex)
                return
            }
            running[job.owner, default: 1] -= 1
            if running[job.owner] == 0 { running[job.owner] = nil }
            job.finished = true
            complete()
            if runnableIndex() != nil && idle > 0 { pthread_cond_signal(cond) }
        }
        workers -= 1
        pthread_mutex_unlock(mutex)
    }
}
