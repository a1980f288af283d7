/// The mix to the device's sample format: 16-bit or float, clipped at full scale (the limiter
/// keeps the mix below it; frames mixed again after a rewind, or the raw sum in tests, may not be).
extension Mixer {
    /// How many samples of `frames` frames of `source` a conversion to `format` clips
    /// (what `convert` returns for them).
    public static func clipped(_ source: UnsafePointer<Float>, frames: Int, format: SampleFormat) -> Int {
        var n = 0
        switch format {
        case .s16:
            for i in 0..<(frames * 2) { let v = source[i] * 32768; if v > 32767 || v < -32768 { n += 1 } }
        case .float:
            for i in 0..<(frames * 2) { let v = source[i]; if v > 1 || v < -1 { n += 1 } }
        }
        return n
    }

    /// Converts the last `frames` mixed frames (or `frames` frames of `source`) to
    /// 16-bit, clipping; returns how many samples had to be clipped.
    public func convert(frames: Int, from source: UnsafePointer<Float>? = nil, toS16 out: UnsafeMutablePointer<Int16>) -> Int {
        var clipped = 0
        do {
            let m = source ?? UnsafePointer(mix)
            for i in 0..<(frames * 2) {
                let v = m[i] * 32768
                if v > 32767 { out[i] = 32767; clipped += 1 }
                else if v >= -32768 { out[i] = Int16(v < 0 ? v - 0.5 : v + 0.5) }  // round half away from zero, as .rounded(), without libm
                else if v < -32768 { out[i] = -32768; clipped += 1 }
                else { out[i] = 0 }  // NaN (a file's own, or +inf and -inf mixed): Int16(NaN) would trap
            }
        }
        return clipped
    }

    /// Converts to float, clipping to [-1, 1]; returns the clipped count.
    public func convert(frames: Int, from source: UnsafePointer<Float>? = nil, toFloat out: UnsafeMutablePointer<Float>) -> Int {
        var clipped = 0
        do {
            let m = source ?? UnsafePointer(mix)
            for i in 0..<(frames * 2) {
                let v = m[i]
                if v > 1 { out[i] = 1; clipped += 1 }
                else if v >= -1 { out[i] = v }
                else if v < -1 { out[i] = -1; clipped += 1 }
                else { out[i] = 0 }  // NaN: never handed to a device
            }
        }
        return clipped
    }
}
