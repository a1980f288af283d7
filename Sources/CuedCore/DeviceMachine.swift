/// The life of the output device, as one clocked state machine: no I/O, no
/// clock reads. The audio thread (`AudioEngine`) feeds it events with the
/// time they happened and carries out the actions it returns; between events
/// it sleeps until `deadline` (and, while `wantsToWrite`, until the device has
/// room). Times are monotonic nanoseconds.
///
///     closed ──cue/prewarm──▶ opening ──opened──▶ idle ──cue──▶ streaming
///       ▲                        │                  ▲               │ the last voice ends
///       │ idle-close, error      │ open failed      │ tail played   ▼
///       └──────── idle ◀──       ▼                  └─────────── draining (silence tail)
///                            failed(retryAt) ──timer/cue──▶ opening
///     streaming/draining ──no progress for `stallNs`, or a recover loop──▶ close, reopen at once
///     any ──shutdown──▶ play out until the deadline ──▶ finished
///
/// `Job` is whatever the shell needs to start a voice (a cue and its gain);
/// the machine only holds jobs while the device is not open yet, and decides
/// whether each starts or is dropped by the 250 ms rule.
public struct DeviceMachine<Job> {
    public struct Settings: Sendable {
        /// Close an idle (stopped) device after this long; nil: never.
        public var idleCloseNs: UInt64? = 30_000_000_000
        /// A cue that cannot start within this of its request is dropped, never played late.
        public var maxStartDelayNs: UInt64 = 250_000_000
        /// Retries while the device fails: 50 ms doubling to 2 s.
        public var minRetryNs: UInt64 = 50_000_000
        public var maxRetryNs: UInt64 = 2_000_000_000
        /// A running device that takes no frame for max(this, 4 buffers) is stalled.
        /// Not shorter: on a loaded machine a sound server's non-realtime threads
        /// (stream start, the plugin's main loop) were late by > 100 ms.
        public var minStallNs: UInt64 = 250_000_000
        /// Until a started stream has taken more than its first buffer (the server has to
        /// link and start a new stream: over 250 ms on a loaded machine), it is given this long.
        public var startStallNs: UInt64 = 1_000_000_000
        /// xruns recovered in a row without a frame taken: the device is lost.
        public var maxRecoveriesWithoutProgress = 3
        /// Silence written past the device's own delay before the stream is stopped:
        /// a sound server's delay figure can miss the last milliseconds (pulse's did,
        /// by 2 ms), and stopping discards whatever is still queued.
        public var drainMarginNs: UInt64 = 20_000_000
        /// Cues held while the device (re)opens; the oldest is dropped beyond this.
        public var maxPending = 64
        public init() {}
    }

    public enum State: Equatable, Sendable {
        /// No device. Nothing to wait for.
        case closed
        /// `open` was asked for; the shell answers `opened` or `openFailed`.
        case opening
        /// The last open failed; try again at `retryAt` if cues wait, or at the next cue.
        case failed(retryAt: UInt64)
        /// Open, stream stopped (nothing queued). Closes at `since + idleCloseNs`.
        case idle(since: UInt64)
        /// Voices sound: the shell writes a period whenever the device has room.
        case streaming
        /// The last voice has been written; silence is written until `until`, when
        /// everything written has sounded, then the stream is stopped.
        case draining(until: UInt64)
        /// Shut down: the shell ends the thread.
        case finished
    }

    /// What an opened device is like: its buffer, and what it asks of the machine.
    public struct Device: Sendable, Equatable {
        /// The buffer's duration.
        public var bufferNs: UInt64
        /// Its size (0: unknown, then any frame taken counts as the stream having started).
        public var bufferFrames: Int
        /// The longest it should stay open with its stream stopped (it costs the desktop
        /// something even then); nil: `settings.idleCloseNs`.
        public var idleCloseLimitNs: UInt64?
        /// How long past its own delay figure to let it play before stopping it; nil: `settings.drainMarginNs`.
        public var drainMarginNs: UInt64?
        public init(bufferNs: UInt64, bufferFrames: Int = 0, idleCloseLimitNs: UInt64? = nil, drainMarginNs: UInt64? = nil) {
            self.bufferNs = bufferNs; self.bufferFrames = bufferFrames
            self.idleCloseLimitNs = idleCloseLimitNs; self.drainMarginNs = drainMarginNs
        }
    }

