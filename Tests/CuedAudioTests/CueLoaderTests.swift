import CSndFile
import CuedAudio
import CuedCore
import CuedSystem
import Foundation
import Testing
import TestSupport

@Suite struct CueLoaderTests {
    let dir = TempDir()

    func sine(rate: Int, channels: Int, seconds: Double) -> [Float] {
        let frames = Int(Double(rate) * seconds)
        var out: [Float] = []
        for f in 0..<frames {
            let v = Float(0.5 * sin(2 * Double.pi * 440 * Double(f) / Double(rate)))
            for c in 0..<channels { out.append(c == 1 ? -v : v) }
        }
        return out
    }

    @Test(arguments: [(22_050, 1), (44_100, 2), (48_000, 1), (96_000, 2), (8_000, 1), (48_000, 4)])
    func loadsAnyRateAndChannelCount(rate: Int, channels: Int) throws {
        let path = dir.file("c\(rate)x\(channels).wav")
        try WAV.write(path, samples: sine(rate: rate, channels: channels, seconds: 0.25), sampleRate: rate, channels: channels)
        let cue = try CueLoader().load(path: path, name: "c")
        // Converted to 48 kHz: the duration is kept (within a few frames).
        #expect(abs(cue.frames - 12_000) <= 4, "\(cue.frames) frames")
        #expect(cue.samples.count == cue.frames * 2)
        let mid = cue.frames / 2
        if channels == 1 {
            #expect(cue.samples[2 * mid] == cue.samples[2 * mid + 1])  // mono to both channels
        } else {
            #expect(abs(cue.samples[2 * mid] + cue.samples[2 * mid + 1]) < 1e-3)  // channel 2 kept
        }
        let peak = cue.samples.map(abs).max()!
        #expect(peak > 0.45 && peak < 0.55)
    }

    @Test func sixteenBit48kIsLoadedExactly() throws {
        let pcm: [Int16] = [1, -1, 32767, -32768, 1234, 0, -20000]
        let path = dir.file("exact.wav")
        try WAV.write(path, int16: pcm, sampleRate: 48_000, channels: 1)
        let cue = try CueLoader().load(path: path, name: "exact")
        #expect(Array(cue.samples) == pcm.flatMap { [Float($0) / 32768, Float($0) / 32768] })
    }

    @Test func flacAndFloatWork() throws {
        let a = dir.file("a.flac"), b = dir.file("b.wav")
        try WAV.write(a, samples: sine(rate: 44_100, channels: 1, seconds: 0.1), sampleRate: 44_100, channels: 1,
                      format: Int32(SF_FORMAT_FLAC | SF_FORMAT_PCM_16))
        try WAV.write(b, samples: sine(rate: 48_000, channels: 2, seconds: 0.1), sampleRate: 48_000, channels: 2,
                      format: Int32(SF_FORMAT_WAV | SF_FORMAT_FLOAT))
        #expect(try CueLoader().load(path: a, name: "a").frames > 4_700)
        #expect(try CueLoader().load(path: b, name: "b").frames == 4_800)
    }

    @Test func corruptFileNamesFileAndReason() throws {
        let path = dir.file("bad.wav")
        try Data("RIFF\u{0}\u{0}\u{0}\u{0}WAVEjunkjunkjunk".utf8).write(to: URL(fileURLWithPath: path))
        do {
            _ = try CueLoader().load(path: path, name: "bad")
            Issue.record("loaded a corrupt file")
        } catch {
            #expect(error.path == path)
            #expect(!error.reason.isEmpty)
            #expect(error.description.hasPrefix(path + ": "))
        }
    }

    @Test func missingFileIsAnError() {
        #expect(throws: SndFileError.self) { try CueLoader().load(path: dir.file("none.wav"), name: "x") }
    }

    @Test func tooLongIsRefused() throws {
        let path = dir.file("long.wav")
        try WAV.write(path, int16: [Int16](repeating: 0, count: 8_000 * 11), sampleRate: 8_000, channels: 1)
        do {
            _ = try CueLoader().load(path: path, name: "long")
            Issue.record("loaded an 11 s cue")
        } catch {
            #expect(error.reason.contains("10 s"))
        }
    }
}

@Suite struct CueBankLoaderTests {
    let dir = TempDir()

    func make(_ sub: String, _ names: [String], value: Int16 = 1000) throws -> String {
        let d = dir.file(sub)
        try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
        for n in names { try WAV.write(d + "/" + n, int16: [Int16](repeating: value, count: 480), sampleRate: 48_000, channels: 1) }
        return d
    }

    @Test func laterDirectoryOverrides() throws {
        let a = try make("a", ["psst1.wav", "psst2.wav", "pop.wav", "extra.wav"], value: 1000)
        let b = try make("b", ["pop.wav"], value: 2000)
        try Data("not a cue".utf8).write(to: URL(fileURLWithPath: a + "/README.md"))
        let r = try CueBankLoader().load(directories: [a, b, dir.file("missing-dir")])
        #expect(r.bank.names == ["extra", "pop", "psst1", "psst2"])
        #expect(r.bank["pop"]!.samples[0] == 2000.0 / 32768)
        #expect(r.bank["psst1"]!.samples[0] == 1000.0 / 32768)
        #expect(r.warnings.isEmpty)
    }

