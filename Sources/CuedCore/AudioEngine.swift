#if canImport(Glibc)
import Glibc
#endif
import CuedSystem
import Synchronization

/// What the audio thread reports (state changes, stops, voice ends; nothing per
/// period). `onEvent` runs on the engine's relay thread, in the order the audio thread
/// sent them: it may lock or allocate, but should not wait (the events behind it would).
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
    /// The answer to `Command.stop`: how many voices it faded out (0 is an answer too).
    case stopped(ticket: UInt64, count: Int)
    /// The answer to `Command.sync`: every command before it has been taken.
    case synced(ticket: UInt64)
    /// A voice's one end, for those the server must hear of (`VoiceEnd.isReported`).
    case voiceEnded(VoiceEnd)
    /// The thread has made its own attempt at real time after cued's chance to ask the desktop
    /// for it came (`RealtimeGrant.ownAttempt`): the chance is given again.
    case threadStarted
}

/// The audio engine: the server's handle on the audio thread (`submit`, `shutdown`,
/// `stats`), and the thread itself, a poll shell around `Playback`. The thread
/// sleeps in `poll()` on an eventfd (commands) plus, when `Playback` asks, the
/// device's descriptors, until the time `Playback` names; then it lets `Playback`
/// take the commands and do one step. Idle it has no timeout but idle-close: no
/// wakeups. No Dispatch, no Foundation.
///
/// The audio thread takes no lock and frees nothing in the steady state: commands come
/// through a lock-free ring (`CommandQueue`), and its events and everything it lets go of
/// (the commands it took, the requests of ended voices) go out through another (`Outbox`)
/// to the relay thread, which delivers the events (`onEvent`) and drops the rest there.
public final class AudioEngine: @unchecked Sendable {
    public enum Command: Sendable {
        /// Play a voice (its id, cue, owner, priority, loops, who hears of its end).
        case play(VoiceRequest)
        /// Fade out (4 ms) the voices `scope` selects, held cues included; answers `stopped(ticket:count:)`.
        case stop(StopScope, ticket: UInt64)
        /// Fade out everything (mute); no answer.
        case fadeOutAll
        /// Open and prepare the device now, so the next cue starts warm.
        case prewarm
        /// Answers `synced(ticket:)` once every command before it has been taken (a cue
        /// queued before it has started, or its device's open was tried): `status wait`.
        case sync(ticket: UInt64)
        case shutdown(deadline: UInt64)
    }

    public struct Configuration: Sendable {
        public var voices = 16
        public var idleCloseSeconds = 30.0
        /// A cue that cannot start within this of its request is dropped, never played late.
        public var maxStartDelayMs = 250
        /// Commands that can wait for the audio thread's next turn (a power of two). The slots are
        /// allocated up front (a command is 120 bytes): 1024 take
        /// 120 KiB and cover 200 k plays/s at 5 ms periods; past them `submit` says false and
        /// the client is told the queue is full.
        public var queueCapacity = 1024
        /// What the audio thread sends out (events, and what it let go of) that the relay thread
        /// has not taken yet; past it an event is counted in `eventsLost`, never waited for.
        public var outboxCapacity = 1024
        /// Test hook: the first cue makes the audio thread hang forever, as a
        /// stuck driver would (for watchdog and shutdown tests only).
        public var hangOnPlayForTesting = false
        /// Test hook: the first cue makes the audio thread spin forever without sleeping, as a
        /// bug would (for the real-time budget's test only: SIGXCPU drops it to normal).
        public var spinOnPlayForTesting = false
        /// The hooks' hang or spin, on the audio thread as it takes a cue.
        func hangIfTesting() {
            if hangOnPlayForTesting { while true { _ = Glibc.sleep(3600) } }
            if spinOnPlayForTesting { let turns = Atomic<Int>(0); while true { turns.add(1, ordering: .relaxed) } }
        }
        /// The audio thread asks for SCHED_FIFO at this priority (below PipeWire's
        /// own 88), else for nice -11, and the desktop (RTKit, the portal: `RealtimeGrant`)
        /// for either: a busy machine then cannot starve it of the few milliseconds a period
        /// allows. nil: don't ask.
        public var realtimePriority: Int32? = 20
        /// How long without a miss before the margin against stalls shrinks a step (`MarginTuner`).
        public var marginQuietSeconds = Double(MarginTuner.defaultQuietNs) / 1e9
        public init() {}

        var machineSettings: DeviceMachine<UInt64>.Settings {
            var s = DeviceMachine<UInt64>.Settings()
            s.idleCloseNs = idleCloseSeconds.isFinite && idleCloseSeconds >= 0 ? UInt64(idleCloseSeconds * 1e9) : nil
            s.maxStartDelayNs = UInt64(max(0, maxStartDelayMs)) * 1_000_000
            return s
        }
    }

