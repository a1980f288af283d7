#if canImport(Glibc)
import Glibc
#endif

/// What the audio thread does, without the thread: it carries out the device
/// machine's actions on the sink, the mixer, the output stream and the voice
/// ledger. Every call takes the time it happens at and none reads a clock or
/// sleeps, so a test drives it with a fake clock and a fake device; the thread
/// shell (`AudioEngine.run`) drives it with the real ones. Not thread-safe: one
/// thread owns it.
final class Playback {
    typealias Machine = DeviceMachine<UInt64>

    /// What the shell waits for next.
    enum Wait: Equatable {
        /// Work is left: call `step` again at once.
        case again
        /// Sleep until `until` (nil: until a command), and on the device's descriptors:
        /// for room while streaming, for a failure while idle, or not at all.
        case sleep(until: UInt64?, watch: DeviceWatch)
    }
    enum DeviceWatch: Equatable { case none, room, idle }

    let sink: any Sink
    let stats: EngineStats
    let configuration: AudioEngine.Configuration
    private let onEvent: (EngineEvent) -> Void
    private(set) var machine: Machine
    private(set) var ledger: VoiceLedger
    private(set) var stream: OutputStream?
    private(set) var mixer: Mixer?
    private(set) var exited = false

    /// The machine's actions for one event (capacity reserved: no allocation per event).
    private var actions: [Machine.Action] = []
    /// Events that carrying out actions produced (an open's result).
    private var followUps: [Machine.Event] = []
    /// The converted frames waiting to be written: `stream.unwritten` of them from `outOffset`.
    private var output: UnsafeMutableRawPointer?
    private var outOffset = 0
    /// The float mix of the last `stream.history` frames rendered, a ring ending at `historyEnd`.
    private var history: UnsafeMutablePointer<Float>?
    private var historyCapacity = 0
    private var historyEnd = 0
    /// Where a mid-stream cue is mixed into frames given back or not yet written.
    private var scratch: UnsafeMutablePointer<Float>?
    private var format: SinkFormat?
    private var published: Machine.State?

    init(sink: any Sink, configuration: AudioEngine.Configuration, stats: EngineStats,
         onEvent: @escaping (EngineEvent) -> Void) {
        self.sink = sink
        self.configuration = configuration
        self.stats = stats
        self.onEvent = onEvent
        machine = Machine(settings: configuration.machineSettings)
        ledger = VoiceLedger(capacity: configuration.voices * 2 + machine.settings.maxPending + 256)
        actions.reserveCapacity(256)
        followUps.reserveCapacity(8)
    }

    deinit {
        output?.deallocate()
        history?.deallocate()
        scratch?.deallocate()
    }

    // MARK: - Commands

    func take(_ command: AudioEngine.Command, now: UInt64) {
        switch command {
        case .play(let request):
            ledger.admit(request)
            feed(.cue(request.id, requestTime: request.requestTime), now: now)
        case .stop(let scope, let ticket):
            var count = 0
            if let mixer, let format {
                count = mixer.stop(fadeFrames: format.rate * 4 / 1000, reason: scope.reason) { ledger.matches($0, scope) }
            }
            count += machine.removePending { ledger.matches($0, scope) } removed: { id in
                ledger.finish(id, scope.reason, started: false)
            }
            onEvent(.stopped(ticket: ticket, count: count))
        case .fadeOutAll:
            if let mixer, let format { mixer.fadeOutAll(frames: format.rate * 4 / 1000, reason: .muted) }
            _ = machine.removePending { _ in true } removed: { id in ledger.finish(id, .muted, started: false) }
        case .prewarm:
            feed(.prewarm, now: now)
        case .sync(let ticket):
            onEvent(.synced(ticket: ticket))
        case .shutdown(let deadline):
            feed(.shutdown(deadline: deadline), now: now)
        }
        reportEnds()
    }

    // MARK: - One turn of the loop

