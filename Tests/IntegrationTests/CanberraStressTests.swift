import Foundation
import Testing
import TestSupport

/// The plug-in's stress and fuzzer, where `make canberra-stress canberra-fuzz` built them.
enum CanberraStress {
    static let build = TestPaths.repoRoot.appendingPathComponent(".build/canberra").path
    static let fuzzer = build + "/fuzz-reply"

    static var unavailableReason: String? {
        if let r = CanberraSandbox.unavailableReason { return r }
        for v in ["plain", "asan", "tsan"] where !FileManager.default.isExecutableFile(atPath: "\(build)/stress/\(v)/canberra-host") {
            return "the plug-in's stress is not built (make canberra-stress): \(v)"
        }
        return nil
    }

    /// The release cued when make test built it, else this build's.
    static var cuedDir: String {
        ProcessInfo.processInfo.environment["CUED_RELEASE_BIN_DIR"].flatMap { $0.isEmpty ? nil : $0 } ?? TestPaths.binDir.path
    }
}

/// The libcanberra plug-in inside a host process (canberra/stress/host.c: real libcanberra,
/// contexts and threads), briefly: against a fake cued in every hostile mode and the real cued
/// stopped and restarted, built as is, with ASan+UBSan and with TSan; and its reply parser under
/// libFuzzer. `make reliability` runs the same scenarios longer (bench/attack_canberra.py). The
/// verdicts are bench/canberra_stress.py's: every accepted play called back once, before its
/// context goes, never on the caller's thread, none lost, nothing left behind, no sanitizer report.
@Suite(.serialized, .timeLimit(.minutes(6)),
       .enabled(if: CanberraStress.unavailableReason == nil, Comment(rawValue: CanberraStress.unavailableReason ?? "")))
struct CanberraStressTests {
    @Test func thePlugInHoldsInItsHostAgainstEveryHostileCuedWithSanitizers() throws {
        var env = ProcessInfo.processInfo.environment
        env["BENCH_BIN_DIR"] = CanberraStress.cuedDir
        let r = try runProcess("/usr/bin/python3", [TestPaths.repoRoot.path + "/bench/canberra_stress.py", "--quick", "--json"],
                               env: env, timeout: 330)
        let runs = try #require(try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [[String: Any]], "\(r.out) \(r.err.suffix(2000))")
        // Every mode of the fake, the real cued stopped and restarted, threads, contexts, destroys, libcanberra's own
        // alsa driver on ALSA's null PCM with cancels racing each sound's end (and its player threads slowed at their
        // end, as built and under ASan+UBSan), a cued that acks and never ends, an app's slow callback, a fallback driver
        // that hangs (a context per sound under `ulimit -n 1024`) or fails to open, a sound on a hung FUSE mount, as built;
        // all but eight of the fake's modes under ASan+UBSan and TSan too (make reliability runs all, longer).
        #expect(runs.count == 65, "\(runs.count) runs")
        for run in runs where run["held"] as? Bool != true {
            Issue.record("\(run["name"] ?? "?") (\(run["variant"] ?? "?")): \(run["why"] ?? "?") \(run["first_report"] ?? "")")
        }
        #expect(runs.allSatisfy { ($0["sanitizer_reports"] as? Int) == 0 }, "\(r.err.suffix(3000))")
    }

    /// The parser of cued's lines under libFuzzer, from the corpus in fuzz/seeds/canberra (its
    /// finds, if any, in a temp directory named in the failure).
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: CanberraStress.fuzzer), "make canberra-fuzz builds it"))
    func theReplyParserSurvivesRandomInput() throws {
        let dir = TempDir()
        let corpus = dir.file("corpus")
        try FileManager.default.createDirectory(atPath: corpus, withIntermediateDirectories: true)
        let r = try runProcess(CanberraStress.fuzzer, ["-runs=300000", "-max_len=1024", "-artifact_prefix=\(dir.path)/", corpus,
                                                       TestPaths.repoRoot.path + "/fuzz/seeds/canberra"], timeout: 120)
        #expect(r.status == 0, "\(r.err.suffix(3000))")
        #expect(r.err.contains("Done 300000 runs"), "\(r.err.suffix(500))")
    }
}
