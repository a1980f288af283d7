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

/// Loops, priorities and stops by id, through the same playback.
@Suite struct VoiceControlTests {
    static let tone = Cue(name: "tone", stereo: [Float](repeating: 0.25, count: 100 * 2))  // 8192 in 16 bits
    static let long = Cue(name: "long", stereo: [Float](repeating: 0.125, count: 48_000 * 2))

    func count(_ d: FakeDevice, _ value: Int16) -> Int { (0..<d.frames).filter { d.frame($0) == value }.count }

    /// `status wait` answers once the audio thread has taken the cues before it: the voices
    /// they started count at once, before the next render (16 loops then read 15 when the
    /// event loop was quicker than the audio thread's next period: a flaky integration test).
    @Test(arguments: [WriteAhead.lowWater, .fill])
    func voicesStartedBetweenRendersCountAtOnce(_ writeAhead: WriteAhead) {
        let d = FakeDevice(writeAhead: writeAhead)
        d.waitsInWrite = writeAhead == .fill  // as the wav and null sinks: kept full, no rewind
        var run = FakeRun(d)
        run.play(Self.tone, id: 1, loop: .forever, notify: [])
        run.run(for: 100 * .ms)
        #expect(run.stats.voicesActive.load(ordering: .relaxed) == 1)
        for id in 2...16 {
            // Taken as the audio thread takes commands, with no step (no render) after them.
            run.playback.take(.play(VoiceRequest(id: UInt64(id), cue: Self.tone, requestTime: run.now, owner: "o",
                                                 loop: .forever, notify: [])), now: run.now)
            #expect(run.stats.voicesActive.load(ordering: .relaxed) == id)
        }
    }

    @Test func aVoiceLoopsNTimesThenEndsPlayed() {
        let d = FakeDevice()
        var run = FakeRun(d)
        run.play(Self.tone, id: 1, loop: .times(3))
        run.run(for: 200 * .ms)
        #expect(count(d, 8192) == 300)
        #expect(run.ends[1]?.reason == .played)
    }

    @Test func aVoiceLoopsUntilStoppedByItsID() {
        let d = FakeDevice()
        var run = FakeRun(d)
        run.play(Self.tone, id: 1, loop: .forever)
        run.play(Self.tone, id: 2, loop: .forever, owner: "other")
        run.run(for: 500 * .ms)
        #expect(run.ends[1] == nil)
        #expect(count(d, 16384) >= 400 * 48)  // both, summed, for about 0.5 s
        run.submit(.stop(.id(1), ticket: 9))
        #expect(run.events.contains { if case .stopped(9, 1) = $0 { return true }; return false })
        run.run(for: 20 * .ms)
        #expect(run.ends[1]?.reason == .stoppedByID)
        #expect(run.ends[2] == nil)  // the other goes on
        run.submit(.stop(.all, ticket: 10))
        run.run(for: 20 * .ms)
        #expect(run.ends[2]?.reason == .stoppedAll)
    }

    @Test func aVoiceLoopsForAtMostItsSecondsThenFadesAndEndsPlayed() throws {
        let d = FakeDevice()
        var run = FakeRun(d)
        run.play(Self.tone, id: 1, loop: .seconds(0.05))
        run.run(for: 300 * .ms)
        #expect(run.ends[1]?.reason == .played)
        let sounding = (0..<d.frames).filter { d.frame($0) != 0 }
        #expect(sounding.count == 2_400, "sounded \(sounding.count) frames")
        let full = count(d, 8192)
        #expect(full == 2_400 - 192 || full == 2_400 - 192 + 1, "full-scale frames: \(full)")  // then a 4 ms fade
        let last = try #require(sounding.last)
        #expect(d.frame(last) < 100)  // faded, no click
    }

    /// All voices busy: the lowest priority is taken (then the oldest); a new voice
    /// that finds only higher ones is not started (`busy`).
    @Test func prioritiesDecideWhichVoiceIsTaken() {
        let d = FakeDevice()
        var run = FakeRun(d, voices: 2)
        run.play(Self.long, id: 1, priority: 0)
        run.play(Self.long, id: 2, priority: 5)
        run.play(Self.long, id: 3, priority: 1)   // takes 1 (lowest)
        run.run(for: 20 * .ms)
        #expect(run.ends[1]?.reason == .stolen)
        run.play(Self.long, id: 4, priority: 0)   // 2 (5) and 3 (1) both outrank it
        #expect(run.ends[4]?.reason == .busy)
        #expect(run.ends[4]?.started == false)
        run.play(Self.long, id: 5, priority: 1)   // equal to 3, the oldest of the lowest: 3 goes
        run.run(for: 20 * .ms)
        #expect(run.ends[3]?.reason == .stolen)
        #expect(run.ends[2] == nil && run.ends[5] == nil)
        #expect(run.stats.stolen.load(ordering: .relaxed) == 2)
    }

