@testable import CuedCore
import Testing

/// The audio thread's work on a fake clock and a fake device (`FakeRun`): how far
/// ahead it writes, when a cue that arrives mid-stream is heard, rewinds, pacing,
/// when a waited-for voice ends, stalls, loops, priorities. No test here sleeps.
@Suite struct PlaybackTests {
    /// A bed whose every frame differs from its neighbours (a displaced or repeated
    /// frame shows), exact in 16 bits.
    static let bedFrames = 48_000
    static func bed(_ i: Int) -> Int16 { Int16(i % 97 + 1) }
    static let bedCue = Cue(name: "bed", stereo: (0..<bedFrames).flatMap { [Float(bed($0)) / 32768, -Float(bed($0)) / 32768] })
    static let beep = Cue(name: "beep", stereo: [Float](repeating: 1000.0 / 32768, count: 2_400 * 2))

    /// The first frame where the device's stream is not the bed (the beep's first), and
    /// the frames that are neither the bed alone nor the bed plus the beep from there.
    func findBeep(_ d: FakeDevice, upTo frames: Int = bedFrames) -> (start: Int?, wrong: [String]) {
        let n = min(frames, d.frames)
        guard let start = (0..<n).first(where: { d.frame($0) != Self.bed($0) }) else { return (nil, []) }
        var wrong: [String] = []
        for f in 0..<n where wrong.count < 5 {
            let beep: Int16 = (start..<start + 2_400).contains(f) ? 1000 : 0
            if d.samples[2 * f] != Self.bed(f) + beep || d.samples[2 * f + 1] != -Self.bed(f) + beep {
                wrong.append("frame \(f): \(d.samples[2 * f]) \(d.samples[2 * f + 1])")
            }
        }
        return (start, wrong)
    }

    // MARK: - Writing ahead

    /// On a device that cannot rewind, with a big buffer (100 ms), the writer keeps
    /// only a period and a margin queued: a cue that arrives mid-stream is heard
    /// within that, not behind the whole buffer; the bed never breaks.
    @Test func aCueMidStreamOnAPlainDeviceIsHeardWithinAPeriodAndAMargin() throws {
        let d = FakeDevice(periodFrames: 240, bufferFrames: 4_800)
        var run = FakeRun(d)
        run.play(Self.bedCue, id: 1, notify: [])
        run.run(for: 300 * .ms)
        let stream = try #require(run.playback.writer?.stream)
        #expect(stream.lowWaterFrames == 360)
        #expect(d.delayFrames() <= 360 + 240, "queued \(d.delayFrames()) frames ahead")
        let asked = run.now
        run.play(Self.beep, id: 2, notify: [])
        run.run(for: 200 * .ms)
        let (start, wrong) = findBeep(d, upTo: d.frames)
        let s = try #require(start)
        #expect(wrong.isEmpty, "\(wrong)")
        let heardAfter = d.heardAt[s] - asked
        #expect(heardAfter <= UInt64(360 + 240) * 1_000_000_000 / 48_000, "heard \(heardAfter / 1000) µs after it was asked for")
        #expect(d.underruns == 0)
    }

    /// While voices play on such a device, nothing ever runs dry, over a second of
    /// wake-ups at the moments the writer chose.
    @Test func theWriterNeverUnderrunsAndKeepsOnlyAPeriodAndAMarginQueued() {
        let d = FakeDevice(periodFrames: 240, bufferFrames: 4_800)
        var run = FakeRun(d)
        run.play(Self.bedCue, id: 1, notify: [])
        var most = 0
        for _ in 0..<200 {
            run.run(for: 5 * .ms)
            most = max(most, d.delayFrames())
        }
        #expect(d.underruns == 0)
        #expect(most <= 360 + 240, "at most \(most) frames were queued")
        #expect(d.frames >= Self.bedFrames - 600, "wrote \(d.frames) frames of a 1 s bed in 1 s")
    }