    /// Writes what the stream wants written now, fires the machine's deadline if it
    /// passed, ends the voices heard by now; then says how to wait.
    func step(now: UInt64, deviceWoke: Bool) -> Wait {
        heard(now: now)
        var paced: UInt64?
        var watch = DeviceWatch.none
        var wrote = false
        if machine.wantsToWrite, let stream {
            switch stream.next(now: now, room: sink.availableFrames(), deviceWoke: deviceWoke) {
            case .write(let render):
                writeOnce(render: render, now: now)
                reportEnds()
                wrote = true
            case .wait(let until): paced = until
            case .waitForDevice: watch = .room
            }
        }
        if exited { return .sleep(until: nil, watch: .none) }
        // Also after a write: a device that always has room (its write waits instead) would
        // otherwise keep the machine's deadline from ever firing (the drain's end, shutdown).
        if let d = machine.deadline, now >= d {
            feed(.timer, now: now)
            reportEnds()
            return .again
        }
        if wrote { return .again }
        if case .idle = machine.state { watch = .idle }
        return .sleep(until: wake(paced: paced, now: now), watch: paced != nil ? .none : watch)
    }

    /// Every clock that wakes the thread, in one place: the machine's deadline, the
    /// stream's pacing, and the moment the next ending voice has been heard.
    func wake(paced: UInt64?, now: UInt64) -> UInt64? {
        var wake = machine.deadline
        func earliest(_ t: UInt64?) { if let t { wake = min(wake ?? t, t) } }
        earliest(paced)
        if machine.wantsToWrite, let stream, let frame = ledger.nextSoundingFrame {
            earliest(stream.timeHeard(frame, now: now))
        }
        return wake
    }

    /// The device's descriptors woke the thread (their `revents` are set). Returns
    /// true if that was news about room (the shell then counts the wake as the device's).
    func deviceReadable(_ watch: DeviceWatch, now: UInt64) -> Bool {
        switch watch {
        case .none:
            return false
        case .idle:
            if sink.idleDeviceFailed() {
                onEvent(.writeFailed("the idle device reported an error (its sound server went away?)"))
                feed(.deviceError, now: now)
                reportEnds()
            }
            return false
        case .room:
            guard machine.wantsToWrite else { return false }
            do {
                _ = try sink.hasRoom()  // decodes the wake-up; `step` then checks the room itself
            } catch {
                deviceFailed(error, now: now)
                reportEnds()
            }
            return true
        }
    }

    // MARK: - The device machine

    /// Hands one event to the machine and carries out its actions (and those of
    /// the events they produce, such as an open's result).
    private func feed(_ event: Machine.Event, now: UInt64) {
        let phase = machine.phase
        var next: Machine.Event? = event
        while let e = next {
            if !actions.isEmpty { actions.removeAll(keepingCapacity: true) }
            machine.handle(e, now: now, into: &actions)
            for i in actions.indices { perform(actions[i], now: now) }
            next = followUps.isEmpty ? nil : followUps.removeFirst()
        }
        if machine.phase != phase || !actions.isEmpty { publishState() }
    }

