/// The stream on its way to one opened device: it renders into the `RenderBuffer`, writes to the
/// sink, and takes frames back from it (a rewind: for a voice that starts mid-stream, and after
/// the margin asked a longer cycle), keeping the accounting (`OutputStream`) and the bytes in
/// step, and counting what the device reports (xruns, missed cycles, rewinds, its delay). One per
/// open; what it renders is reported as `RenderBuffer.Report`s, what it writes as `Written`.
/// Not thread-safe: the audio thread's; no allocation after `init`.
final class StreamWriter {
    let sink: any Sink
    let device: OpenedDevice
    let buffer: RenderBuffer
    private(set) var stream: OutputStream
    private let stats: EngineStats

    /// What one write did, for the device machine.
    struct Written {
        let frames: Int
        let xruns: Int
        /// The device's delay after the write, in ns.
        let delayNs: UInt64
    }

    /// Opens the stream on `device` with the margin learnt so far (`tuner`), in `buffer` if it fits.
    init(sink: any Sink, device: OpenedDevice, tuner: MarginTuner, buffer: RenderBuffer?, stats: EngineStats) {
        self.sink = sink
        self.device = device
        self.stats = stats
        stream = OutputStream(format: device.format, pacing: device.pacing, tuner: tuner)
        self.buffer = buffer.flatMap { $0.fits(device.format) ? $0 : nil } ?? RenderBuffer(format: device.format)
        if let cycle = stream.cycleFrames { _ = sink.setMargin(frames: cycle, canGiveBack: 0) }
        stats.publish(stream.tuner)
    }

    /// What to do next at `now` (`deviceWoke`: the device's descriptors just woke the thread).
    func next(now: UInt64, deviceWoke: Bool) -> OutputStream.Next {
        stream.next(now: now, room: sink.availableFrames(), deviceWoke: deviceWoke)
    }

    /// Starts voice `id` (`start` places it in the mixer, mixing its first frames into the scratch
    /// it is given): on a device that can rewind, the frames it can give back are taken back
    /// first; the voice is mixed into those and the ones not written yet, so it sounds from the
    /// earliest frame the device has not committed. With none, it starts at the next render (at
    /// once, if `streaming`). The report says what the mix-in did, and how the mixer took the voice.
    func startVoice(_ id: UInt64, mixer: Mixer, streaming: Bool, now: UInt64,
                    start: (UnsafeMutablePointer<Float>, Int) -> Mixer.Start) -> RenderBuffer.Report {
        if device.pacing.rewindKeeps != nil && stream.written > 0, case let can = stream.rewindable(deviceCan: sink.rewindableFrames()),
           can > 0, case let back = min(can, sink.rewind(frames: can)), back > 0 {
            stream.didRewind(back, now: now)
            stats.rewinds.add(1, ordering: .relaxed)
        }
        let frames = stream.unwritten
        if frames == 0 && streaming && stream.written > 0 { stream.voiceStartedMidStream() }
        var (result, report) = buffer.mixIn(frames, at: stream.written, mixer: mixer) { start($0, frames) }
        report.voice = (id, result)
        return report
    }

    /// Renders `frames` more when nothing unwritten is left (nil: nothing rendered).
    func render(_ frames: Int, mixer: Mixer) -> RenderBuffer.Report? {
        guard frames > 0 && stream.unwritten == 0 else { return nil }
        defer { stream.didRender(frames) }
        return buffer.render(frames, at: stream.rendered, mixer: mixer)
    }

    /// Writes the unwritten frames, as many as the device takes. A miss (xrun, missed cycle) that
    /// is `heard` (not in a lingering stream's silence) is counted and may grow the margin.
    func write(mixer: Mixer, heard: Bool, now: UInt64) throws(SinkError) -> Written {
        let result = try sink.write(buffer.pending, frames: stream.unwritten)
        buffer.wrote(result.frames)
        if result.xruns > 0 { stats.xruns.add(result.xruns, ordering: .relaxed) }
        if result.missedCycles > 0 && heard { stats.missedCycles.add(result.missedCycles, ordering: .relaxed) }
        let delay = sink.delayFrames(now: now)
        if stream.didWrite(frames: result.frames, xruns: result.xruns, missedCycles: result.missedCycles, heard: heard, delay: delay, now: now) {
            // The margin grew after a miss, or shrank after a quiet while. A longer cycle: what the
            // device gave back (made for the shorter one) is written again, to the new length.
            if let cycle = stream.cycleFrames,
               case let back = sink.setMargin(frames: cycle, canGiveBack: stream.rewindable(deviceCan: .max)), back > 0 {
                stream.didRewind(back, now: now)
                buffer.unwrite(stream.unwritten, mixer: mixer)
            }
            stats.publish(stream.tuner)
        }
        stats.deviceDelayFrames.store(delay, ordering: .relaxed)
        return Written(frames: result.frames, xruns: result.xruns,
                       delayNs: UInt64(max(0, delay)) * 1_000_000_000 / UInt64(device.format.rate))
    }

    /// The stream stopped once it drained: everything written has been heard.
    func stopped() {
        stream.stopped()
        stats.deviceDelayFrames.store(0, ordering: .relaxed)
    }

    /// What the device held is gone (thrown away, or the device closed).
    func reset() {
        stream.reset()
        stats.deviceDelayFrames.store(0, ordering: .relaxed)
    }
}