    /// A sound server's plugin (`.fill`) is kept full, as before.
    @Test func aSoundServersPluginIsKeptFull() {
        let d = FakeDevice(periodFrames: 480, bufferFrames: 1_056, writeAhead: .fill)
        var run = FakeRun(d)
        run.play(Self.bedCue, id: 1, notify: [])
        run.run(for: 100 * .ms)
        #expect(d.delayFrames() >= 1_056 - 480, "queued \(d.delayFrames())")
        #expect(d.underruns == 0)
    }

    /// Cycles a sound server's graph ran without the stream (the native PipeWire stream's
    /// missed cycles) are counted as such, not as xruns: nothing the stream holds was
    /// dropped, and it goes on as it was.
    @Test func missedCyclesAreCountedAndTheStreamGoesOn() {
        let d = FakeDevice(periodFrames: 128, bufferFrames: 2_048, writeAhead: .fill)
        var run = FakeRun(d)
        run.play(Self.bedCue, id: 1, notify: [])
        run.run(for: 50 * .ms)
        d.missedCyclesToReport = 3
        run.run(for: 50 * .ms)
        #expect(run.stats.missedCycles.load(ordering: .relaxed) == 3)
        #expect(run.stats.xruns.load(ordering: .relaxed) == 0)
        #expect(d.underruns == 0)
        #expect((0..<d.frames).allSatisfy { d.frame($0) == Self.bed($0) }, "the bed broke")
    }

    /// On a device without a clock (ALSA's `file` plugin over `null`: what is written is
    /// in the file at once), a cue that arrives mid-stream is written the moment it is
    /// asked for; the writer still keeps to real time (not seconds of audio at once).
    @Test func onAClocklessDeviceAMidStreamCueIsWrittenAtOnce() throws {
        let d = FakeDevice(periodFrames: 240, bufferFrames: 480, clockless: true)
        var run = FakeRun(d)
        let t0 = run.now
        run.play(Self.bedCue, id: 1, notify: [])
        #expect(d.frames == 720, "a stream's start: a buffer and a period at once (alsa-lib's file plugin passes on only past a buffer)")
        #expect(Set(d.heardAt) == [t0])
        run.run(for: 300 * .ms)
        #expect(run.playback.writer?.stream.clockless == true)
        // Real time plus the limit (a buffer and a period), not more.
        #expect(d.frames <= 300 * 48 + 720 + 240, "wrote \(d.frames) frames in 300 ms")
        #expect(d.frames >= 300 * 48 - 240)
        for _ in 0..<10 {
            run.run(for: 7 * .ms + 123_457)  // a phase of its own each time
            let asked = run.now
            let before = d.frames
            run.play(Self.beep, id: 2, notify: [])
            #expect(d.frames > before, "nothing written at the request")
            #expect(d.heardAt[before] == asked)
        }
        _ = t0
    }

    /// A device whose write waits for room (the null sink), kept full: the machine's
    /// deadlines still fire although every step finds room (they did not: the drain never
    /// ended, and shutdown waited for its abandon limit).
    @Test func aDeviceThatAlwaysHasRoomStillDrainsStopsAndShutsDown() throws {
        let d = FakeDevice(periodFrames: 240, bufferFrames: 480, writeAhead: .fill)
        d.waitsInWrite = true
        var run = FakeRun(d)
        run.play(Cue(name: "short", stereo: [Float](repeating: 0.1, count: 2_400 * 2)), id: 1)
        run.run(for: 200 * .ms)
        #expect(run.ends[1]?.reason == .played)
        #expect(run.playback.machine.phase == .idle, "\(run.playback.machine.state)")
        run.play(Self.bedCue, id: 2)
        run.run(for: 20 * .ms)
        run.submit(.shutdown(deadline: run.now + 30 * .ms))
        run.run(for: 100 * .ms)
        #expect(run.playback.exited)
        #expect(run.ends[2]?.reason == .shutdown)
    }

    // MARK: - Rewind