    public let stats: EngineStats
    public let configuration: Configuration
    private let onEvent: @Sendable (EngineEvent) -> Void
    private let queue: CommandQueue
    private let outbox: Outbox
    private let started = Atomic<Bool>(false)
    /// Commands: producers write to it only while the audio thread sleeps.
    private let wakeFD: Int32
    private let sleeping = Atomic<Bool>(false)
    /// Written once by the audio thread when it ends.
    private let doneFD: Int32
    /// Touched by the audio thread only, after `start()`.
    private let playback: Playback
    /// Read for `status` from any thread: `spec` and `why` are (a following sink's change as it picks).
    private let output: any Sink
    public var sinkSpec: String { output.spec }
    public var sinkWhy: String? { output.why }

    public init(sink: any Sink, configuration: Configuration = .init(), stats: EngineStats = EngineStats(),
                onEvent: @escaping @Sendable (EngineEvent) -> Void = { _ in }) {
        self.configuration = configuration
        self.stats = stats
        self.queue = CommandQueue(capacity: configuration.queueCapacity)
        output = sink
        wakeFD = SystemCall.eventfd(flags: O_NONBLOCK | O_CLOEXEC)
        doneFD = SystemCall.eventfd(flags: O_NONBLOCK | O_CLOEXEC)
        precondition(wakeFD >= 0 && doneFD >= 0, "eventfd: \(errno)")
        let outbox = Outbox(capacity: configuration.outboxCapacity, stats: stats)
        self.outbox = outbox
        playback = Playback(sink: sink, configuration: configuration, stats: stats,
                            onEvent: { outbox.send($0) }, retire: { outbox.retire(.request($0)) })
        self.onEvent = onEvent
        pollFDs = .allocate(capacity: 1 + Self.maxDeviceFDs)
    }

    deinit {
        // Only reached if the thread never started or has ended (it holds a reference while it runs).
        close(wakeFD)
        close(doneFD)
        pollFDs.deallocate()
    }

    /// Checks the sink's configuration before start-up (see `Sink.preflight`).
    public func preflight() throws(SinkError) { try playback.sink.preflight() }

    /// Starts the audio thread.
    public func start() {
        guard !started.exchange(true, ordering: .relaxed) else { return }
        // Sample memory whose last reference the audio thread drops is unmapped there.
        SampleReclaimer.start()
        outbox.startRelay(owner: self, doneFD: doneFD, deliver: onEvent)
        switch CuedThread.start("cued-audio", { [self] in run() }) {
        case .success(let thread): audioThread.withLock { $0 = thread }
        case .failure(let why): preconditionFailure("cannot start the audio thread: \(why)")
        }
    }

    /// Drops the audio thread to normal scheduling for good (from any thread): it ran past its
    /// real-time budget (SIGXCPU from RLIMIT_RTTIME's soft limit), and a thread that spins must not
    /// hold a core, nor be killed at the hard limit. Lowering a policy needs no privilege.
    /// Which thread overran is not said, and a device's library may run real-time threads of its
    /// own in cued (PipeWire's ALSA plugin asks RTKit for its data loop's): every real-time thread
    /// of the process is dropped, or the kernel kills cued at the hard limit. Returns their names.
    @discardableResult
    public func dropRealtime() -> [String] {
        // Its own thread by its handle first, whether or not /proc can be read.
        if let thread = audioThread.withLock({ $0 }) {
            var param = sched_param()
            // With SCHED_RESET_ON_FORK kept: clearing it takes a privilege RTKit's threads' owner lacks.
            if pthread_setschedparam(thread, SCHED_OTHER | Self.resetOnFork, &param) != 0 {
                _ = pthread_setschedparam(thread, SCHED_OTHER, &param)
            }
        }
        let dropped = Self.dropRealtimeThreads()
        stats.realtime.withLock { $0.overran() }
        return dropped
    }

