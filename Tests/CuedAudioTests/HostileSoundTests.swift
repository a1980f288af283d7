import CSndFile
@testable import CuedAudio
import CuedCore
import CuedSystem
import Foundation
import Testing
import TestSupport

/// Sound files as untrusted input: whatever a file claims, the loader
/// refuses it with a reason naming it, allocates only what a real sound
/// needs, and never blocks.
@Suite(.timeLimit(.minutes(2))) struct HostileSoundTests {
    let dir = TempDir()

    func reason(_ path: String, loader: CueLoader = CueLoader()) -> String? {
        do {
            _ = try loader.load(path: path, name: "x")
            return nil
        } catch {
            #expect(error.path == path)
            #expect(error.description == "\(path): \(error.reason)")
            return error.reason
        }
    }

    /// The issue's file: a sparse RF64 whose valid header claims 64 GiB at
    /// 2 GHz × 1024 channels (0.016 s: it passed the old length check).
    @Test func sparseRF64WithAbsurdHeader() throws {
        let p = dir.file("huge.wav")
        let data = 64 << 30
        try CraftedWAV.write(p, CraftedWAV.rf64(channels: 1024, rate: 2_000_000_000, dataBytes: data), size: data + 80)
        #expect(reason(p) == "has 1024 channels; at most 64 are played")
        // Fewer channels: the rate is refused.
        try CraftedWAV.write(p, CraftedWAV.rf64(channels: 2, rate: 2_000_000_000, dataBytes: data), size: data + 80)
        #expect(reason(p) == "has a sample rate of 2000000000 Hz; 1000 to 768000 Hz are played")
        // A rate and channels that play: the length is refused, from the header, before decoding.
        try CraftedWAV.write(p, CraftedWAV.rf64(channels: 64, rate: 768_000, dataBytes: data), size: data + 80)
        #expect(reason(p) == "is 699.05 s long; at most 10 s")
    }

    @Test func sparseFourGiBWAVIsRefusedByItsLength() throws {
        let p = dir.file("4g.wav")
        let data = (4 << 30) - 64
        try CraftedWAV.write(p, CraftedWAV.wav(channels: 2, rate: 48_000, dataBytes: data), size: data + 44)
        #expect(reason(p) == "is 22369.62 s long; at most 10 s")
    }

    @Test func headerClaimingMoreThanTheFileHolds() throws {
        // RF64's 64-bit data size claims 5 s of stereo on a 1 KiB file:
        // libsndfile believes the file's size (250 frames), never the header.
        let p = dir.file("liar.wav")
        try CraftedWAV.write(p, CraftedWAV.rf64(channels: 2, rate: 48_000, dataBytes: 960_000), body: [UInt8](repeating: 1, count: 1_000))
        #expect(try CueLoader().load(path: p, name: "liar").frames == 250)
        // So does AU's; the loader's own check stands behind it for any uncompressed format.
        let au = dir.file("liar.au")
        func be32(_ v: Int) -> [UInt8] { (0..<4).reversed().map { UInt8((v >> (8 * $0)) & 0xFF) } }
        try CraftedWAV.write(au, Array(".snd".utf8) + be32(24) + be32(960_000) + be32(3) + be32(48_000) + be32(2),
                             body: [UInt8](repeating: 1, count: 1_000))
        #expect(try CueLoader().load(path: au, name: "liar").frames == 250)
        let wav16 = Int32(SF_FORMAT_WAV | SF_FORMAT_PCM_16), flac = Int32(SF_FORMAT_FLAC | SF_FORMAT_PCM_16)
        #expect(CueLoader.sizeProblem(frames: 240_000, channels: 2, format: wav16, fileSize: 1_080)
                == "its header claims 240000 frames (960000 bytes of audio) but the file has 1080 bytes")
        #expect(CueLoader.sizeProblem(frames: 250, channels: 2, format: wav16, fileSize: 1_080) == nil)
        #expect(CueLoader.sizeProblem(frames: Int.max / 2, channels: 64, format: wav16, fileSize: 1_080)?.contains("more than") == true)
        #expect(CueLoader.sizeProblem(frames: 240_000, channels: 2, format: flac, fileSize: 1_080) == nil)  // compressed: no bound
    }

    @Test func truncatedFileDecodesItsIntactPart() throws {
        let p = dir.file("cut.wav")
        try WAV.write(p, int16: [Int16](repeating: 1000, count: 48_000), sampleRate: 48_000, channels: 1)
        #expect(truncate(p, 44 + 20_000) == 0)
        // libsndfile trusts the file's size over the header: the frames that are there.
        let cue = try CueLoader().load(path: p, name: "cut")
        #expect(cue.frames == 10_000)
        #expect(cue.samples.allSatisfy { $0 == 1000.0 / 32768 })
        // Cut inside the header: refused.
        #expect(truncate(p, 30) == 0)
        #expect(reason(p) != nil)
    }

    @Test func justOverTheLimitSaysByHowMuch() throws {
        let p = dir.file("long.wav")
        try WAV.write(p, int16: [Int16](repeating: 0, count: 480_480), sampleRate: 48_000, channels: 1)
        #expect(reason(p) == "is 10.01 s long; at most 10 s")
        try WAV.write(p, int16: [Int16](repeating: 0, count: 441_001), sampleRate: 44_100, channels: 1)
        #expect(reason(p) == "is 10.00002 s long; at most 10 s")
        try WAV.write(p, int16: [Int16](repeating: 0, count: 8_000 * 11), sampleRate: 8_000, channels: 1)
        #expect(reason(p) == "is 11 s long; at most 10 s")
        #expect(reason(p, loader: CueLoader(maxSeconds: 2.5)) == "is 11 s long; at most 2.5 s")
        // Exactly the limit plays.
        try WAV.write(p, int16: [Int16](repeating: 0, count: 480_000), sampleRate: 48_000, channels: 1)
        #expect(try CueLoader().load(path: p, name: "x").frames == 480_000)
    }

    /// A float (or double) file can hold NaN or ±infinity: refused at load, naming the
    /// value and the frame, in any chunk (the mixer only makes them silence, and a NaN
    /// silences every other voice in its frames). Huge finite values still play (clipped).
    @Test func samplesThatAreNotNumbersAreRefused() throws {
        let p = dir.file("nan.wav")
        let float = Int32(SF_FORMAT_WAV | SF_FORMAT_FLOAT), double = Int32(SF_FORMAT_WAV | SF_FORMAT_DOUBLE)
        var samples = [Float](repeating: 0.25, count: 2 * 10_000)
        samples[2 * 9_000 + 1] = .nan  // frame 9001, in the third 4096-frame chunk
        try WAV.write(p, samples: samples, sampleRate: 48_000, channels: 2, format: float)
        #expect(reason(p) == "holds a sample that is not a number (NaN) in frame 9001")
        samples[2 * 9_000 + 1] = 0.25
        samples[4] = -.infinity
        try WAV.write(p, samples: samples, sampleRate: 44_100, channels: 2, format: double)  // resampled: checked before
        #expect(reason(p) == "holds a sample that is infinite or beyond a float's range (-infinity when read) in frame 3")
        samples[4] = 3e38
        try WAV.write(p, samples: samples, sampleRate: 48_000, channels: 2, format: float)
        #expect(try CueLoader().load(path: p, name: "loud").frames == 10_000)
    }

    @Test func nineChannelsAtOneGigahertz() throws {
        let p = dir.file("9ch.wav")
        try CraftedWAV.write(p, CraftedWAV.wav(channels: 9, rate: 1_000_000_000, dataBytes: 18 * 100),
                             body: [UInt8](repeating: 0, count: 18 * 100))
        #expect(reason(p) == "has a sample rate of 1000000000 Hz; 1000 to 768000 Hz are played")
        // Nine channels at a real rate play: the first two.
        var samples: [Float] = []
        for _ in 0..<4_800 { samples += [0.25, -0.5] + [Float](repeating: 0.75, count: 7) }
        try WAV.write(p, samples: samples, sampleRate: 48_000, channels: 9)
        let cue = try CueLoader().load(path: p, name: "nine")
        #expect(cue.frames == 4_800)
        #expect(cue.samples[0] == 0.25 && cue.samples[1] == -0.5)
    }

    @Test func sixtyFiveChannelsAndZeroRateAreRefused() throws {
        let p = dir.file("65.wav")
        try CraftedWAV.write(p, CraftedWAV.wav(channels: 65, rate: 48_000, dataBytes: 130), body: [UInt8](repeating: 0, count: 130))
        #expect(reason(p) == "has 65 channels; at most 64 are played")
        try CraftedWAV.write(p, CraftedWAV.wav(channels: 1, rate: 999, dataBytes: 100), body: [UInt8](repeating: 0, count: 100))
        #expect(reason(p) == "has a sample rate of 999 Hz; 1000 to 768000 Hz are played")
    }

    @Test func aFIFODoesNotBlock() throws {
        let p = dir.file("fifo.wav")
        #expect(mkfifo(p, 0o600) == 0)
        // With no writer, a blocking open would hang here (the suite's time limit ends it).
        #expect(reason(p) == "is a FIFO, not a regular file")
    }

    @Test func aDirectoryNamedLikeASound() throws {
        let p = dir.file("x.wav")
        try FileManager.default.createDirectory(atPath: p, withIntermediateDirectories: false)
        #expect(reason(p) == "is a directory, not a regular file")
    }

    @Test func aSymlinkToADevice() throws {
        let p = dir.file("zero.wav")
        #expect(symlink("/dev/zero", p) == 0)
        #expect(reason(p) == "is a character device, not a regular file")
    }

    @Test func emptyAndGarbageFiles() throws {
        let p = dir.file("empty.wav")
        try Data().write(to: URL(fileURLWithPath: p))
        #expect(reason(p) != nil)
        try CraftedWAV.write(p, CraftedWAV.wav(channels: 1, rate: 48_000, dataBytes: 0))
        #expect(reason(p) == "has no audio frames")
    }

    /// In a sounds directory: a FIFO, a directory and a device named like
    /// sounds are skipped with a reason (or fail the load if a required cue),
    /// and nothing blocks.
    @Test func bankLoaderNamesWhatItSkips() throws {
        let d = dir.file("sounds")
        try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
        for n in ["psst1", "psst2", "pop"] {
            try WAV.write(d + "/\(n).wav", int16: [Int16](repeating: 100, count: 480), sampleRate: 48_000, channels: 1)
        }
        #expect(mkfifo(d + "/fifo.wav", 0o600) == 0)
        try FileManager.default.createDirectory(atPath: d + "/folder.wav", withIntermediateDirectories: false)
        #expect(symlink("/dev/zero", d + "/zero.wav") == 0)
        let r = try CueBankLoader().load(directories: [d])
        #expect(r.bank.names == ["pop", "psst1", "psst2"])
        // One warning for the directory, naming each file and why.
        #expect(r.warnings == [
            "skipped \(d)/fifo.wav: is a FIFO, not a regular file; "
            + "skipped \(d)/folder.wav: is a directory, not a regular file; "
            + "skipped \(d)/zero.wav: is a character device, not a regular file",
        ])
        // A required cue that is a FIFO fails the load, naming it.
        #expect(unlink(d + "/pop.wav") == 0)
        #expect(mkfifo(d + "/pop.wav", 0o600) == 0)
        do {
            _ = try CueBankLoader().load(directories: [d])
            Issue.record("loaded with a FIFO for pop")
        } catch {
            #expect(error.description == "required cue unreadable: \(d)/pop.wav: is a FIFO, not a regular file")
        }
    }

    /// A directory of many broken files is one warning a load: the first
    /// `maxNamedSkips` named with their reasons, and how many more.
    @Test func manyBrokenFilesAreOneWarningPerDirectory() throws {
        let d = dir.file("many"), other = dir.file("other")
        for x in [d, other] { try FileManager.default.createDirectory(atPath: x, withIntermediateDirectories: true) }
        for n in ["psst1", "psst2", "pop"] {
            try WAV.write(d + "/\(n).wav", int16: [Int16](repeating: 100, count: 480), sampleRate: 48_000, channels: 1)
        }
        for i in 0..<500 { try Data("not a sound".utf8).write(to: URL(fileURLWithPath: d + "/broken\(1000 + i).wav")) }
        try Data().write(to: URL(fileURLWithPath: other + "/empty.wav"))
        let r = try CueBankLoader().load(directories: [d, other])
        #expect(r.bank.names == ["pop", "psst1", "psst2"])
        #expect(r.warnings.count == 2)
        let first = try #require(r.warnings.first)
        #expect(first.hasPrefix("skipped \(d)/broken1000.wav: "))
        #expect(first.components(separatedBy: "skipped ").count - 1 == CueBankLoader.maxNamedSkips)
        #expect(first.hasSuffix("; and 492 more files in \(d) that cannot be played"))
        #expect(r.warnings.last?.hasPrefix("skipped \(other)/empty.wav: ") == true)
    }

    /// The decoded size of a legitimate file is what is allocated, not the
    /// header's frames × channels: a 10 s, 64-channel, 96 kHz sparse file
    /// (123 MB on disk as holes) decodes to 10 s of 48 kHz stereo.
    @Test func manyChannelsDecodeToStereoInChunks() throws {
        let p = dir.file("wide.wav")
        let frames = 960_000, data = frames * 64 * 2
        try CraftedWAV.write(p, CraftedWAV.wav(channels: 64, rate: 96_000, dataBytes: data), size: data + 44)
        let cue = try CueLoader().load(path: p, name: "wide")
        #expect(abs(cue.frames - 480_000) <= 4, "\(cue.frames)")
        #expect(cue.samples.allSatisfy { $0 == 0 })
    }

    @Test func identityComesFromTheSameOpen() throws {
        let p = dir.file("id.wav")
        try WAV.write(p, int16: [1, 2, 3, 4], sampleRate: 48_000, channels: 1)
        let (cue, id) = try CueLoader().loadIdentified(path: p, name: "id")
        #expect(cue.frames == 4)
        var st = stat()
        #expect(stat(p, &st) == 0)
        #expect(id.inode == UInt64(st.st_ino) && id.size == Int64(st.st_size))
        // From a descriptor the caller opened: decoded from its first byte, left open.
        let opened = try UntrustedFile.openIdentified(p)
        defer { close(opened.fd) }
        #expect(lseek(opened.fd, 10, SEEK_SET) == 10)
        let again = try CueLoader().load(opened, path: p, name: "id")
        #expect(Array(again.samples) == Array(cue.samples))
        #expect(fcntl(opened.fd, F_GETFD) >= 0)
        // Rewritten (another size, whatever the clock's grain): another identity.
        try WAV.write(p, int16: [1, 2, 3, 4, 5], sampleRate: 48_000, channels: 1)
        #expect(try CueLoader().loadIdentified(path: p, name: "id").identity != id)
    }
}
