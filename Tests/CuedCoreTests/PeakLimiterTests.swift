import CuedCore
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The mix never passes full scale: turned down around a loud stretch (ramping down
/// ahead of it and back up after), untouched everywhere else.
@Suite struct PeakLimiterTests {
    func block(_ frames: Int, _ value: (Int) -> Float) -> [Float] { (0..<frames).flatMap { [value($0), -value($0)] } }

    @Test func belowFullScaleNothingChanges() {
        var l = PeakLimiter(maxFrames: 512)
        defer { l.deallocate() }
        var x = block(512) { Float($0 % 7) / 7 }
        let before = x
        x.withUnsafeMutableBufferPointer { l.process($0.baseAddress!, frames: 512) }
        #expect(x == before)
        #expect(l.gain == 1 && l.limitedFrames == 0)
    }

    @Test func aLoudStretchIsTurnedDownWithRampsAndNeverPassesFullScale() {
        var l = PeakLimiter(maxFrames: 512, attackFrames: 48, releaseFrames: 2_400)
        defer { l.deallocate() }
        // 0.5 everywhere, 2.0 (6 dB over) for frames 200..<220.
        var x = block(512) { (200..<220).contains($0) ? 2 : 0.5 }
        x.withUnsafeMutableBufferPointer { l.process($0.baseAddress!, frames: 512) }
        #expect(x.allSatisfy { abs($0) <= 1 })
        #expect(Array(x[0..<(2 * 152)]) == block(152) { _ in 0.5 })  // untouched before the attack
        #expect(abs(x[2 * 200] - PeakLimiter.ceiling) < 1e-4)  // the loud frames at full scale, not above
        for f in 153..<200 { #expect(x[2 * f] < x[2 * (f - 1)] + 1e-6) }  // down smoothly ahead of it
        for f in 221..<512 { #expect(x[2 * f] >= x[2 * (f - 1)] - 1e-6) }  // then back up, slowly
        #expect(l.gain < 1 && x[2 * 511] < 0.5)  // still recovering at the block's end…
        var y = block(512) { _ in 0.5 }
        for _ in 0..<6 { y = block(512) { _ in 0.5 }; y.withUnsafeMutableBufferPointer { l.process($0.baseAddress!, frames: 512) } }
        #expect(l.gain == 1 && y == block(512) { _ in 0.5 })  // …and back to unity after the release
    }

    @Test func eightVoicesInPhaseAreLimitedNotClipped() {
        let m = Mixer(maxVoices: 8, maxFrames: 480)
        let c = Cue(name: "c", stereo: (0..<4_800).flatMap { i -> [Float] in let v = Float(0.5 * sin(Double(i) / 10)); return [v, v] })
        for _ in 0..<8 { m.start(c, gain: 1) }
        var out = [Int16](repeating: 0, count: 960)
        var clipped = 0
        for _ in 0..<10 {
            m.render(frames: 480)
            clipped += out.withUnsafeMutableBufferPointer { m.convert(frames: 480, toS16: $0.baseAddress!) }
        }
        #expect(clipped == 0)
        #expect(m.limiter.limitedFrames > 0)
        // Without the limiter the same mix clips.
        let raw = Mixer(maxVoices: 8, maxFrames: 480, limiting: false)
        for _ in 0..<8 { raw.start(c, gain: 1) }
        raw.render(frames: 480)
        #expect(out.withUnsafeMutableBufferPointer { raw.convert(frames: 480, toS16: $0.baseAddress!) } > 0)
    }
}
