import CSampleRate
import CuedCore
import Foundation
import Testing
import TestSupport

/// The mixer's band-limited interpolation (`rate=`, `pitch=`, pitch jitter) against
/// libsamplerate's best converter on the shipped cues, and against plain linear
/// interpolation, the cheap alternative it was chosen over
/// (docs/decisions/0001-voice-resampling.md holds the figures this prints).
@Suite struct InterpolatorTests {
    static let cues = ["psst1", "psst2", "pop", "fail"]
    static let rates = [0.5, 0.8, 1.5, 2.0]

    static func shipped(_ name: String) throws -> [Float] {
        let wav = try WAV.read(TestPaths.repoRoot.appendingPathComponent("Sounds/\(name).wav").path)
        return wav.samples.map { Float($0) / 32768 }
    }

    /// What the mixer plays of a mono cue at `rate` (left channel).
    static func mixed(_ mono: [Float], rate: Double) -> [Float] {
        let m = Mixer(maxVoices: 1, maxFrames: 1024)
        var voice = VoiceRequest(id: 0, cue: Cue(name: "c", stereo: mono.flatMap { [$0, $0] }))
        voice.rate = rate
        m.start(voice)
        var out: [Float] = []
        while m.isSounding {
            m.render(frames: 1024)
            out += (0..<1024).map { m.mix[2 * $0] }
        }
        return out
    }

    /// libsamplerate, best quality: the reference.
    static func reference(_ mono: [Float], rate: Double) -> [Float] {
        var out = [Float](repeating: 0, count: Int(Double(mono.count) / rate) + 64)
        var input = mono
        let generated: Int = input.withUnsafeMutableBufferPointer { i in
            out.withUnsafeMutableBufferPointer { o in
                var d = SRC_DATA()
                d.data_in = UnsafePointer(i.baseAddress)
                d.input_frames = i.count
                d.data_out = o.baseAddress
                d.output_frames = o.count
                d.src_ratio = 1 / rate
                return src_simple(&d, Int32(SRC_SINC_BEST_QUALITY), 1) == 0 ? d.output_frames_gen : -1
            }
        }
        return Array(out.prefix(max(0, generated)))
    }

    static func linear(_ mono: [Float], rate: Double) -> [Float] {
        var out: [Float] = []
        var t = 0.0
        while t < Double(mono.count) {
            let i = Int(t), f = Float(t - Double(i))
            out.append(mono[i] * (1 - f) + (i + 1 < mono.count ? mono[i + 1] : 0) * f)
            t += rate
        }
        return out
    }

    /// `x` low-passed at `cutoff` × the Nyquist frequency (a 255-tap Blackman-windowed sinc).
    static func lowpass(_ x: [Float], cutoff: Double) -> [Float] {
        let half = 127
        let taps = (-half...half).map { k -> Float in
            let sinc = k == 0 ? cutoff : sin(Double.pi * cutoff * Double(k)) / (Double.pi * Double(k))
            let n = Double(k + half) / Double(2 * half)
            return Float(sinc * (0.42 - 0.5 * cos(2 * Double.pi * n) + 0.08 * cos(4 * Double.pi * n)))
        }
        var out = [Float](repeating: 0, count: x.count)
        x.withUnsafeBufferPointer { xs in
            taps.withUnsafeBufferPointer { t in
                out.withUnsafeMutableBufferPointer { o in
                    for i in 0..<xs.count {
                        var acc: Float = 0
                        for j in max(0, half - i)..<min(t.count, xs.count + half - i) { acc += xs[i + j - half] * t[j] }
                        o[i] = acc
                    }
                }
            }
        }
        return out
    }

    /// How far `x` is from `ref`, in dB of the reference's energy (higher is closer).
    static func snr(_ x: [Float], _ ref: [Float]) -> Double {
        let n = min(x.count, ref.count)
        var signal = 0.0, noise = 0.0
        for i in 0..<n {
            signal += Double(ref[i]) * Double(ref[i])
            noise += Double(x[i] - ref[i]) * Double(x[i] - ref[i])
        }
        return 10 * log10(signal / max(noise, 1e-30))
    }

    /// Aliasing is what folds back below the new Nyquist frequency: every shipped cue at
    /// every rate, low-passed at 80 % of the band it can hold (so the converters' own
    /// pass-band edges, which differ, are left out), is within 60 dB of libsamplerate's best:
    /// nothing folded down is audible under the cue. With CUED_RECORD_FIGURES=1, linear
    /// interpolation is measured beside it, for the decision record.
    @Test(arguments: cues)
    func noAudibleAliasingAtAnyRate(cue: String) throws {
        let mono = try Self.shipped(cue)
        let record = ProcessInfo.processInfo.environment["CUED_RECORD_FIGURES"] == "1"
        var figures: [String] = []
        for rate in Self.rates {
            let band = 0.8 * min(1, 1 / rate)
            let ref = Self.lowpass(Self.reference(mono, rate: rate), cutoff: band)
            let ours = Self.snr(Self.lowpass(Self.mixed(mono, rate: rate), cutoff: band), ref)
            var figure = "rate \(rate): sinc \(Int(ours.rounded())) dB"
            if record { figure += ", linear \(Int(Self.snr(Self.lowpass(Self.linear(mono, rate: rate), cutoff: band), ref).rounded())) dB" }
            figures.append(figure)
            #expect(ours >= 60, "\(cue) at rate \(rate): \(ours) dB")
        }
        print("\(cue): " + figures.joined(separator: "; "))
    }

    /// Rate 2 halves the duration and doubles the pitch; rate 0.5 the reverse (a sine's zero
    /// crossings counted).
    @Test(arguments: [2.0, 0.5, 1.5])
    func rateScalesDurationAndPitch(rate: Double) {
        let tone = (0..<48_000).map { Float(0.5 * sin(2 * Double.pi * 440 * Double($0) / 48_000)) }
        let out = Self.mixed(tone, rate: rate)
        let sounding = out.lastIndex { abs($0) > 1e-3 }.map { $0 + 1 } ?? 0
        #expect(abs(Double(sounding) - 48_000 / rate) <= 16, "\(sounding) frames at rate \(rate)")
        // Away from the edges, crossings per second: 2 × 440 × rate.
        let body = out[2_000..<(sounding - 2_000)]
        var crossings = 0
        for (a, b) in zip(body, body.dropFirst()) where (a < 0) != (b < 0) { crossings += 1 }
        let hz = Double(crossings) / 2 / (Double(body.count) / 48_000)
        #expect(abs(hz - 440 * rate) < 2, "\(hz) Hz at rate \(rate)")
    }
}

