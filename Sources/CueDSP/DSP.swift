// Small, readable DSP for synthesizing cued's cues. Everything here is
// deterministic: seeded noise, no clocks, no machine-dependent state.

/// SplitMix64: tiny, fast, and fully specified, so a seed gives the same noise
/// on every machine.
public struct SeededNoise: Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func nextUInt64() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// White noise, uniform in [-1, 1), built from 53 random bits.
    public mutating func next() -> Double {
        Double(nextUInt64() >> 11) * (2.0 / 9_007_199_254_740_992.0) - 1.0
    }
}

/// RBJ-cookbook biquad in transposed direct form II. Coefficients can be
/// changed every sample (for a sweeping centre) without resetting state.
public struct Biquad: Sendable {
    private var b0 = 1.0, b1 = 0.0, b2 = 0.0, a1 = 0.0, a2 = 0.0
    private var z1 = 0.0, z2 = 0.0
    public let sampleRate: Double

    public init(sampleRate: Double) { self.sampleRate = sampleRate }

    /// Band-pass with constant 0 dB peak gain at `centre`.
    public mutating func setBandPass(centre: Double, q: Double) {
        let w = 2 * Double.pi * centre / sampleRate
        let alpha = sin(w) / (2 * q)
        let a0 = 1 + alpha
        b0 = alpha / a0; b1 = 0; b2 = -alpha / a0
        a1 = -2 * cos(w) / a0; a2 = (1 - alpha) / a0
    }

    public mutating func setHighPass(cutoff: Double, q: Double = 0.7071) {
        let w = 2 * Double.pi * cutoff / sampleRate
        let alpha = sin(w) / (2 * q), c = cos(w)
        let a0 = 1 + alpha
        b0 = (1 + c) / 2 / a0; b1 = -(1 + c) / a0; b2 = (1 + c) / 2 / a0
        a1 = -2 * c / a0; a2 = (1 - alpha) / a0
    }

    public mutating func setLowPass(cutoff: Double, q: Double = 0.7071) {
        let w = 2 * Double.pi * cutoff / sampleRate
        let alpha = sin(w) / (2 * q), c = cos(w)
        let a0 = 1 + alpha
        b0 = (1 - c) / 2 / a0; b1 = (1 - c) / a0; b2 = (1 - c) / 2 / a0
        a1 = -2 * c / a0; a2 = (1 - alpha) / a0
    }

    public mutating func process(_ x: Double) -> Double {
        let y = b0 * x + z1
        z1 = b1 * x - a1 * y + z2
        z2 = b2 * x - a2 * y
        return y
    }
}

/// Amplitude envelope: silent pre-roll, raised-cosine attack, exponential
/// decay, raised-cosine release to exactly zero, silent tail. The silent edges
/// guarantee that a cue never clicks when it starts or stops.
public struct Envelope: Sendable {
    public var preRoll: Double      // seconds of silence before the attack
    public var attack: Double       // seconds
    public var decayTau: Double     // exponential time constant, seconds
    public var release: Double      // seconds of raised-cosine fade to zero
    public var tail: Double         // seconds of silence at the end

    public init(preRoll: Double, attack: Double, decayTau: Double, release: Double, tail: Double) {
        self.preRoll = preRoll; self.attack = attack; self.decayTau = decayTau
        self.release = release; self.tail = tail
    }

    /// Gain at time `t` for a cue of total length `duration`.
    public func gain(at t: Double, duration: Double) -> Double {
        let start = preRoll, peak = preRoll + attack
        let releaseEnd = duration - tail, releaseStart = releaseEnd - release
        if t < start || t >= releaseEnd { return 0 }
        var g = 1.0
        if t < peak { g = 0.5 - 0.5 * cos(Double.pi * (t - start) / attack) }
        else { g = exp(-(t - peak) / decayTau) }
        if t > releaseStart { g *= 0.5 + 0.5 * cos(Double.pi * (t - releaseStart) / release) }
        return g
    }
}

/// Sine oscillator whose frequency glides exponentially from `from` to `to`
/// with time constant `tau`, integrating phase so the glide is click-free.
public struct GlidingOscillator: Sendable {
    public let from: Double, to: Double, tau: Double, sampleRate: Double
    private var phase = 0.0

    public init(from: Double, to: Double, tau: Double, sampleRate: Double) {
        self.from = from; self.to = to; self.tau = tau; self.sampleRate = sampleRate
    }

    public func frequency(at t: Double) -> Double { to + (from - to) * exp(-t / tau) }

    /// Returns the phase (radians) at time t and advances by one sample.
    public mutating func nextPhase(at t: Double) -> Double {
        let p = phase
        phase += 2 * Double.pi * frequency(at: t) / sampleRate
        if phase > 2 * Double.pi { phase -= 2 * Double.pi }
        return p
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
