import Foundation
import Testing
import TestSupport

/// The short fuzz run of `make test` (`make fuzz` runs 10 million inputs per parser).
@Suite(.timeLimit(.minutes(3))) struct FuzzTests {
    // `toml` compares cued's TOML parser with Python's tomllib on every input.
    @Test(arguments: [("protocol", 300_000), ("config", 100_000), ("toml", 50_000), ("json", 50_000), ("status", 50_000)])
    func parsersSurviveRandomInput(target: String, inputs: Int) throws {
        // 150 s: `status` (the debug build's JSON, 50,000 status lines) takes 43 s alone and
        // passed 60 s beside the rest of `make test` on two cores.
        let r = try runProcess(TestPaths.binary("cuedfuzz"), [target, "-n", "\(inputs)", "--seed", "\(UInt64.random(in: 1...1_000_000))"],
                               timeout: 170)
        #expect(r.status == 0, "\(r.out)\(r.err.suffix(500))")
        #expect(r.out.contains("cuedfuzz \(target): \(inputs) inputs"))
        #expect(r.out.contains("every property held"))
    }
}
