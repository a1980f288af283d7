#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The recipes for cued's cues. Each returns mono samples at
/// `CueRecipes.sampleRate`, normalised to `targetLoudness` (gated RMS, dBFS).
public enum CueRecipes {
    public static let sampleRate = 48_000.0
    /// Gated RMS every cue is normalised to; leaves headroom below -1 dBFS peak.
    public static let targetLoudness = -20.0

    public static let names = ["psst1", "psst2", "pop", "fail", "tick"]

    /// Each cue's variants (1 is the cue's own file, `NAME.wav`; N ≥ 2 is `NAME-N.wav`):
    /// the same recipe with its own noise and a few per cent off in pitch, glide and
    /// length, so that a cue heard many times in a row never repeats exactly.
    public static let variants = 3

    /// Every file cuesynth writes: the cue, its variant, the file name.
    public static var files: [(name: String, variant: Int, file: String)] {
        names.flatMap { n in (1...variants).map { v in (n, v, v == 1 ? "\(n).wav" : "\(n)-\(v).wav") } }
    }

    public static func render(_ name: String, variant: Int = 1) -> [Double]? {
        guard (1...variants).contains(variant) else { return nil }
        let v = Variation(variant)
        switch name {
        case "psst1": return normalise(psst1(v))
        case "psst2": return normalise(psst2(v))
        case "pop": return normalise(pop(v))
        case "fail": return normalise(fail(v))
        case "tick": return normalise(tick(v))
        default: return nil
        }
    }

    /// How a variant departs from the cue (variant 1: not at all). Small on purpose:
    /// a shuffled variant must still be the same cue to the ear.
    struct Variation {
        /// Added to the noise seed.
        let seed: UInt64
        /// Frequencies times this.
        let pitch: Double
        /// Durations and time constants times this.
        let time: Double
        /// A second partial's weight times this.
        let colour: Double
        init(_ variant: Int) {
            let table: [(pitch: Double, time: Double, colour: Double)] = [(1, 1, 1), (1.045, 0.94, 1.2), (0.96, 1.07, 0.8)]
            let t = table[(variant - 1) % table.count]
            seed = UInt64(variant - 1) &* 0x9E37_79B9
            pitch = t.pitch; time = t.time; colour = t.colour
        }
    }

    /// psst1: airy band-passed noise whose centre rises 2.8 → 6.5 kHz; 180 ms.
    static func psst1(_ v: Variation) -> [Double] {
        let duration = 0.180 * v.time
        let env = Envelope(preRoll: 0.001, attack: 0.012, decayTau: 0.055 * v.time, release: 0.030, tail: 0.0015)
        return sweptNoise(seed: 0x7073_7374_31 &+ v.seed, duration: duration, envelope: env,
                          centre: { t in 2_800 * v.pitch * pow(6_500 / 2_800, t / duration) }, q: 1.6)
    }

    /// psst2: a lower, falling woosh, 2.2 kHz → 700 Hz, longer and softer-edged; 300 ms.
    static func psst2(_ v: Variation) -> [Double] {
        let duration = 0.300 * v.time
        let env = Envelope(preRoll: 0.001, attack: 0.030, decayTau: 0.110 * v.time, release: 0.060, tail: 0.0015)
        return sweptNoise(seed: 0x7073_7374_32 &+ v.seed, duration: duration, envelope: env,
                          centre: { t in 2_200 * v.pitch * pow(700 / 2_200, t / duration) }, q: 1.2)
    }

    /// pop: a bubble — a sine with a fast downward glide (1.1 kHz → 380 Hz)
    /// plus a quieter second partial, exponential decay; 90 ms.
    static func pop(_ v: Variation) -> [Double] {
        let duration = 0.090 * v.time
        let env = Envelope(preRoll: 0.001, attack: 0.002, decayTau: 0.018 * v.time, release: 0.025, tail: 0.0015)
        var fundamental = GlidingOscillator(from: 1_100 * v.pitch, to: 380 * v.pitch, tau: 0.012 * v.time, sampleRate: sampleRate)
        var out = [Double](repeating: 0, count: Int(duration * sampleRate))
        for i in out.indices {
            let t = Double(i) / sampleRate
            let p = fundamental.nextPhase(at: t)
            out[i] = env.gain(at: t, duration: duration) * (sin(p) + 0.25 * v.colour * sin(2 * p))
        }
        return removeDC(out, envelope: env, duration: duration)
    }