    /// A device that can give back what it has not played: a cue that arrives while
    /// another plays is mixed in from the first frame the device has not committed
    /// (all it holds but `margin`), not queued behind the 100 ms it holds; every other
    /// frame of the bed is exactly as it was.
    @Test func aCueMidStreamStartsAtTheFirstFrameTheDeviceGaveBack() throws {
        let d = FakeDevice(periodFrames: 480, bufferFrames: 4_800, rewindMargin: 480, writeAhead: .fill)
        var run = FakeRun(d)
        run.play(Self.bedCue, id: 1, notify: [])
        run.run(for: 300 * .ms)
        #expect(d.delayFrames() >= 4_800 - 480)  // kept full
        let asked = run.now
        run.play(Self.beep, id: 2, notify: [])
        run.run(for: 800 * .ms)
        #expect(run.stats.rewinds.load(ordering: .relaxed) == 1)
        let (start, wrong) = findBeep(d)
        let s = try #require(start)
        #expect(wrong.isEmpty, "\(wrong)")
        // Heard after the margin the device kept, not after its 4,800 frames.
        #expect(d.heardAt[s] - asked <= UInt64(480) * 1_000_000_000 / 48_000 + 1, "\(d.heardAt[s] - asked) ns")
        #expect(d.underruns == 0)
    }

    /// Frames given back are mixed and converted again: a mix past full scale is limited
    /// the same way each time (never clipped), however often it is written.
    @Test func aMixPastFullScaleIsLimitedNotClippedAcrossRewinds() throws {
        let d = FakeDevice(periodFrames: 480, bufferFrames: 4_800, rewindMargin: 480, writeAhead: .fill)
        var run = FakeRun(d)
        let frames = 24_000
        run.play(Cue(name: "loud", stereo: [Float](repeating: 1.5, count: frames * 2)), id: 1, notify: [])
        run.run(for: 100 * .ms)
        let quiet = Cue(name: "quiet", stereo: [Float](repeating: 0, count: 480 * 2))
        for i in 0..<20 {
            run.play(quiet, id: UInt64(10 + i), notify: [])
            run.run(for: 10 * .ms)
        }
        run.run(for: 1_000 * .ms)
        #expect(run.stats.rewinds.load(ordering: .relaxed) >= 10)
        #expect(run.stats.clipped.load(ordering: .relaxed) == 0)
        // 1.5 turned down to the limiter's ceiling, every frame of it (16-bit: 32765).
        let ceiling = Int16((PeakLimiter.ceiling * 32768).rounded())
        #expect((0..<d.frames).filter { d.frame($0) == ceiling }.count == frames)
    }

    // MARK: - When a voice has been heard

    /// A waited-for voice ends when its last frame has been heard at the device: not
    /// when it was rendered or written, and not much later.
    @Test func aWaitedVoiceEndsWhenItsLastFrameIsHeard() throws {
        let d = FakeDevice(periodFrames: 240, bufferFrames: 4_800)
        var run = FakeRun(d)
        run.play(Self.bedCue, id: 1, notify: [])
        run.run(for: 50 * .ms)
        run.play(Self.beep, id: 2, notify: [.wait])
        run.run(for: 300 * .ms)
        let (start, _) = findBeep(d, upTo: d.frames)
        let last = try #require(start) + 2_399
        let ended = try #require(run.endTime(2))
        #expect(run.ends[2]?.reason == .played)
        #expect(ended >= d.heardAt[last], "ended \(Int64(d.heardAt[last]) - Int64(ended)) ns before its last frame was heard")
        #expect(ended <= d.heardAt[last] + 1 * .ms)
        #expect(run.endCount == 1)  // the bed, unwatched and still playing, is not reported
    }

    /// On a clockless device, what is written is heard: the end comes with the write.
    @Test func onAClocklessDeviceAVoiceEndsWithItsLastWrite() throws {
        let d = FakeDevice(periodFrames: 240, bufferFrames: 480, clockless: true)
        var run = FakeRun(d)
        run.play(Self.beep, id: 7)
        run.run(for: 200 * .ms)
        let ended = try #require(run.endTime(7))
        let last = try #require((0..<d.frames).last { d.frame($0) == 1000 })
        #expect(ended == d.heardAt[last])
    }

