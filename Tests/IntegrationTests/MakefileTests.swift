import Foundation
import Testing
import TestSupport

/// What the Makefile runs, read from `make -n` (nothing is built).
@Suite struct MakefileTests {
    func dryRun(_ targets: [String]) throws -> [Substring] {
        let r = try runProcess("/usr/bin/make", ["-n", "-C", TestPaths.repoRoot.path] + targets)
        #expect(r.status == 0, "\(r.err)")
        return r.out.split(separator: "\n")
    }

    /// SwiftPM passes -color-diagnostics only when its output is a terminal,
    /// so a build after one whose output went elsewhere recompiled everything
    /// (a full release rebuild): every build says which it wants.
    @Test func everyBuildFixesTheColourFlag() throws {
        let builds = try dryRun(["build", "test", "sounds", "install"]).filter { $0.contains("swift build") }
        #expect(builds.count >= 3)  // release, debug with tests, cuesynth
        for line in builds { #expect(line.contains("--no-color-diagnostics"), "\(line)") }
        // The release configuration is one: the Swift runtime linked in.
        for line in builds where line.contains("-c release") { #expect(line.contains("--static-swift-stdlib"), "\(line)") }
    }

    /// No XCTest run, whose "Executed 0 tests" lines only confuse.
    @Test func testsRunWithoutXCTest() throws {
        let tests = try dryRun(["test"]).filter { $0.contains("swift test") }
        #expect(tests.count == 2)  // everything but PipeWireTests, then PipeWireTests on their own
        for line in tests { #expect(line.contains("--disable-xctest"), "\(line)") }
        #expect(tests.first?.contains("--skip PipeWireTests") == true)
        #expect(tests.last?.contains("--filter PipeWireTests") == true)
    }

    /// Every test case's time limit counts from when it runs, not from when the run
    /// began: the parallelization width is the number of cores (see the Makefile).
    @Test func timeLimitsCountFromWhenATestRuns() throws {
        let tests = try dryRun(["test"]).filter { $0.contains("swift test") }
        #expect(tests.count == 2)
        for line in tests {
            let width = line.split(separator: " ").first { $0.hasPrefix("SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH=") }
            let n = width.flatMap { Int($0.split(separator: "=").last ?? "") }
            #expect(n != nil && n! >= 1, "\(line)")
        }
    }

    /// UNITDIR follows $XDG_CONFIG_HOME, as systemd's user units do.
    @Test func unitsGoUnderXDGConfigHome() throws {
        let dir = TempDir()
        var env = ProcessInfo.processInfo.environment
        env["XDG_CONFIG_HOME"] = dir.file("cfg")
        let r = try runProcess("/usr/bin/make", ["-s", "-C", TestPaths.repoRoot.path, "install-units", "BINDIR=/x/bin"], env: env)
        #expect(r.status == 0, "\(r.err)")
        #expect(FileManager.default.fileExists(atPath: dir.file("cfg/systemd/user/cued.service")))
        #expect(FileManager.default.fileExists(atPath: dir.file("cfg/systemd/user/cued.socket")))
    }
}
