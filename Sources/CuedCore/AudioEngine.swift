import Dispatch
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

public enum SinkState: String, Sendable {
    case running, idle, closed, failed
}

/// What the audio thread reports on state changes (never in the steady state).
public enum EngineEvent: Sendable {
    case opened(SinkFormat)
    case openFailed(String)
    case writeFailed(String)
    case streamStopped
    case closed
    case dropped(cue: String, owner: String, lateMs: Int)
    /// A `stop` command's answer: how many voices it faded out.
    case stopped(ticket: UInt64, count: Int)
    /// A waited-for voice is over (waitID ≠ 0 only).
    case voiceEnded(waitID: UInt64, outcome: VoiceOutcome)
}

public enum VoiceOutcome: Sendable, Equatable {
    /// Its last frame sounded at the device.
    case played
    /// A `stop` (or mute) cut it short.
    case stopped
    /// It never started (the device was gone for longer than the start deadline).
    case dropped
}

/// Which voices a `stop` fades out.
public enum StopScope: Sendable, Equatable {
    case all
    case owner(String)
    case cue(name: String, owner: String)
}

/// Counters and state the audio thread publishes and the server reads.
public final class EngineStats: Sendable {
    public let played = Atomic<Int>(0)
    public let stolen = Atomic<Int>(0)
    public let clipped = Atomic<Int>(0)
    public let xruns = Atomic<Int>(0)
    public let dropped = Atomic<Int>(0)
    public let voicesActive = Atomic<Int>(0)
    /// Monotonic ns of the audio thread's last loop turn.
    public let heartbeat = Atomic<UInt64>(0)
    /// True while the audio thread sleeps waiting for work (idle by design, not stuck).
    public let waiting = Atomic<Bool>(false)

    /// The audio thread is healthy if it is idle-waiting or turned its loop
    /// within `maxStallNanoseconds` (a period is milliseconds).
    public func audioThreadIsHealthy(now: UInt64 = MonotonicClock.now(), maxStallNanoseconds: UInt64) -> Bool {
        waiting.load(ordering: .relaxed) || now &- heartbeat.load(ordering: .relaxed) < maxStallNanoseconds
    }

    struct SinkStatus { var state = SinkState.closed; var format: SinkFormat?; var error: String? }
    private let sink = Mutex(SinkStatus())

    /// The most recent trigger-to-sink latencies, µs.
    private let latencies = Mutex(LatencyRing())

    public init() {}

    public var sinkState: SinkState { sink.withLock { $0.state } }
    public var sinkFormat: SinkFormat? { sink.withLock { $0.format } }
    public var sinkError: String? { sink.withLock { $0.error } }

    func setSink(_ state: SinkState, format: SinkFormat? = nil, error: String? = nil, keepError: Bool = false) {
        sink.withLock {
            $0.state = state
            if let format { $0.format = format }
            if !keepError { $0.error = error }
        }
    }

    func recordLatency(ns: UInt64) {
        let us = UInt32(min(ns / 1000, UInt64(UInt32.max)))
        latencies.withLock { $0.add(us) }
    }

    /// p50, p99 and max of the recent latencies in µs (nil when none yet).
    public func latencyPercentiles() -> (p50: UInt32, p99: UInt32, max: UInt32)? {
        var values = latencies.withLock { $0.snapshot() }
        guard !values.isEmpty else { return nil }
        values.sort()
        func pct(_ p: Double) -> UInt32 { values[min(values.count - 1, Int(Double(values.count) * p))] }
        return (pct(0.50), pct(0.99), values.last!)
    }
}

struct LatencyRing {
    private var values = [UInt32](repeating: 0, count: 4096)
    private var next = 0
    private var count = 0
    mutating func add(_ v: UInt32) {
        values[next] = v
        next = (next + 1) % values.count
        count = min(count + 1, values.count)
    }
    func snapshot() -> [UInt32] { Array(values[0..<count]) }
}

/// A bounded multi-producer queue for the audio thread. Producers never
/// block on audio: `push` takes a short lock and fails when full.
final class CommandQueue: Sendable {
    private struct Ring {
        var items: [AudioEngine.Command?]
        var head = 0, count = 0
    }
    private let ring: Mutex<Ring>
    init(capacity: Int) { ring = Mutex(Ring(items: Array(repeating: nil, count: capacity))) }

