import CALSA
import CuedCore
import CuedSystem
#if canImport(Glibc)
import Glibc
#endif

/// An ALSA error: the call that failed and snd_strerror of its code.
func alsaError(_ what: String, _ code: Int32) -> SinkError {
    SinkError("\(what): \(String(cString: snd_strerror(code)))")
}

/// Plays through one ALSA PCM, kept open while cues play (`--sink alsa:PCM`).
/// Non-blocking: the engine polls the PCM's own descriptors, so no call here
/// waits on the device (a PipeWire PCM can stay RUNNING and never take another
/// frame; a blocking write would then hang for good).
/// Threading: every method on the audio thread only (see `Sink`), except
/// `init` and `preflight`, called before it starts.
public final class ALSASink: Sink {
    public let spec: String
    public let device: String
    /// nil: pick the buffer and period for the PCM's kind (see `Timing.defaults`).
    public let latencyMs: Int?
    public let rate: Int
    public let streamProperties: [String: String]
    public private(set) var kind: String = "alsa"
    private var pcm: OpaquePointer?
    private var fds = UnsafeMutableBufferPointer<pollfd>(start: nil, count: 0)

    /// What a sound server shows for cued's stream: desktop mixers list it as
    /// an event sound, and role policies (e.g. ducking, "system sounds" volume) apply.
    public static let defaultStreamProperties = ["application.name": "cued", "application.id": "cued", "media.role": "event"]

    /// Sets `PIPEWIRE_ALSA` and `PULSE_PROP` (unless the user set them) so
    /// PipeWire's and PulseAudio's ALSA plugins label the stream with
    /// `streamProperties`: construct the sink before starting other threads
    /// (setenv is not thread-safe).
    public init(device: String, latencyMs: Int? = nil, rate: Int = 48_000,
                streamProperties: [String: String] = ALSASink.defaultStreamProperties) {
        self.device = device
        self.latencyMs = latencyMs
        self.rate = rate
        self.streamProperties = streamProperties
        spec = "alsa:" + device
        _ = cued_alsa_silence_errors()
        Self.exportStreamProperties(streamProperties)
    }

    deinit {
        close()
    }

    /// `PIPEWIRE_ALSA='{ key = "value" … }'` (SPA JSON, read by pipewire-alsa's
    /// plugin at open) and `PULSE_PROP='key="value" …'` (read by libpulse for the
    /// pulse plugin's context; it names the application itself: "ALSA plug-in [cued]").
    static func exportStreamProperties(_ props: [String: String]) {
        guard !props.isEmpty else { return }
        func quoted(_ v: String) -> String {
            var q = "\""
            for c in v {
                if c == "\\" || c == "\"" { q.append("\\") }
                q.append(c)
            }
            return q + "\""
        }
        let pairs = props.keys.sorted().map { ($0, quoted(props[$0]!)) }
        if getenv("PIPEWIRE_ALSA") == nil {
            // PipeWire's own word for pulse's `event` role (pipewire-pulse's remap.c maps one to the
            // other), so that the session manager files the plugin's stream with the native one under
            // the Notification role: the desktop's System Sounds volume governs it.
            let native = pairs.map { $0.0 == "media.role" && props[$0.0] == "event" ? ($0.0, quoted("Notification")) : $0 }
            setenv("PIPEWIRE_ALSA", "{ " + native.map { "\($0.0) = \($0.1)" }.joined(separator: " ") + " }", 1)
        }
        if getenv("PULSE_PROP") == nil {
            setenv("PULSE_PROP", pairs.map { "\($0.0)=\($0.1)" }.joined(separator: " "), 1)
        }
    }

    /// Fails when ALSA's configuration defines no PCM by the base name (before
    /// ':'), which no retry can fix; a PCM that exists but is busy or absent
    /// passes (the engine retries it).
    public func preflight() throws(SinkError) {
        let base = String(device.prefix { $0 != ":" })
        let rc = cued_alsa_pcm_defined(base)
        if rc < 0 { throw alsaError("cannot read ALSA's configuration", rc) }
        if rc == 0 {
            throw SinkError("no ALSA PCM named '\(base)' (in '\(spec)'): list the PCMs with `aplay -L`, or use `alsa:default`")
        }
    }

