import Foundation
import Testing
import TestSupport

/// The short fuzz run of `make test` (`make fuzz` runs 10 million inputs per parser).
@Suite(.timeLimit(.minutes(3))) struct FuzzTests {
    // `toml` compares cued's TOML parser with Python's tomllib on every input.
    @Test(arguments: [("protocol", 300_000), ("config", 100_000), ("toml", 50_000), ("json", 50_000), ("status", 50_000)])
    func parsersSurviveRandomInput(target: String, inputs: Int) throws {
        // `make test` runs the release build's cuedfuzz (CUED_RELEASE_BIN_DIR, built just before):
        // the five targets take 28 s there and 106 s in the debug build (`status` alone 43 s),
        // the longest part of the suite. A plain `swift test` fuzzes the debug build.
        let dir = ProcessInfo.processInfo.environment["CUED_RELEASE_BIN_DIR"].flatMap { $0.isEmpty ? nil : $0 }
        let bin = dir.map { $0 + "/cuedfuzz" } ?? TestPaths.binary("cuedfuzz")
        let r = try runProcess(bin, [target, "-n", "\(inputs)", "--seed", "\(UInt64.random(in: 1...1_000_000))"],
                               timeout: 170)
        #expect(r.status == 0, "\(r.out)\(r.err.suffix(500))")
        #expect(r.out.contains("cuedfuzz \(target): \(inputs) inputs"))
        #expect(r.out.contains("every property held"))
    }
}