    func push(_ c: AudioEngine.Command) -> Bool {
        ring.withLock { r in
            guard r.count < r.items.count else { return false }
            r.items[(r.head + r.count) % r.items.count] = c
            r.count += 1
            return true
        }
    }

    func pop() -> AudioEngine.Command? {
        ring.withLock { r in
            guard r.count > 0 else { return nil }
            let c = r.items[r.head]
            r.items[r.head] = nil
            r.head = (r.head + 1) % r.items.count
            r.count -= 1
            return c
        }
    }
}

/// The audio thread: takes commands from a bounded queue, mixes, writes to
/// the sink. It sleeps on a semaphore when nothing sounds, so an idle daemon
/// uses no CPU and has no wakeups (besides one idle-close timer).
public final class AudioEngine: @unchecked Sendable {
    public enum Command: Sendable {
        case play(Cue, gain: Float, requestTime: UInt64, owner: String, waitID: UInt64)
        case stop(StopScope, ticket: UInt64)
        case fadeOutAll
        /// Open and prepare the device now, so the next cue starts warm.
        case prewarm
        case shutdown(deadline: UInt64)
    }

    public struct Configuration: Sendable {
        public var voices = 16
        public var idleCloseSeconds = 30.0
        /// A cue that cannot start within this of its request is dropped, never played late.
        public var maxStartDelayMs = 250
        /// Plays that can wait for the next period: 8192 covers > 1.6 M plays/s at 5 ms periods.
        public var queueCapacity = 8192
        /// Test hook: the first cue makes the audio thread hang forever, as a
        /// stuck driver would (for watchdog tests only).
        public var hangOnPlayForTesting = false
        public init() {}
    }

    public let stats = EngineStats()
    public let configuration: Configuration
    private let sink: any Sink   // touched by the audio thread only, after start()
    private let queue: CommandQueue
    private let wake = DispatchSemaphore(value: 0)
    private let onEvent: @Sendable (EngineEvent) -> Void
    private let finished = DispatchSemaphore(value: 0)
    private let started = Atomic<Bool>(false)

    public var sinkSpec: String { sink.spec }

    public init(sink: any Sink, configuration: Configuration = .init(),
                onEvent: @escaping @Sendable (EngineEvent) -> Void = { _ in }) {
        self.sink = sink
        self.configuration = configuration
        self.queue = CommandQueue(capacity: configuration.queueCapacity)
        self.onEvent = onEvent
        pending.reserveCapacity(Self.maxPending)  // the audio thread must not allocate, even when the device fails
    }

    /// Starts the audio thread.
    public func start() {
        guard !started.exchange(true, ordering: .relaxed) else { return }
        let box = Unmanaged.passRetained(self)
        var thread = pthread_t()
        let rc = pthread_create(&thread, nil, { arg in
            let engine = Unmanaged<AudioEngine>.fromOpaque(arg!).takeRetainedValue()
            engine.run()
            return nil
        }, box.toOpaque())
        precondition(rc == 0, "cannot start the audio thread: \(rc)")
        pthread_detach(thread)
    }

    /// Hands a command to the audio thread; false if the queue is full.
    /// Never blocks on audio.
    @discardableResult
    public func submit(_ command: Command) -> Bool {
        guard queue.push(command) else { return false }
        wake.signal()
        return true
    }

    /// Lets what is playing finish (up to `graceMs`), closes the sink and ends
    /// the audio thread. Blocks the caller until then.
    public func shutdown(graceMs: Int = 500) {
        let deadline = MonotonicClock.now() + UInt64(graceMs) * 1_000_000
        while !submit(.shutdown(deadline: deadline)) { usleep(1000) }
        finished.wait()
    }

    // MARK: - The audio thread

