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
    public let settings: Settings
    public private(set) var state: State = .closed
    /// Set by `shutdown`, for every state after it: play out until then, take no cue.
    public private(set) var shutdownDeadline: UInt64?

    public init(settings: Settings = Settings()) {
        self.settings = settings
    }

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
        var d = Earliest()
        switch state {
        case .closed, .opening, .finished: break
        case .failed(let a, let retryAt):
            if let first = a.pending.first {
                d.add(retryAt)
                // The first instant it is too late (`isTooLate` is strict): firing at the deadline
                // itself would find nothing to do, and fire again.
                if first.requestTime != 0 { d.add(first.requestTime &+ settings.maxStartDelayNs &+ 1) }
            }
        case .idle(let o, let since):
            d.add(o.idleCloseNs.map { since &+ $0 })
        case .streaming(let o, let r):
            d.add(r.lastProgress &+ stallNs(o, r))
        case .draining(let o, let r, let until), .lingering(let o, let r, let until):
            d.add(until)
            d.add(r.lastProgress &+ stallNs(o, r))
        }
        if phase != .finished { d.add(shutdownDeadline) }
        return d.value
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
        // A loop, not `removeAll(where:)` with a captured counter: that allocates in a debug
        // build, where the audio thread's test counts (AudioThreadAllocationTests).
        func sift(_ a: inout Attempts) -> Int {
            var kept = 0, n = 0
            for i in 0..<a.pending.count {
                let p = a.pending[i]
                if matches(p.job) { removed(p.job); n += 1 } else { a.pending[kept] = p; kept += 1 }
            }
            a.pending.removeLast(a.pending.count - kept)
            return n
        }
        switch state {
        case .opening(var a): count = sift(&a); state = .opening(a)
        case .failed(var a, let retryAt): count = sift(&a); state = .failed(a, retryAt: retryAt)
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

/// The earliest of some instants (nil: none yet). A value, not a variable captured by a
/// nested function: a debug build boxes such a variable on the heap, on the audio thread.
struct Earliest {
    private(set) var value: UInt64?
    mutating func add(_ t: UInt64?) { if let t { value = min(value ?? t, t) } }
}
