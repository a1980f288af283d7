import CueDSP
import Foundation
import Testing
import TestSupport

/// The committed cues in Sounds/ held to the quality bars of the cues issue.
@Suite struct CueSoundsTests {
    static let durations: [String: ClosedRange<Double>] = [
        "psst1": 0.120...0.250, "psst2": 0.200...0.400, "pop": 0.040...0.120, "fail": 0.080...0.250, "tick": 0.008...0.030,
    ]

    /// Every committed file: each cue and its variants (`pop`, `pop-2`, `pop-3`…).
    static let files = CueRecipes.files.map { String($0.file.dropLast(4)) }

    func committed(_ name: String) throws -> (wav: WAVData, x: [Double]) {
        let wav = try WAV.read(TestPaths.repoRoot.appendingPathComponent("Sounds/\(name).wav").path)
        return (wav, wav.samples.map { Double($0) / 32768 })
    }

    @Test func freshOutputIsByteIdentical() throws {
        let dir = TempDir()
        let r = try runProcess(TestPaths.binary("cuesynth"), ["--out", dir.path])
        #expect(r.status == 0, "cuesynth failed: \(r.err)")
        for name in Self.files {
            let fresh = try Data(contentsOf: URL(fileURLWithPath: dir.file("\(name).wav")))
            let kept = try Data(contentsOf: TestPaths.repoRoot.appendingPathComponent("Sounds/\(name).wav"))
            #expect(fresh == kept, "\(name).wav differs from a fresh cuesynth run: run `make sounds`")
        }
    }

    /// A cue's variants are its own sound a few per cent off, never a copy of it: each
    /// differs, and its centroid and length stay within 15 % of the first's.
    @Test(arguments: CueRecipes.names)
    func variantsAreTheSameCueNotTheSameSamples(name: String) throws {
        let first = try committed(name).x
        let c1 = CueAnalysis.spectralCentroid(first, sampleRate: 48_000)
        for v in 2...CueRecipes.variants {
            let x = try committed("\(name)-\(v)").x
            #expect(x != first)
            let c = CueAnalysis.spectralCentroid(x, sampleRate: 48_000)
            #expect(abs(c / c1 - 1) < 0.15, "\(name)-\(v): centroid \(c) Hz vs \(c1) Hz")
            #expect(abs(Double(x.count) / Double(first.count) - 1) < 0.15, "\(name)-\(v): \(x.count) frames vs \(first.count)")
        }
    }

    @Test(arguments: files)
    func formatIs48kMono16Bit(name: String) throws {
        let (wav, _) = try committed(name)
        #expect(wav.sampleRate == 48_000)
        #expect(wav.channels == 1)
        #expect(wav.format == 0x010002)  // SF_FORMAT_WAV | SF_FORMAT_PCM_16
    }

    @Test(arguments: files)
    func durationInRange(name: String) throws {
        let (wav, _) = try committed(name)
        let seconds = Double(wav.frames) / 48_000
        let cue = String(name.split(separator: "-").first!)
        #expect(Self.durations[cue]!.contains(seconds), "\(name) lasts \(seconds) s")
    }

    @Test(arguments: files)
    func edgesAreSilent(name: String) throws {
        let (_, x) = try committed(name)
        let ms = 48
        let head = CueAnalysis.peak(Array(x.prefix(ms))), tail = CueAnalysis.peak(Array(x.suffix(ms)))
        #expect(CueAnalysis.dBFS(head) < -60, "first ms peaks at \(CueAnalysis.dBFS(head)) dBFS")
        #expect(CueAnalysis.dBFS(tail) < -60, "last ms peaks at \(CueAnalysis.dBFS(tail)) dBFS")
    }

    @Test(arguments: files)
    func peakAndDC(name: String) throws {
        let (_, x) = try committed(name)
        #expect(CueAnalysis.dBFS(CueAnalysis.peak(x)) <= -1)
        #expect(abs(CueAnalysis.dcOffset(x)) < 0.001)
    }

    @Test func loudnessMatchedWithin2dB() throws {
        let levels = try Self.files.map { CueAnalysis.dBFS(CueAnalysis.gatedRMS(try committed($0).x)) }
        #expect(levels.max()! - levels.min()! <= 2, "gated RMS: \(levels)")
    }

    @Test func cuesAreDistinct() throws {
        let c1 = CueAnalysis.spectralCentroid(try committed("psst1").x, sampleRate: 48_000)
        let c2 = CueAnalysis.spectralCentroid(try committed("psst2").x, sampleRate: 48_000)
        #expect(c1 >= 1.2 * c2, "psst1 centroid \(c1) Hz vs psst2 \(c2) Hz")
        let popLow = CueAnalysis.energyFraction(below: 2_000, try committed("pop").x, sampleRate: 48_000)
        #expect(popLow > 0.8, "pop has \(popLow * 100) % of its energy below 2 kHz")
    }

    /// fail: lower and duller than pop, falling, nothing harsh.
    @Test func failIsLowDullAndFalls() throws {
        let fail = try committed("fail").x, pop = try committed("pop").x
        let cf = CueAnalysis.spectralCentroid(fail, sampleRate: 48_000), cp = CueAnalysis.spectralCentroid(pop, sampleRate: 48_000)
        #expect(cf <= 0.7 * cp, "fail centroid \(cf) Hz vs pop \(cp) Hz")
        let below1k = CueAnalysis.energyFraction(below: 1_000, fail, sampleRate: 48_000)
        #expect(below1k > 0.9, "fail has \(below1k * 100) % of its energy below 1 kHz")
        let above3k = 1 - CueAnalysis.energyFraction(below: 3_000, fail, sampleRate: 48_000)
        #expect(above3k < 0.005, "fail has \(above3k * 100) % of its energy above 3 kHz")
        // Two notes, the second lower: the strongest frequency of each part.
        func strongest(_ x: ArraySlice<Double>) -> Double {
            let (binHz, p) = CueAnalysis.powerSpectrum(Array(x), sampleRate: 48_000)
            return Double(p.indices.max { p[$0] < p[$1] }!) * binHz
        }
        let first = strongest(fail[240..<3_840]), second = strongest(fail[4_800..<9_120])
        #expect(first / second > 1.1 && first / second < 1.35, "\(first) Hz then \(second) Hz")
        #expect(second < 300, "the second note is at \(second) Hz")
    }

    @Test func analysisIsSound() {
        // The measuring stick itself: a 1 kHz sine has its centroid at 1 kHz.
        let sine = (0..<4800).map { sin(2 * Double.pi * 1000 * Double($0) / 48_000) }
        #expect(abs(CueAnalysis.spectralCentroid(sine, sampleRate: 48_000) - 1000) < 30)
        #expect(CueAnalysis.energyFraction(below: 2000, sine, sampleRate: 48_000) > 0.99)
    }
}
