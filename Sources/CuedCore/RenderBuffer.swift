/// The mixed frames on their way to the device, in one place: the converted bytes that wait to
/// be written (from `offset`), the float mix of the last frames rendered (a ring, at most a
/// buffer and a period: what a rewind mixes a new voice into), and the scratch space where that
/// is done. Each render — a period from the mixer, or a voice mixed into frames rendered before —
/// gives one `Report`: the voices it started and ended, the samples it clipped. `OutputStream`
/// counts the frames (how many are unwritten, how many have their mix at hand); this holds them.
/// Not thread-safe: the audio thread's; no allocation after `init`.
final class RenderBuffer {
    /// What one render did.
    struct Report {
        /// The mixer whose `started…` and `ended` lists the render left (read them before the next).
        let mixer: Mixer
        /// The stream position of the render's first frame.
        let position: Int
        /// Samples clipped that had not been counted before (frames converted again count only
        /// what the new voice added).
        let clipped: Int
        /// A mix-in's voice and how the mixer took it (nil: a render).
        var voice: (id: UInt64, start: Mixer.Start)?

        /// The request time of each voice whose first frame was in these frames (0: none given).
        func started(_ each: (UInt64) -> Void) {
            for i in 0..<mixer.startedCount { each(mixer.startedRequestTimes[i]) }
        }

        /// Each voice that ended in these frames, and its last frame's stream position.
        func ended(_ each: (Mixer.Ended, Int) -> Void) {
            for i in 0..<mixer.endedCount { each(mixer.ended[i], position + max(0, mixer.ended[i].lastFrame)) }
        }

        /// Counts it (samples clipped, voices playing, each started voice's latency from its
        /// request to `now`, a voice stolen) and tells the ledger when each ended voice sounds its
        /// last frame, and which ended at once (a voice refused, one pushed out of its fade).
        func record(into stats: EngineStats, ledger: inout VoiceLedger, now: UInt64) {
            if clipped > 0 { stats.clipped.add(clipped, ordering: .relaxed) }
            stats.voicesActive.store(mixer.activeVoices, ordering: .relaxed)
            started { requestTime in if requestTime != 0 { stats.recordLatency(ns: now &- requestTime) } }
            ended { e, lastFrame in
                if e.reason == .played { ledger.rendered(e.id, lastFrame: lastFrame) } else { ledger.finish(e.id, e.reason, started: true) }
            }
            switch voice?.start {
            case .refused?: ledger.finish(voice!.id, .busy, started: false)
            case .stole?: stats.stolen.add(1, ordering: .relaxed)
            case .started?, nil: break
            }
            mixer.takeEvicted { ledger.finish($0, $1, started: true) }
        }
    }

    let format: SinkFormat
    /// Frames it holds at most: a buffer and a period.
    let capacity: Int
    private let bytesPerFrame: Int
    private let output: UnsafeMutableRawPointer
    /// Frames of `output` already written.
    private(set) var offset = 0
    private let history: UnsafeMutablePointer<Float>
    private var historyEnd = 0
    private let scratch: UnsafeMutablePointer<Float>

    init(format: SinkFormat) {
        self.format = format
        capacity = format.bufferFrames + format.periodFrames
        bytesPerFrame = format.channels * format.sampleFormat.bytes
        output = .allocate(byteCount: capacity * bytesPerFrame, alignment: 16)
        history = .allocate(capacity: capacity * 2)
        scratch = .allocate(capacity: capacity * 2)
    }

    deinit {
        output.deallocate()
        history.deallocate()
        scratch.deallocate()
    }

    /// Whether it can hold what a device of `f` needs.
    func fits(_ f: SinkFormat) -> Bool {
        f.sampleFormat == format.sampleFormat && f.channels == format.channels && f.bufferFrames + f.periodFrames <= capacity
    }

    /// The frames to write next (the unwritten ones start here).
    var pending: UnsafeRawPointer { UnsafeRawPointer(output + offset * bytesPerFrame) }

    /// The device took `frames` of them.
    func wrote(_ frames: Int) { offset += frames }

    /// Mixes the next `frames` frames (nothing unwritten is left), at stream position `position`:
    /// remembered for rewinds, and converted to be written from the start.
    func render(_ frames: Int, at position: Int, mixer: Mixer) -> Report {
        mixer.render(frames: frames)
        remember(UnsafePointer(mixer.mix), frames: frames)
        return convert(UnsafePointer(mixer.mix), frames: frames, at: position, mixer: mixer, counted: 0)
    }

    /// Mixes a voice into the last `frames` frames rendered (those unwritten: given back by the
    /// device or not written yet), at stream position `position`: `start` mixes its first frames
    /// into their float mix, which is remembered and converted again, to be written from the start.
    /// With no frames, the voice starts at the next render (the report is of the start alone).
    /// The report's `voice` is left to the caller, who knows the voice's id.
    func mixIn(_ frames: Int, at position: Int, mixer: Mixer,
               start: (UnsafeMutablePointer<Float>) -> Mixer.Start) -> (Mixer.Start, Report) {
        guard frames > 0 else { return (start(scratch), Report(mixer: mixer, position: position, clipped: 0)) }
        tail(frames, copyOut: true)
        // These frames were converted (and their clipping counted) before; count only what the new voice adds.
        let counted = Mixer.clipped(UnsafePointer(scratch), frames: frames, format: format.sampleFormat)
        let result = start(scratch)
        tail(frames, copyOut: false)
        return (result, convert(UnsafePointer(scratch), frames: frames, at: position, mixer: mixer, counted: counted))
    }

    /// The last `frames` frames rendered are to be written again as they were (the device gave
    /// back some, and those not written yet follow them): converted again from their mix, from the
    /// start. Nothing to report: their voices and clipping were reported when they were rendered.
    func unwrite(_ frames: Int, mixer: Mixer) {
        tail(frames, copyOut: true)
        _ = convertOnly(UnsafePointer(scratch), frames: frames, mixer: mixer)
    }

    private func convert(_ mix: UnsafePointer<Float>, frames: Int, at position: Int, mixer: Mixer, counted: Int) -> Report {
        Report(mixer: mixer, position: position, clipped: max(0, convertOnly(mix, frames: frames, mixer: mixer) - counted))
    }

    /// Converts into the output, to be written from the start; returns the samples clipped.
    private func convertOnly(_ mix: UnsafePointer<Float>, frames: Int, mixer: Mixer) -> Int {
        offset = 0
        switch format.sampleFormat {
        case .s16: return mixer.convert(frames: frames, from: mix, toS16: output.assumingMemoryBound(to: Int16.self))
        case .float: return mixer.convert(frames: frames, from: mix, toFloat: output.assumingMemoryBound(to: Float.self))
        }
    }

    /// Appends rendered frames to the history ring.
    private func remember(_ mix: UnsafePointer<Float>, frames: Int) {
        var done = 0
        while done < frames {
            let n = min(frames - done, capacity - historyEnd)
            (history + historyEnd * 2).update(from: mix + done * 2, count: n * 2)
            historyEnd = (historyEnd + n) % capacity
            done += n
        }
    }

    /// Copies the last `frames` frames of the history ring out to the scratch space, or back in from it.
    private func tail(_ frames: Int, copyOut: Bool) {
        var at = (historyEnd + capacity - frames) % capacity
        var done = 0
        while done < frames {
            let n = min(frames - done, capacity - at)
            if copyOut { (scratch + done * 2).update(from: history + at * 2, count: n * 2) }
            else { (history + at * 2).update(from: scratch + done * 2, count: n * 2) }
            at = (at + n) % capacity
            done += n
        }
    }
}
