import CuedCore
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A device with a clock (frames play at the sample rate through a buffer of
/// `bufferFrames`) that can give back what it has not played yet, keeping
/// `margin` frames: what it would play is the stream of frames it kept.
final class RewindingSink: Sink, @unchecked Sendable {
    let spec = "rewinding"
    let format: SinkFormat
    let margin: Int
    private var clock: DeviceClock
    struct Played { var stream: [Int16] = []; var rewinds: [(writtenBefore: Int, frames: Int)] = [] }
    let played = Mutex(Played())

    init(periodFrames: Int = 480, bufferFrames: Int = 4_800, margin: Int = 480) {
        format = SinkFormat(rate: 48_000, channels: 2, sampleFormat: .s16, periodFrames: periodFrames, bufferFrames: bufferFrames)
        self.margin = margin
        clock = DeviceClock(rate: 48_000, bufferFrames: bufferFrames)
    }
    func open() throws(SinkError) -> SinkFormat { format }
    func write(_ data: UnsafeRawPointer, frames n: Int) throws(SinkError) -> SinkWrite {
        clock.write(frames: n)
        let samples = UnsafeBufferPointer(start: data.assumingMemoryBound(to: Int16.self), count: n * 2)
        played.withLock { $0.stream += samples }
        return SinkWrite(frames: n)
    }
    func delayFrames() -> Int { clock.delay() }
    func rewindableFrames() -> Int { max(0, clock.delay() - margin) }
    func rewind(frames: Int) -> Int {
        let n = clock.takeBack(frames)
        played.withLock {
            $0.rewinds.append((writtenBefore: $0.stream.count / 2, frames: n))
            $0.stream.removeLast(n * 2)
        }
        return n
    }
    func stop() { clock.drop() }
    func close() { clock.drop() }
}

/// Polls `condition` every 10 ms until true or `timeout` seconds pass.
private func eventually(timeout: Double, _ condition: () -> Bool) -> Bool {
    let deadline = MonotonicClock.now() + UInt64(timeout * 1e9)
    while MonotonicClock.now() < deadline {
        if condition() { return true }
        usleep(10_000)
    }
    return condition()
}

@Suite(.timeLimit(.minutes(1))) struct RewindTests {
    /// A bed whose every frame differs from its neighbours (a displaced or repeated
    /// frame shows), exact in 16 bits.
    static let bedFrames = 48_000
    static func bed(_ i: Int) -> Int16 { Int16(i % 97 + 1) }
    static let bedCue = Cue(name: "bed", stereo: (0..<bedFrames).flatMap { [Float(bed($0)) / 32768, -Float(bed($0)) / 32768] })

    /// A cue that arrives while another plays is mixed in from the first frame the
    /// device has not committed (here: all it holds but `margin`), not queued behind
    /// the 100 ms the device holds; every other frame of the bed is exactly as it was.
    @Test func aCueMidStreamStartsAtTheFirstFrameTheDeviceGaveBack() throws {
        let sink = RewindingSink()
        let engine = AudioEngine(sink: sink)
        engine.start()
        defer { engine.shutdown(graceMs: 0) }
        engine.submit(.play(Self.bedCue, gain: 1, requestTime: MonotonicClock.now(), owner: "", waitID: 0))
        usleep(300_000)  // streaming, the device's 100 ms buffer full
        let beep = Cue(name: "beep", stereo: [Float](repeating: 1000.0 / 32768, count: 2_400 * 2))
        engine.submit(.play(beep, gain: 1, requestTime: MonotonicClock.now(), owner: "", waitID: 0))
        #expect(eventually(timeout: 5) { sink.played.withLock { $0.stream.count / 2 } >= Self.bedFrames + 4_800 })
        let (stream, rewinds) = sink.played.withLock { ($0.stream, $0.rewinds) }
        try #require(rewinds.count == 1, "rewinds: \(rewinds)")
        let r = rewinds[0]
        // It gave back all it held but the margin (the writer keeps the buffer full; a
        // period may have been under way).
        #expect(r.frames >= 4_800 - 480 - 480 - 480, "gave back \(r.frames) of 4,800")
        let start = r.writtenBefore - r.frames
        var wrong: [String] = []
        for f in 0..<Self.bedFrames where wrong.count < 5 {
            let beepHere: Int16 = (start..<start + 2_400).contains(f) ? 1000 : 0
            let (l, rr) = (stream[2 * f], stream[2 * f + 1])
            if l != Self.bed(f) + beepHere || rr != -Self.bed(f) + beepHere { wrong.append("frame \(f): \(l) \(rr)") }
        }
        #expect(wrong.isEmpty, "the beep should start at frame \(start): \(wrong)")
    }

    /// Frames given back are converted again: their clipping is counted once. A bed
    /// that clips every sample, with silent cues rewound into it many times, counts
    /// exactly its own samples (it counted each rewound frame twice before).
    @Test func clippingIsCountedOnceAcrossRewinds() throws {
        let sink = RewindingSink()
        let engine = AudioEngine(sink: sink)
        engine.start()
        defer { engine.shutdown(graceMs: 0) }
        let frames = 24_000
        engine.submit(.play(Cue(name: "loud", stereo: [Float](repeating: 1.5, count: frames * 2)), gain: 1,
                            requestTime: MonotonicClock.now(), owner: "", waitID: 0))
        usleep(100_000)
        let quiet = Cue(name: "quiet", stereo: [Float](repeating: 0, count: 480 * 2))
        for _ in 0..<20 {
            engine.submit(.play(quiet, gain: 1, requestTime: MonotonicClock.now(), owner: "", waitID: 0))
            usleep(10_000)
        }
        #expect(eventually(timeout: 5) { sink.played.withLock { $0.stream.count / 2 } >= frames + 4_800 })
        let rewinds = sink.played.withLock { $0.rewinds.count }
        try #require(rewinds >= 10, "only \(rewinds) rewinds")
        #expect(engine.stats.clipped.load(ordering: .relaxed) == frames * 2, "\(rewinds) rewinds")
    }

    /// A device that cannot rewind: the cue starts after what was written (as before).
    @Test func withoutRewindingTheCueFollowsWhatIsQueued() throws {
        let sink = RewindingSink(margin: 1_000_000)
        let engine = AudioEngine(sink: sink)
        engine.start()
        defer { engine.shutdown(graceMs: 0) }
        engine.submit(.play(Self.bedCue, gain: 1, requestTime: MonotonicClock.now(), owner: "", waitID: 0))
        usleep(300_000)
        let queued = sink.played.withLock { $0.stream.count / 2 }
        let beep = Cue(name: "beep", stereo: [Float](repeating: 1000.0 / 32768, count: 2_400 * 2))
        engine.submit(.play(beep, gain: 1, requestTime: MonotonicClock.now(), owner: "", waitID: 0))
        #expect(eventually(timeout: 5) { sink.played.withLock { $0.stream.count / 2 } >= Self.bedFrames })
        let stream = sink.played.withLock { $0.stream }
        let first = (0..<Self.bedFrames).first { stream[2 * $0] != Self.bed($0) }
        #expect(sink.played.withLock { $0.rewinds.isEmpty })
        #expect(first != nil && first! >= queued, "the beep starts at \(first ?? -1), before the \(queued) frames written")
    }
}
