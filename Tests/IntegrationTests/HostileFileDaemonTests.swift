import CuedClient
import CuedProtocol
import Foundation
import Testing
import TestSupport

/// Sound files as untrusted input, against the real daemon: a crafted file
/// makes `reload` answer `err reload-failed FILE: …`, never kills or hangs
/// cued, and the old cues keep playing.
@Suite(.timeLimit(.minutes(3))) struct HostileFileDaemonTests {
    func anonKiB(_ pid: pid_t) -> Int {
        let text = (try? String(contentsOfFile: "/proc/\(pid)/smaps_rollup", encoding: .utf8)) ?? ""
        let line = text.split(separator: "\n").first { $0.hasPrefix("Anonymous:") } ?? ""
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? -1
    }

    /// Each way of planting a bad `pop.wav` (a required cue), and what the reply says.
    static let plants: [(String, String)] = [
        ("rf64-64GiB-2GHz-1024ch", "has 1024 channels; at most 64 are played"),
        ("wav-4GiB", "is 22369.62 s long; at most 10 s"),
        ("wav-1GHz-9ch", "has a sample rate of 1000000000 Hz; 1000 to 768000 Hz are played"),
        ("wav-10.01s", "is 10.01 s long; at most 10 s"),
        ("fifo", "is a FIFO, not a regular file"),
        ("directory", "is a directory, not a regular file"),
        ("symlink-dev-zero", "is a character device, not a regular file"),
    ]

    static func plant(_ kind: String, at p: String) throws {
        unlink(p)
        switch kind {
        case "rf64-64GiB-2GHz-1024ch":
            try CraftedWAV.write(p, CraftedWAV.rf64(channels: 1024, rate: 2_000_000_000, dataBytes: 64 << 30), size: (64 << 30) + 80)
        case "wav-4GiB":
            let data = (4 << 30) - 64
            try CraftedWAV.write(p, CraftedWAV.wav(channels: 2, rate: 48_000, dataBytes: data), size: data + 44)
        case "wav-1GHz-9ch":
            try CraftedWAV.write(p, CraftedWAV.wav(channels: 9, rate: 1_000_000_000, dataBytes: 1_800), body: [UInt8](repeating: 0, count: 1_800))
        case "wav-10.01s":
            try WAV.write(p, int16: [Int16](repeating: 5, count: 480_480), sampleRate: 48_000, channels: 1)
        case "fifo":
            #expect(mkfifo(p, 0o600) == 0)
        case "directory":
            try FileManager.default.createDirectory(atPath: p, withIntermediateDirectories: false)
        case "symlink-dev-zero":
            #expect(symlink("/dev/zero", p) == 0)
        default:
            Issue.record("unknown plant \(kind)")
        }
    }

    @Test(arguments: plants)
    func reloadWithAHostileRequiredCueFailsAndKeepsServing(kind: String, reason: String) throws {
        let d = try DaemonHarness(args: ["--sink", "wav:%DIR%/capture.wav"])
        let c = try d.client()
        let before = anonKiB(d.pid)
        let pop = d.soundsDir + "/pop.wav"
        try Self.plant(kind, at: pop)
        #expect(try c.request("reload") == "err reload-failed \(pop): \(reason)")
        // Still serving, on this connection and others, with the old cues.
        #expect(try c.request("ping") == "ok pong")
        #expect(try d.request("cues") == "ok pop psst1 psst2")
        #expect(try d.request("play pop") == "ok")
        let pcm = Fixture.standard["pop"]!
        #expect(eventually { ((try? WAV.read(d.capturePath))?.frames ?? 0) >= pcm.count })
        // Nothing of the claimed sizes was allocated.
        let grown = anonKiB(d.pid) - before
        #expect(grown < 16 * 1024, "anonymous memory grew \(grown) KiB")
        #expect(d.process.isRunning)
        d.stop()
        #expect(sampleDifference(Array(try WAV.read(d.capturePath).samples.prefix(pcm.count * 2)), pcm.stereo) == nil)
    }

    /// A sound that is not required is skipped with a warning, as before:
    /// cued starts and reloads without it, and nothing blocks.
    @Test func hostileOptionalSoundsAreSkipped() throws {
        let dir = TempDir()
        let sounds = dir.file("sounds")
        try Fixture.writeCues(into: sounds, Fixture.standard)
        for (kind, _) in Self.plants { try Self.plant(kind, at: sounds + "/\(kind).wav") }
        let d = try DaemonHarness(args: ["--sink", "null", "--sounds", sounds])
        #expect(try d.request("cues") == "ok pop psst1 psst2")
        let log = d.readStderr()
        for (kind, reason) in Self.plants {
            #expect(log.contains("skipped \(sounds)/\(kind).wav: \(reason)"), "no warning for \(kind)")
        }
        // …and says so where the user looks: status, and cuectl reload (not only the log).
        let warnings = try d.status().warnings.joined(separator: "\n")
        let reload = try runProcess(TestPaths.binary("cuectl"), ["--socket", d.socketPath, "reload"])
        #expect(reload.status == 0 && reload.out == "reloaded\n", "\(reload)")
        for (kind, reason) in Self.plants {
            #expect(warnings.contains("skipped \(sounds)/\(kind).wav: \(reason)"), "status: \(warnings)")
            #expect(reload.err.contains("skipped \(sounds)/\(kind).wav: \(reason)"), "cuectl reload: \(reload.err)")
        }
        #expect(try d.request("cues") == "ok pop psst1 psst2")
        #expect(try d.request("ping") == "ok pong")
    }

    /// The config names a FIFO as a cue: refused at once, naming it and the line.
    @Test func fifoNamedAsACueInTheConfig() throws {
        let d = try DaemonHarness(args: ["--sink", "null"])
        let fifo = d.dir.file("cue.wav")
        #expect(mkfifo(fifo, 0o600) == 0)
        try d.writeConfig("[cues.hang]\nfile = \"\(fifo)\"\n")
        let c = try d.client()
        #expect(try c.request("reload") == "err reload-failed \(fifo): is a FIFO, not a regular file (cue 'hang', \(d.configPath):2)")
        #expect(try c.request("ping") == "ok pong")
        #expect(try d.request("cues") == "ok pop psst1 psst2")
        // A FIFO in place of a cue at start: cued refuses to start, naming it, rather than hanging.
        let e = try DaemonHarness(args: ["--sink", "null", "--config", d.configPath], waitReady: false)
        #expect(e.waitForExit() == 78)
        #expect(e.readStderr().contains("\(fifo): is a FIFO, not a regular file"))
    }

    /// Under an address-space limit, decoding a legitimate cue that no longer
    /// fits is an error naming the file (exit 78 from `cued --check-config`),
    /// not an abort. The limit is found by bisection: the least that checks a
    /// config without the big cue, plus 1 MiB (the big cue needs 3.84 MB).
    @Test func allocationFailureUnderRLIMIT_ASIsAnError() throws {
        let dir = TempDir()
        let sounds = dir.file("sounds")
        try Fixture.writeCues(into: sounds, Fixture.standard)
        // 10 s of 48 kHz stereo: decodes to 480,000 × 2 floats = 3.84 MB.
        let big = dir.file("big.wav")
        try WAV.write(big, int16: Fixture.samples(seed: 5, frames: 960_000), sampleRate: 48_000, channels: 2)
        try "voices = 4\n".write(toFile: dir.file("small.toml"), atomically: false, encoding: .utf8)
        try "[cues.big]\nfile = \"\(big)\"\n".write(toFile: dir.file("big.toml"), atomically: false, encoding: .utf8)

        func check(_ config: String, limitKiB: Int) throws -> (status: Int32, out: String, err: String) {
            try runProcess("/usr/bin/prlimit", ["--as=\(limitKiB * 1024)", TestPaths.binary("cued"),
                                                "--sounds", sounds, "--check-config", dir.file(config)], timeout: 30)
        }
        var lo = 1_024, hi = 1_024 * 1_024   // KiB: 1 MiB (too little to load cued) … 1 GiB
        #expect(try check("small.toml", limitKiB: hi).status == 0)
        while hi - lo > 128 {
            let mid = (lo + hi) / 2
            if try check("small.toml", limitKiB: mid).status == 0 { hi = mid } else { lo = mid }
        }
        let r = try check("big.toml", limitKiB: hi + 1_024)
        #expect(r.status == 78, "status \(r.status): \(r.err)")
        // 3,840,000 bytes in whole pages (sample memory is mapped page by page).
        #expect(r.err.hasPrefix("\(big): cannot allocate 3842048 bytes to decode it"), "\(r.err)")
        #expect(r.err.contains("(cue 'big', \(dir.file("big.toml")):2)"))
        // With room, the same file checks fine: the limit was the cause.
        let roomy = try check("big.toml", limitKiB: hi + 16 * 1_024)
        #expect(roomy.status == 0, "\(roomy.err)")
    }
}