    @Test func missingRequiredCueNamesIt() throws {
        let a = try make("a", ["psst1.wav", "pop.wav"])
        do {
            _ = try CueBankLoader().load(directories: [a])
            Issue.record("loaded without psst2")
        } catch {
            #expect(error.description.contains("psst2"))
            #expect(error.description.contains(a))
        }
    }

    @Test func brokenRequiredCueFails() throws {
        let a = try make("a", ["psst1.wav", "psst2.wav"])
        try Data("garbage".utf8).write(to: URL(fileURLWithPath: a + "/pop.wav"))
        #expect(throws: CueBankLoader.Failure.self) { try CueBankLoader().load(directories: [a]) }
    }

    @Test func brokenOptionalCueIsSkippedWithWarning() throws {
        let a = try make("a", ["psst1.wav", "psst2.wav", "pop.wav"])
        try Data("garbage".utf8).write(to: URL(fileURLWithPath: a + "/broken.wav"))
        let r = try CueBankLoader().load(directories: [a])
        #expect(r.bank["broken"] == nil)
        #expect(r.warnings.count == 1)
        #expect(r.warnings[0].contains("broken.wav"))
    }
}

@Suite struct WAVSinkTests {
    @Test func writesEveryFrameAndPaces() throws {
        let dir = TempDir()
        let path = dir.file("cap.wav")
        let sink = WAVSink(path: path, latencyMs: 10)
        let f = try sink.open().format
        #expect(f.rate == 48_000 && f.channels == 2 && f.sampleFormat == .s16)
        var data = [Int16](repeating: 0, count: f.periodFrames * 2)
        let start = MonotonicClock.now()
        for p in 0..<20 {
            for i in data.indices { data[i] = Int16(p * 100 + i % 7) }
            _ = try data.withUnsafeBytes { try sink.write($0.baseAddress!, frames: f.periodFrames) }
            // Visible to a reader right away (header kept up to date).
            #expect(try WAV.read(path).frames == (p + 1) * f.periodFrames)
        }
        MonotonicClock.sleep(until: MonotonicClock.now() + UInt64(sink.delayFrames(now: MonotonicClock.now())) * 1_000_000_000 / 48_000)  // play out
        #expect(MonotonicClock.now() - start >= 95_000_000)  // 20 × 5 ms of audio at least
        let back = try WAV.read(path)
        #expect(back.samples[0] == 0 && back.samples[back.samples.count - 1] == Int16(1900 + (f.periodFrames * 2 - 1) % 7))
    }

    /// The express bound: a small file is decoded, one whose header says it decodes to
    /// more samples (frames × channels) than the bound is not (nil), however small on disk.
    @Test func loadIfSmallDecodesOnlyWhatTheHeaderSaysIsSmall() throws {
        let dir = TempDir()
        let small = dir.file("small.wav")
        try WAV.write(small, samples: [Float](repeating: 0.25, count: 9_600), sampleRate: 48_000, channels: 2)
        let big = dir.file("big.wav")
        let data = 768_000 * 64 * 2  // 1 s of 64 channels at 768 kHz: 0 bytes on disk past the header
        try CraftedWAV.write(big, CraftedWAV.wav(channels: 64, rate: 768_000, dataBytes: data), size: 44 + data)
        let loader = CueLoader()
        func smallCue(_ path: String) throws -> Cue? {
            let file = try UntrustedFile.openIdentified(path)
            defer { close(file.fd) }
            return try loader.loadIfSmall(file, path: path, name: "x", maxSamples: 1 << 19)
        }
        #expect(try smallCue(small)?.frames == 4_800)
        #expect(try smallCue(big) == nil)
        // The same sparse file on an 8-frame bound: its samples, not its bytes on disk, count.
        let file = try UntrustedFile.openIdentified(small)
        defer { close(file.fd) }
        #expect(try loader.loadIfSmall(file, path: small, name: "x", maxSamples: 4_800 * 2 - 1) == nil)
    }

    /// A decode told to stop stops between chunks, with a reason naming the file.
    @Test func aCancelledDecodeStops() throws {
        let dir = TempDir()
        let path = dir.file("long.wav")
        try WAV.write(path, samples: [Float](repeating: 0.25, count: 96_000), sampleRate: 48_000, channels: 2)
        let file = try UntrustedFile.openIdentified(path)
        defer { close(file.fd) }
        var asked = 0
        let error = #expect(throws: SndFileError.self) {
            try CueLoader().load(file, path: path, name: "x", cancelled: { asked += 1; return asked > 3 })
        }
        #expect(error?.reason == CueLoader.cancelledReason)
        #expect(asked == 4)  // once before decoding, then once a chunk: stopped at the third chunk
    }
}
