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
        // A mono source stays mono (the mixer plays it on both sides); anything else is stereo.
        #expect(cue.channels == (channels == 1 ? 1 : 2) && cue.samples.count == cue.frames * cue.channels)
        let mid = cue.frames / 2
        if channels > 1 {
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
        #expect(cue.channels == 1 && Array(cue.samples) == pcm.map { Float($0) / 32768 })
    }

    /// A mono file decodes, at its rate and resampled, to the same frames as a stereo file of it
    /// on each side, in half the memory. (libsamplerate alone ends a stereo stream a frame later
    /// than a mono one; 37.8 kHz: 0.3 s is exactly 14,400 frames at 48 kHz, the edge case.)
    @Test(arguments: [48_000, 44_100, 22_050, 37_800, 96_000])
    func aMonoFileIsKeptMonoWithTheStereoFilesFrames(rate: Int) throws {
        let mono = sine(rate: rate, channels: 1, seconds: 0.3)
        let m = dir.file("m\(rate).wav"), st = dir.file("s\(rate).wav")
        try WAV.write(m, samples: mono, sampleRate: rate, channels: 1)
        try WAV.write(st, samples: mono.flatMap { [$0, $0] }, sampleRate: rate, channels: 2)
        let a = try CueLoader().load(path: m, name: "m"), b = try CueLoader().load(path: st, name: "s")
        #expect(a.channels == 1 && b.channels == 2 && a.frames == b.frames, "mono \(a.frames) frames, stereo \(b.frames)")
        let left = stride(from: 0, to: b.samples.count, by: 2).map { b.samples[$0] }
        let right = stride(from: 1, to: b.samples.count, by: 2).map { b.samples[$0] }
        let worst = zip(Array(a.samples), left).map { abs($0 - $1) }.max() ?? 1
        #expect(left == right && worst < 1e-6, "mono against the stereo file's left: \(worst) at most")
        #expect(a.sound.bytes < b.sound.bytes)
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

    // MARK: MP3s, whose length in the header is an estimate

    static let lame = "/usr/bin/lame"
    static var lameHere: Bool { FileManager.default.isExecutableFile(atPath: lame) }
    /// sox writes MP3 only with its libmp3lame handler (Debian: libsox-fmt-mp3).
    static var soxWritesMP3: Bool { ((try? runProcess("/usr/bin/sox", ["-h"]))?.out ?? "").contains(" mp3 ") }

    /// The frames libsndfile's header gives a file, and those it decodes to, read to the end.
    func frames(_ path: String) throws -> (header: Int, decoded: Int) {
        var info = SF_INFO()
        let f = try #require(sf_open(path, Int32(SFM_READ), &info), "libsndfile cannot open \(path)")
        defer { sf_close(f) }
        var buffer = [Float](repeating: 0, count: 4_096 * Int(info.channels))
        var decoded = 0
        while true {
            let n = Int(sf_readf_float(f, &buffer, 4_096))
            if n <= 0 { break }
            decoded += n
        }
        return (Int(info.frames), decoded)
    }

    /// An MP3 decoded whole: every frame libsndfile reads of it, resampled to 48 kHz.
    func expectWhole(_ mp3: String, rate: Int, _ context: String) throws {
        let f = try frames(mp3)
        // Without a LAME or Xing tag, libmpg123 reckons the length from the file's size and its
        // first frame, past the end: the file issue 47 met (14976 of 15042 frames).
        #expect(f.decoded < f.header, "\(context): not an estimate past the end: \(f)")
        let cue = try CueLoader().load(path: mp3, name: "m")
        #expect(abs(cue.frames - f.decoded * 48_000 / rate) <= 2, "\(context): \(cue.frames) frames of \(f)")
    }

    /// lame without its tag (`-t`), as tools that stream MP3 write it: CBR at 44.1 kHz (its frames
    /// 417 or 418 bytes, the estimate counts them all as the first), mono and stereo, and at 22.05 kHz.
    @Test(.enabled(if: CueLoaderTests.lameHere, "no lame here (Debian: apt install lame)"),
          arguments: [(44_100, 1, ["-t"]), (44_100, 2, ["-t"]), (44_100, 1, ["-t", "-b", "64"]), (22_050, 1, ["-t", "-b", "32"])])
    func anMP3MadeByLamePlaysWhole(rate: Int, channels: Int, flags: [String]) throws {
        let wav = dir.file("lame\(rate)x\(channels).wav"), mp3 = dir.file("lame\(rate)x\(channels)\(flags.count).mp3")
        try WAV.write(wav, samples: sine(rate: rate, channels: channels, seconds: 1), sampleRate: rate, channels: channels)
        let r = try runProcess(Self.lame, ["--quiet"] + flags + [wav, mp3])
        #expect(r.status == 0, "\(r)")
        try expectWhole(mp3, rate: rate, "lame \(flags) at \(rate) Hz, \(channels) channels")
    }

    /// sox's MP3s (libsox-fmt-mp3): the newcomer's 0.3 s mono file at 44.1 kHz among them.
    @Test(.enabled(if: CueLoaderTests.soxWritesMP3, "sox cannot write MP3 here (Debian: apt install libsox-fmt-mp3)"),
          arguments: [(44_100, 1, 0.3), (44_100, 2, 2.5), (22_050, 1, 1.0)])
    func anMP3MadeBySoxPlaysWhole(rate: Int, channels: Int, seconds: Double) throws {
        let mp3 = dir.file("sox\(rate)x\(channels).mp3")
        let r = try runProcess("/usr/bin/sox", ["-n", "-r", "\(rate)", "-c", "\(channels)", mp3, "synth", "\(seconds)", "sine", "440", "gain", "-6"])
        #expect(r.status == 0, "\(r)")
        try expectWhole(mp3, rate: rate, "sox at \(rate) Hz, \(channels) channels, \(seconds) s")
    }

    /// The estimate's slack is not a licence: an MP3 that lost half its bytes (its tag says how
    /// long it is) is still truncated.
    @Test(.enabled(if: CueLoaderTests.lameHere, "no lame here (Debian: apt install lame)"))
    func anMP3CutShortIsStillTruncated() throws {
        let wav = dir.file("cut.wav"), mp3 = dir.file("cut.mp3")
        try WAV.write(wav, samples: sine(rate: 44_100, channels: 2, seconds: 2), sampleRate: 44_100, channels: 2)
        #expect(try runProcess(Self.lame, ["--quiet", wav, mp3]).status == 0)
        let whole = try frames(mp3)
        #expect(whole.header == whole.decoded && whole.header == 88_200, "lame's tag gives the exact length: \(whole)")
        #expect(abs(try CueLoader().load(path: mp3, name: "cut").frames - 96_000) <= 1)
        let size = try #require(try FileManager.default.attributesOfItem(atPath: mp3)[.size] as? Int)
        #expect(truncate(mp3, off_t(size / 2)) == 0)
        do {
            _ = try CueLoader().load(path: mp3, name: "cut")
            Issue.record("played an MP3 cut in half")
        } catch {
            #expect(error.reason.contains("is truncated"), "\(error)")
        }
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

    /// `pop-2.wav`, `pop-3.wav` beside `pop.wav` are pop's variants, in order; a `-N`
    /// name with no cue of its base is a cue of its own; a later directory's pop replaces
    /// the whole set; the config's `files` replace the directories' set.
    @Test func numberedFilesAreTheCuesVariants() throws {
        let a = try make("a", ["psst1.wav", "psst2.wav", "pop.wav", "pop-3.wav", "pop-2.wav", "lone-2.wav", "pop-x.wav"])
        try WAV.write(a + "/pop-2.wav", int16: [Int16](repeating: 2000, count: 480), sampleRate: 48_000, channels: 1)
        let r = try CueBankLoader().load(directories: [a])
        #expect(r.bank.names == ["lone-2", "pop", "pop-x", "psst1", "psst2"])
        #expect(r.bank.variants["pop"]!.map(\.source) == [a + "/pop.wav", a + "/pop-2.wav", a + "/pop-3.wav"])
        #expect(r.bank.variants["pop"]!.allSatisfy { $0.name == "pop" })
        #expect(r.bank.variants["pop"]![1].samples[0] == 2000.0 / 32768)
        let b = try make("b", ["pop.wav"])
        #expect(try CueBankLoader().load(directories: [a, b]).bank.variants["pop"]!.map(\.source) == [b + "/pop.wav"])
        let listed = try CueBankLoader().load(directories: [a], files: ["pop": [b + "/pop.wav", a + "/pop-3.wav"]])
        #expect(listed.bank.variants["pop"]!.map(\.source) == [b + "/pop.wav", a + "/pop-3.wav"])
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

/// Decoded sound and the memory budget: a file decoded once however many cues name it,
/// a reload's unchanged files not decoded again, and what does not fit refused with why.
@Suite struct CueBudgetTests {
    let dir = TempDir()

    func wav(_ name: String, frames: Int, channels: Int = 1, value: Int16 = 1000) throws -> String {
        let path = dir.file(name)
        try WAV.write(path, int16: [Int16](repeating: value, count: frames * channels), sampleRate: 48_000, channels: channels)
        return path
    }

    func required() throws -> String {
        let d = dir.file("req")
        try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
        for n in ["psst1", "psst2", "pop"] {
            try WAV.write(d + "/" + n + ".wav", int16: [Int16](repeating: 500, count: 480), sampleRate: 48_000, channels: 1)
        }
        return d
    }

    /// 300 cues naming one 1 s file: one decode, one buffer, counted once.
    @Test func aFileNamedByManyCuesIsDecodedOnce() throws {
        let one = try wav("one.wav", frames: 48_000)
        let budget = SoundBudget(limitBytes: 8 << 20)
        var files: [String: [String]] = [:]
        for i in 0..<300 { files["c\(i)"] = [one] }
        let r = try CueBankLoader(loader: CueLoader(budget: budget)).load(directories: [try required()], files: files)
        let sounds = Set((0..<300).map { ObjectIdentifier(r.bank["c\($0)"]!.sound) })
        #expect(sounds.count == 1)
        #expect(r.bank["c7"]!.name == "c7" && r.bank["c7"]!.frames == 48_000)
        let page = SampleMemory.pageSize
        let decoded = r.bank["c0"]!.sound.bytes
        #expect(decoded == (48_000 * 4 + page - 1) / page * page && r.bank.bytes == decoded + 3 * page)  // mono: 192,000 B in whole pages
        #expect(budget.used == r.bank.bytes && budget.decoding == 0)
    }

    /// A reload takes the files that did not change as they are: no new decode, no overlap.
    @Test func aReloadDecodesOnlyWhatChanged() throws {
        let a = try wav("a.wav", frames: 48_000), b = try wav("b.wav", frames: 24_000)
        let budget = SoundBudget(limitBytes: 8 << 20)
        let loader = CueBankLoader(loader: CueLoader(budget: budget))
        let req = try required()
        let first = try loader.load(directories: [req], files: ["a": [a], "b": [b]])
        let used = budget.used
        // b changes (a new mtime and size), a does not.
        _ = try wav("b.wav", frames: 12_000)
        let second = try loader.load(directories: [req], files: ["a": [a], "b": [b]], reuse: first.sounds)
        #expect(second.bank["a"]!.sound === first.bank["a"]!.sound)
        #expect(second.bank["b"]!.sound !== first.bank["b"]!.sound && second.bank["b"]!.frames == 12_000)
        #expect(budget.used == used + second.bank["b"]!.sound.bytes)  // the old and the new b, side by side
    }

    /// Past the budget a decode is refused with what it needs, the budget, and how to raise it;
    /// a bank load fails whole for it, even for a file of a directory it would skip otherwise.
    @Test func whatDoesNotFitIsRefusedWithHowToRaiseTheBudget() throws {
        let long = try wav("long.wav", frames: 480_000, channels: 2)  // 10 s of stereo: 3.84 MB decoded
        let budget = SoundBudget(limitBytes: 2 << 20)
        do {
            _ = try CueLoader(budget: budget).load(path: long, name: "long")
            Issue.record("decoded over the budget")
        } catch {
            #expect(error.overBudget && error.path == long)
            #expect(error.reason.contains("over the memory budget for decoded sound: it needs 3.7 MiB"), "\(error.reason)")
            #expect(error.reason.contains("sound_budget_mb") && error.reason.contains("--sound-budget-mb"), "\(error.reason)")
        }
        #expect(budget.used == 0 && budget.refused == 1)
        let req = try required()
        try FileManager.default.copyItem(atPath: long, toPath: req + "/extra.wav")
        do {
            _ = try CueBankLoader(loader: CueLoader(budget: budget)).load(directories: [req])
            Issue.record("a bank over the budget loaded")
        } catch {
            guard case .overBudget(let name, _) = error else { Issue.record("\(error)"); return }
            #expect(name == "extra")
        }
        #expect(budget.used == 0)
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
        MonotonicClock.sleep(until: MonotonicClock.now() + UInt64(sink.delayFrames(now: MonotonicClock.now())) * 1_000_000_000 / 48_000)  // the pace is what is measured: play out
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