    /// A cue waiting for the device to (re)open; it plays only if that happens
    /// within `maxStartDelayMs` of its request.
    private struct Pending { var cue: Cue; var gain: Float; var requestTime: UInt64 }
    private var pending: [Pending] = []
    private static let maxPending = 64
    /// Retries while the device is failing: 50 ms doubling to 2 s.
    private static let minRetryNs: UInt64 = 50_000_000
    private static let maxRetryNs: UInt64 = 2_000_000_000
    private var lastAttempt: UInt64 = 0
    private var retryDelay: UInt64 = AudioEngine.minRetryNs
    private var nextRetry: UInt64?

    private var mixer: Mixer?
    private var format: SinkFormat?
    private var output: UnsafeMutableRawPointer?
    private var isOpen = false
    private var streaming = false

    private func run() {
        var shutdownDeadline: UInt64?
        loop: while true {
            stats.heartbeat.store(MonotonicClock.now(), ordering: .relaxed)
            if mixer?.isSounding != true {
                if shutdownDeadline != nil { break loop }
                if streaming {
                    sink.stop()
                    streaming = false
                    stats.setSink(.idle, keepError: true)
                    onEvent(.streamStopped)
                }
                stats.waiting.store(true, ordering: .relaxed)
                if let retryAt = nextRetry {
                    // The device failed: wake for the next retry or the oldest pending cue's deadline.
                    var until = retryAt
                    if let first = pending.first { until = min(until, first.requestTime &+ maxStartDelayNs) }
                    let now = MonotonicClock.now()
                    _ = wake.wait(timeout: DispatchTime(uptimeNanoseconds: DispatchTime.now().uptimeNanoseconds + (until > now ? until - now : 0)))
                    stats.waiting.store(false, ordering: .relaxed)
                    stats.heartbeat.store(MonotonicClock.now(), ordering: .relaxed)
                    if shutdownDeadline == nil, let r = nextRetry, MonotonicClock.now() >= r { openSink() }
                    expirePending()
                } else if isOpen {
                    let idle = DispatchTime.now() + configuration.idleCloseSeconds
                    let result = wake.wait(timeout: idle)
                    stats.waiting.store(false, ordering: .relaxed)
                    stats.heartbeat.store(MonotonicClock.now(), ordering: .relaxed)
                    if result == .timedOut {
                        closeSink()
                        continue loop
                    }
                } else {
                    wake.wait()
                    stats.waiting.store(false, ordering: .relaxed)
                    stats.heartbeat.store(MonotonicClock.now(), ordering: .relaxed)
                }
            }
            while let command = queue.pop() {
                switch command {
                case .play(let cue, let gain, let requestTime, _, let waitID):
                    guard shutdownDeadline == nil else { break }
                    play(cue, gain: gain, requestTime: requestTime)
                    if waitID != 0 { onEvent(.voiceEnded(waitID: waitID, outcome: .played)) }  // interim
                case .stop(_, let ticket):
                    let n = mixer?.activeVoices ?? 0
                    if let mixer, let format { mixer.fadeOutAll(frames: format.rate * 4 / 1000) }
                    onEvent(.stopped(ticket: ticket, count: n))
                case .fadeOutAll:
                    if let mixer, let format { mixer.fadeOutAll(frames: format.rate * 4 / 1000) }
                case .prewarm:
                    if !isOpen && shutdownDeadline == nil { openSink() }
                case .shutdown(let deadline):
                    shutdownDeadline = deadline
                }
            }
            if let deadline = shutdownDeadline, MonotonicClock.now() >= deadline { break loop }
            if let mixer, mixer.isSounding { renderPeriod(mixer) }
        }
        if streaming { sink.stop(); streaming = false }
        closeSink()
        finished.signal()
    }

    private var maxStartDelayNs: UInt64 { UInt64(configuration.maxStartDelayMs) * 1_000_000 }

    private func play(_ cue: Cue, gain: Float, requestTime: UInt64) {
        if configuration.hangOnPlayForTesting { while true { sleep(3600) } }
        if !isOpen {
            // A cue is the best moment to try again: the device may be back.
            if MonotonicClock.now() &- lastAttempt >= Self.minRetryNs || lastAttempt == 0 { openSink() }
            if !isOpen {
                if pending.count >= Self.maxPending { drop(pending.removeFirst()) }
                pending.append(Pending(cue: cue, gain: gain, requestTime: requestTime))
                return
            }
        }
        start(cue, gain: gain, requestTime: requestTime)
    }

