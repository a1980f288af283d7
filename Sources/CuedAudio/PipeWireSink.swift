import CPipeWire
import CuedCore
import CuedProtocol
#if canImport(Glibc)
import Glibc
#endif

/// Plays through a native PipeWire stream (`--sink pipewire[:TARGET]`): no ALSA
/// plugin and no second ring in front of the graph's own buffers.
///
/// How it is driven: one thread, cued's audio thread, runs both of libpipewire's
/// loops. The stream lives on a non-threaded `pw_loop` (the context's main loop,
/// entered in `open`), and the context's data loop, whose own thread `open` stops, is
/// entered by the audio thread too. Their descriptors (`pw_loop_get_fd`: epoll fds,
/// readable when any of a loop's sources is) are the sink's `pollDescriptors` and,
/// while the stream is stopped, its `idleWatchDescriptors`. Every call that needs
/// fresh news runs both loops once without waiting (`pw_loop_iterate(loop, 0)`): the
/// data loop runs the graph's cycle for the stream (the server's wake-up for the
/// node, the converter, the stream's RT_PROCESS callback), the main loop the server's
/// messages, all recorded in `cued_pw_events`. No second thread is in the path from a
/// cycle to the buffer it plays, and none can be late for it while the other runs.
///
/// Buffers: a write fills a buffer dequeued from the stream (`pw_stream_dequeue_buffer`,
/// the graph's own memory) up to the frames the graph asks for (`pw_buffer.requested`:
/// one quantum, or what its resampler needs), across writes if cued's period is
/// smaller, and once full makes it the one `ready` buffer. The process callback, inside
/// the graph's next cycle, queues it and the graph plays it in that same cycle; the
/// write that follows prepares the next. Until that cycle the ready buffer is still
/// cued's: a cue that arrives mid-stream takes it back (`rewind`) and is mixed into it,
/// so it is heard in the graph's next cycle, not behind a buffer already handed over.
///
/// Timing (`delayFrames`, from `pw_stream_get_time_n`): frames in the buffer being
/// filled or ready, plus any still queued (`queued`) and the resampler's (`buffered`),
/// plus what the graph holds: the rest of the buffer it took in its last cycle and
/// the device delay (`delay`), less the time elapsed since the cycle stamped `now`.
///
/// Idle: when the engine stops the stream (its last cue has played), the stream stays
/// active for `lingerMs` more (the graph plays silence for it): the cues of one gesture
/// come within a second or two of each other, and a running stream takes the next one
/// in the graph's next cycle, where waking a stopped one costs the server a round
/// trip and the graph a quantum switch. Then it goes inactive (`pw_stream_set_active`)
/// so that the graph can return to its own quantum and suspend.
///
/// Missed cycles (`SinkWrite.missedCycles`): libpipewire tells a client nothing when the
/// graph runs a cycle without its audio (the buffer came too late, or the stream's node
/// was not scheduled in time): PipeWire plays silence there and no xrun reaches cued.
/// Before each buffer is queued, the graph position and the frames the graph has taken
/// from the queue are compared (`CycleAccount`); what the position gained beyond what
/// was taken, the graph played without the stream.
///
/// Errors (server absent, core error or disconnect, stream error state) become
/// `SinkError`s; the engine closes the sink and opens it again later.
/// Threading: every method on the audio thread only (see `Sink`), except `init`
/// and `preflight`, called before it starts.
public final class PipeWireSink: Sink {
    public let spec: String
    /// A node name or serial (`target.object`), nil: the session manager's default.
    public let target: String?
    public let rate: Int
    /// The quantum asked for (`node.latency` = quantumFrames/rate) and cued's period.
    public let quantumFrames: Int
    public let streamProperties: [String: String]
    public var kind: String { "pipewire" }
    /// The graph's buffers are the device: fill what it asks for (the sink itself
    /// keeps one buffer ready ahead of the graph's next cycle).
    public var writeAhead: WriteAhead { .fill }
    /// Every wake-up of the loop's descriptor is consumed by the dispatch in `hasRoom`: a
    /// wake-up without room (a message from the server) is followed by another poll, not a
    /// timer that would sleep through the `process` that follows it (the graph asks for the
    /// next buffer once a cycle, and it is needed within that cycle).
    public var descriptorsStayReadable: Bool { false }
    /// Its room is the buffer the graph asks for next: a quantum smaller than the period
    /// (forced by the user or another app) is filled as it is.
    public var takesAnyRoom: Bool { true }
    /// How long `open` waits for the server to link the stream and agree on a format.
    public var openTimeoutMs = 2000
    /// How long the stream stays active once the engine stopped it (see the type's notes).
    public let lingerMs: Int