    public enum Event {
        /// A cue to play, requested at `requestTime` (0: never too late).
        case cue(Job, requestTime: UInt64)
        /// Open the device now so that the next cue starts warm.
        case prewarm
        /// The device opened.
        case opened(Device)
        case openFailed
        /// A write went through: `frames` taken (0 is no progress), `xruns`
        /// recovered on the way, whether any voice still sounds, and how long
        /// what is queued in the device will take to play (`delayNs`).
        case wrote(frames: Int, xruns: Int, sounding: Bool, delayNs: UInt64)
        /// The device failed for good (unplugged, broken, server gone).
        case writeFailed
        /// While idle, the device reported an error or hang-up (a sound server went away).
        case deviceError
        /// The deadline passed.
        case timer
        /// Stop taking cues; let what plays finish until `deadline`, then close.
        case shutdown(deadline: UInt64)
    }

    public enum Action {
        case open
        case close
        /// Stop the stream (drop what is queued: by then only silence).
        case stopStream
        /// Start a voice now.
        case start(Job)
        /// Drop a cue that could not start in time (or arrived during shutdown).
        case drop(Job, lateNs: UInt64)
        /// The device was reopened under running voices: those requested at or
        /// after `requestedSince` start again from their first frame, the others are dropped.
        case restartVoices(requestedSince: UInt64)
        /// Every voice is dropped (the device is gone).
        case dropVoices
        /// Shutdown: every voice still sounding is cut off. They started, so
        /// they are stopped (as by `stop`), not dropped.
        case cutVoices
        /// The running device took no frame for `stallNs`: counted, logged once.
        case reportStall
        /// xruns recovered in a row without progress: the device is treated as lost.
        case reportLost
        /// End the audio thread.
        case exit
    }

    public let settings: Settings
    /// The open device's idle-close and drain margin (the settings', or what the device asks).
    private var idleCloseNs: UInt64?
    private var drainMarginNs: UInt64
    public private(set) var state: State = .closed
    /// Cues waiting for the device to open, oldest first.
    public private(set) var pending: [(job: Job, requestTime: UInt64)] = []
    public private(set) var shutdownDeadline: UInt64?
    private var retryDelay: UInt64
    private var lastAttempt: UInt64?
    private var lastProgress: UInt64 = 0
    private var stallNs: UInt64
    private var bufferFrames = 0
    /// Frames written since the stream (re)started: beyond one buffer, the device is consuming.
    private var framesSinceStart = 0
    private var recoveries = 0
    /// True when the open under way replaces a device lost under running voices.
    private var reopeningUnderVoices = false
    /// A reopen under voices was tried since the device last took a frame: the
    /// next failure gives up (drops the voices) instead of reopening again.
    private var reopenedSinceProgress = false

    public init(settings: Settings = Settings()) {
        self.settings = settings
        idleCloseNs = settings.idleCloseNs
        drainMarginNs = settings.drainMarginNs
        retryDelay = settings.minRetryNs
        stallNs = settings.minStallNs
        pending.reserveCapacity(settings.maxPending)
    }

    /// The state without its times: cheap to compare on every period.
    public enum Phase: Sendable { case closed, opening, failed, idle, streaming, draining, finished }
    public var phase: Phase {
        switch state {
        case .closed: return .closed
        case .opening: return .opening
        case .failed: return .failed
        case .idle: return .idle
        case .streaming: return .streaming
        case .draining: return .draining
        case .finished: return .finished
        }
    }

    /// Whether the shell should write when the device has room.
    public var wantsToWrite: Bool {
        switch state {
        case .streaming, .draining: return true
        case .closed, .opening, .failed, .idle, .finished: return false
        }
    }

