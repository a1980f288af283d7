import CuedClient
import Foundation
import Testing
import TestSupport

/// The cues in Sounds/ as cued loads them by default: `fail` is shipped and
/// mappable like any cue, though only psst1, psst2 and pop are required.
@Suite(.timeLimit(.minutes(2))) struct ShippedCuesTests {
    static let sounds = TestPaths.repoRoot.appendingPathComponent("Sounds").path

    @Test func failIsLoadedAndMappable() throws {
        // In sequence, the first play of each is its first variant: the file checked below.
        let d = try DaemonHarness(args: ["--sink", "wav:%DIR%/capture.wav", "--sounds", Self.sounds],
                                  config: "[transitions]\n\"loading->idle\" = \"fail\"\n[cues.psst2]\norder = \"sequence\"\n"
                                      + "[cues.fail]\norder = \"sequence\"\n")
        #expect(try d.request("cues") == "ok fail pop psst1 psst2 tick")
        #expect(try d.request("cues variants") == "ok fail:3 pop:3 psst1:3 psst2:3 tick:3")
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

    /// The shipped pop has three variants, shuffled: six pops in a row are each variant
    /// twice and never the same twice in a row (found sample-exact in the capture).
    @Test func theShippedPopNeverSoundsTheSameTwiceInARow() throws {
        let d = try DaemonHarness(args: ["--sink", "wav:%DIR%/capture.wav", "--sounds", Self.sounds])
        let c = try d.client()
        for _ in 0..<6 { #expect(try c.request("play pop wait") == "ok") }
        let s = try d.status()
        #expect(s.cues["pop"]?.variants == 3 && s.cues["pop"]?.order == "shuffle" && s.cues["pop"]?.played == 6)
        d.stop()
        let variants = try ["pop", "pop-2", "pop-3"].map { try WAV.read(Self.sounds + "/\($0).wav").samples.stereo }
        var cap = try WAV.read(d.capturePath).samples[...]
        var heard: [Int] = []
        while let start = cap.firstIndex(where: { $0 != 0 }) {
            // Each variant starts with 1 ms of silence: line its first sound up with the capture's.
            let match = variants.indices.first { v in
                let lead = variants[v].firstIndex { $0 != 0 }!
                let from = start - lead
                return from >= cap.startIndex && from + variants[v].count <= cap.endIndex
                    && Array(cap[from..<(from + variants[v].count)]) == variants[v]
            }
            guard let v = match else { Issue.record("a play at sample \(start) is no variant of pop"); break }
            heard.append(v)
            cap = cap[(start - variants[v].firstIndex { $0 != 0 }! + variants[v].count)...]
        }
        #expect(heard.count == 6, "\(heard)")
        #expect(zip(heard, heard.dropFirst()).allSatisfy { $0 != $1 }, "\(heard)")
        #expect(Set(heard) == [0, 1, 2], "\(heard)")
    }
}