    /// fail: "didn't work" — two soft, low notes falling a minor third
    /// (294 → 247 Hz, D4 → B3), each a sine with partials 2–4 (enough to be
    /// heard on small speakers) that settles from 2 % sharp (a soft "bonk",
    /// not a beep); gentler attacks than pop's, no partial above 1.2 kHz; 200 ms.
    static func fail(_ v: Variation) -> [Double] {
        let duration = 0.200
        // Notes a little off in pitch and decay per variant; the minor third and the timing stay.
        let notes: [(start: Double, length: Double, hz: Double, envelope: Envelope)] = [
            (0.000, 0.095, 293.66 * v.pitch, Envelope(preRoll: 0.001, attack: 0.005, decayTau: 0.035 * v.time, release: 0.030, tail: 0)),
            (0.085, 0.115, 246.94 * v.pitch, Envelope(preRoll: 0, attack: 0.006, decayTau: 0.050 * v.time, release: 0.045, tail: 0.0015)),
        ]
        var out = [Double](repeating: 0, count: Int(duration * sampleRate))
        var gains = out
        for note in notes {
            let first = Int(note.start * sampleRate)
            var phase = 0.0
            for i in 0..<min(Int(note.length * sampleRate), out.count - first) {
                let t = Double(i) / sampleRate
                let g = note.envelope.gain(at: t, duration: note.length)
                out[first + i] += g * (sin(phase) + 0.7 * v.colour * sin(2 * phase) + 0.45 * sin(3 * phase) + 0.2 * sin(4 * phase))
                gains[first + i] += g
                phase += 2 * Double.pi * note.hz * (1 + 0.02 * exp(-t / 0.015)) / sampleRate
                if phase > 2 * Double.pi { phase -= 2 * Double.pi }
            }
        }
        return removeDC(out, gains: gains)
    }

    /// tick: a detent of the pull you can hear (`[pull] detent_points`): a tiny damped
    /// click, a 3.2 kHz partial over a breath of band-passed noise, gone in 16 ms; soft by
    /// design (cued plays it 12 dB under the other cues by default).
    static func tick(_ v: Variation) -> [Double] {
        let duration = 0.016
        let env = Envelope(preRoll: 0.001, attack: 0.0008, decayTau: 0.0022 * v.time, release: 0.004, tail: 0.0015)
        let noise = sweptNoise(seed: 0x7469_636B &+ v.seed, duration: duration, envelope: env, centre: { _ in 4_500 * v.pitch }, q: 2)
        var out = noise.map { 0.5 * $0 }
        var phase = 0.0
        for i in out.indices {
            let t = Double(i) / sampleRate
            out[i] += env.gain(at: t, duration: duration) * sin(phase)
            phase += 2 * Double.pi * 3_200 * v.pitch / sampleRate
        }
        return removeDC(out, envelope: env, duration: duration)
    }

    static func sweptNoise(seed: UInt64, duration: Double, envelope: Envelope,
                           centre: (Double) -> Double, q: Double) -> [Double] {
        var noise = SeededNoise(seed: seed)
        // Two cascaded band-passes give a steeper, more "breathy" band than one.
        var bp1 = Biquad(sampleRate: sampleRate), bp2 = Biquad(sampleRate: sampleRate)
        var out = [Double](repeating: 0, count: Int(duration * sampleRate))
        for i in out.indices {
            let t = Double(i) / sampleRate
            let c = centre(t)
            bp1.setBandPass(centre: c, q: q)
            bp2.setBandPass(centre: c, q: q)
            out[i] = envelope.gain(at: t, duration: duration) * bp2.process(bp1.process(noise.next()))
        }
        return out
    }

    /// A decaying sine has a net offset. Subtracting a scaled copy of the
    /// envelope removes it exactly while keeping the edges exactly silent.
    static func removeDC(_ x: [Double], envelope: Envelope, duration: Double) -> [Double] {
        removeDC(x, gains: x.indices.map { envelope.gain(at: Double($0) / sampleRate, duration: duration) })
    }

    /// The same with the envelope given sample by sample (several notes).
    static func removeDC(_ x: [Double], gains: [Double]) -> [Double] {
        let offset = x.reduce(0, +) / gains.reduce(0, +)
        return x.indices.map { x[$0] - offset * gains[$0] }
    }

    /// Scales to `targetLoudness` gated RMS. The gate (-40 dBFS) depends on the
    /// level, so a few passes converge.
    static func normalise(_ x: [Double]) -> [Double] {
        var y = x
        for _ in 0..<4 {
            let rms = CueAnalysis.gatedRMS(y)
            let gain = pow(10, targetLoudness / 20) / rms
            y = y.map { $0 * gain }
        }
        return y
    }

    /// Rounds to 16-bit PCM (no dither: the cues are far above the noise floor,
    /// and rounding keeps the output exactly reproducible).
    public static func toInt16(_ x: [Double]) -> [Int16] {
        x.map { Int16(max(-32768, min(32767, ($0 * 32768).rounded()))) }
    }
}