    /// Whether the device is open (idle, streaming or draining).
    public var isOpen: Bool {
        switch state {
        case .idle, .streaming, .draining: return true
        case .closed, .opening, .failed, .finished: return false
        }
    }

    /// When the shell must feed `.timer` even if nothing else happens; nil: sleep until an event.
    public var deadline: UInt64? {
        var d: UInt64?
        func earliest(_ t: UInt64?) { if let t { d = min(d ?? t, t) } }
        switch state {
        case .closed, .opening, .finished: break
        case .failed(let retryAt):
            if let first = pending.first {
                earliest(retryAt)
                // The first instant it is too late (`isTooLate` is strict): firing at the deadline
                // itself would find nothing to do, and fire again.
                if first.requestTime != 0 { earliest(first.requestTime &+ settings.maxStartDelayNs &+ 1) }
            }
        case .idle(let since):
            earliest(idleCloseNs.map { since &+ $0 })
        case .streaming:
            earliest(lastProgress &+ currentStallNs)
        case .draining(let until):
            earliest(until)
            earliest(lastProgress &+ currentStallNs)
        }
        if state != .finished { earliest(shutdownDeadline) }
        return d
    }

    /// Feeds one event; the actions to carry out, in order.
    public mutating func handle(_ event: Event, now: UInt64) -> [Action] {
        var out: [Action] = []
        handle(event, now: now, into: &out)
        return out
    }

    /// The same, appending to `out` (the audio thread reuses one buffer: no allocation per event).
    public mutating func handle(_ event: Event, now: UInt64, into out: inout [Action]) {
        switch event {
        case .cue(let job, let requestTime): cue(job, requestTime, now, &out)
        case .prewarm: prewarm(now, &out)
        case .opened(let device): opened(device, now, &out)
        case .openFailed: openFailed(now, &out)
        case .wrote(let frames, let xruns, let sounding, let delayNs): wrote(frames, xruns, sounding, delayNs, now, &out)
        case .writeFailed: writeFailed(now, &out)
        case .deviceError: deviceError(&out)
        case .timer: timer(now, &out)
        case .shutdown(let deadline): shutdown(deadline, now, &out)
        }
    }

    /// Removes the held cues `matches` selects (a `stop` reaching cues that wait
    /// for the device); `removed` sees each. Returns how many.
    public mutating func removePending(where matches: (Job) -> Bool, removed: (Job) -> Void) -> Int {
        var count = 0
        pending.removeAll { p in
            guard matches(p.job) else { return false }
            removed(p.job)
            count += 1
            return true
        }
        return count
    }

    // MARK: - Events

    private mutating func cue(_ job: Job, _ requestTime: UInt64, _ now: UInt64, _ out: inout [Action]) {
        if shutdownDeadline != nil || state == .finished || isTooLate(requestTime, now) {
            out.append(.drop(job, lateNs: late(requestTime, now)))
            return
        }
        switch state {
        case .idle:
            lastProgress = now
            recoveries = 0
            framesSinceStart = 0
            state = .streaming
            out.append(.start(job))
        case .streaming:
            out.append(.start(job))
        case .draining:
            state = .streaming
            out.append(.start(job))
        case .closed:
            hold(job, requestTime, &out)
            beginOpen(now, &out)
        case .opening:
            hold(job, requestTime, &out)
        case .failed:
            // A cue is the best moment to try again: the device may be back.
            hold(job, requestTime, &out)
            if mayRetry(now) { beginOpen(now, &out) }
        case .finished:
            break
        }
    }

    private mutating func prewarm(_ now: UInt64, _ out: inout [Action]) {
        guard shutdownDeadline == nil else { return }
        switch state {
        case .closed:
            beginOpen(now, &out)
        case .failed:
            if mayRetry(now) { beginOpen(now, &out) }
        case .idle(let since):
            // Warm again: the idle-close countdown restarts, so the device is still open for the cue.
            state = .idle(since: max(since, now))
        case .opening, .streaming, .draining, .finished:
            break
        }
    }