    /// Every thread of this process at a real-time policy, set to normal; their names.
    static func dropRealtimeThreads() -> [String] {
        guard let dir = opendir("/proc/self/task") else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let tid = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                pid_t(String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)) ?? 0
            }
            guard tid > 0 else { continue }
            let policy = sched_getscheduler(tid) & ~Self.resetOnFork
            guard policy == SCHED_FIFO || policy == SCHED_RR else { continue }
            var param = sched_param()
            if sched_setscheduler(tid, SCHED_OTHER | Self.resetOnFork, &param) != 0 {
                _ = sched_setscheduler(tid, SCHED_OTHER, &param)
            }
            names.append(threadName(tid) ?? "\(tid)")
        }
        return names
    }

    /// A thread's name (its `comm`), as `ps -L` shows it.
    private static func threadName(_ tid: pid_t) -> String? {
        let fd = open("/proc/self/task/\(tid)/comm", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buf = [UInt8](repeating: 0, count: 32)
        let n = buf.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard n > 0 else { return nil }
        return String(decoding: buf[0..<n].prefix { $0 != 10 }, as: UTF8.self)
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

    private let audioThread = Mutex<pthread_t?>(nil)
    private static let maxDeviceFDs = 15
    private let pollFDs: UnsafeMutablePointer<pollfd>

    /// SCHED_FIFO if allowed (root, CAP_SYS_NICE, RLIMIT_RTPRIO; not under RestrictRealtime=),
    /// else a lower nice value if allowed, else nothing; the desktop is asked for more by
    /// another thread (`RealtimeGrant`). First RLIMIT_RTTIME is lowered (RTKit requires it too):
    /// the thread never runs long without sleeping, so a real-time thread that did would be a
    /// bug, stopped at 100 ms (SIGXCPU: dropped to normal) before the kernel kills at 200 ms.
    private func raisePriority() {
        stats.audioThreadID.store(SystemCall.gettid(), ordering: .relaxed)
        guard let prio = configuration.realtimePriority else { return }
        Self.limitRealtimeBudget(hardUs: 200_000)
        var param = sched_param()
        param.sched_priority = prio
        let got: RealtimeGrant.Scheduling, why: String?
        let rc = pthread_setschedparam(pthread_self(), SCHED_FIFO | Self.resetOnFork, &param)
        if rc == 0 {
            (got, why) = (.realtime(priority: Int(prio), via: .own), nil)
        } else if setpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(SystemCall.gettid()), -11) == 0 {
            (got, why) = (.nice(-11, via: .own), nil)
        } else {
            (got, why) = (.normal, "not allowed to raise itself (\(String(cString: strerror(rc))))")
        }
        if stats.realtime.withLock({ $0.ownAttempt(got, refused: why) }) { outbox.send(.threadStarted) }
    }

    /// SCHED_RESET_ON_FORK: a child of cued's never inherits the thread's real time.
    private static let resetOnFork: Int32 = 0x4000_0000

    /// RLIMIT_RTTIME (15 on Linux; glibc's enum constant does not import).
    private static let rlimitRTTime = __rlimit_resource_t(15)

    /// RLIMIT_RTTIME lowered to `hardUs` µs, the soft limit to half of it; never raised.
    static func limitRealtimeBudget(hardUs: UInt64) {
        var rl = rlimit()
        guard getrlimit(Self.rlimitRTTime, &rl) == 0 else { return }
        rl.rlim_max = min(rl.rlim_max, rlim_t(hardUs))
        rl.rlim_cur = min(rl.rlim_cur, rl.rlim_max / 2)
        _ = setrlimit(Self.rlimitRTTime, &rl)
    }

    private func run() {
        raisePriority()
        SampleReclaimer.markAudioThread()
        var deviceWoke = false  // the last sleep ended on the device's descriptors
        while !playback.exited {
            stats.heartbeat.store(MonotonicClock.now(), ordering: .relaxed)
            while let command = queue.pop() {
                playback.take(command, now: MonotonicClock.now())
                if command.holdsReferences { outbox.retire(.command(command)) }
            }
            if playback.exited { break }
            let wait = playback.step(now: MonotonicClock.now(), deviceWoke: deviceWoke)
            // Out once a turn, in one go: the turn's own copies of what they carry are gone by now.
            outbox.flush()
            switch wait {
            case .again:
                deviceWoke = false
            case .sleep(let until, let watch):
                deviceWoke = sleep(until: until, watch: playback.exited ? .none : watch)
            }
        }
        // The relay delivers what is left, then says the engine is done (`doneFD`).
        outbox.finish()
    }

    /// Sleeps until a command, `until`, or (as `watch` says) the device's descriptors.
    /// Returns true if the device's descriptors woke it with news of room.
    private func sleep(until: UInt64?, watch: Playback.DeviceWatch) -> Bool {
        let sink = playback.sink
        let device = watch == .none ? UnsafeMutableBufferPointer<pollfd>(start: nil, count: 0) : sink.pollDescriptors
        let n = min(device.count, Self.maxDeviceFDs)
        pollFDs[0] = pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)
        for i in 0..<n { pollFDs[1 + i] = device[i]; pollFDs[1 + i].revents = 0 }
        var timeout: Int32 = -1
        if let d = until {
            let now = MonotonicClock.now()
            timeout = d <= now ? 0 : Int32(min((d - now + 999_999) / 1_000_000, 3_600_000))
        }
        let idle = !playback.machine.wantsToWrite
        if idle { stats.waiting.store(true, ordering: .relaxed) }
        sleeping.store(true, ordering: .sequentiallyConsistent)
        if queue.isEmpty { _ = poll(pollFDs, nfds_t(1 + n), timeout) }
        sleeping.store(false, ordering: .sequentiallyConsistent)
        if idle { stats.waiting.store(false, ordering: .relaxed) }
        if pollFDs[0].revents != 0 {
            var value: UInt64 = 0
            _ = read(wakeFD, &value, 8)
        }
        guard n > 0, (0..<n).contains(where: { pollFDs[1 + $0].revents != 0 }) else { return false }
        for i in 0..<n { device[i].revents = pollFDs[1 + i].revents }
        return playback.deviceReadable(watch, now: MonotonicClock.now())
    }
}

