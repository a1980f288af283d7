import CuedCore
import Testing
#if canImport(Glibc)
import Glibc
#endif

@Suite struct MixerTests {
    /// A constant-valued stereo cue.
    func cue(_ value: Float, frames: Int, name: String = "c") -> Cue {
        Cue(name: name, stereo: [Float](repeating: value, count: frames * 2))
    }

    func rendered(_ m: Mixer, frames: Int) -> [Float] {
        m.render(frames: frames)
        return Array(UnsafeBufferPointer(start: m.mix, count: frames * 2))
    }

    @Test func sumsVoices() {
        let m = Mixer(maxVoices: 4, maxFrames: 8)
        m.start(cue(0.25, frames: 8), gain: 1)
        m.start(cue(0.125, frames: 4), gain: 1)
        let out = rendered(m, frames: 8)
        #expect(Array(out[0..<8]) == [Float](repeating: 0.375, count: 8))
        #expect(Array(out[8..<16]) == [Float](repeating: 0.25, count: 8))
        #expect(!m.isSounding)
    }

    @Test func appliesGain() {
        let m = Mixer(maxVoices: 2, maxFrames: 4)
        m.start(cue(0.5, frames: 4), gain: decibelsToGain(-6.0206))
        let out = rendered(m, frames: 4)
        for v in out { #expect(abs(v - 0.25) < 1e-4) }
        #expect(abs(decibelsToGain(0) - 1) < 1e-7)
    }

    @Test func voiceSpansPeriodsExactly() {
        let samples = (0..<10).flatMap { [Float($0), -Float($0)] }
        let m = Mixer(maxVoices: 1, maxFrames: 4, limiting: false)
        m.start(Cue(name: "ramp", stereo: samples), gain: 1)
        var got: [Float] = []
        for _ in 0..<3 { got += rendered(m, frames: 4) }
        #expect(Array(got[0..<20]) == samples)
        #expect(Array(got[20...]) == [0, 0, 0, 0])
    }

    @Test func stealsOldestWithFade() {
        let m = Mixer(maxVoices: 2, maxFrames: 200, stealFadeFrames: 96)
        m.start(cue(0.1, frames: 1000, name: "a"), gain: 1)
        m.start(cue(0.2, frames: 1000, name: "b"), gain: 1)
        #expect(m.start(cue(0.0, frames: 10, name: "probe"), gain: 1) != .started)  // a is stolen
        #expect(m.activeVoices == 2)
        let out = rendered(m, frames: 200)
        // a fades linearly from 0.1 to 0 over 96 frames (2 ms at 48 kHz); b keeps playing.
        let expected: [(frame: Int, value: Float)] = [(0, 0.3), (48, 0.25), (96, 0.2), (199, 0.2)]
        for e in expected {
            let got: Float = out[2 * e.frame]
            #expect(abs(got - e.value) < 1e-6, "frame \(e.frame)")
        }
        // The fade is monotonic: no click.
        for f in 1..<96 { #expect(out[2 * f] <= out[2 * (f - 1)]) }
    }

    /// One owner holding every voice at the highest priority cannot keep another owner
    /// out: a newcomer under its fair share (voices / owners) takes the oldest voice of
    /// an owner over its share, whatever the priorities; at its share it takes its own.
    @Test func oneOwnerCannotSilenceAnother() {
        let m = Mixer(maxVoices: 16, maxFrames: 64)
        let loud = cue(0.01, frames: 100_000)
        for i in 1...16 { #expect(m.start(loud, id: UInt64(i), gain: 1, priority: 100, owner: 1, loop: .forever) == .started) }
        // Owner 1 alone: its own rules as before (a lower priority is refused).
        #expect(m.start(loud, id: 17, gain: 1, priority: 0, owner: 1) == .refused)
        // Owner 2 at the lowest priority: takes owner 1's oldest, up to its share of 8.
        for k in 0..<8 { #expect(m.start(loud, id: UInt64(100 + k), gain: 1, priority: -100, owner: 2) == .stole(id: UInt64(1 + k))) }
        // At its share it takes its own oldest, not owner 1's 8.
        #expect(m.start(loud, id: 200, gain: 1, priority: -100, owner: 2) == .stole(id: 100))
        // Owner 1, at its share too, takes its own oldest (its priority allows it).
        #expect(m.start(loud, id: 300, gain: 1, priority: 100, owner: 1) == .stole(id: 9))
        // A third owner: share 16 / 3 = 5; both are over it: the lowest priority goes first.
        #expect(m.start(loud, id: 400, gain: 1, priority: 0, owner: 3) == .stole(id: 101))
        #expect(m.activeVoices == 16)
    }

    /// `important` is never refused: it takes the lowest, oldest voice where its priority
    /// would not have been enough; a plain voice of the same owner is refused there.
    @Test func anImportantVoiceIsNeverRefused() {
        let m = Mixer(maxVoices: 4, maxFrames: 64)
        let c = cue(0.01, frames: 100_000)
        for i in 1...4 { m.start(c, id: UInt64(i), gain: 1, priority: 100, owner: 7) }
        #expect(m.start(c, id: 5, gain: 1, priority: 0, owner: 7) == .refused)
        #expect(m.start(c, id: 6, gain: 1, priority: 0, owner: 7, important: true) == .stole(id: 1))
        // With every owner at its share, a newcomer under it falls back to priority.
        let n = Mixer(maxVoices: 2, maxFrames: 64)
        n.start(c, id: 1, gain: 1, priority: 50, owner: 1)
        n.start(c, id: 2, gain: 1, priority: 50, owner: 2)
        #expect(n.start(c, id: 3, gain: 1, priority: 0, owner: 3) == .refused)
        #expect(n.start(c, id: 4, gain: 1, priority: 0, owner: 3, important: true) == .stole(id: 1))
    }

    /// A cue's `max_voices`: past it a new voice of that cue takes the oldest one's place
    /// (or the quietest's), even with slots free; other cues are not touched.
    @Test func aCueNeverHasMoreThanItsVoiceLimit() {
        let m = Mixer(maxVoices: 16, maxFrames: 64)
        let click = cue(0.1, frames: 100_000, name: "click"), other = cue(0.1, frames: 100_000, name: "other")
        m.start(other, id: 99, gain: 1)
        let oldest = CueVoiceLimit(maxVoices: 3)
        let results = (1...5).map { m.start(click, id: UInt64($0), gain: 1, limit: oldest) }
        #expect(results == [.started, .started, .started, .stole(id: 1), .stole(id: 2)])
        #expect(m.activeVoices == 4 && m.contains(99))
        let quietest = CueVoiceLimit(maxVoices: 3, steal: .quietest)
        let n = Mixer(maxVoices: 16, maxFrames: 64)
        for (id, g) in [(1, 0.5), (2, 0.2), (3, 0.9)] as [(UInt64, Float)] { n.start(click, id: id, gain: g, limit: quietest) }
        #expect(n.start(click, id: 4, gain: 0.7, limit: quietest) == .stole(id: 2))
        #expect(n.start(click, id: 5, gain: 0.7, limit: quietest) == .stole(id: 1))
    }

    /// 100 clicks in a second (one every 480 frames, each 2,000 frames long) with a limit of 4:
    /// never more than 4 sound at once, and the mix stays under full scale.
    @Test func aBurstStaysWithinTheLimitAndNeverClips() {
        let m = Mixer(maxVoices: 16, maxFrames: 480)
        let click = Cue(name: "click", stereo: (0..<2_000).flatMap { i -> [Float] in
            let v = Float(0.6 * sin(Double(i) / 5) * exp(-Double(i) / 600)); return [v, v] })
        var most = 0, clipped = 0
        var out = [Float](repeating: 0, count: 960)
        for _ in 0..<100 {
            m.start(click, gain: 1, limit: CueVoiceLimit(maxVoices: 4))
            most = max(most, m.activeVoices)
            m.render(frames: 480)
            clipped += out.withUnsafeMutableBufferPointer { m.convert(frames: 480, toFloat: $0.baseAddress!) }
        }
        #expect(most == 4)
        #expect(clipped == 0)
    }

    @Test func stealCountsOnlyWhenFull() {
        let m = Mixer(maxVoices: 3, maxFrames: 16)
        let steals = (0..<5).map { _ in m.start(cue(0.1, frames: 100), gain: 1) != .started }
        #expect(steals == [false, false, false, true, true])
    }

    @Test func clipsAndCounts() {
        let m = Mixer(maxVoices: 4, maxFrames: 4, limiting: false)
        m.start(cue(0.75, frames: 4), gain: 1)
        m.start(cue(0.75, frames: 2), gain: 1)
        m.render(frames: 4)
        var s16 = [Int16](repeating: 0, count: 8)
        let clipped = s16.withUnsafeMutableBufferPointer { m.convert(frames: 4, toS16: $0.baseAddress!) }
        #expect(clipped == 4)
        #expect(s16 == [32767, 32767, 32767, 32767, 24576, 24576, 24576, 24576])
        var f = [Float](repeating: 0, count: 8)
        let clippedF = f.withUnsafeMutableBufferPointer { m.convert(frames: 4, toFloat: $0.baseAddress!) }
        #expect(clippedF == 4)
        #expect(f == [1, 1, 1, 1, 0.75, 0.75, 0.75, 0.75])
    }

    @Test func negativeClipNeverWraps() {
        let m = Mixer(maxVoices: 2, maxFrames: 1, limiting: false)
        m.start(cue(-0.9, frames: 1), gain: 1)
        m.start(cue(-0.9, frames: 1), gain: 1)
        m.render(frames: 1)
        var s16 = [Int16](repeating: 0, count: 2)
        _ = s16.withUnsafeMutableBufferPointer { m.convert(frames: 1, toS16: $0.baseAddress!) }
        #expect(s16 == [-32768, -32768])
    }

    @Test func sixteenBitRoundTripIsExact() {
        let values: [Int16] = [-32768, -1, 0, 1, 12345, 32767]
        let m = Mixer(maxVoices: 1, maxFrames: 6)
        m.start(Cue(name: "x", stereo: values.flatMap { [Float($0) / 32768, Float($0) / 32768] }), gain: 1)
        m.render(frames: 6)
        var s16 = [Int16](repeating: 0, count: 12)
        let clipped = s16.withUnsafeMutableBufferPointer { m.convert(frames: 6, toS16: $0.baseAddress!) }
        #expect(clipped == 0)
        #expect(s16 == values.flatMap { [$0, $0] })
    }

    @Test func muteFadeReachesSilenceWithin5ms() {
        let m = Mixer(maxVoices: 4, maxFrames: 480)
        m.start(cue(0.5, frames: 48_000), gain: 1)
        m.start(cue(0.25, frames: 48_000), gain: 1)
        _ = rendered(m, frames: 100)
        m.fadeOutAll(frames: 192)  // 4 ms at 48 kHz
        let out = rendered(m, frames: 240)  // 5 ms
        #expect(abs(out[0] - 0.75) < 1e-6)
        for f in 192..<240 { #expect(out[2 * f] == 0) }
        #expect(!m.isSounding)
    }

    /// A float file may hold NaN or ±infinity (and +max plus -max overflows to NaN):
    /// `Int16(NaN)` traps, which killed the audio thread and the daemon with it.
    @Test func nonFiniteSamplesBecomeSilenceOrFullScaleNeverATrap() {
        let m = Mixer(maxVoices: 4, maxFrames: 4)
        m.start(Cue(name: "odd", stereo: [.nan, .nan, .infinity, -.infinity, 3e38, -3e38, 0.5, 0.5]), gain: 1)
        m.start(Cue(name: "max", stereo: [0, 0, 0, 0, 3e38, -3e38, 0, 0]), gain: 4)  // 3e38 × 4: +inf, -inf
        m.start(Cue(name: "neg", stereo: [0, 0, 0, 0, -3e38, 3e38, 0, 0]), gain: 4)  // +inf + -inf: NaN
        m.render(frames: 4)
        var s16 = [Int16](repeating: 7, count: 8)
        let clipped = s16.withUnsafeMutableBufferPointer { m.convert(frames: 4, toS16: $0.baseAddress!) }
        #expect(s16 == [0, 0, 32767, -32768, 0, 0, 16384, 16384])
        #expect(clipped == 2)
        var f = [Float](repeating: 7, count: 8)
        _ = f.withUnsafeMutableBufferPointer { m.convert(frames: 4, toFloat: $0.baseAddress!) }
        #expect(f == [0, 0, 1, -1, 0, 0, 0.5, 0.5])
    }

    /// A voice started into frames already rendered (what a rewinding device gave
    /// back) is added to them from their first frame, then goes on at the next render.
    @Test func aVoiceMixedIntoRenderedFramesGoesOnWhereItLeftOff() {
        let m = Mixer(maxVoices: 2, maxFrames: 4)
        m.start(cue(0.5, frames: 100, name: "bed"), gain: 1)
        m.render(frames: 4)
        var given = [Float](repeating: 0.5, count: 6)  // 3 frames of the bed, given back
        let ramp = (1...10).flatMap { [Float($0) / 100, -Float($0) / 100] }
        _ = given.withUnsafeMutableBufferPointer {
            m.start(Cue(name: "ramp", stereo: ramp), id: 9, gain: 1, requestTime: 42, mixedInto: $0.baseAddress!, frames: 3)
        }
        #expect(given == [0.51, 0.49, 0.52, 0.48, 0.53, 0.47])
        #expect(m.startedCount == 1 && m.startedRequestTimes[0] == 42)
        let next = rendered(m, frames: 4)  // the bed's frames 4…7 plus the ramp's 4th to 7th
        #expect(next == [0.54, 0.46, 0.55, 0.45, 0.56, 0.44, 0.57, 0.43])
        #expect(m.startedCount == 0)  // started once, in the frames given back
        _ = rendered(m, frames: 4)
        #expect(m.endedCount == 1 && m.ended[0].id == 9 && m.ended[0].reason == .played && m.ended[0].lastFrame == 2)
    }

    /// A cue shorter than the frames given back ends in them: reported there.
    @Test func aShortVoiceMixedInEndsThere() {
        let m = Mixer(maxVoices: 2, maxFrames: 4)
        var given = [Float](repeating: 0, count: 8)
        _ = given.withUnsafeMutableBufferPointer {
            m.start(cue(0.25, frames: 2), id: 5, gain: 1, mixedInto: $0.baseAddress!, frames: 4)
        }
        #expect(given == [0.25, 0.25, 0.25, 0.25, 0, 0, 0, 0])
        #expect(m.endedCount == 1 && m.ended[0].id == 5 && m.ended[0].lastFrame == 1)
        #expect(!m.isSounding)
    }

    @Test func reportsStartedVoices() {
        let m = Mixer(maxVoices: 4, maxFrames: 8)
        m.start(cue(0.1, frames: 20), gain: 1, requestTime: 111)
        m.start(cue(0.1, frames: 20), gain: 1, requestTime: 222)
        m.render(frames: 8)
        #expect(m.startedCount == 2)
        #expect(Set(m.startedRequestTimes[0..<2]) == [111, 222])
        m.render(frames: 8)
        #expect(m.startedCount == 0)
    }

    /// A mono cue (kept mono in memory) plays on both sides exactly as a stereo copy of it
    /// does: at its own rate and resampled, at a gain, looped, and faded by a stop.
    @Test(arguments: [1.0, 1.5, 0.75])
    func aMonoCuePlaysOnBothSidesAsItsStereoCopy(rate: Double) {
        let mono = (0..<3_000).map { Float(($0 * 7_919) % 2_001 - 1_000) / 2_000 }
        let fromMono = played(Cue(name: "m", mono: mono), rate: rate)
        let fromStereo = played(Cue(name: "s", stereo: mono.flatMap { [$0, $0] }), rate: rate)
        let firstDifference = zip(fromMono, fromStereo).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? -1
        #expect(Cue(name: "m", mono: mono).frames == 3_000 && Cue(name: "m", mono: mono).channels == 1)
        #expect(fromMono.contains { $0 != 0 } && fromMono == fromStereo, "first difference at sample \(firstDifference)")
    }

    /// `cue` played three times at `rate` and gain 0.7, stopped with a 300-frame fade in its 31st period.
    func played(_ cue: Cue, rate: Double) -> [Float] {
        let m = Mixer(maxVoices: 2, maxFrames: 256, limiting: false)
        m.start(cue, gain: 0.7, rate: rate, loop: .times(3))
        var out: [Float] = []
        for k in 0..<40 {
            if k == 30 { _ = m.stop(fadeFrames: 300, reason: .stoppedByID) { _ in true } }
            out += rendered(m, frames: 256)
        }
        return out
    }
}

@Suite struct DeviceClockTests {
    @Test func pacesAtTheSampleRate() {
        // 4,800 frames at 48 kHz through a 480-frame buffer must take ≥ 90 ms
        // (100 ms less the one buffer that may be ahead). No upper bound: timing tests must not flake.
        var clock = DeviceClock(rate: 48_000, bufferFrames: 480)
        let start = MonotonicClock.now()
        for _ in 0..<20 { clock.write(frames: 240) }
        MonotonicClock.sleep(until: MonotonicClock.now() + UInt64(clock.delay()) * 1_000_000_000 / 48_000)  // the pace is what is measured: play out what is queued
        let elapsed = MonotonicClock.now() - start
        #expect(elapsed >= 95_000_000, "took \(elapsed / 1_000_000) ms")
    }

}
