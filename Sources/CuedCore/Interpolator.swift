#if canImport(Glibc)
import Glibc
#endif

/// Band-limited interpolation of a cue read at another rate (`play … rate=R`, `pitch=`,
/// a cue's pitch jitter): Smith's "bandlimited interpolation" (his resample, the sinc
/// converters of libsamplerate), a Kaiser-windowed sinc read from a table. Reading faster
/// than 1 (pitch up) narrows the kernel's pass band to the new Nyquist frequency, so what
/// would fold back (aliasing) is filtered out first; reading slower leaves it at the
/// source's. Chosen by measurement against libsamplerate's best converter on the shipped
/// cues (docs/decisions/0001-voice-resampling.md): below 80 % of the band each rate can
/// hold, this kernel is 75 dB or more from the reference at rates 0.5…2, linear
/// interpolation 31–34 dB on psst1 (its noise dulled and folded back).
///
/// Immutable after init: the mixer makes one at its own init, and the audio thread only
/// reads it (no allocation, no locks).
public final class Interpolator: @unchecked Sendable {
    /// Zero crossings of the sinc each side of the centre (at rate ≤ 1: 16 taps).
    public let zeroCrossings: Int
    /// Table points per zero crossing (between them, linear interpolation of the table).
    public let resolution: Int
    /// The kernel h(x) for x = i / resolution, i in 0...zeroCrossings × resolution, then a 0.
    private let table: UnsafeMutablePointer<Float>
    /// table[i + 1] - table[i].
    private let deltas: UnsafeMutablePointer<Float>
    private let points: Int
    /// The pass band's edge as a share of the output's Nyquist frequency (or the source's,
    /// reading slower): a little below 1 leaves the kernel room to attenuate before the fold.
    public let rolloff: Double

    public static let minRate = 0.5
    public static let maxRate = 2.0

    public init(zeroCrossings: Int = 8, resolution: Int = 256, beta: Double = 7.5, rolloff: Double = 1) {
        self.zeroCrossings = zeroCrossings
        self.resolution = resolution
        self.rolloff = rolloff
        points = zeroCrossings * resolution + 1
        table = .allocate(capacity: points + 1)
        deltas = .allocate(capacity: points + 1)
        let i0beta = Self.besselI0(beta)
        for i in 0..<points {
            let x = Double(i) / Double(resolution)
            let sinc = x == 0 ? 1 : sin(Double.pi * x) / (Double.pi * x)
            let r = x / Double(zeroCrossings)
            let window = Self.besselI0(beta * (1 - r * r).squareRoot()) / i0beta
            table[i] = Float(sinc * window)
        }
        table[points] = 0
        for i in 0..<points { deltas[i] = table[i + 1] - table[i] }
        deltas[points] = 0
    }

    deinit {
        table.deallocate()
        deltas.deallocate()
    }

    /// The zeroth-order modified Bessel function of the first kind (the Kaiser window's).
    static func besselI0(_ x: Double) -> Double {
        var sum = 1.0, term = 1.0, k = 1.0
        while term > 1e-12 * sum {
            term *= (x / (2 * k)) * (x / (2 * k))
            sum += term
            k += 1
        }
        return sum
    }

    /// Mixes `frames` output frames of interleaved `source` (`count` frames of `channels`: 2, or
    /// 1, read for both sides), read from frame `position + phase` onward at `step` source frames per output frame, times
    /// `gain` (faded linearly from `fadeFrom` over `fadeLength` frames when `fadeFrom >= 0`),
    /// into `out`. `wrap`: frames past the end (and, once `looped`, before the start) come
    /// from the other end, as a loop plays them; otherwise they are silence.
    @inline(__always)
    public func mix(_ source: UnsafeBufferPointer<Float>, channels: Int = 2, count: Int, position: Int, phase: Double, step: Double,
             frames: Int, gain: Float, fadeFrom: Int, fadeLength: Int, wrap: Bool, looped: Bool, into out: UnsafeMutablePointer<Float>) {
        guard count > 0, let src = source.baseAddress else { return }
        let cutoff = rolloff * min(1.0, 1 / step)
        let scale = cutoff * Double(resolution)
        let reach = Double(zeroCrossings) / cutoff
        var t = Double(position) + phase
        for f in 0..<frames {
            var l: Float = 0, r: Float = 0
            let first = Int((t - reach).rounded(.down)) + 1
            let last = Int((t + reach).rounded(.down))
            var k = first
            while k <= last {
                var at = k
                if at < 0 || at >= count {
                    guard wrap, at >= count || looped else { k += 1; continue }
                    at %= count
                    if at < 0 { at += count }
                }
                let x = abs(t - Double(k)) * scale
                let i = Int(x)
                if i < points {
                    let h = table[i] + Float(x - Double(i)) * deltas[i]
                    l += src[channels * at] * h
                    r += src[channels * at + channels - 1] * h
                }
                k += 1
            }
            var g = gain * Float(cutoff)
            if fadeFrom >= 0 { g *= Float(fadeFrom - f) / Float(fadeLength) }
            out[2 * f] += l * g
            out[2 * f + 1] += r * g
            t += step
        }
    }
}
