import CPipeWire
import CuedCore
import CuedProtocol
#if canImport(Glibc)
import Glibc
#endif

/// Plays through a native PipeWire stream (`--sink pipewire[:TARGET]`): no ALSA plugin and no
/// second ring in front of the graph's own buffers. This file keeps only the libpipewire calls:
/// what to do with the graph's buffers (fill, hand over, take back, count the cycles missed, the
/// delay) is `GraphSlot`'s, a value tested without PipeWire, and the stream's timing (the linger,
/// the cycle asked of the graph) the engine's (`Pacing`, `DeviceMachine`, `MarginTuner`).
///
/// One thread, cued's audio thread, runs both of libpipewire's loops: the context's main loop
/// (entered in `open`) and its data loop, whose own thread `open` stops. Their descriptors are
/// the sink's `pollDescriptors`; every call that needs fresh news runs both once without waiting
/// (`dispatch`): the data loop runs the graph's cycle for the stream (the server's wake-up, the
/// converter, the RT_PROCESS callback that queues the buffer the slot made ready), the main loop
/// the server's messages. No second thread is in the path from a cycle to the buffer it plays.
/// Errors (libpipewire missing, no server, a core or stream error) become `SinkError`s.
/// Threading: the audio thread only (see `Sink`), but `init` and `preflight`. See docs/AUDIO.md.
public final class PipeWireSink: Sink {
    public let spec: String, rate: Int, streamProperties: [String: String]
    /// A node name or serial (`target.object`), nil: the session manager's default.
    public let target: String?
    /// The quantum first asked for (`node.latency` = quantumFrames/rate) and cued's period.
    public let quantumFrames: Int
    /// How long `open` waits for the server to link the stream and agree on a format.
    public var openTimeoutMs = 2000
    /// How long the stream stays active, fed silence, after its last cue (`Pacing.lingerNs`).
    public let lingerMs: Int
    /// The longest cycle cued's margin asks of the graph: the default graph's own (21 ms).
    public static let marginLimitFrames = 1024

    private static let channels = 2, stride = 2 * MemoryLayout<Int16>.size

    private var loop: UnsafeMutablePointer<pw_loop>?
    private var dataLoop: UnsafeMutablePointer<pw_loop>?  // the context's, driven by this thread
    private var context: OpaquePointer?
    private var markSlot: UnsafeMutablePointer<pthread_t>?  // see `cued_pw_take_data_loop`: as long as the context
    private var core: OpaquePointer?
    private var stream: OpaquePointer?
    private var events: UnsafeMutablePointer<cued_pw_events>?
    private var fds = UnsafeMutableBufferPointer<pollfd>(start: nil, count: 0)
    private var slot: GraphSlot<UnsafeMutablePointer<pw_buffer>>
    /// The cycle asked of the graph now (frames), and whether the user's `[stream]` node.latency
    /// fixes it (then cued's margin does not change it).
    private var latency: Int
    /// Cycles left in which the graph may still switch to a longer cycle cued just asked for.
    private var switchPending = 0
    private var userLatency: Bool { streamProperties["node.latency"] != nil }
    /// Where the stream's Props go as the graph sets them (`status`, `why`), and the last seen.
    public let props: StreamProps?
    private var propsSeen: UInt32 = 0
    /// Test hook (`CUED_TEST_HANDED_OVER=PATH`): every buffer a graph cycle took is appended to
    /// PATH as cued handed it over (s16 stereo, in the order taken), so that a test can tell what
    /// cued gave the graph from what the graph played. A write to a file on the audio thread: for
    /// tests only, never set otherwise.
    private let handedOverPath: String?
    private var handedOverFD: Int32 = -1

    /// What PipeWire shows for cued's stream (`[stream]` in the config overrides them).
    public static let defaultStreamProperties = [
        "application.name": "cued", "application.id": "cued", "node.name": "cued",
        "media.type": "Audio", "media.category": "Playback", "media.role": "Notification",
    ]

