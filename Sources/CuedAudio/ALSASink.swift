import CALSA
import CuedCore
#if canImport(Glibc)
import Glibc
#endif

/// An ALSA error: the call that failed and snd_strerror of its code.
func alsaError(_ what: String, _ code: Int32) -> SinkError {
    SinkError("\(what): \(String(cString: snd_strerror(code)))")
}

/// Plays through one ALSA PCM, kept open while cues play (`--sink alsa:PCM`).
/// Threading: every method on the audio thread only (see `Sink`).
public final class ALSASink: Sink {
    public let spec: String
    public let device: String
    public let latencyMs: Int
    public let rate: Int
    private var pcm: OpaquePointer?

    public init(device: String, latencyMs: Int = 10, rate: Int = 48_000) {
        self.device = device
        self.latencyMs = latencyMs
        self.rate = rate
        spec = "alsa:" + device
        _ = cued_alsa_silence_errors()
    }

    deinit { close() }

    public func open() throws(SinkError) -> SinkFormat {
        close()
        var handle: OpaquePointer?
        var rc = snd_pcm_open(&handle, device, SND_PCM_STREAM_PLAYBACK, 0)
        guard rc >= 0, let handle else { throw alsaError("cannot open PCM '\(device)'", rc) }
        do throws(SinkError) {
            let format = try configure(handle)
            rc = snd_pcm_prepare(handle)
            guard rc >= 0 else { throw alsaError("snd_pcm_prepare", rc) }
            pcm = handle
            return format
        } catch {
            snd_pcm_close(handle)
            throw error
        }
    }

    /// Negotiates 48 kHz stereo S16_LE (else FLOAT_LE) with the `_near` calls
    /// and reads back what the device actually gave.
    private func configure(_ pcm: OpaquePointer) throws(SinkError) -> SinkFormat {
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
        var bufferUs = UInt32(max(1, latencyMs) * 1000)
        rc = snd_pcm_hw_params_set_buffer_time_near(pcm, hw, &bufferUs, &dir)
        guard rc >= 0 else { throw alsaError("buffer time \(latencyMs) ms", rc) }
        var periodUs = bufferUs / 2
        rc = snd_pcm_hw_params_set_period_time_near(pcm, hw, &periodUs, &dir)
        guard rc >= 0 else { throw alsaError("period time", rc) }
        rc = snd_pcm_hw_params(pcm, hw)
        guard rc >= 0 else { throw alsaError("snd_pcm_hw_params", rc) }

        var period = snd_pcm_uframes_t(0), buffer = snd_pcm_uframes_t(0)
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

    public func write(_ data: UnsafeRawPointer, frames: Int) throws(SinkError) -> Int {
        guard let pcm else { throw SinkError("PCM '\(device)' is not open") }
        var xruns = 0
        var done = 0
        let bytesPerFrame = snd_pcm_frames_to_bytes(pcm, 1)
        while done < frames {
            let n = snd_pcm_writei(pcm, data + done * bytesPerFrame, snd_pcm_uframes_t(frames - done))
            if n >= 0 { done += n; continue }
            let code = Int32(n)
            switch -code {
            case EPIPE, ESTRPIPE, EINTR:
                // xrun or suspend: one clear line, as aplay/axfer do.
                let rc = snd_pcm_recover(pcm, code, 1)
                guard rc >= 0 else { throw alsaError("recovering PCM '\(device)'", rc) }
                if -code != EINTR { xruns += 1 }
            default:
                throw alsaError("writing to PCM '\(device)'", code)
            }
        }
        return xruns
    }

    public func stop() {
        guard let pcm else { return }
        snd_pcm_drain(pcm)
        snd_pcm_prepare(pcm)
    }

    public func close() {
        if let pcm { snd_pcm_close(pcm) }
        pcm = nil
    }
}
