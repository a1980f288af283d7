/// Keeps the mix at or below full scale (0 dBFS) instead of clipping it: where voices add
/// up past ±1 (a burst of clicks in phase, loud cues together), the whole mix is turned
/// down just enough, reaching that gain over `attackFrames` before the loud frame (the
/// block being rendered is the look-ahead) and coming back over `releaseFrames`. Below
/// full scale it does nothing: every sample passes unchanged (cued's sample-exact
/// tests hold). Allocation-free after init; owned by the audio thread's mixer.
public struct PeakLimiter {
    /// Ramp down to the needed gain over 1 ms at 48 kHz…
    public let attackFrames: Int
    /// …and back up to 1 over 50 ms.
    public let releaseFrames: Int
    /// The gain on the last frame limited (1: not limiting).
    public private(set) var gain: Float = 1
    /// Frames turned down so far (status, tests).
    public private(set) var limitedFrames = 0
    private let envelope: UnsafeMutablePointer<Float>
    private let capacity: Int

    public init(maxFrames: Int, attackFrames: Int = 48, releaseFrames: Int = 2_400) {
        self.attackFrames = max(1, attackFrames)
        self.releaseFrames = max(1, releaseFrames)
        capacity = maxFrames
        envelope = .allocate(capacity: max(1, maxFrames))
    }

    /// Where a limited frame peaks: −0.001 dBFS.
    public static let ceiling: Float = 0.9999

    /// Back to unity gain (for a pass over frames limited before).
    public mutating func reset() { gain = 1 }

    /// The mixer frees it (a struct cannot have a deinit).
    public func deallocate() { envelope.deallocate() }

    /// Limits `frames` interleaved stereo frames of `mix` in place.
    public mutating func process(_ mix: UnsafeMutablePointer<Float>, frames: Int) {
        precondition(frames <= capacity)
        guard frames > 0 else { return }
        var loudest: Float = 0
        for i in 0..<(frames * 2) { let a = abs(mix[i]); if a > loudest && a.isFinite { loudest = a } }
        if loudest <= 1 && gain == 1 { return }  // the usual case: nothing to do
        // The gain each frame needs, then each lowered early enough (backwards) to be
        // reached by a ramp of `attackFrames`.
        let attack = 1 / Float(attackFrames), release = 1 / Float(releaseFrames)
        var next: Float = 1
        for f in stride(from: frames - 1, through: 0, by: -1) {
            let peak = max(abs(mix[2 * f]), abs(mix[2 * f + 1]))
            // A hair under full scale (16-bit's is 32767/32768, 0.99997), so that rounding never
            // takes a sample past it. Infinity and NaN (only a test's hand-made cue has them)
            // are left to the conversion.
            let need: Float = peak > 1 && peak.isFinite ? Self.ceiling / peak : 1
            next = min(need, next + attack)
            envelope[f] = next
        }
        // Forwards: never up faster than the release.
        var g = gain
        for f in 0..<frames {
            g = min(envelope[f], g + release)
            if g < 1 {
                mix[2 * f] *= g
                mix[2 * f + 1] *= g
                limitedFrames += 1
            }
        }
        gain = g
    }
}