    /// Mute fades everything: each voice ends `muted`, once.
    @Test func muteEndsEveryVoiceOnceAsMuted() {
        let d = FakeDevice()
        var run = FakeRun(d)
        run.play(Self.long, id: 1)
        run.play(Self.long, id: 2, loop: .forever)
        run.run(for: 20 * .ms)
        run.submit(.fadeOutAll)
        run.run(for: 100 * .ms)
        #expect(run.ends[1]?.reason == .muted && run.ends[2]?.reason == .muted)
        #expect(run.endCount == 2)
    }

    /// Shutdown at once: a voice that got its slot but never a rendered frame ends
    /// `shutdown`, not started (its waiter hears that cued is stopping).
    @Test func shutdownBeforeAVoiceRenderedSaysItNeverStarted() {
        let d = FakeDevice()
        var run = FakeRun(d)
        run.play(Self.long, id: 1)
        run.run(for: 20 * .ms)  // the device is open and streaming
        run.playback.take(.play(VoiceRequest(id: 2, cue: Self.long, requestTime: run.now, notify: [.wait])), now: run.now)
        run.submit(.shutdown(deadline: run.now))
        #expect(run.playback.exited)
        #expect(run.ends[1]?.reason == .shutdown && run.ends[1]?.started == true)
        #expect(run.ends[2]?.reason == .shutdown && run.ends[2]?.started == false)
    }

    /// Shutdown: a voice still sounding at the deadline is cut off (`shutdown`, started).
    @Test func shutdownCutsWhatStillSoundsAtItsDeadline() {
        let d = FakeDevice()
        var run = FakeRun(d)
        run.play(Self.long, id: 1)
        run.run(for: 20 * .ms)
        run.submit(.shutdown(deadline: run.now + 50 * .ms))
        run.run(for: 200 * .ms)
        #expect(run.playback.exited)
        #expect(run.ends[1]?.reason == .shutdown && run.ends[1]?.started == true)
    }
}


/// The margin against stalls, through the playback: a miss grows it (the low water on a ring, the
/// cycle asked of a graph), status says so, and a quiet while brings it back; the linger after the
/// last cue is the machine's, written as silence.
@Suite struct MarginAndLingerTests {
    static let bed = Cue(name: "bed", stereo: [Float](repeating: 0.01, count: 48_000 * 2))
    static let pop = Cue(name: "pop", stereo: [Float](repeating: 0.1, count: 2_400 * 2))

    /// An xrun on a device kept a period and a margin ahead: the margin grows by a period, so the
    /// writer keeps more queued from then on; `status` has the margin and the growth.
    @Test func anXrunGrowsTheLowWaterByAPeriod() throws {
        let d = FakeDevice(periodFrames: 240, bufferFrames: 4_800)
        var run = FakeRun(d)
        run.play(MarginAndLingerTests.bed, id: 1, notify: [])
        run.run(for: 100 * .ms)
        #expect(try #require(run.playback.writer?.stream).lowWaterFrames == 360)
        #expect(run.stats.marginFrames.load(ordering: .relaxed) == 120)
        d.xrunsToReport = 1
        run.run(for: 100 * .ms)
        #expect(try #require(run.playback.writer?.stream).lowWaterFrames == 600)
        #expect(run.stats.marginFrames.load(ordering: .relaxed) == 360)
        #expect(run.stats.marginGrowths.load(ordering: .relaxed) == 1)
        var most = 0
        for _ in 0..<40 { run.run(for: 5 * .ms); most = max(most, d.delayFrames()) }
        #expect(most > 360 + 240 && most <= 600 + 240, "queued at most \(most)")
        #expect(d.underruns == 0)
    }