    public func open() throws(SinkError) -> OpenedDevice {
        close()
        var handle: OpaquePointer?
        var rc = snd_pcm_open(&handle, device, SND_PCM_STREAM_PLAYBACK, SND_PCM_NONBLOCK)
        guard rc >= 0, let handle else { throw alsaError("cannot open PCM '\(device)'", rc) }
        do throws(SinkError) {
            kind = Self.kind(of: handle)
            let format = try configure(handle, timing: Timing.forKind(kind, latencyMs: latencyMs, rate: rate))
            rc = snd_pcm_prepare(handle)
            guard rc >= 0 else { throw alsaError("snd_pcm_prepare", rc) }
            let count = snd_pcm_poll_descriptors_count(handle)
            guard count > 0 else { throw alsaError("snd_pcm_poll_descriptors_count", count < 0 ? count : -EINVAL) }
            let buffer = UnsafeMutableBufferPointer<pollfd>.allocate(capacity: Int(count))
            rc = snd_pcm_poll_descriptors(handle, buffer.baseAddress, UInt32(count))
            guard rc > 0 else {
                buffer.deallocate()
                throw alsaError("snd_pcm_poll_descriptors", rc < 0 ? rc : -EINVAL)
            }
            fds = UnsafeMutableBufferPointer(rebasing: buffer[0..<Int(rc)])
            pcm = handle
            return OpenedDevice(kind: kind, format: format, pacing: Self.pacing(kind: kind, format: format, descriptors: fds.count))
        } catch {
            snd_pcm_close(handle)
            throw error
        }
    }

    /// The PCM's kind from `snd_pcm_type`; an external (ioplug) PCM is named by its plugin.
    /// A `file` plugin over a sound server's PCM (how a user, or a test, records exactly
    /// what cued hands the server) is that server's kind: it passes every write, the room
    /// and the delay through, so it must be fed the same way.
    static func kind(of pcm: OpaquePointer) -> String {
        let type = snd_pcm_type(pcm)
        switch type {
        case SND_PCM_TYPE_HW: return "hw"
        case SND_PCM_TYPE_DMIX: return "dmix"
        case SND_PCM_TYPE_PLUG: return "plug"
        case SND_PCM_TYPE_NULL: return "null"
        case SND_PCM_TYPE_FILE:
            // "File PCM (file=…)", its setup, then "Slave: " and the slave's own dump.
            guard let dump = dump(pcm), let slave = text(of: dump, after: "\nSlave: ") else { return "file" }
            return serverKind(slave.prefix(200)) ?? "file"
        case SND_PCM_TYPE_IOPLUG:
            // The plugin's name is the first line of its dump ("ALSA <-> PipeWire PCM I/O Plugin").
            guard let dump = dump(pcm) else { return "ioplug" }
            return serverKind(dump.prefix(200)) ?? "ioplug"
        default:
            return String(cString: snd_pcm_type_name(type)).lowercased()
        }
    }

    static func serverKind(_ text: Substring) -> String? {
        if text.includes("PipeWire") { return "pipewire" }
        if text.includes("PulseAudio") { return "pulse" }
        return nil
    }

    /// What follows the first `marker` in `text` (no Foundation here for `range(of:)`).
    static func text(of text: String, after marker: String) -> Substring? {
        let hay = Array(text.utf8), m = Array(marker.utf8)
        guard !m.isEmpty, m.count <= hay.count,
              let i = (0...(hay.count - m.count)).first(where: { hay[$0..<($0 + m.count)].elementsEqual(m) }) else { return nil }
        return Substring(decoding: hay[(i + m.count)...], as: UTF8.self)
    }

    private static func dump(_ pcm: OpaquePointer) -> String? {
        var out: OpaquePointer?
        guard snd_output_buffer_open(&out) >= 0, let out else { return nil }
        defer { snd_output_close(out) }
        snd_pcm_dump(pcm, out)
        var text: UnsafeMutablePointer<CChar>?
        let n = snd_output_buffer_string(out, &text)
        guard n > 0, let text else { return nil }
        return String(cString: text)
    }

    /// Buffer and period asked of the device.
    struct Timing: Equatable {
        var bufferFrames: Int
        var periodFrames: Int