    private static let channels = 2
    private static let stride = 2 * MemoryLayout<Int16>.size
    private static let initialized: Bool = { cued_pw_init(); return true }()

    private var loop: UnsafeMutablePointer<pw_loop>?
    /// The context's data loop, driven by this thread (its own thread stopped).
    private var dataLoop: UnsafeMutablePointer<pw_loop>?
    private var context: OpaquePointer?
    /// Where the data thread says it runs (see `cued_pw_take_data_loop`); lives as long as the context.
    private var markSlot: UnsafeMutablePointer<pthread_t>?
    private var core: OpaquePointer?
    private var stream: OpaquePointer?
    private var events: UnsafeMutablePointer<cued_pw_events>?
    private var fds = UnsafeMutableBufferPointer<pollfd>(start: nil, count: 0)
    /// The dequeued buffer being filled (`events.held`), its frames so far and the frames it is filled to.
    private var held: UnsafeMutablePointer<pw_buffer>? {
        get { events?.pointee.held }
        set { events?.pointee.held = newValue }
    }
    /// The buffer the next cycle takes (`events.ready`), and its frames.
    private var ready: UnsafeMutablePointer<pw_buffer>? {
        get { events?.pointee.ready }
        set { events?.pointee.ready = newValue }
    }
    private var readyFrames = 0
    /// The ready buffer is silence the sink made while lingering, not frames written.
    private var readyIsSilence = false
    /// The ready buffer was taken back (a rewind) and is being filled again: the graph's
    /// cycle is not run (`dispatch` leaves the data loop alone) until it is ready again,
    /// else the cycle that comes meanwhile would find nothing (a hole) where the buffer
    /// was. The engine writes it at once (its mix is at hand): microseconds.
    private var refilling = false
    private var heldFrames = 0
    private var heldTarget = 0
    /// What the graph asked for the held buffer (`pw_buffer.requested`), nil: not known.
    private var heldAsked: Int?
    /// The frames of the last buffer made ready: what the graph takes per cycle.
    private var lastBufferFrames = 0
    private var active = false
    /// When the stream was last made active (monotonic ns).
    private var activatedAt: UInt64 = 0
    /// While the stream lingers active after the engine stopped it: when it goes inactive (0: not lingering).
    private var lingerUntil: UInt64 = 0
    private var cycles = CycleAccount()
    /// Missed cycles found and not yet reported by a write.
    private var missedUnreported = 0

    /// What PipeWire shows for cued's stream (`[stream]` in the config overrides them).
    public static let defaultStreamProperties = [
        "application.name": "cued", "application.id": "cued", "node.name": "cued",
        "media.type": "Audio", "media.category": "Playback", "media.role": "Notification",
    ]

    public init(target: String? = nil, quantumFrames: Int = 128, rate: Int = 48_000, lingerMs: Int = 2000,
                streamProperties: [String: String] = PipeWireSink.defaultStreamProperties) {
        self.target = target.flatMap { $0.isEmpty ? nil : $0 }
        self.lingerMs = max(0, lingerMs)
        self.quantumFrames = max(16, min(quantumFrames, 8192))
        self.rate = rate
        self.streamProperties = streamProperties
        spec = self.target.map { "pipewire:" + $0 } ?? "pipewire"
    }

    deinit { close() }

