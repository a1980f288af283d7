#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Measurements used to tune the cues and, in tests, to hold them to the
/// quality bars. Samples are mono, full scale = 1.0.
public enum CueAnalysis {
    public static func dBFS(_ amplitude: Double) -> Double { 20 * log10(max(amplitude, 1e-12)) }

    public static func peak(_ x: [Double]) -> Double { x.reduce(0) { max($0, abs($1)) } }

    public static func dcOffset(_ x: [Double]) -> Double { x.reduce(0, +) / Double(max(x.count, 1)) }

    /// RMS over the samples whose magnitude is above `gateDB` (default -40 dBFS).
    public static func gatedRMS(_ x: [Double], gateDB: Double = -40) -> Double {
        let gate = pow(10, gateDB / 20)
        var sum = 0.0, n = 0
        for s in x where abs(s) > gate { sum += s * s; n += 1 }
        return n == 0 ? 0 : (sum / Double(n)).squareRoot()
    }

    /// Power spectrum of the whole signal, zero-padded to a power of two.
    /// Returns (bin width in Hz, power per bin up to Nyquist).
    public static func powerSpectrum(_ x: [Double], sampleRate: Double) -> (binHz: Double, power: [Double]) {
        var n = 1
        while n < x.count { n <<= 1 }
        var re = x + [Double](repeating: 0, count: n - x.count)
        var im = [Double](repeating: 0, count: n)
        fft(&re, &im)
        let power = (0...(n / 2)).map { re[$0] * re[$0] + im[$0] * im[$0] }
        return (sampleRate / Double(n), power)
    }

    /// Power-weighted mean frequency.
    public static func spectralCentroid(_ x: [Double], sampleRate: Double) -> Double {
        let (binHz, p) = powerSpectrum(x, sampleRate: sampleRate)
        var num = 0.0, den = 0.0
        for (i, v) in p.enumerated() { num += Double(i) * binHz * v; den += v }
        return den == 0 ? 0 : num / den
    }

    /// Fraction of the signal's energy below `hz`.
    public static func energyFraction(below hz: Double, _ x: [Double], sampleRate: Double) -> Double {
        let (binHz, p) = powerSpectrum(x, sampleRate: sampleRate)
        let total = p.reduce(0, +)
        let low = p.enumerated().filter { Double($0.offset) * binHz < hz }.reduce(0) { $0 + $1.element }
        return total == 0 ? 0 : low / total
    }

    /// In-place iterative radix-2 FFT; `re.count` must be a power of two.
    public static func fft(_ re: inout [Double], _ im: inout [Double]) {
        let n = re.count
        var j = 0
        for i in 1..<n {
            var bit = n >> 1
            while j & bit != 0 { j ^= bit; bit >>= 1 }
            j |= bit
            if i < j { re.swapAt(i, j); im.swapAt(i, j) }
        }
        var len = 2
        while len <= n {
            let ang = -2 * Double.pi / Double(len)
            for start in stride(from: 0, to: n, by: len) {
                for k in 0..<(len / 2) {
                    let wr = cos(ang * Double(k)), wi = sin(ang * Double(k))
                    let a = start + k, b = a + len / 2
                    let tr = re[b] * wr - im[b] * wi, ti = re[b] * wi + im[b] * wr
                    re[b] = re[a] - tr; im[b] = im[a] - ti
                    re[a] += tr; im[a] += ti
                }
            }
            len <<= 1
        }
    }
}