        /// An explicit latency wins (buffer = latency, period = half); else per kind:
        /// - hw, plug, dmix and the rest: 10 ms in periods of 5 ms (a card's interrupts pace us);
        /// - pipewire: 22 ms (1056 frames) in periods of 11 ms. The plugin asks the graph for a
        ///   quantum of one period; a buffer just over the graph's usual quantum (1024) fills
        ///   the first cycle after the stream starts. Measured at the monitor, each cue 0.5 s
        ///   after the last: 256/512 frames p50 16 ms, p99 90 ms (the graph changing its
        ///   quantum, an underrun at start); 512/1024 p50 13, p99 13–24; 528/1056 p50 7.6,
        ///   p99 11–13; 600/1200 p50 7.6, p99 13; 720/1440 p50 7.6, p99 42;
        /// - pulse: periods of 5 ms in a buffer of 10 ms (the plugin rounds it up to 720 frames
        ///   and sets prebuf to buffer − period).
        static func forKind(_ kind: String, latencyMs: Int?, rate: Int) -> Timing {
            if let ms = latencyMs {
                let buffer = max(64, rate * max(1, ms) / 1000)
                return Timing(bufferFrames: buffer, periodFrames: buffer / 2)
            }
            switch kind {
            case "pipewire": return Timing(bufferFrames: rate * 22 / 1000, periodFrames: rate * 11 / 1000)
            case "pulse": return Timing(bufferFrames: rate / 100, periodFrames: rate / 200)
            default: return Timing(bufferFrames: rate / 100, periodFrames: rate / 200)
            }
        }
    }

    /// Negotiates 48 kHz stereo S16_LE (else FLOAT_LE) with the `_near` calls
    /// and reads back what the device actually gave.
    private func configure(_ pcm: OpaquePointer, timing: Timing) throws(SinkError) -> SinkFormat {
        var hw: OpaquePointer?
        var rc = snd_pcm_hw_params_malloc(&hw)
        guard rc >= 0, let hw else { throw alsaError("snd_pcm_hw_params_malloc", rc) }
        defer { snd_pcm_hw_params_free(hw) }
        rc = snd_pcm_hw_params_any(pcm, hw)
        guard rc >= 0 else { throw alsaError("snd_pcm_hw_params_any", rc) }
        rc = snd_pcm_hw_params_set_access(pcm, hw, SND_PCM_ACCESS_RW_INTERLEAVED)
        guard rc >= 0 else { throw alsaError("interleaved access", rc) }
        var sampleFormat = SampleFormat.s16
        if snd_pcm_hw_params_test_format(pcm, hw, SND_PCM_FORMAT_S16_LE) == 0 {
            rc = snd_pcm_hw_params_set_format(pcm, hw, SND_PCM_FORMAT_S16_LE)
        } else {
            sampleFormat = .float
            rc = snd_pcm_hw_params_set_format(pcm, hw, SND_PCM_FORMAT_FLOAT_LE)
        }
        guard rc >= 0 else { throw alsaError("neither S16_LE nor FLOAT_LE is supported", rc) }
        rc = snd_pcm_hw_params_set_channels(pcm, hw, 2)
        guard rc >= 0 else { throw alsaError("2 channels", rc) }
        var r = UInt32(rate)
        var dir: Int32 = 0
        rc = snd_pcm_hw_params_set_rate_near(pcm, hw, &r, &dir)
        guard rc >= 0 else { throw alsaError("rate \(rate)", rc) }
        guard Int(r) == rate else {
            throw SinkError("device offers \(r) Hz, not \(rate) Hz (use a 'plug' PCM such as 'default')")
        }
        var period = snd_pcm_uframes_t(timing.periodFrames)
        rc = snd_pcm_hw_params_set_period_size_near(pcm, hw, &period, &dir)
        guard rc >= 0 else { throw alsaError("period of \(timing.periodFrames) frames", rc) }
        var buffer = snd_pcm_uframes_t(max(timing.bufferFrames, Int(period) * 2))
        rc = snd_pcm_hw_params_set_buffer_size_near(pcm, hw, &buffer)
        guard rc >= 0 else { throw alsaError("buffer of \(timing.bufferFrames) frames", rc) }
        rc = snd_pcm_hw_params(pcm, hw)
        guard rc >= 0 else { throw alsaError("snd_pcm_hw_params", rc) }
        snd_pcm_hw_params_get_period_size(hw, &period, &dir)
        snd_pcm_hw_params_get_buffer_size(hw, &buffer)

        var sw: OpaquePointer?
        rc = snd_pcm_sw_params_malloc(&sw)
        guard rc >= 0, let sw else { throw alsaError("snd_pcm_sw_params_malloc", rc) }
        defer { snd_pcm_sw_params_free(sw) }
        snd_pcm_sw_params_current(pcm, sw)
        // Start as soon as the first period is written: lowest latency.
        rc = snd_pcm_sw_params_set_start_threshold(pcm, sw, period)
        guard rc >= 0 else { throw alsaError("start threshold", rc) }
        rc = snd_pcm_sw_params_set_avail_min(pcm, sw, period)
        guard rc >= 0 else { throw alsaError("avail min", rc) }
        rc = snd_pcm_sw_params(pcm, sw)
        guard rc >= 0 else { throw alsaError("snd_pcm_sw_params", rc) }

        return SinkFormat(rate: Int(r), channels: 2, sampleFormat: sampleFormat,
                          periodFrames: Int(period), bufferFrames: Int(buffer))
    }