    public func open() throws(SinkError) -> SinkFormat {
        close()
        _ = Self.initialized
        guard let loop = pw_loop_new(nil) else { throw SinkError("PipeWire: cannot create a loop: \(String(cString: strerror(errno)))") }
        self.loop = loop
        // The loop belongs to this thread: the data thread's hand-offs (pw_loop_invoke)
        // are queued to it, not run on the caller, once it is entered.
        cued_pw_loop_enter(loop)
        do throws(SinkError) {
            try connect(loop)
            try waitUntilReady()
            _ = pw_stream_set_active(stream, false)
        } catch {
            close()
            throw error
        }
        let buffer = UnsafeMutableBufferPointer<pollfd>.allocate(capacity: 2)
        buffer[0] = pollfd(fd: cued_pw_loop_get_fd(dataLoop), events: Int16(POLLIN), revents: 0)
        buffer[1] = pollfd(fd: cued_pw_loop_get_fd(loop), events: Int16(POLLIN), revents: 0)
        fds = buffer
        // The buffer: the most that can wait in front of the device, one quantum queued
        // and one in the graph, for a graph quantum up to 1024 (another client can hold it there).
        return SinkFormat(rate: rate, channels: Self.channels, sampleFormat: .s16,
                          periodFrames: quantumFrames, bufferFrames: max(4 * quantumFrames, 2048))
    }

    private func connect(_ loop: UnsafeMutablePointer<pw_loop>) throws(SinkError) {
        let contextProps = cued_pw_properties_new()
        // client.conf, not client-rt.conf: the data thread it would make real-time is stopped at
        // once (below); the graph runs on cued's audio thread, real-time on its own. (Open to first
        // sound of a 100 ms cue: 110-116 ms either way.)
        pw_properties_set(contextProps, "config.name", "client.conf")
        guard let context = pw_context_new(loop, contextProps, 0) else {
            throw SinkError("PipeWire: cannot create a context: \(String(cString: strerror(errno)))")
        }
        self.context = context
        // The graph's cycles for the stream run on this thread (see the type's notes).
        let slot = UnsafeMutablePointer<pthread_t>.allocate(capacity: 1)
        slot.initialize(to: 0)
        markSlot = slot
        guard let dataLoop = cued_pw_take_data_loop(context, slot, Int32(openTimeoutMs)) else {
            throw SinkError(errno == ETIMEDOUT ? "PipeWire: the context's data thread did not start within \(openTimeoutMs) ms"
                                               : "PipeWire: the context has no data loop")
        }
        self.dataLoop = dataLoop
        guard let core = pw_context_connect(context, nil, 0) else {
            throw SinkError("cannot connect to PipeWire: \(String(cString: strerror(errno)))")
        }
        self.core = core
        let props = cued_pw_properties_new()
        for (k, v) in streamProperties { pw_properties_set(props, k, v) }
        // Scheduled only once linked to its target. pw_stream's default (want-driver true) puts an
        // unlinked node on the graph's driver; the session manager agrees the format and buffers
        // (what `open` waits for) before it links the node, and just after a server restart that
        // gap is wide: a cue written in it was played into no link and lost (the idle-restart
        // test, 3 in 12 runs). Unlinked, the stream keeps what is queued until the link exists.
        if streamProperties["node.want-driver"] == nil { pw_properties_set(props, "node.want-driver", "false") }
        // A `[stream]` node.latency is the user's word; else the quantum asked for.
        if streamProperties["node.latency"] == nil { pw_properties_set(props, "node.latency", "\(quantumFrames)/\(rate)") }
        if let target { pw_properties_set(props, "target.object", target) }
        guard let stream = pw_stream_new(core, "cued", props) else {
            throw SinkError("PipeWire: cannot create a stream: \(String(cString: strerror(errno)))")
        }
        self.stream = stream
        let ev = UnsafeMutablePointer<cued_pw_events>.allocate(capacity: 1)
        ev.initialize(to: cued_pw_events())
        events = ev
        cued_pw_listen(ev, core, stream)
        // Connected active: WirePlumber links (and the format is agreed for) an active node
        // only; `open` makes it inactive once it has its buffers, until the first write.
        let flags = pw_stream_flags(rawValue: PW_STREAM_FLAG_AUTOCONNECT.rawValue | PW_STREAM_FLAG_MAP_BUFFERS.rawValue
                                    | PW_STREAM_FLAG_RT_PROCESS.rawValue)
        let rc = cued_pw_stream_connect(stream, 0, UInt32(rate), UInt32(Self.channels), flags)
        guard rc >= 0 else { throw SinkError("PipeWire: cannot connect the stream: \(String(cString: strerror(-rc)))") }
    }

