import CuedProtocol
import Foundation
import Testing
import TestSupport

/// Cue design against the real daemon, heard in its WAV capture: variants and jitter,
/// rate and pitch, voice limits and cooldowns, and the pull you can hear.
@Suite(.timeLimit(.minutes(2))) struct CueDesignTests {
    /// A 440 Hz sine, 0.5 s, at -12 dBFS: its pitch is counted by zero crossings.
    static let tone = (0..<24_000).map { Int16(8000 * sin(2 * Double.pi * 440 * Double($0) / 48_000)) }
    /// A click: 200 ms of a loud decaying burst (peaks near -2 dBFS).
    static let click = (0..<9_600).map { i -> Int16 in
        Int16(26_000 * sin(Double(i) / 3) * exp(-Double(i) / 3_000))
    }

    func daemon(config: String = "", cues extra: [String: [Int16]] = [:]) throws -> DaemonHarness {
        var cues = Fixture.standard
        cues["tone"] = Self.tone
        cues["click"] = Self.click
        for (k, v) in extra { cues[k] = v }
        return try DaemonHarness(cues: cues, args: ["--sink", "wav:%DIR%/capture.wav", "--rate-limit", "0"], config: config)
    }

    /// The capture's left channel, cut into sounds: each from a first non-zero sample to
    /// the last one before 5 ms of silence.
    static func sounds(_ d: DaemonHarness) throws -> [[Int16]] {
        let all = try WAV.read(d.capturePath).samples
        let left = stride(from: 0, to: all.count, by: 2).map { all[$0] }
        var out: [[Int16]] = []
        var start: Int?, last = 0
        for (i, s) in left.enumerated() {
            if s != 0 {
                if start == nil { start = i }
                last = i
            } else if let st = start, i - last >= 240 {
                out.append(Array(left[st...last]))
                start = nil
            }
        }
        if let st = start { out.append(Array(left[st...last])) }
        return out
    }

    /// A cue's samples from its first to its last non-zero one.
    static func trimmed(_ x: [Int16]) -> [Int16] {
        guard let f = x.firstIndex(where: { $0 != 0 }), let l = x.lastIndex(where: { $0 != 0 }) else { return [] }
        return Array(x[f...l])
    }

    static func crossingsPerSecond(_ x: ArraySlice<Int16>) -> Double {
        var n = 0
        for (a, b) in zip(x, x.dropFirst()) where (a < 0) != (b < 0) { n += 1 }
        return Double(n) / 2 / (Double(x.count) / 48_000)
    }

    /// What a new user writes: three variants and ±50 cents of jitter; no two pops in a
    /// row are the same sound.
    @Test func threeVariantsAndJitterNeverRepeat() throws {
        let dir = TempDir()
        for (i, seed) in [31, 32, 33].enumerated() {
            try WAV.write(dir.file("v\(i).wav"), int16: Fixture.samples(seed: UInt64(seed), frames: 2_400), sampleRate: 48_000, channels: 1)
        }
        let d = try daemon(config: """
            [cues.pop]
            files = ["\(dir.file("v0.wav"))", "\(dir.file("v1.wav"))", "\(dir.file("v2.wav"))"]
            pitch_jitter_cents = 50
            """)
        #expect(try d.request("cues variants").contains("pop:3"))
        let c = try d.client()
        for _ in 0..<8 { #expect(try c.request("play pop wait") == "ok") }
        d.stop()
        let heard = try Self.sounds(d)
        #expect(heard.count == 8, "\(heard.map(\.count))")
        for (a, b) in zip(heard, heard.dropFirst()) { #expect(a != b) }
        // Jitter changes the length (rate ±2.9 %): not every pop is 2,400 frames long.
        #expect(Set(heard.map(\.count)).count > 1, "\(heard.map(\.count))")
    }

    /// `rate=1.5` sounds higher and shorter; `pitch=-1200` an octave lower and twice as long.
    @Test(arguments: [("rate=1.5", 1.5), ("pitch=-1200", 0.5), ("rate=2 pitch=-1200", 1.0)])
    func rateAndPitchChangeSpeedAndPitch(options: String, rate: Double) throws {
        let d = try daemon()
        #expect(try d.request("play tone \(options) wait") == "ok")
        d.stop()
        let heard = try #require(try Self.sounds(d).first)
        #expect(abs(Double(heard.count) - 24_000 / rate) <= 64, "\(heard.count) frames at \(options)")
        let hz = Self.crossingsPerSecond(heard[1_000..<(heard.count - 1_000)])
        #expect(abs(hz - 440 * rate) < 3, "\(hz) Hz at \(options)")
    }

    @Test func outOfRangeRatesAreRefused() throws {
        let d = try daemon()
        #expect(try d.request("play pop rate=3") == "err bad-argument rate '3' is not a speed in 0.5...2 (1: as recorded)")
        #expect(try d.request("play pop pitch=2000") == "err bad-argument pitch '2000' is not a number of cents in -1200...1200")
        try d.writeConfig("[cues.pop]\npitch_jitter_cents = 5000\n")
        let r = try d.request("reload")
        #expect(r.hasPrefix("err reload-failed \(d.configPath):2: cues.pop.pitch_jitter_cents: must be 0...1200"), "\(r)")
    }

    /// 100 clicks in a second with `max_voices = 4`: the oldest gives way each time, at most
    /// four sound at once, and the sum never clips at the sink.
    @Test func aBurstOfClicksStaysWithinItsLimitAndNeverClips() throws {
        let d = try daemon(config: "[cues.click]\nmax_voices = 4\n")
        let c = try d.client()
        for _ in 0..<100 {
            #expect(try c.request("play click") == "ok")
            usleep(10_000)  // the burst's pace, 100 a second, is what is tested
        }
        #expect(try c.request("play click wait") == "ok")
        let s = try d.status()
        d.stop()
        #expect(s.voicesStolen >= 50, "stolen: \(s.voicesStolen)")  // 200 ms clicks 10 ms apart: 4 at once at most
        #expect(s.clippedSamples == 0)
        let peak = try WAV.read(d.capturePath).samples.map { abs(Int($0)) }.max() ?? 0
        #expect(peak < 32_767 && peak > 20_000, "peak \(peak)")
    }

    /// `cooldown_ms`: a play within it is dropped (`ok cooldown`), or restarts the one playing.
    @Test func cooldownDropsOrRestarts() throws {
        let d = try daemon(config: "[cues.click]\ncooldown_ms = 300\n[cues.tone]\ncooldown_ms = 300\ncooldown = \"restart\"\n")
        let c = try d.client()
        #expect(try c.request("play click") == "ok")
        #expect(try c.request("play click") == "ok cooldown")
        #expect(try c.request("play click wait") == "ok cooldown")
        #expect(try c.request("events on") == "ok events on")
        let first = try c.request("play tone id")
        #expect(first.hasPrefix("ok "))
        #expect(try c.request("play tone id").hasPrefix("ok "))
        #expect(try c.readLine() == "end \(first.dropFirst(3)) stolen")  // the first tone gave way to the second
        usleep(400_000)  // past the 300 ms cooldown: a span of time is the rule tested, not an event
        #expect(try c.request("play click") == "ok")
    }

    /// `[pull] detent_points = 10`: a tick for each detent the pull moves into (either way),
    /// none past the threshold, the tick's reply its cue; heard in the capture.
    @Test func detentTicksSoundAtTheRightDistances() throws {
        let tick = (0..<480).map { Int16(12_000 * sin(Double($0) / 2) * exp(-Double($0) / 80)) }
        // 20 ms of zeros, played between: a voice that ended has left its last period for
        // the device to play, and the next could start on the frame after it (seen once under
        // load: the third tick and psst1 as one sound); the gap keeps each sound apart.
        let d = try daemon(config: "[pull]\ndetent_points = 10\ndetent_gain_db = 0\n",
                           cues: ["tick": tick, "gap": [Int16](repeating: 0, count: 960)])
        let c = try d.client()
        var replies: [String] = []
        for p in [4, 12, 18, 25, 19, 70] {
            replies.append(try c.request("drag \(p)"))
            #expect(try d.quiet())  // each tick ends before the next (heard apart in the capture)
            #expect(try c.request("play gap") == "ok")
            #expect(try d.quiet())
        }
        #expect(replies == ["ok -", "ok tick", "ok -", "ok tick", "ok tick", "ok psst1"])
        #expect(try d.quiet())  // psst1 (100 ms) ends before psst2 starts
        #expect(try c.request("detent") == "ok detent 10")
        #expect(try c.request("detent off") == "ok detent off")
        #expect(try c.request("drop") == "ok psst2")
        // The load ends (quietly) and a new pull crosses the first detent: with detents on,
        // `drag 12` would tick (while loading, a drag is ignored whatever the detents).
        #expect(try c.request("state idle quiet") == "ok -")
        #expect(try c.request("drag 4") == "ok -")
        #expect(try c.request("drag 12") == "ok -")
        // No tick was asked for since (status counts a play as it is answered), and what was
        // asked has played out: the stream drained (idle), so the capture holds all of it.
        let s = try #require(Status.parse(String(try c.request("status").dropFirst(3))))
        #expect(s.cues["tick"]?.played == 3, "\(s.cues["tick"].map { "\($0.played)" } ?? "no tick") ticks played")
        #expect(eventually { (try? Status.parse(String(d.request("status").dropFirst(3))))?.sink.state == "idle" })
        d.stop()
        let heard = try Self.sounds(d)
        // Three ticks, psst1, psst2: no tick once `detent off`.
        #expect(heard.map { $0 } == [Self.trimmed(tick), Self.trimmed(tick), Self.trimmed(tick),
                                      Self.trimmed(Fixture.standard["psst1"]!), Self.trimmed(Fixture.standard["psst2"]!)],
                "\(heard.map(\.count))")
    }
}