    private mutating func opened(_ device: Device, _ now: UInt64, _ out: inout [Action]) {
        guard state == .opening else { return }
        retryDelay = settings.minRetryNs
        stallNs = max(settings.minStallNs, 4 &* device.bufferNs)
        bufferFrames = device.bufferFrames
        idleCloseNs = settings.idleCloseNs
        if let limit = device.idleCloseLimitNs { idleCloseNs = min(idleCloseNs ?? limit, limit) }
        drainMarginNs = device.drainMarginNs ?? settings.drainMarginNs
        framesSinceStart = 0
        lastProgress = now
        recoveries = 0
        state = .idle(since: now)
        if !reopeningUnderVoices { reopenedSinceProgress = false }  // a fresh device
        if reopeningUnderVoices {
            reopeningUnderVoices = false
            out.append(.restartVoices(requestedSince: now &- min(now, settings.maxStartDelayNs)))
            state = .streaming
        }
        for p in pending {
            if isTooLate(p.requestTime, now) {
                out.append(.drop(p.job, lateNs: late(p.requestTime, now)))
            } else {
                out.append(.start(p.job))
                state = .streaming
            }
        }
        pending.removeAll(keepingCapacity: true)
    }

    private mutating func openFailed(_ now: UInt64, _ out: inout [Action]) {
        guard state == .opening else { return }
        failed(now, &out)
        reopenedSinceProgress = false
        if reopeningUnderVoices {
            reopeningUnderVoices = false
            out.append(.dropVoices)
        }
        expire(now, &out)
    }

    private mutating func wrote(_ frames: Int, _ xruns: Int, _ sounding: Bool, _ delayNs: UInt64, _ now: UInt64,
                                _ out: inout [Action]) {
        guard wantsToWrite else { return }
        if frames > 0 {
            lastProgress = now
            recoveries = 0
            reopenedSinceProgress = false
            framesSinceStart &+= frames
        } else if xruns > 0 {
            recoveries += xruns
            if recoveries >= settings.maxRecoveriesWithoutProgress {
                // Recovering "succeeds" and the next write fails again (a sound server that went away).
                out.append(.reportLost)
                reopen(now, &out)
                return
            }
        }
        switch state {
        case .streaming where !sounding:
            state = .draining(until: now &+ delayNs &+ drainMarginNs)
        case .draining where sounding:
            state = .streaming
        default:
            break
        }
    }

    private mutating func writeFailed(_ now: UInt64, _ out: inout [Action]) {
        guard isOpen else { return }
        if !reopenedSinceProgress && shutdownDeadline == nil {
            // One immediate reopen: a PCM left open across a sound-server restart fails
            // its first write; a fresh one plays the cue (restarted by the 250 ms rule).
            reopen(now, &out)
            return
        }
        out.append(.dropVoices)
        out.append(.close)
        if shutdownDeadline != nil {
            state = .finished
            out.append(.exit)
            return
        }
        retryDelay = settings.minRetryNs
        failed(now, &out)
    }

    private mutating func deviceError(_ out: inout [Action]) {
        guard case .idle = state else { return }
        state = .closed
        out.append(.close)
    }

    private mutating func timer(_ now: UInt64, _ out: inout [Action]) {
        if let d = shutdownDeadline, now >= d, state != .finished {
            finish(&out)
            return
        }
        switch state {
        case .closed, .opening, .finished:
            break
        case .failed(let retryAt):
            expire(now, &out)
            if !pending.isEmpty, now >= retryAt { beginOpen(now, &out) }
        case .idle(let since):
            guard let idle = idleCloseNs, now &- since >= idle else { return }
            state = .closed
            out.append(.close)
        case .streaming:
            if now &- lastProgress >= currentStallNs {
                out.append(.reportStall)
                reopen(now, &out)
            }
        case .draining(let until):
            if now &- lastProgress >= currentStallNs {
                // Only silence was left to write: close; the next cue opens afresh.
                out.append(.reportStall)
                out.append(.dropVoices)
                out.append(.close)
                state = .closed
                if shutdownDeadline != nil { finish(&out) }
                return
            }
            guard now >= until else { return }
            if shutdownDeadline != nil {
                finish(&out)
                return
            }
            // What was written has sounded: stop the stream (the server's graph may suspend).
            out.append(.stopStream)
            state = .idle(since: now)
            if idleCloseNs == 0 {
                state = .closed
                out.append(.close)
            }
        }
    }