    /// Runs the loop until the stream is linked with a format and buffers, or fails, or the time is up.
    private func waitUntilReady() throws(SinkError) {
        guard let loop, let events else { return }
        let deadline = MonotonicClock.now() + UInt64(openTimeoutMs) * 1_000_000
        while true {
            try check()
            let e = events.pointee
            if e.format_ready != 0 && e.buffers > 0
                && (e.state == PW_STREAM_STATE_PAUSED.rawValue || e.state == PW_STREAM_STATE_STREAMING.rawValue) { return }
            let now = MonotonicClock.now()
            guard now < deadline else {
                let state = String(cString: pw_stream_state_as_string(pw_stream_state(rawValue: e.state)))
                throw SinkError("PipeWire: the stream was \(OutputFailure.notLinked) within \(openTimeoutMs) ms (state \(state), "
                                + (e.format_ready != 0 ? "format agreed" : "no format yet") + "): is a session manager such as WirePlumber running?")
            }
            if let dataLoop { _ = cued_pw_loop_iterate(dataLoop, 0) }
            let rc = cued_pw_loop_iterate(loop, Int32(min(5, (deadline - now) / 1_000_000 + 1)))
            if rc < 0 && rc != -EINTR { throw SinkError("PipeWire: pw_loop_iterate: \(String(cString: strerror(-rc)))") }
        }
    }

