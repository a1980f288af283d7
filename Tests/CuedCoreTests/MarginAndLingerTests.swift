@testable import CuedCore
import Testing

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
