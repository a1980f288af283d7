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

    public static let names = ["psst1", "psst2", "pop", "fail"]

    public static func render(_ name: String) -> [Double]? {
        switch name {
        case "psst1": return normalise(psst1())
        case "psst2": return normalise(psst2())
        case "pop": return normalise(pop())
        case "fail": return normalise(fail())
        default: return nil
        }
    }

    /// psst1: airy band-passed noise whose centre rises 2.8 → 6.5 kHz; 180 ms.
    static func psst1() -> [Double] {
        let duration = 0.180
        let env = Envelope(preRoll: 0.001, attack: 0.012, decayTau: 0.055, release: 0.030, tail: 0.0015)
        return sweptNoise(seed: 0x7073_7374_31, duration: duration, envelope: env,
                          centre: { t in 2_800 * pow(6_500 / 2_800, t / duration) }, q: 1.6)
    }

    /// psst2: a lower, falling woosh, 2.2 kHz → 700 Hz, longer and softer-edged; 300 ms.
    static func psst2() -> [Double] {
        let duration = 0.300
        let env = Envelope(preRoll: 0.001, attack: 0.030, decayTau: 0.110, release: 0.060, tail: 0.0015)
        return sweptNoise(seed: 0x7073_7374_32, duration: duration, envelope: env,
                          centre: { t in 2_200 * pow(700 / 2_200, t / duration) }, q: 1.2)
    }

    /// pop: a bubble — a sine with a fast downward glide (1.1 kHz → 380 Hz)
    /// plus a quieter second partial, exponential decay; 90 ms.
    static func pop() -> [Double] {
        let duration = 0.090
        let env = Envelope(preRoll: 0.001, attack: 0.002, decayTau: 0.018, release: 0.025, tail: 0.0015)
        var fundamental = GlidingOscillator(from: 1_100, to: 380, tau: 0.012, sampleRate: sampleRate)
        var out = [Double](repeating: 0, count: Int(duration * sampleRate))
        for i in out.indices {
            let t = Double(i) / sampleRate
            let p = fundamental.nextPhase(at: t)
            out[i] = env.gain(at: t, duration: duration) * (sin(p) + 0.25 * sin(2 * p))
        }
        return removeDC(out, envelope: env, duration: duration)
    }

    /// fail: "didn't work" — two soft, low notes falling a minor third
    /// (294 → 247 Hz, D4 → B3), each a sine with partials 2–4 (enough to be
    /// heard on small speakers) that settles from 2 % sharp (a soft "bonk",
    /// not a beep); gentler attacks than pop's, no partial above 1.2 kHz; 200 ms.
    static func fail() -> [Double] {
        let duration = 0.200
        let notes: [(start: Double, length: Double, hz: Double, envelope: Envelope)] = [
            (0.000, 0.095, 293.66, Envelope(preRoll: 0.001, attack: 0.005, decayTau: 0.035, release: 0.030, tail: 0)),
            (0.085, 0.115, 246.94, Envelope(preRoll: 0, attack: 0.006, decayTau: 0.050, release: 0.045, tail: 0.0015)),
        ]
        var out = [Double](repeating: 0, count: Int(duration * sampleRate))
        var gains = out
        for note in notes {
            let first = Int(note.start * sampleRate)
            var phase = 0.0
            for i in 0..<min(Int(note.length * sampleRate), out.count - first) {
                let t = Double(i) / sampleRate
                let g = note.envelope.gain(at: t, duration: note.length)
                out[first + i] += g * (sin(phase) + 0.7 * sin(2 * phase) + 0.45 * sin(3 * phase) + 0.2 * sin(4 * phase))
                gains[first + i] += g
                phase += 2 * Double.pi * note.hz * (1 + 0.02 * exp(-t / 0.015)) / sampleRate
                if phase > 2 * Double.pi { phase -= 2 * Double.pi }
            }
        }
        return removeDC(out, gains: gains)
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