    /// A cue that waited for the device to open: `status` never says idle in between (it
    /// said so from the open until the cue started, and a test that waited for idle to
    /// restart the sound server hit the cue instead); a prewarm's open is idle.
    @Test func anOpenForACueIsNeverShownIdle() throws {
        let d = FakeDevice(periodFrames: 240, bufferFrames: 480)
        var run = FakeRun(d)
        run.play(Self.beep, id: 1)
        let opened = try #require(run.events.firstIndex { if case .opened = $0 { return true }; return false })
        #expect(run.sinkStates[opened] != .idle, "\(run.sinkStates)")
        #expect(run.stats.sinkState == .running)
        #expect(run.stats.sinkFormat?.rate == 48_000 && run.stats.sinkKind != nil)

        var warm = FakeRun(FakeDevice(periodFrames: 240, bufferFrames: 480))
        warm.submit(.prewarm)
        #expect(warm.stats.sinkState == .idle)
    }

    // MARK: - Devices that stop taking frames

    /// A running device that takes no frame is reopened (a stalled PipeWire PCM), and the
    /// voice requested less than 250 ms before starts again there.
    @Test func aStalledDeviceIsReopened() {
        let d = FakeDevice(periodFrames: 240, bufferFrames: 480)
        d.stallFromWrite = 3
        var run = FakeRun(d)
        run.play(Self.bedCue, id: 1)
        run.run(for: 2_000 * .ms)
        #expect(run.events.contains { if case .stalled = $0 { return true }; return false })
        #expect(d.opens >= 2)
        #expect(run.stats.stalls.load(ordering: .relaxed) >= 1)
        // The bed was requested over 250 ms before the stall was found: too late to start again.
        #expect(run.ends[1]?.reason == .cut)
    }

    /// A device that never opens: the cue waits its 250 ms, then ends `late`.
    @Test func aCueTheDeviceCannotStartInTimeEndsLate() {
        let d = FakeDevice()
        d.failOpen = true
        var run = FakeRun(d)
        run.play(Self.beep, id: 3)
        run.run(for: 1_000 * .ms)
        #expect(run.ends[3]?.reason == .late)
        #expect(run.ends[3]?.started == false)
        #expect(run.stats.dropped.load(ordering: .relaxed) == 1)
    }

    /// A descriptor that wakes the thread without room (PipeWire's eventfd) makes it
    /// sleep on a timer, not poll again at once.
    @Test func aWakeWithoutRoomSleepsOnATimer() throws {
        let d = FakeDevice(periodFrames: 480, bufferFrames: 960, writeAhead: .fill)
        var run = FakeRun(d)
        run.play(Self.bedCue, id: 1, notify: [])
        run.run(for: 5 * .ms)
        #expect(d.delayFrames() > 960 - 480)  // full: no room for a period
        let w = run.playback.step(now: run.now, deviceWoke: true)
        guard case .sleep(let until, let watch) = w else { Issue.record("\(w)"); return }
        #expect(watch == .none)
        let u = try #require(until)
        #expect(u >= run.now + 500_000)
    }

    /// …unless the device's descriptors say only what is new (the native PipeWire stream):
    /// then it polls them again, and the wake-up that brings room is not slept through.
    @Test func aWakeWithoutRoomPollsAgainWhenTheDeviceSaysOnlyWhatIsNew() throws {
        let d = FakeDevice(periodFrames: 480, bufferFrames: 960, writeAhead: .fill)
        d.descriptorsStayReadable = false
        var run = FakeRun(d)
        run.play(Self.bedCue, id: 1, notify: [])
        run.run(for: 5 * .ms)
        #expect(d.delayFrames() > 960 - 480)
        let w = run.playback.step(now: run.now, deviceWoke: true)
        guard case .sleep(_, let watch) = w else { Issue.record("\(w)"); return }
        #expect(watch == .room)
    }

    /// Over a second of a cue playing, the thread turns its loop a few times a period,
    /// not thousands of times.
    @Test func theThreadTurnsAFewTimesAPeriod() {
        let d = FakeDevice(periodFrames: 240, bufferFrames: 480)
        var run = FakeRun(d)
        run.play(Self.bedCue, id: 1, notify: [])
        run.run(for: 1_000 * .ms)
        #expect(run.steps < 200 * 5, "\(run.steps) steps for 200 periods")
        #expect(run.steps >= 200)
    }
}
