import Synchronization
#if canImport(Glibc)
import Glibc
#endif

public enum SinkState: String, Sendable {
    case running, idle, closed, failed
}

/// Which voices a `stop` command fades out.
public enum StopScope: Sendable, Equatable {
    case all
    /// Every voice this owner (app name or connection label) started.
    case owner(String)
    /// This owner's voices of one cue.
    case cue(name: String, owner: String)

    func matches(cue: String, owner: String) -> Bool {
        switch self {
        case .all: return true
        case .owner(let o): return o == owner
        case .cue(let name, let o): return name == cue && o == owner
        }
    }
}

/// How a voice somebody waits for ended.
public enum VoiceOutcome: String, Sendable {
    /// Its last frame has sounded at the device (written, and the device delay elapsed or the stream drained).
    case played
    /// Faded out by `stop`, a mute, or stolen by a newer voice.
    case stopped
    /// Never started (the 250 ms rule, shutdown).
    case dropped
    /// Started, then cut off because the device failed (it was not restarted: too late by the 250 ms rule).
    case cut
}

/// What the audio thread reports (state changes, drops, stops, ends of waited-for
/// voices; nothing per period). `onEvent` runs on the audio thread: keep it cheap
/// and non-blocking (hop to another thread for anything else).
public enum EngineEvent: Sendable {
    case opened(SinkFormat, kind: String)
    case openFailed(String)
    case writeFailed(String)
    /// The running device took no frame for several buffers: closed and reopened (counted in `stalls`).
    case stalled
    /// xruns recovered in a row without a frame taken (a sound server gone): closed and reopened.
    case lost
    /// Everything written has sounded and the stream stopped.
    case streamStopped
    case closed
    /// A cue that did not play, or was cut off by a failed device (`cut`) and not
    /// restarted (counted in `dropped`).
    case dropped(cue: String, owner: String, lateMs: Int, cut: Bool)
    /// The answer to `Command.stop`: how many voices it faded out (0 is an answer too).
    case stopped(ticket: UInt64, count: Int)
    /// A voice whose `waitID` ≠ 0 ended.
    case voiceEnded(waitID: UInt64, outcome: VoiceOutcome)
}

