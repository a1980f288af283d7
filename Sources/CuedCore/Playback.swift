/// What the audio thread does, without the thread: it carries out the device machine's
/// actions on the sink, the mixer, the stream writer and the voice ledger, and applies what
/// each render and write reports. Every call takes the time it happens at and
/// none reads a clock or sleeps, so a test drives it with a fake clock and a fake device; the
/// thread shell (`AudioEngine.run`) drives it with the real ones. Not thread-safe: one thread owns it.
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
    /// Takes the requests of ended voices, to be released off this thread (`Outbox`).
    private let retire: (VoiceRequest) -> Void
    private(set) var machine: Machine
    private(set) var ledger: VoiceLedger
    /// The stream to the opened device (kept after a close: its margin goes on with the next).
    private(set) var writer: StreamWriter?
    private(set) var mixer: Mixer?
    private(set) var exited = false

    /// The machine's actions for one event (capacity reserved: no allocation per event).
    private var actions: [Machine.Action] = []
    /// Events that carrying out actions produced (an open's result).
    private var followUps: [Machine.Event] = []
    private var published: Machine.Phase?

    init(sink: any Sink, configuration: AudioEngine.Configuration, stats: EngineStats,
         onEvent: @escaping (EngineEvent) -> Void, retire: @escaping (VoiceRequest) -> Void = { _ in }) {
        self.sink = sink
        self.configuration = configuration
        self.stats = stats
        self.onEvent = onEvent
        self.retire = retire
        machine = Machine(settings: configuration.machineSettings)
        ledger = VoiceLedger(capacity: configuration.voices * 2 + machine.settings.maxPending + 256)
        actions.reserveCapacity(256)
        followUps.reserveCapacity(8)
    }

    // MARK: - Commands

    func take(_ command: AudioEngine.Command, now: UInt64) {
        switch command {
        case .play(let request):
            ledger.admit(request)
            feed(.cue(request.id, requestTime: request.requestTime), now: now)
        case .stop(let scope, let ticket):
            var count = 0
            if let mixer { count = mixer.stop(fadeFrames: mixer.stopFadeFrames, reason: scope.reason) { ledger.matches($0, scope) } }
            count += machine.removePending { ledger.matches($0, scope) } removed: { id in
                ledger.finish(id, scope.reason, started: false)
            }
            onEvent(.stopped(ticket: ticket, count: count))
        case .fadeOutAll:
            if let mixer { mixer.fadeOutAll(frames: mixer.stopFadeFrames, reason: .muted) }
            _ = machine.removePending { _ in true } removed: { id in ledger.finish(id, .muted, started: false) }
        case .prewarm:
            feed(.prewarm, now: now)
        case .sync(let ticket):
            onEvent(.synced(ticket: ticket))
        case .shutdown(let deadline):
            feed(.shutdown(deadline: deadline), now: now)
        }
        reportEnds(now: now)
    }

    // MARK: - One turn of the loop

    /// Writes what the stream wants written now, fires the machine's deadline if it
    /// passed, ends the voices heard by now; then says how to wait.
    func step(now: UInt64, deviceWoke: Bool) -> Wait {
        heard(now: now)
        var paced: UInt64?
        var watch = DeviceWatch.none
        var wrote = false
        if machine.wantsToWrite, let writer {
            switch writer.next(now: now, deviceWoke: deviceWoke) {
            case .write(let render):
                writeOnce(render: render, now: now)
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
            return .again
        }
        if wrote { return .again }
        if machine.phase == .idle, writer?.device.pacing.watchesWhileIdle == true { watch = .idle }
        return .sleep(until: wake(paced: paced, now: now), watch: paced != nil ? .none : watch)
    }

    /// Every clock that wakes the thread, in one place: the machine's deadline, the
    /// stream's pacing, and the moment the next ending voice has been heard.
    func wake(paced: UInt64?, now: UInt64) -> UInt64? {
        var wake = Earliest()
        wake.add(machine.deadline)
        wake.add(paced)
        if machine.wantsToWrite, let writer, let frame = ledger.nextSoundingFrame {
            wake.add(writer.stream.timeHeard(frame, now: now))
        }
        return wake.value
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
            }
            return false
        case .room:
            guard machine.wantsToWrite else { return false }
            do {
                _ = try sink.hasRoom()  // decodes the wake-up; `step` then checks the room itself
            } catch {
                deviceFailed(error, now: now)
            }
            return true
        }
    }

    // MARK: - The device machine

    /// Hands one event to the machine and carries out its actions (and those of
    /// the events they produce, such as an open's result); then hands over the voices' ends.
    private func feed(_ event: Machine.Event, now: UInt64) {
        var next: Machine.Event? = event
        while let e = next {
            if !actions.isEmpty { actions.removeAll(keepingCapacity: true) }
            machine.handle(e, now: now, into: &actions)
            for i in actions.indices { perform(actions[i], now: now) }
            next = followUps.isEmpty ? nil : followUps.removeFirst()
        }
        publishState()
        reportEnds(now: now)
    }

    private func perform(_ action: Machine.Action, now: UInt64) {
        switch action {
        case .open:
            open(now: now)
        case .close:
            sink.close()
            published = nil  // the status says closed now: the machine's state is told again
            throwAwayStream(.cut)
            stats.setSink(.closed, keepError: true)
            onEvent(.closed)
        case .linger:
            ledger.soundedAll()  // the drain is over: everything written has sounded
        case .stopStream:
            sink.stop()
            ledger.soundedAll()
            writer?.stopped()
            onEvent(.streamStopped)
        case .start(let id):
            configuration.hangIfTesting()
            start(id, now: now)
        case .drop(let id, let lateNs):
            ledger.finish(id, machine.shutdownDeadline != nil ? .shutdown : .late, started: false, lateNs: lateNs)
        case .restartVoices(let since):
            throwAwayStream(.cut)
            mixer?.restart(requestedSince: since) { ledger.removed($0, now: now) }
        case .dropVoices:
            throwAwayStream(.cut)
            mixer?.removeAll { ledger.removed($0, now: now) }
            stats.voicesActive.store(0, ordering: .relaxed)
        case .cutVoices:
            // Shutdown's deadline: what still sounds (or sits in the device's buffer) is cut off.
            writer?.reset()
            ledger.finishSounding(.shutdown)
            mixer?.removeAll { ledger.finish($0.id, $0.stopReason ?? .shutdown, started: $0.started) }
            stats.voicesActive.store(0, ordering: .relaxed)
        case .reportStall:
            stats.stalls.add(1, ordering: .relaxed)
            sink.note(.failed(OutputHealth.stalled), now: now)
            onEvent(.stalled)
        case .reportLost:
            stats.lost.add(1, ordering: .relaxed)
            sink.note(.failed(OutputHealth.lostDevice), now: now)
            onEvent(.lost)
        case .exit:
            exited = true
        }
    }

    /// What the device held is gone: voices rendered and not heard end `reason`.
    private func throwAwayStream(_ reason: VoiceEndReason) {
        writer?.reset()
        ledger.finishSounding(reason)
    }

    private func open(now: UInt64) {
        let d: OpenedDevice
        do {
            d = try sink.open()
        } catch {
            stats.setSink(.failed, error: error.message)
            onEvent(.openFailed(error.message))
            followUps.append(.openFailed)
            return
        }
        let f = d.format
        // The margin learnt so far goes on with the new stream (a reopen of the same device keeps it).
        let writer = StreamWriter(sink: sink, device: d, tuner: self.writer?.stream.tuner
                                  ?? MarginTuner(quietNs: UInt64(max(0, configuration.marginQuietSeconds) * 1e9)),
                                  buffer: self.writer?.buffer, stats: stats)
        let maxRender = writer.stream.maxRender
        if mixer == nil || maxRender > mixer!.maxFrames || f.rate != mixer!.rate {
            let old = mixer
            mixer = Mixer(maxVoices: configuration.voices, maxFrames: maxRender, stealFadeFrames: f.rate * 2 / 1000, rate: f.rate)
            old?.removeAll { ledger.removed($0, now: now) }
        }
        self.writer = writer
        published = nil
        // The state itself comes from the machine once it took the open (idle, or running a cue
        // that waited): saying idle here showed a cue about to sound as idle for a moment.
        stats.setOpened(format: f, kind: d.kind)
        // A library the device loaded may have set RLIMIT_RTTIME's soft limit to its hard one
        // (libpipewire's module-rt does, in the ALSA plugin): then a real-time thread that ran
        // long was killed at once, with no SIGXCPU to drop it to normal first (seen as a user
        // with RTKit: SIGKILL after a PipeWire restart). The budget is set again, soft below hard.
        AudioEngine.limitRealtimeBudget(hardUs: 200_000)
        onEvent(.opened(f, kind: d.kind))
        followUps.append(.opened(Machine.Device(d)))
    }

    // MARK: - Voices

    /// Starts a voice: mid-stream, into the frames the device has not committed (`StreamWriter.startVoice`).
    private func start(_ id: UInt64, now: UInt64) {
        guard let r = ledger.request(id) else { return }
        guard let mixer, let writer else {
            ledger.finish(id, .late, started: false)
            return
        }
        ledger.playing(id)
        let report = writer.startVoice(id, mixer: mixer, streaming: machine.phase == .streaming, now: now) { scratch, frames in
            mixer.start(r, mixedInto: scratch, frames: frames)
        }
        // Also when nothing was mixed in: `status wait` after a play counts the voice at once, not at the next render.
        report.record(into: stats, ledger: &ledger, now: now)
    }

    /// Voices heard by `now` end `played`.
    private func heard(now: UInt64) {
        guard ledger.soundingCount > 0, let writer else { return }
        ledger.sounded(through: writer.stream.heard(now: now))
        reportEnds(now: now)
    }

    /// Hands the ledger's ends to the server (those it needs), and counts them.
    /// Hands over the voices' ends; each tells the sink how its output did (`OutputHealth`).
    private func reportEnds(now: UInt64) {
        ledger.takeEnds { end in
            if end.reason == .played { sink.note(.heard, now: now) }
            if end.reason == .late || end.reason == .cut {
                stats.dropped.add(1, ordering: .relaxed)
                if machine.shutdownDeadline == nil { sink.note(.lost, now: now) }
            }
            if end.isReported { onEvent(.voiceEnded(end)) }
        }
        ledger.takeRetired(retire)
    }

    // MARK: - Writing

    /// Renders `render` frames (0: none, the unwritten ones are written) and writes what the device takes.
    private func writeOnce(render: Int, now: UInt64) {
        guard let mixer, let writer else { return }
        writer.render(render, mixer: mixer)?.record(into: stats, ledger: &ledger, now: now)
        let w: StreamWriter.Written
        do {
            // A miss in a lingering stream's silence is silence too: not counted, no margin grown.
            w = try writer.write(mixer: mixer, heard: machine.phase != .lingering, now: now)
        } catch {
            deviceFailed(error, now: now)
            return
        }
        feed(.wrote(frames: w.frames, xruns: w.xruns, sounding: mixer.isSounding || writer.stream.unwritten > 0, delayNs: w.delayNs),
             now: now)
    }

    private func deviceFailed(_ error: SinkError, now: UInt64) {
        sink.note(.failed(error.message), now: now)
        onEvent(.writeFailed(error.message))
        stats.setSink(.failed, error: error.message)
        feed(.writeFailed, now: now)
    }

    /// The machine's state as `status` shows it, when it changed.
    private func publishState() {
        guard machine.phase != published else { return }
        published = machine.phase
        stats.publish(machine.phase)
    }
}