    private mutating func shutdown(_ deadline: UInt64, _ now: UInt64, _ out: inout [Action]) {
        guard state != .finished else { return }
        shutdownDeadline = deadline
        for p in pending { out.append(.drop(p.job, lateNs: late(p.requestTime, now))) }
        pending.removeAll(keepingCapacity: true)
        // Streaming: play out until the voices end or the deadline.
        if !wantsToWrite || now >= deadline { finish(&out) }
    }

    // MARK: - Helpers

    /// How long the device may take no frame: longer until the stream has taken more
    /// than its first buffer (the server is still starting it).
    private var currentStallNs: UInt64 {
        framesSinceStart > bufferFrames ? stallNs : max(stallNs, settings.startStallNs)
    }

    private func mayRetry(_ now: UInt64) -> Bool {
        guard let lastAttempt else { return true }
        return now &- lastAttempt >= settings.minRetryNs
    }

    private mutating func beginOpen(_ now: UInt64, _ out: inout [Action]) {
        lastAttempt = now
        state = .opening
        out.append(.open)
    }

    /// Schedules the next attempt: 50 ms after the first failure, doubling up to 2 s.
    private mutating func failed(_ now: UInt64, _ out: inout [Action]) {
        state = .failed(retryAt: now &+ retryDelay)
        retryDelay = min(retryDelay &* 2, settings.maxRetryNs)
    }

    /// Close and open again at once, keeping the voices (a stall, a lost server).
    private mutating func reopen(_ now: UInt64, _ out: inout [Action]) {
        if shutdownDeadline != nil {
            finish(&out)
            return
        }
        reopeningUnderVoices = true
        reopenedSinceProgress = true
        out.append(.close)
        beginOpen(now, &out)
    }

    private mutating func hold(_ job: Job, _ requestTime: UInt64, _ out: inout [Action]) {
        if pending.count >= settings.maxPending {
            let oldest = pending.removeFirst()
            out.append(.drop(oldest.job, lateNs: late(oldest.requestTime, requestTime)))
        }
        pending.append((job, requestTime))
    }

    /// Drops held cues whose moment has passed.
    private mutating func expire(_ now: UInt64, _ out: inout [Action]) {
        while let first = pending.first, isTooLate(first.requestTime, now) {
            pending.removeFirst()
            out.append(.drop(first.job, lateNs: late(first.requestTime, now)))
        }
    }

    /// The end: cut what still sounds, stop, close, exit.
    private mutating func finish(_ out: inout [Action]) {
        if wantsToWrite { out.append(.cutVoices); out.append(.stopStream) }
        if isOpen { out.append(.close) }
        for p in pending { out.append(.drop(p.job, lateNs: 0)) }
        pending.removeAll(keepingCapacity: true)
        state = .finished
        out.append(.exit)
    }

    private func isTooLate(_ requestTime: UInt64, _ now: UInt64) -> Bool {
        requestTime != 0 && now &- requestTime > settings.maxStartDelayNs
    }

    private func late(_ requestTime: UInt64, _ now: UInt64) -> UInt64 {
        requestTime == 0 ? 0 : now &- requestTime
    }
}

extension DeviceMachine.Event {
    /// The device opened with a buffer of `bufferNs` (`bufferFrames` frames), asking nothing special.
    public static func opened(bufferNs: UInt64, bufferFrames: Int = 0) -> Self {
        .opened(DeviceMachine.Device(bufferNs: bufferNs, bufferFrames: bufferFrames))
    }
}