    public init(target: String? = nil, quantumFrames: Int = 128, rate: Int = 48_000, lingerMs: Int = 2000,
                streamProperties: [String: String] = PipeWireSink.defaultStreamProperties, props: StreamProps? = nil,
                handedOverPath: String? = nil) {
        self.props = props
        self.handedOverPath = handedOverPath.flatMap { $0.isEmpty ? nil : $0 }
        self.target = target.flatMap { $0.isEmpty ? nil : $0 }
        self.lingerMs = max(0, lingerMs)
        self.quantumFrames = max(16, min(quantumFrames, 8192))
        self.rate = rate
        self.streamProperties = streamProperties
        latency = Self.frames(ofLatency: streamProperties["node.latency"], rate: rate) ?? self.quantumFrames
        slot = GraphSlot(rate: rate, quantum: self.quantumFrames)
        spec = self.target.map { "pipewire:" + $0 } ?? "pipewire"
    }

    deinit { close() }

    /// A `node.latency` value ("N/D" s) in frames at `rate`.
    static func frames(ofLatency value: String?, rate: Int) -> Int? {
        let p = value?.split(separator: "/").compactMap { Int($0) } ?? []
        return p.count == 2 && p[0] > 0 && p[1] > 0 ? p[0] * rate / p[1] : nil
    }

    public func open() throws(SinkError) -> OpenedDevice {
        close()
        if let why = cued_pw_load() { throw SinkError(String(cString: why)) }
        guard let loop = cued_pw_loop_new() else { throw SinkError("PipeWire: cannot create a loop: \(String(cString: strerror(errno)))") }
        self.loop = loop
        // The loop belongs to this thread: the data thread's hand-offs (pw_loop_invoke)
        // are queued to it, not run on the caller, once it is entered.
        cued_pw_loop_enter(loop)
        do throws(SinkError) {
            try connect(loop)
            try waitUntilReady()
            _ = cued_pw_stream_set_active(stream, false)
            props?.setOpen(true, nodeID: Int(cued_pw_stream_node_id(stream)))
            if let handedOverPath { handedOverFD = Glibc.open(handedOverPath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600) }
        } catch {
            close()
            throw error
        }
        let buffer = UnsafeMutableBufferPointer<pollfd>.allocate(capacity: 2)
        buffer[0] = pollfd(fd: cued_pw_loop_get_fd(dataLoop), events: Int16(POLLIN), revents: 0)
        buffer[1] = pollfd(fd: cued_pw_loop_get_fd(loop), events: Int16(POLLIN), revents: 0)
        fds = buffer
        // The buffer: one quantum queued and one in the graph, for a graph quantum up to 1024.
        let format = SinkFormat(rate: rate, channels: Self.channels, sampleFormat: .s16,
                                periodFrames: quantumFrames, bufferFrames: max(4 * quantumFrames, 2048))
        // Each wake-up is consumed by `dispatch` (polled again); its room, however small, is all it takes.
        let pacing = Pacing(writeAhead: .fill, descriptorsStayReadable: false, partialWrites: true, rewindKeeps: 0,
                            watchesWhileIdle: true, lingerNs: UInt64(lingerMs) * 1_000_000,
                            margin: userLatency ? .fixed : .quantum(start: quantumFrames, limit: max(quantumFrames, Self.marginLimitFrames)))
        return OpenedDevice(kind: "pipewire", format: format, pacing: pacing)
    }

