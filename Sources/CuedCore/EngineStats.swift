import Synchronization
#if canImport(Glibc)
import Glibc
#endif

public enum SinkState: String, Sendable {
    case running, idle, closed, failed

    /// As an atomic holds it.
    var code: Int {
        switch self {
        case .running: 0
        case .idle: 1
        case .closed: 2
        case .failed: 3
        }
    }
    init(code: Int) { self = code == 0 ? .running : code == 1 ? .idle : code == 3 ? .failed : .closed }
}

/// Counters and state the audio thread publishes and the server reads.
public final class EngineStats: Sendable {
    public let stolen = Atomic<Int>(0)
    public let clipped = Atomic<Int>(0)
    public let xruns = Atomic<Int>(0)
    public let dropped = Atomic<Int>(0)
    public let voicesActive = Atomic<Int>(0)
    /// Running devices that stopped taking frames (closed and reopened).
    public let stalls = Atomic<Int>(0)
    /// Cues mixed into frames the device gave back (started mid-stream on a device that rewinds).
    public let rewinds = Atomic<Int>(0)
    /// Devices given up after xruns recovered in a row without progress.
    public let lost = Atomic<Int>(0)
    /// Graph cycles a sound server played without the stream's audio (a hole inside a
    /// sounding stream) that no xrun reported: the native PipeWire stream's.
    public let missedCycles = Atomic<Int>(0)
    /// Events the audio thread could not hand out, its outbox full (a relay thread starved).
    public let eventsLost = Atomic<Int>(0)
    /// What the audio thread let go of and released itself, its outbox too full to take it.
    public let releasedByAudioThread = Atomic<Int>(0)
    /// The margin the device is given against stalls (`MarginTuner`), in frames (0: fixed), and
    /// the times it grew after a miss and shrank after a quiet while.
    public let marginFrames = Atomic<Int>(0)
    public let marginGrowths = Atomic<Int>(0)
    public let marginShrinks = Atomic<Int>(0)
    /// Misses the margin saw (an xrun, or cycles missed in one go), whether or not it could grow.
    public let marginMisses = Atomic<Int>(0)
    /// How the audio thread is scheduled and who granted it (its own attempt, the asks of RTKit
    /// or the portal): see `RealtimeGrant`.
    public let realtime: Mutex<RealtimeGrant>
    /// The audio thread's kernel id (0: not started), for those who ask on its behalf.
    public let audioThreadID = Atomic<Int32>(0)

    /// `status`'s `audio_thread`, with the kernel's word on how the thread runs now (a grant
    /// taken away shows, and is asked for again at the next chance).
    public func audioThreadStatus(now: UInt64 = MonotonicClock.now()) -> String {
        let actual = Self.scheduling(ofThread: audioThreadID.load(ordering: .relaxed))
        return realtime.withLock { g in
            if let actual { g.observed(actual, now: now) }
            return g.status
        }
    }