    public var pollDescriptors: UnsafeMutableBufferPointer<pollfd> { fds }

    public func hasRoom() throws(SinkError) -> Bool {
        guard let pcm else { throw SinkError("PCM '\(device)' is not open") }
        var revents: UInt16 = 0
        let rc = snd_pcm_poll_descriptors_revents(pcm, fds.baseAddress, UInt32(fds.count), &revents)
        // The PipeWire plugin answers its stream's error here (the server went away).
        guard rc >= 0 else { throw alsaError("PCM '\(device)'", rc) }
        if revents & UInt16(POLLERR) != 0 {
            // An xrun shows as POLLERR: let the write see it and recover.
            switch snd_pcm_state(pcm) {
            case SND_PCM_STATE_XRUN, SND_PCM_STATE_SUSPENDED, SND_PCM_STATE_SETUP, SND_PCM_STATE_PREPARED: return true
            default: throw SinkError("PCM '\(device)': the device reported an error (POLLERR)")
            }
        }
        if revents & UInt16(POLLHUP | POLLNVAL) != 0 { throw SinkError("PCM '\(device)': the device hung up") }
        return revents & UInt16(POLLOUT) != 0
    }

    public func availableFrames() -> Int {
        guard let pcm else { return .max }
        if snd_pcm_state(pcm) == SND_PCM_STATE_SETUP { return .max }  // stopped: write prepares it
        let n = snd_pcm_avail_update(pcm)
        return n < 0 ? .max : Int(n)  // an error: let the write see it (and recover an xrun)
    }

    public func write(_ data: UnsafeRawPointer, frames: Int) throws(SinkError) -> SinkWrite {
        guard let pcm else { throw SinkError("PCM '\(device)' is not open") }
        if snd_pcm_state(pcm) == SND_PCM_STATE_SETUP {
            // Stopped with snd_pcm_drop after the last burst: prepare again.
            let rc = snd_pcm_prepare(pcm)
            guard rc >= 0 else { throw alsaError("preparing PCM '\(device)'", rc) }
        }
        var tries = 0
        while true {
            let n = snd_pcm_writei(pcm, data, snd_pcm_uframes_t(frames))
            if n >= 0 { return SinkWrite(frames: n) }
            let code = Int32(n)
            switch -code {
            case EAGAIN:
                return SinkWrite(frames: 0)
            case EINTR where tries < 2:
                tries += 1
            case EPIPE, ESTRPIPE:
                // xrun or suspend: recover once and report it; the engine gives up on a
                // device that keeps failing without taking frames (a server that went away).
                let rc = snd_pcm_recover(pcm, code, 1)
                guard rc >= 0 else { throw alsaError("recovering PCM '\(device)'", rc) }
                return SinkWrite(frames: 0, xruns: 1)
            default:
                throw alsaError("writing to PCM '\(device)'", code)
            }
        }
    }