extension AudioEngine.Command {
    /// It carries references (a cue, strings) whose release belongs off the audio thread.
    var holdsReferences: Bool {
        switch self {
        case .play: return true
        case .stop(let scope, _):
            switch scope {
            case .owner, .cue: return true
            case .all, .id, .loopsOf: return false
            }
        case .fadeOutAll, .prewarm, .sync, .shutdown: return false
        }
    }
}

/// What the audio thread hands the relay thread: an event to deliver, or something it let
/// go of, to be released there.
enum Outbound {
    case event(EngineEvent)
    case command(AudioEngine.Command)
    case request(VoiceRequest)
    /// The audio thread has ended: the relay delivers what came before and ends too.
    case finished
}

/// The audio thread's way out: a lock-free ring (`EventRing`) it stages into, published and
/// signalled once a turn (an eventfd write: a syscall, no lock or allocation in user space),
/// and a relay thread of normal priority that delivers the events, in order, and drops the
/// rest. A quarter of the ring is kept for events: past that, what is let go of is released
/// on the audio thread after all (`stats.releasedByAudioThread`); a full ring loses the event
/// (`stats.eventsLost`, in `status`) rather than make the audio thread wait.
final class Outbox: @unchecked Sendable {
    private let ring: EventRing<Outbound>
    private let stats: EngineStats
    private let wakeFD: Int32

    init(capacity: Int, stats: EngineStats) {
        ring = EventRing(capacity: capacity)
        self.stats = stats
        wakeFD = SystemCall.eventfd(flags: O_CLOEXEC)
        precondition(wakeFD >= 0, "eventfd: \(errno)")
    }

    deinit { close(wakeFD) }

    /// Audio thread.
    func send(_ event: EngineEvent) {
        if !ring.stage(.event(event)) { stats.eventsLost.add(1, ordering: .relaxed) }
    }

    /// Audio thread: `o` is released on the relay thread (if there is room).
    func retire(_ o: consuming Outbound) {
        guard ring.room > ring.capacity / 4, ring.stage(o) else {
            stats.releasedByAudioThread.add(1, ordering: .relaxed)
            return
        }
    }

    /// Audio thread: what was staged goes out, and the relay is woken.
    func flush() {
        guard ring.publish() else { return }
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    /// Audio thread, as it ends: waits for room if it must (it no longer plays).
    func finish() {
        while !ring.stage(.finished) {
            flush()
            usleep(1000)
        }
        flush()
    }

    /// Starts the relay thread: it delivers each event to `deliver` and, after `finished`,
    /// writes `doneFD` and ends; until then it keeps `owner` (of `doneFD`) alive.
    func startRelay(owner: AnyObject & Sendable, doneFD: Int32, deliver: @escaping @Sendable (EngineEvent) -> Void) {
        let relay = Relay(outbox: self, owner: owner, doneFD: doneFD, deliver: deliver)
        if case .failure(let why) = CuedThread.start("cued-relay", { relay.run() }) {
            preconditionFailure("cannot start the audio relay thread: \(why)")
        }
    }

    private final class Relay: Sendable {
        let outbox: Outbox
        let owner: AnyObject & Sendable
        let doneFD: Int32
        let deliver: @Sendable (EngineEvent) -> Void
        init(outbox: Outbox, owner: AnyObject & Sendable, doneFD: Int32, deliver: @escaping @Sendable (EngineEvent) -> Void) {
            self.outbox = outbox; self.owner = owner; self.doneFD = doneFD; self.deliver = deliver
        }

        func run() {
            while true {
                var n: UInt64 = 0
                if read(outbox.wakeFD, &n, 8) < 0 && errno != EINTR { return }
                while let o = outbox.ring.pop() {
                    switch o {
                    case .event(let e): deliver(e)
                    case .command, .request: break  // released here, as `o` goes
                    case .finished:
                        var one: UInt64 = 1
                        _ = write(doneFD, &one, 8)
                        return
                    }
                }
            }
        }
    }
}