    /// How the kernel schedules thread `tid` of this process (nil: not known).
    public static func scheduling(ofThread tid: Int32) -> RealtimeGrant.Scheduling? {
        guard tid > 0 else { return nil }
        let policy = sched_getscheduler(tid)
        guard policy >= 0 else { return nil }
        switch policy & ~Int32(0x4000_0000) {  // SCHED_RESET_ON_FORK
        case SCHED_FIFO, SCHED_RR:
            var p = sched_param()
            return .realtime(priority: sched_getparam(tid, &p) == 0 ? Int(p.sched_priority) : 0, via: .own)
        default:
            errno = 0
            let n = getpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(tid))
            return errno == 0 && n < 0 ? .nice(Int(n), via: .own) : .normal
        }
    }

    /// Frames written to the device and not yet sounded, after the last write
    /// (`snd_pcm_delay`); 0 when the stream is stopped.
    public let deviceDelayFrames = Atomic<Int>(0)
    /// What the latency figures (`latencyPercentiles`) measure, for `status`.
    /// (The latency is from reading the request to handing its first frame to the device;
    /// time to sound adds `deviceDelayFrames`.)
    public static let latencyMeasures = "handoff"
    /// Monotonic ns of the audio thread's last loop turn.
    public let heartbeat = Atomic<UInt64>(0)
    /// True while the audio thread sleeps waiting for work (idle by design, not stuck).
    public let waiting = Atomic<Bool>(false)

    /// The audio thread is healthy if it is idle-waiting or turned its loop
    /// within `maxStallNanoseconds` (a period is milliseconds).
    public func audioThreadIsHealthy(now: UInt64 = MonotonicClock.now(), maxStallNanoseconds: UInt64) -> Bool {
        waiting.load(ordering: .relaxed) || now &- heartbeat.load(ordering: .relaxed) < maxStallNanoseconds
    }

    /// The sink's format, error and kind: set as a device opens or fails (never in the steady
    /// state). Its state, which changes as each burst of cues starts and ends, is an atomic:
    /// the audio thread takes no lock for it.
    struct SinkStatus { var format: SinkFormat?; var error: String?; var kind: String? }
    private let sink = Mutex(SinkStatus())
    private let state = Atomic<Int>(SinkState.closed.code)

    /// The most recent trigger-to-sink latencies, µs (one a voice start: no lock).
    private let latencies = LatencyRing()

    public init(realtime: RealtimeGrant = RealtimeGrant()) {
        self.realtime = Mutex(realtime)
    }

    public var sinkState: SinkState { SinkState(code: state.load(ordering: .relaxed)) }
    public var sinkFormat: SinkFormat? { sink.withLock { $0.format } }
    public var sinkError: String? { sink.withLock { $0.error } }
    /// The output's kind (`hw`, `pipewire`, `pulse`, `dmix`, `null`, …), known once it opened.
    public var sinkKind: String? { sink.withLock { $0.kind } }
    /// The device delay in µs (from `deviceDelayFrames` and the rate), nil before the first open.
    public var deviceDelayMicroseconds: Int? {
        guard let rate = sinkFormat?.rate, rate > 0 else { return nil }
        return deviceDelayFrames.load(ordering: .relaxed) * 1_000_000 / rate
    }

    func setSink(_ state: SinkState, error: String? = nil, keepError: Bool = false) {
        if !keepError { sink.withLock { $0.error = error } }
        self.state.store(state.code, ordering: .relaxed)
    }

    /// A device opened: its format and kind, and no error; its state follows from the machine.
    func setOpened(format: SinkFormat, kind: String) {
        sink.withLock {
            $0.format = format
            $0.kind = kind
            $0.error = nil
        }
    }

    /// The device machine's state as `status` shows it: a lingering stream is idle to a user.
    func publish<Job>(_ phase: DeviceMachine<Job>.Phase) {
        switch phase {
        case .streaming, .draining: setSink(.running, keepError: true)
        case .idle, .lingering: setSink(.idle, keepError: true)
        case .closed, .finished: setSink(.closed, keepError: true)
        case .failed: setSink(.failed, keepError: true)
        case .opening: break
        }
    }

    /// The margin against stalls as `status` shows it.
    func publish(_ tuner: MarginTuner) {
        marginFrames.store(tuner.frames ?? 0, ordering: .relaxed)
        marginGrowths.store(tuner.growths, ordering: .relaxed)
        marginShrinks.store(tuner.shrinks, ordering: .relaxed)
        marginMisses.store(tuner.misses, ordering: .relaxed)
    }

    func recordLatency(ns: UInt64) {
        let us = UInt32(min(ns / 1000, UInt64(UInt32.max)))
        latencies.add(us)
    }

    /// p50, p99 and max of the recent latencies in µs (nil when none yet). By
    /// selection, not a sort: every `status` asks for them, and sorting the 4,096
    /// samples was 40 % of cued's CPU under 250 clients pipelining `status wait`.
    public func latencyPercentiles() -> (p50: UInt32, p99: UInt32, max: UInt32)? {
        var values = latencies.snapshot()
        guard !values.isEmpty else { return nil }
        return Self.percentiles(&values)
    }

    /// The same of `values` (not empty; reordered): the ranks a sort would give.
    static func percentiles(_ values: inout [UInt32]) -> (p50: UInt32, p99: UInt32, max: UInt32) {
        let n = values.count
        let k50 = min(n - 1, n / 2), k99 = min(n - 1, Int(Double(n) * 0.99))
        let p50 = select(&values, k50, in: 0..<n)
        // What follows rank k50 is not smaller than p50, so p99 is ranked among it.
        let p99 = select(&values, k99, in: k50..<n)
        return (p50, p99, values[k99...].max()!)
    }

    /// Leaves at index `k` the value a sort of `range` would put there, nothing
    /// larger before it and nothing smaller after it in the range (Hoare's selection,
    /// median-of-three pivot), and returns it.
    static func select(_ v: inout [UInt32], _ k: Int, in range: Range<Int>) -> UInt32 {
        var lo = range.lowerBound, hi = range.upperBound - 1
        while lo < hi {
            let a = v[lo], b = v[lo + (hi - lo) / 2], c = v[hi]
            let pivot = max(min(a, b), min(max(a, b), c))
            var i = lo, j = hi
            while i <= j {
                while v[i] < pivot { i += 1 }
                while v[j] > pivot { j -= 1 }
                if i <= j {
                    v.swapAt(i, j)
                    i += 1
                    j -= 1
                }
            }
            if k <= j { hi = j } else if k >= i { lo = i } else { break }
        }
        return v[k]
    }
}

/// The last 4,096 values: one writer (the audio thread) stores, readers copy, neither locks. A
/// reader racing the writer may see a value of the round before beside one of this: figures for
/// percentiles, not a record.
final class LatencyRing: @unchecked Sendable {  // its slots are atomics
    private static let size = 4096
    private let values: UnsafeMutablePointer<Atomic<UInt32>>
    /// Values written so far (the next goes to `written % size`).
    private let written = Atomic<Int>(0)

    init() {
        values = .allocate(capacity: Self.size)
        for i in 0..<Self.size { (values + i).initialize(to: Atomic(0)) }
    }

    deinit {
        values.deinitialize(count: Self.size)
        values.deallocate()
    }

    /// The one writer.
    func add(_ v: UInt32) {
        let n = written.load(ordering: .relaxed)
        values[n % Self.size].store(v, ordering: .relaxed)
        written.store(n + 1, ordering: .releasing)
    }

    func snapshot() -> [UInt32] {
        let count = min(written.load(ordering: .acquiring), Self.size)
        return (0..<count).map { values[$0].load(ordering: .relaxed) }
    }
}