/// Counters and state the audio thread publishes and the server reads.
public final class EngineStats: Sendable {
    public let played = Atomic<Int>(0)
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
    /// How the audio thread is scheduled: 0 normal, 1 nice −11, 2 SCHED_FIFO.
    public let threadPriority = Atomic<Int>(0)
    public var threadPriorityName: String {
        switch threadPriority.load(ordering: .relaxed) {
        case 2: return "realtime"
        case 1: return "nice"
        default: return "normal"
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

    struct SinkStatus { var state = SinkState.closed; var format: SinkFormat?; var error: String?; var kind: String? }
    private let sink = Mutex(SinkStatus())

    /// The most recent trigger-to-sink latencies, µs.
    private let latencies = Mutex(LatencyRing())

    public init() {}

    public var sinkState: SinkState { sink.withLock { $0.state } }
    public var sinkFormat: SinkFormat? { sink.withLock { $0.format } }
    public var sinkError: String? { sink.withLock { $0.error } }
    /// The output's kind (`hw`, `pipewire`, `pulse`, `dmix`, `null`, …), known once it opened.
    public var sinkKind: String? { sink.withLock { $0.kind } }
    /// The device delay in µs (from `deviceDelayFrames` and the rate), nil before the first open.
    public var deviceDelayMicroseconds: Int? {
        guard let rate = sinkFormat?.rate, rate > 0 else { return nil }
        return deviceDelayFrames.load(ordering: .relaxed) * 1_000_000 / rate
    }

    func setSink(_ state: SinkState, format: SinkFormat? = nil, kind: String? = nil, error: String? = nil, keepError: Bool = false) {
        sink.withLock {
            $0.state = state
            if let kind { $0.kind = kind }
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
    /// A ring that starts small and doubles, up to `capacity`, when producers
    /// fill it: an idle daemon keeps a few KiB, not the 400 KiB a full-size
    /// ring of commands takes. Only producers (push) ever grow it; the audio
    /// thread's pop never allocates.
    private struct Ring {
        var items: [AudioEngine.Command?]
        var head = 0, count = 0
        let capacity: Int

        mutating func grow() {
            let size = min(capacity, items.count * 2)
            var bigger = [AudioEngine.Command?](repeating: nil, count: size)
            for i in 0..<count { bigger[i] = items[(head + i) % items.count] }
            items = bigger
            head = 0
        }
    }
    static let initialSize = 64
    private let ring: Mutex<Ring>
    init(capacity: Int) {
        ring = Mutex(Ring(items: Array(repeating: nil, count: min(capacity, Self.initialSize)), capacity: capacity))
    }

    func push(_ c: AudioEngine.Command) -> Bool {
        ring.withLock { r in
            if r.count == r.items.count {
                guard r.items.count < r.capacity else { return false }
                r.grow()
            }
            r.items[(r.head + r.count) % r.items.count] = c
            r.count += 1
            return true
        }
    }

    var isEmpty: Bool { ring.withLock { $0.count == 0 } }

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


/// glibc's eventfd(2) wrapper: <sys/eventfd.h> is not part of Swift's Glibc
/// module, and CuedCore imports no C target of its own.
@_silgen_name("eventfd")
private func cued_eventfd(_ initval: UInt32, _ flags: Int32) -> Int32

/// glibc's gettid(3), likewise missing from the Glibc module (setpriority on a thread takes its tid).
@_silgen_name("gettid")
private func cued_gettid() -> Int32

/// The audio thread: a thin shell around `DeviceMachine`. It sleeps in
/// `poll()` on an eventfd (commands) plus, while it streams, the device's own
/// descriptors, with the machine's next deadline as the timeout; it feeds the
/// machine what happened and carries out the actions it returns. Idle (device
/// closed, or open with the stream stopped) it has no timeout but idle-close:
/// no wakeups. No Dispatch, no Foundation.
public final class AudioEngine: @unchecked Sendable {
    public enum Command: Sendable {
        /// Play `cue`. `owner`: the app name (or a per-connection label) that
        /// `stop` matches; `waitID` ≠ 0: report `voiceEnded` for it.
        case play(Cue, gain: Float, requestTime: UInt64, owner: String, waitID: UInt64)
        /// Fade out (4 ms) the voices `scope` selects, held cues included; answers `stopped(ticket:count:)`.
        case stop(StopScope, ticket: UInt64)
        /// Fade out everything (mute); no answer.
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
        /// stuck driver would (for watchdog and shutdown tests only).
        public var hangOnPlayForTesting = false
        /// The audio thread asks for SCHED_FIFO at this priority (below PipeWire's
        /// own 88), else for nice -11, else runs as it is: a busy machine then
        /// cannot starve it of the few milliseconds a period allows. nil: don't ask.
        public var realtimePriority: Int32? = 20
        public init() {}

        var machineSettings: DeviceMachine<Job>.Settings {
            var s = DeviceMachine<Job>.Settings()
            s.idleCloseNs = idleCloseSeconds.isFinite && idleCloseSeconds >= 0 ? UInt64(idleCloseSeconds * 1e9) : nil
            s.maxStartDelayNs = UInt64(max(0, maxStartDelayMs)) * 1_000_000
            return s
        }
    }

    /// What the machine holds for a cue until the device can start it.
    public struct Job {
        var cue: Cue
        var gain: Float
        var requestTime: UInt64
        var owner: String
        var waitID: UInt64
    }

    public let stats = EngineStats()
    public let configuration: Configuration
    private let sink: any Sink   // touched by the audio thread only, after start()
    private let queue: CommandQueue
    private let onEvent: @Sendable (EngineEvent) -> Void
    private let started = Atomic<Bool>(false)
    /// Commands: producers write to it only while the audio thread sleeps.
    private let wakeFD: Int32
    private let sleeping = Atomic<Bool>(false)
    /// Written once by the audio thread when it ends.
    private let doneFD: Int32

    public var sinkSpec: String { sink.spec }

    public init(sink: any Sink, configuration: Configuration = .init(),
                onEvent: @escaping @Sendable (EngineEvent) -> Void = { _ in }) {
        self.sink = sink
        self.configuration = configuration
        self.queue = CommandQueue(capacity: configuration.queueCapacity)
        self.onEvent = onEvent
        wakeFD = cued_eventfd(0, O_NONBLOCK | O_CLOEXEC)  // EFD_NONBLOCK, EFD_CLOEXEC
        doneFD = cued_eventfd(0, O_NONBLOCK | O_CLOEXEC)
        precondition(wakeFD >= 0 && doneFD >= 0, "eventfd: \(errno)")
        machine = DeviceMachine(settings: configuration.machineSettings)
        actions.reserveCapacity(256)
        followUps.reserveCapacity(8)
        awaiting.reserveCapacity(Self.maxAwaiting)
        endedInPeriod.reserveCapacity(configuration.voices * 2)
        pollFDs = .allocate(capacity: 1 + Self.maxDeviceFDs)
    }

    deinit {
        // Only reached if the thread never started or has ended (it holds a reference while it runs).
        close(wakeFD)
        close(doneFD)
        pollFDs.deallocate()
        output?.deallocate()
        history?.deallocate()
        scratch?.deallocate()
    }

    /// Checks the sink's configuration before start-up (see `Sink.preflight`).
    public func preflight() throws(SinkError) { try sink.preflight() }

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
        if sleeping.exchange(false, ordering: .sequentiallyConsistent) {
            var one: UInt64 = 1
            _ = write(wakeFD, &one, 8)
        }
        return true
    }

    /// Lets what is playing finish (up to `graceMs`), closes the sink and ends
    /// the audio thread. Returns within `graceMs` + `abandonAfterMs` even if the
    /// device or the thread is stuck: then the thread is abandoned (false), and
    /// the process may exit regardless.
    @discardableResult
    public func shutdown(graceMs: Int = 500, abandonAfterMs: Int = 500) -> Bool {
        let start = MonotonicClock.now()
        let limit = start + UInt64(max(0, graceMs) + max(0, abandonAfterMs)) * 1_000_000
        let deadline = start + UInt64(max(0, graceMs)) * 1_000_000
        while !submit(.shutdown(deadline: deadline)) {
            if MonotonicClock.now() >= limit { return false }
            usleep(1000)
        }
        guard started.load(ordering: .relaxed) else { return true }
        var pfd = pollfd(fd: doneFD, events: Int16(POLLIN), revents: 0)
        while true {
            let now = MonotonicClock.now()
            if now >= limit { return false }
            let rc = poll(&pfd, 1, Int32((limit - now + 999_999) / 1_000_000))
            if rc > 0 { return true }
            if rc < 0 && errno != EINTR { return false }
        }
    }

    // MARK: - The audio thread

    private var machine: DeviceMachine<Job>
    /// The machine's actions for one event (capacity reserved: no allocation per event).
    private var actions: [DeviceMachine<Job>.Action] = []
    /// Events that carrying out actions produced (an open's result).
    private var followUps: [DeviceMachine<Job>.Event] = []
    private var exited = false

    private var mixer: Mixer?
    private var format: SinkFormat?
    private var output: UnsafeMutableRawPointer?
    /// The rendered frames being written: `outLeft` frames from `outOffset` still to go
    /// (a period, or what a mid-stream cue was mixed into).
    private var outOffset = 0
    private var outLeft = 0
    /// The float mix of the frames last rendered, a ring of `historyCapacity` frames
    /// (a buffer and a period): the frames a device that can rewind gives back are
    /// mixed again from here with a new cue. `historyCount` frames are valid, ending
    /// at `historyEnd`; the last `outLeft` of them are not written yet.
    private var history: UnsafeMutablePointer<Float>?
    private var historyCapacity = 0
    private var historyEnd = 0
    private var historyCount = 0
    /// Where a mid-stream cue is mixed into the frames given back (`historyCapacity` frames).
    private var scratch: UnsafeMutablePointer<Float>?
    /// Holds the writer to real time on a device without a clock (set at open).
    private var pacer = WritePacer(rate: 48_000, limitFrames: 1)

    /// Voices that ended in the period being written (wait IDs), moved to
    /// `awaiting` once it is all written.
    private var endedInPeriod: [UInt64] = []
    /// Voices whose last frame is written: reported `.played` once `soundsAt` passes (or the stream drained).
    private var awaiting: [(waitID: UInt64, soundsAt: UInt64)] = []
    private static let maxAwaiting = 256

    private static let maxDeviceFDs = 15
    private let pollFDs: UnsafeMutablePointer<pollfd>

    /// SCHED_FIFO if allowed (root, RLIMIT_RTPRIO, not under RestrictRealtime=), else a
    /// lower nice value if allowed, else nothing. The thread never spins, so FIFO is safe.
    private func raisePriority() {
        guard let prio = configuration.realtimePriority else { return }
        var param = sched_param()
        param.sched_priority = prio
        if pthread_setschedparam(pthread_self(), SCHED_FIFO, &param) == 0 {
            stats.threadPriority.store(2, ordering: .relaxed)
        } else if setpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(cued_gettid()), -11) == 0 {
            stats.threadPriority.store(1, ordering: .relaxed)
        }
    }

    private func run() {
        raisePriority()
        var deviceWoke = false  // the last sleep ended on the device's descriptors
        while !exited {
            stats.heartbeat.store(MonotonicClock.now(), ordering: .relaxed)
            while let command = queue.pop() { take(command) }
            if exited { break }
            // One reading for both (the commands above may have taken a while).
            let now = MonotonicClock.now()
            reportSounded(now: now)
            var wrote = false
            var pacedUntil = machine.wantsToWrite ? pacer.blockedUntil(now: now) : nil
            let woke = deviceWoke
            deviceWoke = false
            if machine.wantsToWrite, pacedUntil == nil, let format {
                let need = min(outLeft > 0 ? outLeft : format.periodFrames, format.periodFrames)
                let room = sink.availableFrames()
                if room >= need {
                    // Room now (a stream just started or resumed, or a self-clocked sink, whose
                    // write itself waits one period at most): write without polling. A plugin
                    // does not signal its descriptors for room it had before it started.
                    // Before the timer: a thread that woke late finds room, which is no stall.
                    writeOnce()
                    wrote = true
                } else if woke {
                    // The device's descriptors woke the thread without room: a plugin may
                    // leave them readable until it has room (PipeWire's eventfd is only
                    // cleared by a poll_descriptors call), and polling them again would spin.
                    // Sleep on a timer for the frames missing (at least half a millisecond).
                    let missing = UInt64(need - max(0, room)) * 1_000_000_000 / UInt64(format.rate)
                    pacedUntil = now &+ max(missing, 500_000)
                }
            }
            if exited { break }
            if let d = machine.deadline, MonotonicClock.now() >= d {
                feed(.timer)
                continue
            }
            if !wrote { deviceWoke = sleep(pacedUntil: pacedUntil) }
        }
        var one: UInt64 = 1
        _ = write(doneFD, &one, 8)
    }

    /// Sleeps until a command, the device's room (while streaming) or the next deadline;
    /// while the pacer holds the writer, until then (the device has room anyway).
    /// Returns true if the device's descriptors woke it while streaming.
    private func sleep(pacedUntil: UInt64? = nil) -> Bool {
        let watching: Bool
        if case .idle = machine.state { watching = true } else { watching = false }
        let device = pacedUntil != nil ? UnsafeMutableBufferPointer(start: nil, count: 0)
            : machine.wantsToWrite ? sink.pollDescriptors
            : watching ? sink.idleWatchDescriptors : UnsafeMutableBufferPointer(start: nil, count: 0)
        let n = min(device.count, Self.maxDeviceFDs)
        pollFDs[0] = pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)
        for i in 0..<n { pollFDs[1 + i] = device[i]; pollFDs[1 + i].revents = 0 }
        var timeout: Int32 = -1
        var wake = machine.deadline
        if machine.wantsToWrite, let first = awaiting.first?.soundsAt { wake = min(wake ?? first, first) }
        if let p = pacedUntil { wake = min(wake ?? p, p) }
        if let d = wake {
            let now = MonotonicClock.now()
            timeout = d <= now ? 0 : Int32(min((d - now + 999_999) / 1_000_000, 3_600_000))
        }
        let idle = !machine.wantsToWrite
        if idle { stats.waiting.store(true, ordering: .relaxed) }
        sleeping.store(true, ordering: .sequentiallyConsistent)
        if queue.isEmpty { _ = poll(pollFDs, nfds_t(1 + n), timeout) }
        sleeping.store(false, ordering: .sequentiallyConsistent)
        if idle { stats.waiting.store(false, ordering: .relaxed) }
        if pollFDs[0].revents != 0 {
            var value: UInt64 = 0
            _ = read(wakeFD, &value, 8)
        }
        guard n > 0 else { return false }
        if watching {
            // The stream is stopped: a wake-up here can only be the device failing.
            guard (0..<n).contains(where: { pollFDs[1 + $0].revents != 0 }) else { return false }
            for i in 0..<n { device[i].revents = pollFDs[1 + i].revents }
            if sink.idleDeviceFailed() {
                onEvent(.writeFailed("the idle device reported an error (its sound server went away?)"))
                feed(.deviceError)
            }
            return false
        }
        guard machine.wantsToWrite else { return false }
        var any = false
        for i in 0..<n { device[i].revents = pollFDs[1 + i].revents; any = any || pollFDs[1 + i].revents != 0 }
        guard any else { return false }
        do {
            _ = try sink.hasRoom()  // decodes the wake-up; the loop then checks the room itself
        } catch {
            deviceFailed(error)
        }
        return true
    }

    private func take(_ command: Command) {
        switch command {
        case .play(let cue, let gain, let requestTime, let owner, let waitID):
            feed(.cue(Job(cue: cue, gain: gain, requestTime: requestTime, owner: owner, waitID: waitID), requestTime: requestTime))
        case .stop(let scope, let ticket):
            var count = 0
            if let mixer, let format {
                count = mixer.stop(fadeFrames: format.rate * 4 / 1000) { scope.matches(cue: $0, owner: $1) }
            }
            count += machine.removePending { scope.matches(cue: $0.cue.name, owner: $0.owner) } removed: { job in
                if job.waitID != 0 { onEvent(.voiceEnded(waitID: job.waitID, outcome: .stopped)) }
            }
            onEvent(.stopped(ticket: ticket, count: count))
        case .fadeOutAll:
            if let mixer, let format { _ = mixer.stop(fadeFrames: format.rate * 4 / 1000) { _, _ in true } }
            _ = machine.removePending { _ in true } removed: { job in
                if job.waitID != 0 { onEvent(.voiceEnded(waitID: job.waitID, outcome: .stopped)) }
            }
        case .prewarm:
            feed(.prewarm)
        case .shutdown(let deadline):
            feed(.shutdown(deadline: deadline))
        }
    }

    /// Hands one event to the machine and carries out its actions (and those of
    /// the events they produce, such as an open's result).
    private func feed(_ event: DeviceMachine<Job>.Event, now: UInt64 = MonotonicClock.now()) {
        let phase = machine.phase
        var next: DeviceMachine<Job>.Event? = event
        var at = now
        while let e = next {
            if !actions.isEmpty { actions.removeAll(keepingCapacity: true) }
            machine.handle(e, now: at, into: &actions)
            for i in actions.indices { perform(actions[i]) }
            next = followUps.isEmpty ? nil : followUps.removeFirst()
            if next != nil { at = MonotonicClock.now() }
        }
        if machine.phase != phase || !actions.isEmpty { publishState() }
    }

    private func perform(_ action: DeviceMachine<Job>.Action) {
        switch action {
        case .open:
            open()
        case .close:
            sink.close()
            pacer.reset()
            outLeft = 0
            historyCount = 0
            dropEndedInPeriod()  // both empty after a stopped stream; a waiter is never left hanging
            dropAwaiting()
            stats.deviceDelayFrames.store(0, ordering: .relaxed)
            stats.setSink(.closed, keepError: true)
            onEvent(.closed)
        case .stopStream:
            sink.stop()
            pacer.reset()
            outLeft = 0
            historyCount = 0
            stats.deviceDelayFrames.store(0, ordering: .relaxed)
            reportSounded(now: .max)  // the stream drained: everything written has sounded
            onEvent(.streamStopped)
        case .start(let job):
            if configuration.hangOnPlayForTesting { while true { Glibc.sleep(3600) } }
            guard let mixer else { return drop(job.cue, job.owner, job.waitID, lateNs: 0) }
            if startVoice(job, mixer) {
                stats.stolen.add(1, ordering: .relaxed)
                mixer.takeEvicted { onEvent(.voiceEnded(waitID: $0, outcome: .stopped)) }
            }
            job.cue.played.add(1, ordering: .relaxed)
            stats.played.add(1, ordering: .relaxed)
        case .drop(let job, let lateNs):
            drop(job.cue, job.owner, job.waitID, lateNs: lateNs)
        case .restartVoices(let since):
            outLeft = 0
            historyCount = 0
            dropEndedInPeriod()
            mixer?.restart(requestedSince: since) { removed($0) }
            dropAwaiting()
        case .dropVoices:
            outLeft = 0
            historyCount = 0
            dropEndedInPeriod()
            mixer?.removeAll { removed($0) }
            stats.voicesActive.store(0, ordering: .relaxed)
            dropAwaiting()
        case .cutVoices:
            // Shutdown's deadline: what still sounds (or sits in the device's
            // buffer) is cut off. Each had started: a waiter hears `stopped`.
            outLeft = 0
            historyCount = 0
            var waitIDs = endedInPeriod
            endedInPeriod.removeAll(keepingCapacity: true)
            mixer?.removeAll { waitIDs.append($0.waitID) }
            stats.voicesActive.store(0, ordering: .relaxed)
            waitIDs += awaiting.map(\.waitID)
            awaiting.removeAll(keepingCapacity: true)
            for id in waitIDs where id != 0 { onEvent(.voiceEnded(waitID: id, outcome: .stopped)) }
        case .reportStall:
            stats.stalls.add(1, ordering: .relaxed)
            onEvent(.stalled)
        case .reportLost:
            stats.lost.add(1, ordering: .relaxed)
            onEvent(.lost)
        case .exit:
            exited = true
        }
    }

    private func open() {
        do {
            let f = try sink.open()
            let frames = f.bufferFrames + f.periodFrames
            if format == nil || frames > historyCapacity || f.sampleFormat != format?.sampleFormat {
                output?.deallocate()
                output = .allocate(byteCount: frames * f.channels * f.sampleFormat.bytes, alignment: 16)
                history?.deallocate()
                history = .allocate(capacity: frames * 2)
                scratch?.deallocate()
                scratch = .allocate(capacity: frames * 2)
                historyCapacity = frames
            }
            historyCount = 0
            if mixer == nil || f.periodFrames > mixer!.maxFrames {
                let old = mixer
                mixer = Mixer(maxVoices: configuration.voices, maxFrames: f.periodFrames,
                              stealFadeFrames: f.rate * 2 / 1000)
                old?.removeAll { removed($0) }
            }
            format = f
            outLeft = 0
            pacer = WritePacer(rate: f.rate, limitFrames: f.bufferFrames + f.periodFrames)
            var idleClose = configuration.machineSettings.idleCloseNs
            if let limit = sink.idleCloseLimitSeconds {
                let ns = UInt64(max(0, limit) * 1e9)
                idleClose = min(idleClose ?? ns, ns)
            }
            machine.settings.idleCloseNs = idleClose
            machine.settings.drainMarginNs = sink.drainMarginSeconds.map { UInt64(max(0, $0) * 1e9) }
                ?? configuration.machineSettings.drainMarginNs
            stats.setSink(.idle, format: f, kind: sink.kind)
            onEvent(.opened(f, kind: sink.kind))
            followUps.append(.opened(bufferNs: UInt64(f.bufferFrames) * 1_000_000_000 / UInt64(max(1, f.rate)), bufferFrames: f.bufferFrames))
        } catch {
            stats.setSink(.failed, error: error.message)
            onEvent(.openFailed(error.message))
            followUps.append(.openFailed)
        }
    }

    /// Renders a period (when the last one is all written) and writes what the device takes.
    private func writeOnce() {
        guard let mixer, let format, let output else { return }
        let bytesPerFrame = format.channels * format.sampleFormat.bytes
        if outLeft == 0 {
            let frames = format.periodFrames
            mixer.render(frames: frames)
            remember(UnsafePointer(mixer.mix), frames: frames)
            convert(UnsafePointer(mixer.mix), frames: frames, mixer: mixer, format: format, output: output)
        }
        let result: SinkWrite
        do {
            result = try sink.write(output + outOffset * bytesPerFrame, frames: outLeft)
        } catch {
            deviceFailed(error)
            return
        }
        let now = MonotonicClock.now()
        outOffset += result.frames
        outLeft -= result.frames
        if result.xruns > 0 {
            stats.xruns.add(result.xruns, ordering: .relaxed)
            pacer.reset()
            historyCount = min(historyCount, outLeft)  // the device dropped what it held
        }
        pacer.wrote(frames: result.frames, now: now)
        let delay = sink.delayFrames()
        stats.deviceDelayFrames.store(delay, ordering: .relaxed)
        let delayNs = UInt64(max(0, delay)) * 1_000_000_000 / UInt64(format.rate)
        if outLeft == 0 && !endedInPeriod.isEmpty {
            for id in endedInPeriod {
                if awaiting.count < Self.maxAwaiting { awaiting.append((id, now &+ delayNs)) }
                else { onEvent(.voiceEnded(waitID: id, outcome: .played)) }
            }
            endedInPeriod.removeAll(keepingCapacity: true)
        }
        feed(.wrote(frames: result.frames, xruns: result.xruns, sounding: mixer.isSounding || outLeft > 0, delayNs: delayNs), now: now)
    }

    /// Converts `frames` rendered frames into `output` as the next frames to write,
    /// and takes the mixer's report on them (voices that started and ended).
    /// `counted`: clipped samples among these frames already counted (frames converted again).
    private func convert(_ mix: UnsafePointer<Float>, frames: Int, mixer: Mixer, format: SinkFormat,
                         output: UnsafeMutableRawPointer, counted: Int = 0) {
        let clipped: Int
        switch format.sampleFormat {
        case .s16: clipped = mixer.convert(frames: frames, from: mix, toS16: output.assumingMemoryBound(to: Int16.self))
        case .float: clipped = mixer.convert(frames: frames, from: mix, toFloat: output.assumingMemoryBound(to: Float.self))
        }
        if clipped > counted { stats.clipped.add(clipped - counted, ordering: .relaxed) }
        stats.voicesActive.store(mixer.activeVoices, ordering: .relaxed)
        if mixer.startedCount > 0 {
            let now = MonotonicClock.now()
            for i in 0..<mixer.startedCount where mixer.startedRequestTimes[i] != 0 {
                stats.recordLatency(ns: now &- mixer.startedRequestTimes[i])
            }
        }
        for i in 0..<mixer.endedCount {
            switch mixer.endedHow[i] {
            case .played: endedInPeriod.append(mixer.endedWaitIDs[i])
            case .stopped: onEvent(.voiceEnded(waitID: mixer.endedWaitIDs[i], outcome: .stopped))
            }
        }
        outOffset = 0
        outLeft = frames
    }

    /// Starts a voice. Mid-stream, on a device that can rewind, it is mixed into the
    /// frames the device gives back (and into those rendered but not yet written), so
    /// it sounds from the earliest frame the device has not committed instead of
    /// behind everything queued. Returns true on a steal.
    private func startVoice(_ job: Job, _ mixer: Mixer) -> Bool {
        let written = historyCount - outLeft  // written frames whose mix is still at hand
        var back = 0
        if written > 0, case let can = min(sink.rewindableFrames(), written), can > 0 {
            back = min(can, sink.rewind(frames: can))
        }
        let frames = back + outLeft
        guard frames > 0, let scratch, let format, let output else {
            return mixer.start(job.cue, gain: job.gain, requestTime: job.requestTime, owner: job.owner, waitID: job.waitID)
        }
        if back > 0 {
            pacer.rewound(frames: back, now: MonotonicClock.now())
            stats.rewinds.add(1, ordering: .relaxed)
        }
        historyTail(frames, scratch, copyOut: true)
        // These frames were converted (and their clipping counted) before; count only what the new voice adds.
        let counted = Mixer.clipped(UnsafePointer(scratch), frames: frames, format: format.sampleFormat)
        let stole = mixer.start(job.cue, gain: job.gain, requestTime: job.requestTime, owner: job.owner, waitID: job.waitID,
                                mixedInto: scratch, frames: frames)
        historyTail(frames, scratch, copyOut: false)
        convert(UnsafePointer(scratch), frames: frames, mixer: mixer, format: format, output: output, counted: counted)
        return stole
    }

    /// Appends rendered frames to the history ring.
    private func remember(_ mix: UnsafePointer<Float>, frames: Int) {
        guard let history, historyCapacity > 0 else { return }
        var done = 0
        while done < frames {
            let n = min(frames - done, historyCapacity - historyEnd)
            (history + historyEnd * 2).update(from: mix + done * 2, count: n * 2)
            historyEnd = (historyEnd + n) % historyCapacity
            done += n
        }
        historyCount = min(historyCapacity, historyCount + frames)
    }

    /// Copies the last `frames` frames of the history ring out to `buffer`, or back in from it.
    private func historyTail(_ frames: Int, _ buffer: UnsafeMutablePointer<Float>, copyOut: Bool) {
        guard let history else { return }
        var at = (historyEnd + historyCapacity - frames) % historyCapacity
        var done = 0
        while done < frames {
            let n = min(frames - done, historyCapacity - at)
            if copyOut { (buffer + done * 2).update(from: history + at * 2, count: n * 2) }
            else { (history + at * 2).update(from: buffer + done * 2, count: n * 2) }
            at = (at + n) % historyCapacity
            done += n
        }
    }

    private func deviceFailed(_ error: SinkError) {
        onEvent(.writeFailed(error.message))
        stats.setSink(.failed, error: error.message)
        feed(.writeFailed)
    }

    /// Reports `.played` for the voices whose last frame has sounded by `now`.
    private func reportSounded(now: UInt64) {
        guard !awaiting.isEmpty else { return }
        var kept = 0
        for i in awaiting.indices {
            if awaiting[i].soundsAt <= now {
                onEvent(.voiceEnded(waitID: awaiting[i].waitID, outcome: .played))
            } else {
                awaiting[kept] = awaiting[i]
                kept += 1
            }
        }
        awaiting.removeLast(awaiting.count - kept)
    }

    /// Voices that ended in a period that is thrown away unwritten: they did not all sound.
    private func dropEndedInPeriod() {
        for id in endedInPeriod { onEvent(.voiceEnded(waitID: id, outcome: .dropped)) }
        endedInPeriod.removeAll(keepingCapacity: true)
    }

    private func dropAwaiting() {
        for a in awaiting { onEvent(.voiceEnded(waitID: a.waitID, outcome: .dropped)) }
        awaiting.removeAll(keepingCapacity: true)
    }

    /// A voice removed before its end: a stopped one was meant to end; any other is dropped.
    private func removed(_ v: Mixer.RemovedVoice) {
        if v.stopped {
            if v.waitID != 0 { onEvent(.voiceEnded(waitID: v.waitID, outcome: .stopped)) }
        } else {
            drop(v.cue, v.owner, v.waitID, lateNs: v.requestTime == 0 ? 0 : MonotonicClock.now() &- v.requestTime,
                 cut: v.started)
        }
    }

    private func drop(_ cue: Cue, _ owner: String, _ waitID: UInt64, lateNs: UInt64, cut: Bool = false) {
        stats.dropped.add(1, ordering: .relaxed)
        onEvent(.dropped(cue: cue.name, owner: owner, lateMs: Int(lateNs / 1_000_000), cut: cut))
        if waitID != 0 { onEvent(.voiceEnded(waitID: waitID, outcome: cut ? .cut : .dropped)) }
    }

    private var published: DeviceMachine<Job>.State?

    /// The machine's state as `status` shows it (when it changed).
    private func publishState() {
        guard machine.state != published else { return }
        published = machine.state
        switch machine.state {
        case .streaming, .draining: stats.setSink(.running, keepError: true)
        case .idle: stats.setSink(.idle, keepError: true)
        case .closed, .finished: stats.setSink(.closed, keepError: true)
        case .failed: stats.setSink(.failed, keepError: true)
        case .opening: break
        }
    }
}