    /// Starts a voice unless the cue is already too late to be worth hearing.
    private func start(_ cue: Cue, gain: Float, requestTime: UInt64) {
        guard let mixer else { return }
        let waited = MonotonicClock.now() &- requestTime
        if requestTime != 0, waited > maxStartDelayNs {
            drop(Pending(cue: cue, gain: gain, requestTime: requestTime))
            return
        }
        if mixer.start(cue, gain: gain, requestTime: requestTime) { stats.stolen.add(1, ordering: .relaxed) }
        cue.played.add(1, ordering: .relaxed)
        stats.played.add(1, ordering: .relaxed)
    }

    private func drop(_ p: Pending) {
        stats.dropped.add(1, ordering: .relaxed)
        onEvent(.dropped(cue: p.cue.name, owner: "", lateMs: Int((MonotonicClock.now() &- p.requestTime) / 1_000_000)))
    }

    /// Drops pending cues whose moment has passed.
    private func expirePending() {
        let now = MonotonicClock.now()
        while let first = pending.first, now &- first.requestTime > maxStartDelayNs { drop(pending.removeFirst()) }
    }

    private func renderPeriod(_ mixer: Mixer) {
        guard let format, let output else { return }
        let frames = format.periodFrames
        mixer.render(frames: frames)
        let clipped: Int
        switch format.sampleFormat {
        case .s16: clipped = mixer.convert(frames: frames, toS16: output.assumingMemoryBound(to: Int16.self))
        case .float: clipped = mixer.convert(frames: frames, toFloat: output.assumingMemoryBound(to: Float.self))
        }
        if clipped > 0 { stats.clipped.add(clipped, ordering: .relaxed) }
        stats.voicesActive.store(mixer.activeVoices, ordering: .relaxed)
        if mixer.startedCount > 0 {
            let now = MonotonicClock.now()
            for i in 0..<mixer.startedCount where mixer.startedRequestTimes[i] != 0 {
                stats.recordLatency(ns: now &- mixer.startedRequestTimes[i])
            }
        }
        do {
            let xruns = try sink.write(output, frames: frames)
            if xruns > 0 { stats.xruns.add(xruns, ordering: .relaxed) }
            if !streaming { streaming = true; stats.setSink(.running, keepError: true) }
        } catch {
            onEvent(.writeFailed(error.message))
            mixer.removeAll()
            stats.voicesActive.store(0, ordering: .relaxed)
            streaming = false
            closeSink()
            stats.setSink(.failed, error: error.message)
            scheduleRetry()
        }
    }

    /// After a failure: retry in 50 ms, doubling up to 2 s while it keeps failing.
    private func scheduleRetry() {
        retryDelay = nextRetry == nil ? Self.minRetryNs : min(retryDelay * 2, Self.maxRetryNs)
        nextRetry = MonotonicClock.now() &+ retryDelay
    }

    private func openSink() {
        lastAttempt = MonotonicClock.now()
        do {
            let f = try sink.open()
            isOpen = true
            nextRetry = nil
            if format == nil || f.periodFrames > mixer?.maxFrames ?? 0 || f.sampleFormat != format?.sampleFormat {
                output?.deallocate()
                output = .allocate(byteCount: f.periodFrames * f.channels * f.sampleFormat.bytes, alignment: 16)
            }
            if mixer == nil || f.periodFrames > mixer!.maxFrames {
                mixer = Mixer(maxVoices: configuration.voices, maxFrames: f.periodFrames,
                              stealFadeFrames: f.rate * 2 / 1000)
            }
            format = f
            stats.setSink(.idle, format: f)
            onEvent(.opened(f))
            for p in pending { start(p.cue, gain: p.gain, requestTime: p.requestTime) }  // start() leaves `pending` alone
            pending.removeAll(keepingCapacity: true)
        } catch {
            isOpen = false
            stats.setSink(.failed, error: error.message)
            onEvent(.openFailed(error.message))
            scheduleRetry()
        }
    }

    private func closeSink() {
        guard isOpen else { return }
        sink.close()
        isOpen = false
        stats.setSink(.closed, keepError: true)
        onEvent(.closed)
    }
}
