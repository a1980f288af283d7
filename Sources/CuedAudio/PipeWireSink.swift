import CPipeWire
import CuedCore
#if canImport(Glibc)
import Glibc
#endif

/// Plays through a native PipeWire stream (`--sink pipewire[:TARGET]`): no ALSA
/// plugin and no second ring in front of the graph's own buffers.
///
/// How it is driven: the stream lives on a non-threaded `pw_loop` owned by the
/// audio thread (entered in `open`), whose one descriptor (`pw_loop_get_fd`, an
/// epoll fd that is readable when any of the loop's sources is) is the sink's
/// `pollDescriptors` and, while the stream is stopped, its `idleWatchDescriptors`.
/// Every call that needs fresh news runs the loop once without waiting
/// (`pw_loop_iterate(loop, 0)`), which dispatches the server's messages and the
/// data thread's hand-offs into `cued_pw_events`. The stream is not RT_PROCESS:
/// libpipewire's own data thread hands buffers to the graph, and each time it
/// has taken the last one queued it invokes `process` on this loop — the wake-up
/// that says there is room.
///
/// Buffers: a write fills a buffer dequeued from the stream (`pw_stream_dequeue_buffer`,
/// the graph's own memory) up to the frames the graph asks for (`pw_buffer.requested`:
/// one quantum, or what its resampler needs), across writes if cued's period is
/// smaller, and queues it once full. At most one full buffer waits ahead of the one
/// the graph is playing, as in PipeWire's own examples: a cue that arrives mid-stream
/// is heard one to two quanta later.
///
/// Timing (`delayFrames`, from `pw_stream_get_time_n`): frames in the buffer being
/// filled, plus those in the buffers still queued (`queued_buffers` of them, the last
/// ones queued), plus the resampler's (`buffered`), plus what the graph holds: the
/// buffer it took last (played in its next cycle) and the device delay (`delay`),
/// less the time elapsed since the graph's cycle stamped `now`.
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
    /// keeps at most one buffer queued ahead).
    public var writeAhead: WriteAhead { .fill }
    /// Every wake-up of the loop's descriptor is consumed by the dispatch in `hasRoom`: a
    /// wake-up without room (a message from the server) is followed by another poll, not a
    /// timer that would sleep through the `process` that follows it (the graph asks for the
    /// next buffer once a cycle, and it is needed within that cycle).
    public var descriptorsStayReadable: Bool { false }
    /// How long `open` waits for the server to link the stream and agree on a format.
    public var openTimeoutMs = 2000

    private static let channels = 2
    private static let stride = 2 * MemoryLayout<Int16>.size
    private static let initialized: Bool = { cued_pw_init(); return true }()

    private var loop: UnsafeMutablePointer<pw_loop>?
    private var context: OpaquePointer?
    private var core: OpaquePointer?
    private var stream: OpaquePointer?
    private var events: UnsafeMutablePointer<cued_pw_events>?
    private var fds = UnsafeMutableBufferPointer<pollfd>(start: nil, count: 0)
    /// The dequeued buffer being filled, its frames so far and the frames it is filled to.
    private var held: UnsafeMutablePointer<pw_buffer>?
    private var heldFrames = 0
    private var heldTarget = 0
    /// What the graph asked for the held buffer (`pw_buffer.requested`), nil: not known.
    private var heldAsked: Int?
    /// The frames of the last buffer queued: what the graph takes per cycle.
    private var lastBufferFrames = 0
    private var active = false
    /// When the stream was last made active (monotonic ns).
    private var activatedAt: UInt64 = 0
    /// Frames queued since the stream's counters were last reset (`pw_stream_flush` zeroes them).
    private var queuedTotal = 0
    private var cycles = CycleAccount()
    /// Missed cycles found and not yet reported by a write.
    private var missedUnreported = 0

    /// What PipeWire shows for cued's stream (`[stream]` in the config overrides them).
    public static let defaultStreamProperties = [
        "application.name": "cued", "application.id": "cued", "node.name": "cued",
        "media.type": "Audio", "media.category": "Playback", "media.role": "Notification",
    ]

    public init(target: String? = nil, quantumFrames: Int = 128, rate: Int = 48_000,
                streamProperties: [String: String] = PipeWireSink.defaultStreamProperties) {
        self.target = target.flatMap { $0.isEmpty ? nil : $0 }
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
        let buffer = UnsafeMutableBufferPointer<pollfd>.allocate(capacity: 1)
        buffer[0] = pollfd(fd: cued_pw_loop_get_fd(loop), events: Int16(POLLIN), revents: 0)
        fds = buffer
        // The buffer: the most that can wait in front of the device, one quantum queued
        // and one in the graph, for a graph quantum up to 1024 (another client can hold it there).
        return SinkFormat(rate: rate, channels: Self.channels, sampleFormat: .s16,
                          periodFrames: quantumFrames, bufferFrames: max(4 * quantumFrames, 2048))
    }

    private func connect(_ loop: UnsafeMutablePointer<pw_loop>) throws(SinkError) {
        let contextProps = cued_pw_properties_new()
        // client-rt.conf: libpipewire's data thread asks for real-time scheduling.
        pw_properties_set(contextProps, "config.name", "client-rt.conf")
        guard let context = pw_context_new(loop, contextProps, 0) else {
            throw SinkError("PipeWire: cannot create a context: \(String(cString: strerror(errno)))")
        }
        self.context = context
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
        pw_properties_set(props, "node.latency", "\(quantumFrames)/\(rate)")
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
        let flags = pw_stream_flags(rawValue: PW_STREAM_FLAG_AUTOCONNECT.rawValue | PW_STREAM_FLAG_MAP_BUFFERS.rawValue)
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
                throw SinkError("PipeWire: the stream was not ready within \(openTimeoutMs) ms (state \(state), "
                                + (e.format_ready != 0 ? "format agreed" : "no format yet") + "; is a session manager such as WirePlumber running?)")
            }
            let rc = cued_pw_loop_iterate(loop, Int32(min(50, (deadline - now) / 1_000_000 + 1)))
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

    /// Runs what is ready on the loop, without waiting.
    private func dispatch() throws(SinkError) {
        guard let loop else { throw SinkError("PipeWire stream is not open") }
        let rc = cued_pw_loop_iterate(loop, 0)
        if rc < 0 && rc != -EINTR { throw SinkError("PipeWire: pw_loop_iterate: \(String(cString: strerror(-rc)))") }
        try check()
    }

    public var pollDescriptors: UnsafeMutableBufferPointer<pollfd> { fds }
    public var idleWatchDescriptors: UnsafeMutableBufferPointer<pollfd> { fds }

    public func hasRoom() throws(SinkError) -> Bool {
        try dispatch()
        return room() > 0
    }

    public func idleDeviceFailed() -> Bool {
        do throws(SinkError) { try dispatch() } catch { return true }
        return false
    }

    public func availableFrames() -> Int {
        do throws(SinkError) { try dispatch() } catch { return .max }  // the write throws it
        return room()
    }

    /// Frames a write can take now: the rest of the buffer being filled, else a new
    /// buffer's worth if none is queued (one full buffer ahead of the graph is enough).
    private func room() -> Int {
        guard let stream else { return 0 }
        if held != nil { return heldTarget - heldFrames }
        var t = pw_time()
        guard pw_stream_get_time_n(stream, &t, MemoryLayout<pw_time>.size) == 0 else { return 0 }
        guard t.avail_buffers > 0, t.queued_buffers == 0 else { return 0 }
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
        if held == nil && !takeBuffer() { return SinkWrite(frames: 0) }
        guard let b = held, let dst = b.pointee.buffer.pointee.datas[0].data else {
            throw SinkError("PipeWire: a buffer without memory")
        }
        let n = min(frames, heldTarget - heldFrames)
        (dst + heldFrames * Self.stride).copyMemory(from: data, byteCount: n * Self.stride)
        heldFrames += n
        if heldFrames >= heldTarget {
            let chunk = b.pointee.buffer.pointee.datas[0].chunk!
            chunk.pointee.offset = 0
            chunk.pointee.stride = Int32(Self.stride)
            chunk.pointee.size = UInt32(heldFrames * Self.stride)
            b.pointee.size = UInt64(heldFrames)
            recent[recentEnd] = heldFrames
            recentEnd = (recentEnd + 1) % Self.recentCount
            if active { countMissedCycles(stream, filledAsAsked: heldAsked == heldFrames ? heldFrames : nil) }
            held = nil
            lastBufferFrames = heldFrames
            queuedTotal += heldFrames
            heldFrames = 0
            let rc = pw_stream_queue_buffer(stream, b)
            guard rc >= 0 else { throw SinkError("PipeWire: pw_stream_queue_buffer: \(String(cString: strerror(-rc)))") }
            if !active {
                // The first buffer is queued before the stream is scheduled: its first cycle has it.
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
        guard pw_stream_get_time_n(stream, &t, MemoryLayout<pw_time>.size) == 0, t.now > 0,
              t.queued <= UInt64(queuedTotal) else {
            cycles.restart()
            return
        }
        missedUnreported += cycles.look(ticks: t.ticks, taken: queuedTotal - Int(t.queued), quantum: filledAsAsked)
    }

    public func delayFrames() -> Int {
        guard let stream else { return 0 }
        var t = pw_time()
        guard pw_stream_get_time_n(stream, &t, MemoryLayout<pw_time>.size) == 0 else { return heldFrames }
        // Not `t.queued`: pw_stream_flush zeroes the counters it is the difference of but
        // not the graph's last snapshot of them, so until the next cycle it wraps around.
        // The queue is first in, first out: the buffers still queued are the last ones queued.
        // Besides those queued, the buffers the stream took from its queue ahead of the cycle
        // that plays them: it takes one at once when it is queued while the stream drives
        // itself (inactive: libpipewire 0.3's trigger for a driving stream), and the graph's
        // adapter takes the next one early when two are queued. Neither queued nor ours.
        let queued = min(Int(t.queued_buffers), Self.recentCount)
        let ahead = max(0, Int(events?.pointee.buffers ?? 0) - Int(t.avail_buffers) - queued - (held == nil ? 0 : 1))
        var frames = heldFrames + min(Int(clamping: t.buffered), rate)
        for i in 0..<min(queued + ahead, Self.recentCount) { frames += recent[(recentEnd - 1 - i + Self.recentCount) % Self.recentCount] }
        // Until the graph has run a cycle since the stream was started, nothing handed over
        // has played (`now` is still the last cycle of the stream before, or 0).
        guard active, t.now > 0, UInt64(t.now) >= activatedAt, t.rate.denom > 0, t.rate.num > 0 else { return frames }
        // At `now` the graph had just taken a buffer (played in its next cycle) and its
        // device still held `delay` (in num/denom s).
        let device = Int(clamping: min(max(0, t.delay), Int64(t.rate.denom))) * rate * Int(t.rate.num) / Int(t.rate.denom)
        let elapsed = Int(min(MonotonicClock.now() &- UInt64(max(0, t.now)), 1_000_000_000)) * rate / 1_000_000_000
        return frames + max(0, lastBufferFrames + device - elapsed)
    }

    /// The frames of the last buffers queued (a ring of `recentCount`, ending at `recentEnd`).
    private static let recentCount = 16
    private var recent = [Int](repeating: 0, count: PipeWireSink.recentCount)
    private var recentEnd = 0

    /// Called once what was written has played: the stream goes inactive (the graph can
    /// drop to its own quantum and suspend) and what is queued, by then silence, is dropped.
    public func stop() {
        guard let stream, active else { return }
        _ = pw_stream_set_active(stream, false)
        _ = pw_stream_flush(stream, false)
        active = false
        heldFrames = 0
        queuedTotal = 0
        cycles.restart()
    }

    public func close() {
        if let events { cued_pw_unlisten(events) }
        if let stream { pw_stream_destroy(stream) }
        if let core { pw_core_disconnect(core) }
        if let context { pw_context_destroy(context) }
        if let loop {
            cued_pw_loop_leave(loop)
            pw_loop_destroy(loop)
        }
        events?.deallocate()
        fds.baseAddress?.deallocate()
        fds = UnsafeMutableBufferPointer(start: nil, count: 0)
        events = nil; stream = nil; core = nil; context = nil; loop = nil
        held = nil; heldFrames = 0; heldTarget = 0; heldAsked = nil; lastBufferFrames = 0; active = false
        queuedTotal = 0
        cycles.restart()
    }
}