    /// Throws the failure the listeners recorded, if any.
    private func check() throws(SinkError) {
        guard let events else { throw SinkError("PipeWire stream is not open") }
        if events.pointee.failed != 0 {
            throw SinkError(withUnsafeBytes(of: events.pointee.error) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            })
        }
    }

    /// Runs what is ready on both loops, without waiting: the graph's cycle first.
    private func dispatch() throws(SinkError) {
        guard let loop, let dataLoop else { throw SinkError("PipeWire stream is not open") }
        var rc: Int32 = refilling ? 0 : cued_pw_loop_iterate(dataLoop, 0)
        if rc >= 0 || rc == -EINTR { rc = cued_pw_loop_iterate(loop, 0) }
        if rc < 0 && rc != -EINTR { throw SinkError("PipeWire: pw_loop_iterate: \(String(cString: strerror(-rc)))") }
        try check()
        if let events, events.pointee.buffers_changed != 0 {
            // The stream took its buffers away (renegotiated): what was held or ready is gone.
            events.pointee.buffers_changed = 0
            heldFrames = 0
            readyFrames = 0
            readyIsSilence = false
            refilling = false  // else a refill of a buffer that is gone would keep the graph's cycle from running
        }
    }

    public var pollDescriptors: UnsafeMutableBufferPointer<pollfd> { fds }
    public var idleWatchDescriptors: UnsafeMutableBufferPointer<pollfd> { fds }

    public func hasRoom() throws(SinkError) -> Bool {
        try dispatch()
        return room() > 0
    }

    public func idleDeviceFailed() -> Bool {
        do throws(SinkError) { try dispatch() } catch { return true }
        if lingerUntil != 0 {
            if MonotonicClock.now() >= lingerUntil { deactivate() } else { readySilence() }
        }
        return false
    }

    /// While the stream lingers: a buffer of silence ready for each cycle, as if a cue
    /// were playing, so that the graph runs exactly as it will when the next one comes
    /// (a cycle that finds no buffer is an underrun for the graph's converter), and the
    /// next write takes it back and fills it instead (`reclaimSilence`).
    private func readySilence() {
        guard ready == nil, held != nil || takeBuffer(), let b = held,
              let dst = b.pointee.buffer.pointee.datas[0].data else { return }
        dst.initializeMemory(as: UInt8.self, repeating: 0, count: heldTarget * Self.stride)
        seal(b, frames: heldTarget)
        held = nil
        ready = b
        readyFrames = heldTarget
        readyIsSilence = true
        heldFrames = 0
    }

    /// The silence ready while lingering becomes the buffer the next write fills.
    private func reclaimSilence() {
        guard readyIsSilence else { return }
        readyIsSilence = false
        guard let b = ready else { return }
        ready = nil
        held = b
        heldTarget = readyFrames
        heldFrames = 0
        readyFrames = 0
    }

    /// Sets a buffer's chunk to `frames` of interleaved frames from its start.
    private func seal(_ b: UnsafeMutablePointer<pw_buffer>, frames: Int) {
        let chunk = b.pointee.buffer.pointee.datas[0].chunk!
        chunk.pointee.offset = 0
        chunk.pointee.stride = Int32(Self.stride)
        chunk.pointee.size = UInt32(frames * Self.stride)
        b.pointee.size = UInt64(frames)
    }

    public func availableFrames() -> Int {
        do throws(SinkError) { try dispatch() } catch { return .max }  // the write throws it
        return room()
    }

    /// Frames a write can take now: the rest of the buffer being filled, else a new
    /// buffer's worth if none is ready (one buffer ready for the graph's next cycle is enough).
    private func room() -> Int {
        guard stream != nil else { return 0 }
        reclaimSilence()
        if held != nil { return heldTarget - heldFrames }
        if ready != nil { return 0 }
        return takeBuffer() ? heldTarget : 0
    }

    /// Dequeues a buffer to fill, sized to what the graph asks for.
    private func takeBuffer() -> Bool {
        guard let stream, let b = pw_stream_dequeue_buffer(stream) else { return false }
        let maxFrames = Int(b.pointee.buffer.pointee.datas[0].maxsize) / Self.stride
        let requested = Int(clamping: b.pointee.requested)
        let asked = requested > 0 ? requested : max(lastBufferFrames, quantumFrames)
        held = b
        heldFrames = 0
        heldTarget = max(1, min(asked, maxFrames))
        heldAsked = requested > 0 ? requested : nil
        return true
    }

    public func write(_ data: UnsafeRawPointer, frames: Int) throws(SinkError) -> SinkWrite {
        try dispatch()
        guard let stream else { throw SinkError("PipeWire stream is not open") }
        lingerUntil = 0
        reclaimSilence()
        if held == nil && (ready != nil || !takeBuffer()) { return SinkWrite(frames: 0) }
        guard let b = held, let dst = b.pointee.buffer.pointee.datas[0].data else {
            throw SinkError("PipeWire: a buffer without memory")
        }
        let n = min(frames, heldTarget - heldFrames)
        (dst + heldFrames * Self.stride).copyMemory(from: data, byteCount: n * Self.stride)
        heldFrames += n
        if heldFrames >= heldTarget {
            seal(b, frames: heldFrames)
            if active { countMissedCycles(stream, filledAsAsked: heldAsked == heldFrames ? heldFrames : nil) }
            // Ready: the graph's next cycle queues it (cued_pw_on_process) and plays it.
            held = nil
            ready = b
            refilling = false
            readyFrames = heldFrames
            lastBufferFrames = heldFrames
            heldFrames = 0
            if !active {
                // The first buffer is ready before the stream is scheduled: its first cycle has it.
                _ = pw_stream_set_active(stream, true)
                active = true
                activatedAt = MonotonicClock.now()
            }
        }
        let missed = missedUnreported
        missedUnreported = 0
        return SinkWrite(frames: n, missedCycles: missed)
    }

    /// Compares the graph's position with the frames it has taken from the queue (see
    /// `CycleAccount`), before a buffer filled to `filledAsAsked` frames (nil: to another
    /// size than the graph asked for) is queued.
    private func countMissedCycles(_ stream: OpaquePointer, filledAsAsked: Int?) {
        var t = pw_time()
        // Valid once the graph has run a cycle since the counters were reset: until then
        // `queued` is the difference of a zeroed count and the graph's old snapshot.
        let queuedTotal = events?.pointee.queued_frames ?? 0
        guard pw_stream_get_time_n(stream, &t, MemoryLayout<pw_time>.size) == 0, t.now > 0,
              t.queued <= queuedTotal else {
            cycles.restart()
            return
        }
        missedUnreported += cycles.look(ticks: t.ticks, taken: Int(clamping: queuedTotal - t.queued), quantum: filledAsAsked)
    }

    public func delayFrames() -> Int {
        guard let stream else { return 0 }
        let mine = heldFrames + (ready == nil ? 0 : readyFrames)
        var t = pw_time()
        guard pw_stream_get_time_n(stream, &t, MemoryLayout<pw_time>.size) == 0 else { return mine }
        // Queued and not yet taken: none but in the moment inside a cycle (the callback
        // queues and the graph takes at once). Not `t.queued` after a flush: pw_stream_flush
        // zeroes the counters it is the difference of, not the graph's last snapshot of them.
        let queued = Int(clamping: min(t.queued, events?.pointee.queued_frames ?? 0))
        let frames = mine + queued + min(Int(clamping: t.buffered), rate)
        // Until the graph has run a cycle since the stream was started, nothing handed over
        // has played (`now` is still the last cycle of the stream before, or 0).
        guard active, t.now > 0, UInt64(t.now) >= activatedAt, t.rate.denom > 0, t.rate.num > 0 else { return frames }
        // At `now` the graph took the buffer it plays in that cycle (none: a silent cycle),
        // and its device still held `delay` (in num/denom s).
        let took = Int(clamping: events?.pointee.last_took ?? 0)
        let device = Int(clamping: min(max(0, t.delay), Int64(t.rate.denom))) * rate * Int(t.rate.num) / Int(t.rate.denom)
        let elapsed = Int(min(MonotonicClock.now() &- UInt64(max(0, t.now)), 1_000_000_000)) * rate / 1_000_000_000
        return frames + max(0, took + device - elapsed)
    }

    /// What a rewind can give back: the frames not yet handed to the graph (the buffer
    /// being filled, or the one ready for its next cycle).
    public func rewindableFrames() -> Int {
        guard active else { return 0 }
        if held != nil { return heldFrames }
        return ready == nil ? 0 : readyFrames
    }

    /// Gives back the last `frames` written and not yet handed to the graph: the ready
    /// buffer becomes the one being filled again, from where the next write goes on.
    public func rewind(frames: Int) -> Int {
        guard frames > 0, active else { return 0 }
        if held != nil {
            let n = min(frames, heldFrames)
            heldFrames -= n
            return n
        }
        guard let b = ready else { return 0 }
        let n = min(frames, readyFrames)
        ready = nil
        refilling = true
        held = b
        heldTarget = readyFrames
        heldFrames = readyFrames - n
        readyFrames = 0
        return n
    }

    /// Called once what was written has played. The stream lingers active for `lingerMs`
    /// (see the type's notes), then goes inactive; what cued held is dropped (silence by then).
    public func stop() {
        guard active else { return }
        dropMine()
        cycles.restart()
        if lingerMs == 0 { deactivate() } else { lingerUntil = MonotonicClock.now() &+ UInt64(lingerMs) * 1_000_000 }
    }

    /// Keeps a buffer cued holds (dequeued, never handed back but by queueing it) for the
    /// next write, empty.
    private func dropMine() {
        if held == nil, let b = ready { held = b }
        ready = nil
        refilling = false
        readyIsSilence = false
        heldFrames = 0
        readyFrames = 0
    }

    /// The stream goes inactive: the graph can drop to its own quantum and suspend.
    private func deactivate() {
        lingerUntil = 0
        guard let stream, active else { return }
        dropMine()
        _ = pw_stream_set_active(stream, false)
        _ = pw_stream_flush(stream, false)
        events?.pointee.queued_frames = 0
        events?.pointee.last_took = 0
        active = false
        cycles.restart()
    }

    public func close() {
        if let events { cued_pw_unlisten(events) }
        if let stream { pw_stream_destroy(stream) }
        if let core { pw_core_disconnect(core) }
        if let dataLoop { cued_pw_loop_leave(dataLoop) }
        if let context { pw_context_destroy(context) }
        markSlot?.deallocate()
        markSlot = nil
        if let loop {
            cued_pw_loop_leave(loop)
            pw_loop_destroy(loop)
        }
        events?.deallocate()
        fds.baseAddress?.deallocate()
        fds = UnsafeMutableBufferPointer(start: nil, count: 0)
        events = nil; stream = nil; core = nil; context = nil; loop = nil; dataLoop = nil
        heldFrames = 0; readyFrames = 0; heldTarget = 0; heldAsked = nil; lastBufferFrames = 0; active = false
        lingerUntil = 0
        refilling = false
        cycles.restart()
    }
}