    private func connect(_ loop: UnsafeMutablePointer<pw_loop>) throws(SinkError) {
        let contextProps = cued_pw_properties_new()
        // client.conf, not client-rt.conf: the data thread it would make real-time is stopped at
        // once (below); the graph runs on cued's audio thread, real-time on its own. (Open to first
        // sound of a 100 ms cue: 110-116 ms either way.)
        _ = cued_pw_properties_set(contextProps, "config.name", "client.conf")
        guard let context = cued_pw_context_new(loop, contextProps) else {
            throw SinkError("PipeWire: cannot create a context: \(String(cString: strerror(errno)))")
        }
        self.context = context
        // The graph's cycles for the stream run on this thread (see the type's notes).
        let mark = UnsafeMutablePointer<pthread_t>.allocate(capacity: 1)
        mark.initialize(to: 0)
        markSlot = mark
        guard let dataLoop = cued_pw_take_data_loop(context, mark, Int32(openTimeoutMs)) else {
            throw SinkError(errno == ETIMEDOUT ? "PipeWire: the context's data thread did not start within \(openTimeoutMs) ms"
                                               : "PipeWire: the context has no data loop")
        }
        self.dataLoop = dataLoop
        guard let core = cued_pw_context_connect(context) else {
            throw SinkError("cannot connect to PipeWire: \(String(cString: strerror(errno)))")
        }
        self.core = core
        let props = cued_pw_properties_new()
        for (k, v) in streamProperties { _ = cued_pw_properties_set(props, k, v) }
        // Scheduled only once linked to its target. pw_stream's default (want-driver true) puts an
        // unlinked node on the graph's driver; the session manager agrees the format and buffers
        // (what `open` waits for) before it links the node, and just after a server restart that
        // gap is wide: a cue written in it was played into no link and lost (the idle-restart
        // test, 3 in 12 runs). Unlinked, the stream keeps what is queued until the link exists.
        if streamProperties["node.want-driver"] == nil { _ = cued_pw_properties_set(props, "node.want-driver", "false") }
        // A `[stream]` node.latency is the user's word; else the cycle cued's margin asks (at first its quantum).
        if !userLatency { _ = cued_pw_properties_set(props, "node.latency", "\(latency)/\(rate)") }
        if let target { _ = cued_pw_properties_set(props, "target.object", target) }
        guard let stream = cued_pw_stream_new(core, "cued", props) else {
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
                throw SinkError("PipeWire: the stream was \(OutputFailure.notLinked) within \(openTimeoutMs) ms (state "
                                + String(cString: cued_pw_stream_state_string(e.state)) + ", "
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
        if events.pointee.failed != 0 { throw SinkError(withUnsafeBytes(of: events.pointee.error) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }) }
    }

    /// Runs what is ready on both loops, without waiting: the graph's cycle first (unless the
    /// slot holds a buffer taken back), then tells the slot what the cycle and the stream did.
    private func dispatch() throws(SinkError) {
        guard let loop, let dataLoop, let events else { throw SinkError("PipeWire stream is not open") }
        var rc: Int32 = slot.cycleMayRun ? cued_pw_loop_iterate(dataLoop, 0) : 0
        if rc >= 0 || rc == -EINTR { rc = cued_pw_loop_iterate(loop, 0) }
        if rc < 0 && rc != -EINTR { throw SinkError("PipeWire: pw_loop_iterate: \(String(cString: strerror(-rc)))") }
        try check()
        if events.pointee.props.seq != propsSeen { publishProps(events.pointee.props) }
        if events.pointee.buffers_changed != 0 {
            events.pointee.buffers_changed = 0
            slot.buffersGone()
        } else if let taken = slot.ready, events.pointee.ready == nil {
            if handedOverFD >= 0, let data = cued_pw_buffer_data(taken) { _ = Glibc.write(handedOverFD, data, Int(taken.pointee.size) * Self.stride) }
            slot.taken()
            switchPending = events.pointee.quantum >= latency ? 0 : max(0, switchPending - 1)
        }
        mirror()
    }

    /// The slot's buffers, where the callbacks see them.
    private func mirror() {
        events?.pointee.held = slot.held
        events?.pointee.ready = slot.ready
    }

    private func graphTime() -> GraphSlot<UnsafeMutablePointer<pw_buffer>>.GraphTime? {
        var t = pw_time()
        guard let stream, let e = events?.pointee, cued_pw_stream_get_time(stream, &t) == 0 else { return nil }
        return .init(now: UInt64(max(0, t.now)), ticks: t.ticks, rateNum: Int(t.rate.num), rateDenom: Int(t.rate.denom),
                     delay: t.delay, queued: t.queued, buffered: t.buffered, queuedTotal: UInt64(e.queued_frames),
                     lastTook: UInt64(e.last_took))
    }

    public var pollDescriptors: UnsafeMutableBufferPointer<pollfd> { fds }

    public func hasRoom() throws(SinkError) -> Bool { try dispatch(); return room() > 0 }
    public func idleDeviceFailed() -> Bool { (try? dispatch()) == nil }
    public func availableFrames() -> Int { (try? dispatch()) == nil ? .max : room() }  // .max: the write throws it

    /// Frames a write can take now (a buffer dequeued for it if need be).
    private func room() -> Int {
        guard let stream else { return 0 }
        // The cycle the graph runs; the longer one cued asked for while the graph may still switch
        // to it (a few cycles; it does not if another node holds it shorter); see `GraphSlot`.
        let q = Int(clamping: events?.pointee.quantum ?? 0)
        let n = slot.room(want: switchPending > 0 || q == 0 ? max(q, latency) : q) {
            guard let b = cued_pw_stream_dequeue_buffer(stream) else { return nil }
            return (b, Int(clamping: b.pointee.requested), Int(cued_pw_buffer_capacity(b, Int32(Self.stride))))
        }
        mirror()
        return n
    }

    public func write(_ data: UnsafeRawPointer, frames: Int) throws(SinkError) -> SinkWrite {
        try dispatch()
        guard let stream else { throw SinkError("PipeWire stream is not open") }
        guard room() > 0, let f = slot.fill(frames) else { return SinkWrite(frames: 0, missedCycles: slot.takeMissedCycles()) }
        guard let dst = cued_pw_buffer_data(f.buffer) else { throw SinkError("PipeWire: a buffer without memory") }
        (dst + f.offset * Self.stride).copyMemory(from: data, byteCount: f.count * Self.stride)
        if f.full {
            // Ready: the graph's next cycle queues it and plays it.
            cued_pw_buffer_seal(f.buffer, Int32(f.offset + f.count), Int32(Self.stride))
            if let h = slot.handOver(time: graphTime(), quantum: Int(clamping: events?.pointee.quantum ?? 0)), h.activate {
                _ = cued_pw_stream_set_active(stream, true)
            }
            mirror()
        }
        return SinkWrite(frames: f.count, missedCycles: slot.takeMissedCycles())
    }

    public func delayFrames(now: UInt64) -> Int { slot.delay(now: now, time: graphTime()) }
    public func rewindableFrames() -> Int { slot.rewindable }
    public func rewind(frames: Int) -> Int { defer { mirror() }; return slot.rewind(frames) }

    /// The cycle cued's margin asks of the graph (`node.latency`); the graph runs the smallest any
    /// of its nodes asks, from its next cycle on. A buffer held for the shorter cycle is given back
    /// first, to be filled to the longer one before that cycle can run (see `GraphSlot.resize`).
    public func setMargin(frames: Int, canGiveBack: Int) -> Int {
        guard !userLatency, frames != latency else { return 0 }
        let back = slot.resize(to: frames, canGiveBack: canGiveBack)
        mirror()
        switchPending = frames > latency ? 16 : 0
        latency = frames
        if let stream { _ = cued_pw_stream_set_latency(stream, UInt32(frames), UInt32(rate)) }
        return back
    }

    /// Once what was written has played and the linger has passed: the stream goes inactive, so
    /// the graph can return to its own quantum and suspend; what cued held (silence) is dropped.
    public func stop() {
        guard let stream, slot.deactivate() else { return }
        mirror()
        _ = cued_pw_stream_set_active(stream, false)
        _ = cued_pw_stream_flush(stream)
        events?.pointee.queued_frames = 0
        events?.pointee.last_took = 0
    }

    /// The graph set the stream's Props: handed over as atomic stores (no lock, no allocation).
    private func publishProps(_ p: cued_pw_props) {
        propsSeen = p.seq
        props?.publish(volume: p.has_volume != 0 ? p.volume : nil, mute: p.has_mute != 0 ? p.mute != 0 : nil,
                       channels: Int(p.channels), p.channel_volumes.0, p.channel_volumes.1)
    }

    public func close() {
        if stream != nil { props?.setOpen(false) }
        propsSeen = 0
        if let events { cued_pw_unlisten(events) }
        if let stream { cued_pw_stream_destroy(stream) }
        if let core { cued_pw_core_disconnect(core) }
        if let dataLoop { cued_pw_loop_leave(dataLoop) }
        if let context { cued_pw_context_destroy(context) }
        if let loop { cued_pw_loop_leave(loop); cued_pw_loop_destroy(loop) }
        if handedOverFD >= 0 { Glibc.close(handedOverFD); handedOverFD = -1 }
        markSlot?.deallocate()
        events?.deallocate()
        fds.baseAddress?.deallocate()
        fds = UnsafeMutableBufferPointer(start: nil, count: 0)
        events = nil; stream = nil; core = nil; context = nil; loop = nil; dataLoop = nil; markSlot = nil
        slot.reset()
    }
}