    private func perform(_ action: Machine.Action, now: UInt64) {
        switch action {
        case .open:
            open(now: now)
        case .close:
            sink.close()
            throwAwayStream(.cut)
            stats.deviceDelayFrames.store(0, ordering: .relaxed)
            stats.setSink(.closed, keepError: true)
            onEvent(.closed)
        case .stopStream:
            sink.stop()
            ledger.soundedAll()  // the stream drained: everything written has sounded
            stream?.stopped()
            stats.deviceDelayFrames.store(0, ordering: .relaxed)
            onEvent(.streamStopped)
        case .start(let id):
            if configuration.hangOnPlayForTesting { while true { _ = sleep(3600) } }
            start(id, now: now)
        case .drop(let id, let lateNs):
            ledger.finish(id, machine.shutdownDeadline != nil ? .shutdown : .late, started: false, lateNs: lateNs)
        case .restartVoices(let since):
            throwAwayStream(.cut)
            mixer?.restart(requestedSince: since) { removed($0, now: now) }
        case .dropVoices:
            throwAwayStream(.cut)
            mixer?.removeAll { removed($0, now: now) }
            stats.voicesActive.store(0, ordering: .relaxed)
        case .cutVoices:
            // Shutdown's deadline: what still sounds (or sits in the device's buffer) is cut off.
            stream?.reset()
            ledger.finishSounding(.shutdown)
            mixer?.removeAll { ledger.finish($0.id, $0.stopReason ?? .shutdown, started: $0.started) }
            stats.voicesActive.store(0, ordering: .relaxed)
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

    /// What the device held is gone: voices rendered and not heard end `reason`.
    private func throwAwayStream(_ reason: VoiceEndReason) {
        stream?.reset()
        ledger.finishSounding(reason)
    }

    private func open(now: UInt64) {
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
            if mixer == nil || f.periodFrames > mixer!.maxFrames || f.rate != mixer!.rate {
                let old = mixer
                mixer = Mixer(maxVoices: configuration.voices, maxFrames: f.periodFrames,
                              stealFadeFrames: f.rate * 2 / 1000, rate: f.rate)
                old?.removeAll { removed($0, now: now) }
            }
            format = f
            stream = OutputStream(format: f, writeAhead: sink.writeAhead, descriptorsStayReadable: sink.descriptorsStayReadable,
                                  takesAnyRoom: sink.takesAnyRoom)
            outOffset = 0
            stats.setSink(.idle, format: f, kind: sink.kind)
            onEvent(.opened(f, kind: sink.kind))
            var device = Machine.Device(bufferNs: UInt64(f.bufferFrames) * 1_000_000_000 / UInt64(max(1, f.rate)),
                                        bufferFrames: f.bufferFrames)
            device.idleCloseLimitNs = sink.idleCloseLimitSeconds.map { UInt64(max(0, $0) * 1e9) }
            device.drainMarginNs = sink.drainMarginSeconds.map { UInt64(max(0, $0) * 1e9) }
            followUps.append(.opened(device))
        } catch {
            stats.setSink(.failed, error: error.message)
            onEvent(.openFailed(error.message))
            followUps.append(.openFailed)
        }
    }

    // MARK: - Voices

    /// Starts a voice. Mid-stream it is mixed at once into the frames rendered and not
    /// yet written and, on a device that can rewind, into those it gives back, so it
    /// sounds from the earliest frame the device has not committed.
    private func start(_ id: UInt64, now: UInt64) {
        guard let r = ledger.request(id) else { return }
        guard let mixer, let format, var stream, let scratch, let output else {
            ledger.finish(id, .late, started: false)
            return
        }
        var back = 0
        let deviceCan = stream.written > 0 ? sink.rewindableFrames() : 0
        if case let can = stream.rewindable(deviceCan: deviceCan), can > 0 {
            back = min(can, sink.rewind(frames: can))
            if back > 0 {
                stream.didRewind(back, now: now)
                stats.rewinds.add(1, ordering: .relaxed)
            }
        }
        let frames = stream.unwritten
        let result: Mixer.Start
        ledger.playing(id)
        if frames > 0 {
            historyTail(frames, scratch, copyOut: true)
            // These frames were converted (and their clipping counted) before; count only what the new voice adds.
            let counted = Mixer.clipped(UnsafePointer(scratch), frames: frames, format: format.sampleFormat)
            result = mixer.start(r.cue, id: id, gain: r.gain, rate: r.rate, priority: r.priority, owner: r.ownerKey,
                                 important: r.important, limit: r.limit, loop: r.loop, requestTime: r.requestTime,
                                 mixedInto: scratch, frames: frames)
            historyTail(frames, scratch, copyOut: false)
            convert(UnsafePointer(scratch), frames: frames, at: stream.written, mixer: mixer, format: format,
                    output: output, counted: counted, now: now)
        } else {
            result = mixer.start(r.cue, id: id, gain: r.gain, rate: r.rate, priority: r.priority, owner: r.ownerKey,
                                 important: r.important, limit: r.limit, loop: r.loop, requestTime: r.requestTime)
            if machine.phase == .streaming && stream.written > 0 { stream.voiceStartedMidStream() }
        }
        self.stream = stream
        switch result {
        case .refused:
            ledger.finish(id, .busy, started: false)
            return
        case .stole:
            stats.stolen.add(1, ordering: .relaxed)
        case .started:
            break
        }
        mixer.takeEvicted { ledger.finish($0, $1, started: true) }
    }

    /// A voice removed before its end: a stopped one ends as it was stopped; one
    /// that sounded is cut off; one that never sounded was too late.
    private func removed(_ v: Mixer.RemovedVoice, now: UInt64) {
        if let reason = v.stopReason {
            ledger.finish(v.id, reason, started: v.started)
        } else {
            ledger.finish(v.id, v.started ? .cut : .late, started: v.started,
                          lateNs: v.requestTime == 0 ? 0 : now &- v.requestTime)
        }
    }

    /// Voices heard by `now` end `played`.
    private func heard(now: UInt64) {
        guard ledger.soundingCount > 0, let stream else { return }
        ledger.sounded(through: stream.heard(now: now))
        reportEnds()
    }

    /// Hands the ledger's ends to the server (those it needs), and counts them.
    private func reportEnds() {
        ledger.takeEnds { end in
            if end.reason == .late || end.reason == .cut { stats.dropped.add(1, ordering: .relaxed) }
            if end.isReported { onEvent(.voiceEnded(end)) }
        }
    }

    // MARK: - Writing

    /// Renders `render` frames (0: none, the unwritten ones are written) and writes what the device takes.
    private func writeOnce(render: Int, now: UInt64) {
        guard let mixer, let format, let output, var stream else { return }
        let bytesPerFrame = format.channels * format.sampleFormat.bytes
        if render > 0 && stream.unwritten == 0 {
            mixer.render(frames: render)
            remember(UnsafePointer(mixer.mix), frames: render)
            convert(UnsafePointer(mixer.mix), frames: render, at: stream.rendered, mixer: mixer, format: format,
                    output: output, now: now)
            stream.didRender(render)
        }
        let result: SinkWrite
        do {
            result = try sink.write(output + outOffset * bytesPerFrame, frames: stream.unwritten)
        } catch {
            self.stream = stream
            deviceFailed(error, now: now)
            return
        }
        outOffset += result.frames
        if result.xruns > 0 { stats.xruns.add(result.xruns, ordering: .relaxed) }
        if result.missedCycles > 0 { stats.missedCycles.add(result.missedCycles, ordering: .relaxed) }
        let delay = sink.delayFrames()
        stream.didWrite(frames: result.frames, xruns: result.xruns, delay: delay, now: now)
        self.stream = stream
        stats.deviceDelayFrames.store(delay, ordering: .relaxed)
        let delayNs = UInt64(max(0, delay)) * 1_000_000_000 / UInt64(format.rate)
        feed(.wrote(frames: result.frames, xruns: result.xruns, sounding: mixer.isSounding || stream.unwritten > 0,
                    delayNs: delayNs), now: now)
    }

    /// Converts `frames` rendered frames, the stream's frames from position `at`, into
    /// `output` as the next frames to write, and takes the mixer's report on them
    /// (voices that started and ended). `counted`: clipped samples among these frames
    /// already counted (frames converted again).
    private func convert(_ mix: UnsafePointer<Float>, frames: Int, at position: Int, mixer: Mixer, format: SinkFormat,
                         output: UnsafeMutableRawPointer, counted: Int = 0, now: UInt64) {
        let clipped: Int
        switch format.sampleFormat {
        case .s16: clipped = mixer.convert(frames: frames, from: mix, toS16: output.assumingMemoryBound(to: Int16.self))
        case .float: clipped = mixer.convert(frames: frames, from: mix, toFloat: output.assumingMemoryBound(to: Float.self))
        }
        if clipped > counted { stats.clipped.add(clipped - counted, ordering: .relaxed) }
        stats.voicesActive.store(mixer.activeVoices, ordering: .relaxed)
        for i in 0..<mixer.startedCount where mixer.startedRequestTimes[i] != 0 {
            stats.recordLatency(ns: now &- mixer.startedRequestTimes[i])
        }
        for i in 0..<mixer.endedCount {
            let e = mixer.ended[i]
            if e.reason == .played {
                ledger.rendered(e.id, lastFrame: position + max(0, e.lastFrame))
            } else {
                ledger.finish(e.id, e.reason, started: true)
            }
        }
        outOffset = 0
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

    private func deviceFailed(_ error: SinkError, now: UInt64) {
        onEvent(.writeFailed(error.message))
        stats.setSink(.failed, error: error.message)
        feed(.writeFailed, now: now)
    }

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