    /// How each kind of PCM is fed:
    /// - A sound server's plugin (pipewire, pulse) is fed as far as it takes: its ring is not
    ///   the device, the server takes from it on its own cycle. The rest (hw, dmix, a file) is
    ///   kept a period and a margin ahead, so a cue that arrives mid-stream is written at once
    ///   behind little: see `OutputStream`.
    /// - Rewound: pipewire only. Its plugin copies from ALSA's ring once per graph cycle, a
    ///   quantum at a time, and the quantum is at most the period it asks the graph for (its
    ///   `node.latency`), so all but the next period can be given back. Leaving less raced the graph: with 48
    ///   frames left, 1 rewind in about 10,000 let a cycle find too little and the plugin
    ///   reported an xrun (silence in the stream). pulse: no, the plugin hands every write to the
    ///   server at once; a rewind only moves ALSA's pointer and the frames written again were
    ///   played twice (measured). hw, dmix and the rest: not rewound (no sound card here).
    /// - The margin: on hw, dmix and a file the low water grows a period after an xrun. A sound
    ///   server's plugin is kept full, so its margin is its buffer (22 ms on pipewire): an xrun
    ///   there is cued's thread not refilling it for that long (the machine stalled: docs/decisions/0006),
    ///   which leaving more on a rewind does not help (it only stopped rewinds: one xrun, and every
    ///   later cue waited behind the whole buffer); a longer buffer would take a reopen. Fixed.
    /// - Watched while idle: PipeWire's plugin has one poll descriptor, its own eventfd, which it
    ///   writes when there is room or when its server connection fails. With the stream stopped
    ///   only the failure can write it: after clearing it once, a readable descriptor while idle
    ///   means the server went away (a restart).
    /// - pulse: the plugin's stream, corked between bursts, still has its timing updated
    ///   (PA_STREAM_AUTO_TIMING_UPDATE): pipewire-pulse woke ~2.3 times a second for it. Closing
    ///   costs the next cue ~16 ms more (p50 40 ms instead of 24), so only after 7 s without a
    ///   cue: not at the moment WirePlumber suspends the idle sink (its 5 s), where the close and
    ///   the suspend met and pipewire-pulse crashed once in 86 cycles (issue 20; the cause not
    ///   proved, the coincidence removed). Its delay figure (pa_stream_get_latency, through
    ///   pipewire-pulse) missed the last 2 ms of a cue in about 1 of 400 bursts even with 20 ms
    ///   to spare; the tail costs nothing audible, so 100 ms there.
    static func pacing(kind: String, format f: SinkFormat, descriptors: Int) -> Pacing {
        switch kind {
        case "pipewire":
            return Pacing(writeAhead: .fill, rewindKeeps: f.periodFrames, watchesWhileIdle: descriptors == 1)
        case "pulse":
            return Pacing(writeAhead: .fill, idleCloseLimitNs: 7_000_000_000, drainMarginNs: 100_000_000)
        default:
            return Pacing(writeAhead: .lowWater, margin: Pacing.lowWaterMargin(f))
        }
    }

    public func rewindableFrames() -> Int {
        guard kind == "pipewire", let pcm else { return 0 }
        guard snd_pcm_state(pcm) == SND_PCM_STATE_RUNNING else { return 0 }
        // The plugin's own pointer moves on its thread: read it fresh, right before.
        guard snd_pcm_avail_update(pcm) >= 0 else { return 0 }
        return max(0, Int(snd_pcm_rewindable(pcm)))
    }

    public func rewind(frames: Int) -> Int {
        guard kind == "pipewire", let pcm, frames > 0 else { return 0 }
        let n = snd_pcm_rewind(pcm, snd_pcm_uframes_t(frames))
        return n > 0 ? Int(n) : 0
    }

    public func delayFrames(now: UInt64) -> Int {
        guard let pcm else { return 0 }
        var delay = snd_pcm_sframes_t(0)
        return snd_pcm_delay(pcm, &delay) >= 0 ? max(0, delay) : 0
    }

    /// Called once what was written has played out (the engine waits for the
    /// device delay, writing silence meanwhile): dropping then discards only
    /// silence. Unlike drain + prepare, this never left PipeWire's plugin stuck
    /// in our runs, and it stops the stream so the server's graph can suspend.
    public func stop() {
        guard let pcm else { return }
        snd_pcm_drop(pcm)
        if kind == "pipewire" { clearWakeups() }
    }

    public func idleDeviceFailed() -> Bool {
        guard let pcm else { return false }
        var revents: UInt16 = 0
        // The plugin answers its stored error here.
        if snd_pcm_poll_descriptors_revents(pcm, fds.baseAddress, UInt32(fds.count), &revents) < 0 { return true }
        clearWakeups()
        return false
    }

    private func clearWakeups() {
        guard fds.count == 1 else { return }
        var value: UInt64 = 0
        _ = read(fds[0].fd, &value, 8)  // non-blocking eventfd: nothing to read is fine
    }

    public func close() {
        if let pcm { snd_pcm_close(pcm) }
        pcm = nil
        fds.baseAddress?.deallocate()
        fds = UnsafeMutableBufferPointer(start: nil, count: 0)
    }
}
