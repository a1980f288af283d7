@testable import CuedCore
import Testing

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