    /// A device whose margin is the cycle its graph runs (the native PipeWire stream): it is asked
    /// for its start at open, for a cycle long enough after a miss of several cycles, and for one
    /// step less after a quiet while; a reopen keeps what was learnt.
    @Test func aMissedCycleGrowsTheGraphsCycleAndAQuietWhileShrinksIt() throws {
        let d = FakeDevice(periodFrames: 128, bufferFrames: 2_048, writeAhead: .fill)
        d.margin = .quantum(start: 128, limit: 1_024)
        var run = FakeRun(d, marginQuietSeconds: 1)
        let loop = Cue(name: "loop", stereo: [Float](repeating: 0.01, count: 4_800 * 2))
        run.play(loop, id: 1, loop: .forever, notify: [])
        run.run(for: 50 * .ms)
        #expect(d.marginsAsked == [128])
        d.missedCyclesToReport = 1
        run.run(for: 50 * .ms)
        #expect(d.marginsAsked == [128, 512])
        #expect(run.stats.marginFrames.load(ordering: .relaxed) == 512)
        #expect(run.stats.missedCycles.load(ordering: .relaxed) == 1)
        run.run(for: 1_010 * .ms)
        #expect(d.marginsAsked == [128, 512, 256])
        #expect(run.stats.marginShrinks.load(ordering: .relaxed) == 1)
        #expect(run.stats.marginGrowths.load(ordering: .relaxed) == 1)
    }

    /// A longer cycle: what the device gives back (made for the shorter one) is written again,
    /// in order, from its mix: no frame of the bed lost, repeated or moved.
    @Test func whatADeviceGivesBackForALongerCycleIsWrittenAgainInOrder() throws {
        let d = FakeDevice(periodFrames: 128, bufferFrames: 2_048, rewindMargin: 0, writeAhead: .fill)
        d.margin = .quantum(start: 128, limit: 1_024)
        d.givesBackOnMargin = true
        var run = FakeRun(d)
        run.play(PlaybackTests.bedCue, id: 1, notify: [])
        run.run(for: 50 * .ms)
        d.missedCyclesToReport = 1
        run.run(for: 200 * .ms)
        #expect(d.marginsAsked == [128, 512])
        let n = min(d.frames, PlaybackTests.bedFrames)
        let wrong = (0..<n).filter { d.frame($0) != PlaybackTests.bed($0) }
        #expect(n > 10_000 && wrong.isEmpty, "\(wrong.count) frames differ from the bed, the first at \(wrong.first ?? -1)")
    }

    /// A device that lingers: after its last cue has sounded the stream runs on, written silence,
    /// for the linger, and is stopped once after it; `status` shows it idle meanwhile. A cycle
    /// missed in that silence is no hole: not counted, and the margin does not grow for it.
    @Test func aLingeringDeviceIsWrittenSilenceThenStoppedOnce() throws {
        let d = FakeDevice(periodFrames: 128, bufferFrames: 2_048, writeAhead: .fill)
        d.lingerNs = 2_000_000_000
        d.margin = .quantum(start: 128, limit: 1_024)
        var run = FakeRun(d)
        run.play(MarginAndLingerTests.pop, id: 1)
        run.run(for: 200 * .ms)
        #expect(run.ends[1]?.reason == .played)
        #expect(run.playback.machine.phase == .lingering)
        #expect(run.stats.sinkState == .idle)
        let before = d.frames
        d.missedCyclesToReport = 1
        run.run(for: 1_000 * .ms)
        #expect(d.frames >= before + 47_000, "wrote \(d.frames - before) frames in a second of linger")
        #expect(d.samples[(2 * before)...].allSatisfy { $0 == 0 })
        #expect(d.stops == 0)
        #expect(run.stats.missedCycles.load(ordering: .relaxed) == 0)
        #expect(run.stats.marginGrowths.load(ordering: .relaxed) == 0)
        run.run(for: 1_100 * .ms)
        #expect(d.stops == 1)
        #expect(run.playback.machine.phase == .idle)
        let stopped = d.frames
        run.run(for: 500 * .ms)
        #expect(d.frames == stopped)
    }

    /// A cue while the stream lingers is mixed into what the device can give back: heard at once.
    @Test func aCueWhileLingeringIsMixedIntoTheSilenceGivenBack() throws {
        let d = FakeDevice(periodFrames: 128, bufferFrames: 2_048, rewindMargin: 0, writeAhead: .fill)
        d.lingerNs = 2_000_000_000
        var run = FakeRun(d)
        run.play(MarginAndLingerTests.pop, id: 1)
        run.run(for: 500 * .ms)
        #expect(run.playback.machine.phase == .lingering)
        let asked = run.now
        run.play(MarginAndLingerTests.pop, id: 2)
        #expect(run.stats.rewinds.load(ordering: .relaxed) == 1)
        run.run(for: 100 * .ms)
        let first = try #require((d.frames / 2..<d.frames).first { d.frame($0) != 0 })
        #expect(d.heardAt[first] <= asked + 1, "heard \(d.heardAt[first] - asked) ns after it was asked for")
    }
}
