import CuedClient
import Foundation
import Testing
import TestSupport

/// The cues in Sounds/ as cued loads them by default: `fail` is shipped and
/// mappable like any cue, though only psst1, psst2 and pop are required.
@Suite(.timeLimit(.minutes(2))) struct ShippedCuesTests {
    static let sounds = TestPaths.repoRoot.appendingPathComponent("Sounds").path

    @Test func failIsLoadedAndMappable() throws {
        let d = try DaemonHarness(args: ["--sink", "wav:%DIR%/capture.wav", "--sounds", Self.sounds],
                                  config: "[transitions]\n\"loading->idle\" = \"fail\"\n")
        #expect(try d.request("cues") == "ok fail pop psst1 psst2")
        let c = try d.client()
        #expect(try c.request("state loading") == "ok psst2")
        let psst2 = try WAV.read(Self.sounds + "/psst2.wav").samples
        #expect(eventually { ((try? WAV.read(d.capturePath))?.frames ?? 0) >= psst2.count })
        #expect(try c.request("state idle") == "ok fail")
        let fail = try WAV.read(Self.sounds + "/fail.wav").samples
        #expect(eventually { ((try? WAV.read(d.capturePath))?.frames ?? 0) >= psst2.count + fail.count })
        d.stop()
        // The capture holds psst2 then fail, sample for sample (each padded to a period end).
        let cap = try WAV.read(d.capturePath).samples
        guard let start = (psst2.count * 2..<cap.count).first(where: { cap[$0] != 0 }) else {
            Issue.record("fail never sounded"); return
        }
        // fail starts with 1 ms of silence: find its first sound in the file and line up.
        let firstSound = fail.firstIndex { $0 != 0 }!
        #expect(sampleDifference(Array(cap[(start - firstSound * 2)...]), fail.stereo) == nil)
    }

    @Test func withoutFailTheBankStillLoads() throws {
        let d = try DaemonHarness(args: ["--sink", "null"])   // the fixture: psst1, psst2, pop only
        #expect(try d.request("cues") == "ok pop psst1 psst2")
        #expect(try d.request("play fail").hasPrefix("err unknown-cue"))
    }
}
