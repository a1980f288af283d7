/// The life of the output device, as one clocked state machine: no I/O, no
/// clock reads. The audio thread (`AudioEngine`) feeds it events with the
/// time they happened and carries out the actions it returns; between events
/// it sleeps until `deadline` (and, while `wantsToWrite`, until the device has
/// room). Times are monotonic nanoseconds.
///
///     closed ──cue/prewarm──▶ opening ──opened──▶ idle ──cue──▶ streaming
///       ▲                        │                  ▲               │ the last voice ends
///       │ idle-close, error      │ open failed      │ tail played   ▼
///       └──────── idle ◀──       ▼                  ├─────────── draining (silence tail)
///                            failed(retryAt) ──timer/cue──▶ opening  │ tail played, on a device that lingers
///                                                   └─ linger over ─ lingering (silence) ──cue──▶ streaming
///     streaming/draining ──no progress for `stallNs`, or a recover loop──▶ close, reopen at once
///     any ──shutdown──▶ play out until the deadline ──▶ finished
///
/// Each state holds what the machine knows in it (the cues waiting and the backoff while
/// opening or failed; the open device's limits and the stream's progress while open); only
/// the shutdown deadline spans them all.
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

    /// What an opened device asks of the machine (from its `Pacing`), and its buffer.
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
        /// How long the stream stays active, written silence, once everything has sounded (0: stopped then).
        public var lingerNs: UInt64
        public init(bufferNs: UInt64, bufferFrames: Int = 0, idleCloseLimitNs: UInt64? = nil, drainMarginNs: UInt64? = nil,
                    lingerNs: UInt64 = 0) {
            self.bufferNs = bufferNs; self.bufferFrames = bufferFrames
            self.idleCloseLimitNs = idleCloseLimitNs; self.drainMarginNs = drainMarginNs; self.lingerNs = lingerNs
        }
    }

    /// A cue held while the device is not open yet.
    public struct Pending {
        public var job: Job
        public var requestTime: UInt64
    }

    /// Attempts at opening: the cues they hold, and the backoff.
    public struct Attempts {
        public var pending: [Pending] = []
        /// The delay before the next retry, should this attempt fail (50 ms doubling to 2 s).
        public var retryDelay: UInt64
        /// When the last attempt began.
        public var lastAttempt: UInt64
        /// The open under way replaces a device lost under running voices.
        public var underVoices = false
        /// A reopen under voices was tried since the device last took a frame: the next
        /// failure gives up (drops the voices) instead of reopening again.
        public var reopenedSinceProgress = false
    }

    /// The open device, as the machine keeps it (the settings and its pacing, combined).
    public struct Open: Sendable, Equatable {
        public var idleCloseNs: UInt64?
        public var drainMarginNs: UInt64
        public var lingerNs: UInt64
        /// A running device that takes no frame for this long is stalled.
        public var stallNs: UInt64
        public var bufferFrames: Int
    }

    /// A running stream's progress.
    public struct Run: Sendable, Equatable {
        public var lastProgress: UInt64
        /// Frames written since the stream (re)started: beyond one buffer, the device is consuming.
        public var framesSinceStart = 0
        /// xruns recovered in a row without a frame taken.
        public var recoveries = 0
        /// As `Attempts.reopenedSinceProgress`, for the device that reopen opened.
        public var reopenedSinceProgress = false
        public init(lastProgress: UInt64) { self.lastProgress = lastProgress }
    }

    /// Where the device is, with all the machine knows in that state.
    public enum State {
        /// No device. Nothing to wait for.
        case closed
        /// `open` was asked for; the shell answers `opened` or `openFailed`.
        case opening(Attempts)
        /// The last open failed; try again at `retryAt` if cues wait, or at the next cue.
        case failed(Attempts, retryAt: UInt64)
        /// Open, stream stopped (nothing queued). Closes at `since + idleCloseNs`.
        case idle(Open, since: UInt64)
        /// Voices sound: the shell writes a period whenever the device has room.
        case streaming(Open, Run)
        /// The last voice has been written; silence is written until `until`, when
        /// everything written has sounded, then the stream lingers or is stopped.
        case draining(Open, Run, until: UInt64)
        /// Everything has sounded; silence is still written until `until` (`Device.lingerNs`),
        /// so that the next cue finds the stream running; then it is stopped. `status` shows idle.
        case lingering(Open, Run, until: UInt64)
        /// Shut down: the shell ends the thread.
        case finished
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
        /// Stop the stream (drop what is queued: by then only silence); a device that lingered goes inactive.
        case stopStream
        /// Everything written has sounded: the voices have ended; the stream goes on, written silence.
        case linger
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
    public private(set) var state: State = .closed
    /// Set by `shutdown`, for every state after it: play out until then, take no cue.
    public private(set) var shutdownDeadline: UInt64?

    public init(settings: Settings = Settings()) {
        self.settings = settings
    }

    /// The state without its data: cheap to compare on every period.
    public enum Phase: Sendable { case closed, opening, failed, idle, streaming, draining, lingering, finished }
    public var phase: Phase {
        switch state {
        case .closed: return .closed
        case .opening: return .opening
        case .failed: return .failed
        case .idle: return .idle
        case .streaming: return .streaming
        case .draining: return .draining
        case .lingering: return .lingering
        case .finished: return .finished
        }
    }

    /// Cues waiting for the device to open, oldest first.
    public var pending: [Pending] {
        switch state {
        case .opening(let a), .failed(let a, _): return a.pending
        default: return []
        }
    }

    /// When the current state ends by itself (idle: since; draining, lingering: until; failed: retry at), for tests and status.
    public var stateTime: UInt64? {
        switch state {
        case .idle(_, let t), .draining(_, _, let t), .lingering(_, _, let t), .failed(_, let t): return t
        case .closed, .opening, .streaming, .finished: return nil
        }
    }

    /// Whether the shell should write when the device has room.
    public var wantsToWrite: Bool {
        switch state {
        case .streaming, .draining, .lingering: return true
        case .closed, .opening, .failed, .idle, .finished: return false
        }
    }

    /// Whether the device is open (idle, streaming, draining or lingering).
    public var isOpen: Bool { open != nil }

    private var open: Open? {
        switch state {
        case .idle(let o, _), .streaming(let o, _), .draining(let o, _, _), .lingering(let o, _, _): return o
        case .closed, .opening, .failed, .finished: return nil
        }
    }

    /// When the shell must feed `.timer` even if nothing else happens; nil: sleep until an event.
    public var deadline: UInt64? {
        var d: UInt64?
        func earliest(_ t: UInt64?) { if let t { d = min(d ?? t, t) } }
        switch state {
        case .closed, .opening, .finished: break
        case .failed(let a, let retryAt):
            if let first = a.pending.first {
                earliest(retryAt)
                // The first instant it is too late (`isTooLate` is strict): firing at the deadline
                // itself would find nothing to do, and fire again.
                if first.requestTime != 0 { earliest(first.requestTime &+ settings.maxStartDelayNs &+ 1) }
            }
        case .idle(let o, let since):
            earliest(o.idleCloseNs.map { since &+ $0 })
        case .streaming(let o, let r):
            earliest(r.lastProgress &+ stallNs(o, r))
        case .draining(let o, let r, let until), .lingering(let o, let r, let until):
            earliest(until)
            earliest(r.lastProgress &+ stallNs(o, r))
        }
        if phase != .finished { earliest(shutdownDeadline) }
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
        func sift(_ a: inout Attempts) {
            a.pending.removeAll { p in
                guard matches(p.job) else { return false }
                removed(p.job)
                count += 1
                return true
            }
        }
        switch state {
        case .opening(var a): sift(&a); state = .opening(a)
        case .failed(var a, let retryAt): sift(&a); state = .failed(a, retryAt: retryAt)
        default: break
        }
        return count
    }

    // MARK: - Events

    private mutating func cue(_ job: Job, _ requestTime: UInt64, _ now: UInt64, _ out: inout [Action]) {
        if shutdownDeadline != nil || phase == .finished || isTooLate(requestTime, now) {
            out.append(.drop(job, lateNs: late(requestTime, now)))
            return
        }
        switch state {
        case .idle(let o, _):
            state = .streaming(o, Run(lastProgress: now))
            out.append(.start(job))
        case .streaming:
            out.append(.start(job))
        case .draining(let o, let r, _), .lingering(let o, let r, _):
            state = .streaming(o, r)
            out.append(.start(job))
        case .closed:
            var a = Attempts(retryDelay: settings.minRetryNs, lastAttempt: now)
            hold(job, requestTime, &a, &out)
            beginOpen(a, now, &out)
        case .opening(var a):
            hold(job, requestTime, &a, &out)
            state = .opening(a)
        case .failed(var a, let retryAt):
            // A cue is the best moment to try again: the device may be back.
            hold(job, requestTime, &a, &out)
            if now &- a.lastAttempt >= settings.minRetryNs { beginOpen(a, now, &out) } else { state = .failed(a, retryAt: retryAt) }
        case .finished:
            break
        }
    }

    private mutating func prewarm(_ now: UInt64, _ out: inout [Action]) {
        guard shutdownDeadline == nil else { return }
        switch state {
        case .closed:
            beginOpen(Attempts(retryDelay: settings.minRetryNs, lastAttempt: now), now, &out)
        case .failed(let a, _):
            if now &- a.lastAttempt >= settings.minRetryNs { beginOpen(a, now, &out) }
        case .idle(let o, let since):
            // Warm again: the idle-close countdown restarts, so the device is still open for the cue.
            state = .idle(o, since: max(since, now))
        case .opening, .streaming, .draining, .lingering, .finished:
            break
        }
    }

    private mutating func opened(_ device: Device, _ now: UInt64, _ out: inout [Action]) {
        guard case .opening(let a) = state else { return }
        var idleCloseNs = settings.idleCloseNs
        if let limit = device.idleCloseLimitNs { idleCloseNs = min(idleCloseNs ?? limit, limit) }
        let o = Open(idleCloseNs: idleCloseNs, drainMarginNs: device.drainMarginNs ?? settings.drainMarginNs,
                     lingerNs: device.lingerNs, stallNs: max(settings.minStallNs, 4 &* device.bufferNs),
                     bufferFrames: device.bufferFrames)
        var run = Run(lastProgress: now)
        var streaming = false
        if a.underVoices {
            // A fresh device under the voices that were playing: not yet proved by a frame taken.
            run.reopenedSinceProgress = a.reopenedSinceProgress
            out.append(.restartVoices(requestedSince: now &- min(now, settings.maxStartDelayNs)))
            streaming = true
        }
        for p in a.pending {
            if isTooLate(p.requestTime, now) {
                out.append(.drop(p.job, lateNs: late(p.requestTime, now)))
            } else {
                out.append(.start(p.job))
                streaming = true
            }
        }
        state = streaming ? .streaming(o, run) : .idle(o, since: now)
    }

    private mutating func openFailed(_ now: UInt64, _ out: inout [Action]) {
        guard case .opening(var a) = state else { return }
        if a.underVoices { out.append(.dropVoices) }
        a.underVoices = false
        a.reopenedSinceProgress = false
        failed(a, now)
        expire(now, &out)
    }

    private mutating func wrote(_ frames: Int, _ xruns: Int, _ sounding: Bool, _ delayNs: UInt64, _ now: UInt64,
                                _ out: inout [Action]) {
        let (o, r0) : (Open, Run)
        switch state {
        case .streaming(let x, let y), .draining(let x, let y, _), .lingering(let x, let y, _): (o, r0) = (x, y)
        default: return
        }
        var r = r0
        if frames > 0 {
            r.lastProgress = now
            r.recoveries = 0
            r.reopenedSinceProgress = false
            r.framesSinceStart &+= frames
        } else if xruns > 0 {
            r.recoveries += xruns
            if r.recoveries >= settings.maxRecoveriesWithoutProgress {
                // Recovering "succeeds" and the next write fails again (a sound server that went away).
                out.append(.reportLost)
                reopen(r, now, &out)
                return
            }
        }
        switch state {
        case .streaming where !sounding: state = .draining(o, r, until: now &+ delayNs &+ o.drainMarginNs)
        case .draining where sounding: state = .streaming(o, r)
        case .streaming: state = .streaming(o, r)
        case .draining(_, _, let until): state = .draining(o, r, until: until)
        case .lingering(_, _, let until): state = .lingering(o, r, until: until)
        default: break
        }
    }

    private mutating func writeFailed(_ now: UInt64, _ out: inout [Action]) {
        let run: Run
        switch state {
        case .streaming(_, let r), .draining(_, let r, _): run = r
        case .idle, .lingering:
            // Nothing sounds: closed, and the next cue opens afresh.
            state = .closed
            out.append(.close)
            if shutdownDeadline != nil { finish(&out) }
            return
        default: return
        }
        if !run.reopenedSinceProgress && shutdownDeadline == nil {
            // One immediate reopen: a PCM left open across a sound-server restart fails
            // its first write; a fresh one plays the cue (restarted by the 250 ms rule).
            reopen(run, now, &out)
            return
        }
        out.append(.dropVoices)
        out.append(.close)
        if shutdownDeadline != nil {
            state = .finished
            out.append(.exit)
            return
        }
        failed(Attempts(retryDelay: settings.minRetryNs, lastAttempt: now), now)
    }

    private mutating func deviceError(_ out: inout [Action]) {
        guard case .idle = state else { return }
        state = .closed
        out.append(.close)
    }

    private mutating func timer(_ now: UInt64, _ out: inout [Action]) {
        if let d = shutdownDeadline, now >= d, phase != .finished {
            finish(&out)
            return
        }
        switch state {
        case .closed, .opening, .finished:
            break
        case .failed(_, let retryAt):
            expire(now, &out)
            if case .failed(let left, _) = state, !left.pending.isEmpty, now >= retryAt { beginOpen(left, now, &out) }
        case .idle(let o, let since):
            guard let idle = o.idleCloseNs, now &- since >= idle else { return }
            state = .closed
            out.append(.close)
        case .streaming(let o, let r):
            if now &- r.lastProgress >= stallNs(o, r) {
                out.append(.reportStall)
                reopen(r, now, &out)
            }
        case .draining(let o, let r, let until), .lingering(let o, let r, let until):
            if now &- r.lastProgress >= stallNs(o, r) {
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
            if case .draining = state, o.lingerNs > 0 {
                // Everything written has sounded; the stream runs on, in silence, a while.
                out.append(.linger)
                state = .lingering(o, r, until: now &+ o.lingerNs)
                return
            }
            // What was written has sounded: stop the stream (the server's graph may suspend).
            out.append(.stopStream)
            state = .idle(o, since: now)
            if o.idleCloseNs == 0 {
                state = .closed
                out.append(.close)
            }
        }
    }

    private mutating func shutdown(_ deadline: UInt64, _ now: UInt64, _ out: inout [Action]) {
        guard phase != .finished else { return }
        shutdownDeadline = deadline
        for p in pending { out.append(.drop(p.job, lateNs: late(p.requestTime, now))) }
        dropPending()
        // Streaming: play out until the voices end or the deadline.
        if !wantsToWrite || now >= deadline { finish(&out) }
        if case .lingering = state { finish(&out) }
    }

    // MARK: - Helpers

    /// How long the device may take no frame: longer until the stream has taken more
    /// than its first buffer (the server is still starting it).
    private func stallNs(_ o: Open, _ r: Run) -> UInt64 {
        r.framesSinceStart > o.bufferFrames ? o.stallNs : max(o.stallNs, settings.startStallNs)
    }

    private mutating func beginOpen(_ a: Attempts, _ now: UInt64, _ out: inout [Action]) {
        var a = a
        a.lastAttempt = now
        state = .opening(a)
        out.append(.open)
    }

    /// Schedules the next attempt: 50 ms after the first failure, doubling up to 2 s.
    private mutating func failed(_ a: Attempts, _ now: UInt64) {
        var a = a
        let retryAt = now &+ a.retryDelay
        a.retryDelay = min(a.retryDelay &* 2, settings.maxRetryNs)
        state = .failed(a, retryAt: retryAt)
    }

    /// Close and open again at once, keeping the voices (a stall, a lost server).
    private mutating func reopen(_ r: Run, _ now: UInt64, _ out: inout [Action]) {
        if shutdownDeadline != nil {
            finish(&out)
            return
        }
        out.append(.close)
        var a = Attempts(retryDelay: settings.minRetryNs, lastAttempt: now)
        a.underVoices = true
        a.reopenedSinceProgress = true
        beginOpen(a, now, &out)
    }

    private func hold(_ job: Job, _ requestTime: UInt64, _ a: inout Attempts, _ out: inout [Action]) {
        if a.pending.count >= settings.maxPending {
            let oldest = a.pending.removeFirst()
            out.append(.drop(oldest.job, lateNs: late(oldest.requestTime, requestTime)))
        }
        if a.pending.capacity < settings.maxPending { a.pending.reserveCapacity(settings.maxPending) }
        a.pending.append(Pending(job: job, requestTime: requestTime))
    }

    private mutating func dropPending() {
        switch state {
        case .opening(var a): a.pending.removeAll(keepingCapacity: true); state = .opening(a)
        case .failed(var a, let r): a.pending.removeAll(keepingCapacity: true); state = .failed(a, retryAt: r)
        default: break
        }
    }

    /// Drops held cues whose moment has passed.
    private mutating func expire(_ now: UInt64, _ out: inout [Action]) {
        guard case .failed(var a, let retryAt) = state else { return }
        while let first = a.pending.first, isTooLate(first.requestTime, now) {
            a.pending.removeFirst()
            out.append(.drop(first.job, lateNs: late(first.requestTime, now)))
        }
        state = .failed(a, retryAt: retryAt)
    }

    /// The end: cut what still sounds, stop, close, exit.
    private mutating func finish(_ out: inout [Action]) {
        if wantsToWrite { out.append(.cutVoices); out.append(.stopStream) }
        if isOpen { out.append(.close) }
        for p in pending { out.append(.drop(p.job, lateNs: 0)) }
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

extension DeviceMachine.Device {
    /// What an opened device asks of the machine.
    public init(_ d: OpenedDevice) {
        let f = d.format
        self.init(bufferNs: UInt64(f.bufferFrames) * 1_000_000_000 / UInt64(max(1, f.rate)), bufferFrames: f.bufferFrames,
                  idleCloseLimitNs: d.pacing.idleCloseLimitNs, drainMarginNs: d.pacing.drainMarginNs, lingerNs: d.pacing.lingerNs)
    }
}

extension DeviceMachine.Event {
    /// The device opened with a buffer of `bufferNs` (`bufferFrames` frames), asking nothing special.
    public static func opened(bufferNs: UInt64, bufferFrames: Int = 0) -> Self {
        .opened(DeviceMachine.Device(bufferNs: bufferNs, bufferFrames: bufferFrames))
    }
}
