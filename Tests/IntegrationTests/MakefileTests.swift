import Foundation
import Testing
import TestSupport

/// What the Makefile does, run for real: the repository's Makefile in a scratch
/// checkout named `cued` under a path with a space (what a clone often is), with
/// the files it installs linked in and a `swift` that only records how it was
/// called. Nothing is built; the real checkout is not touched.
@Suite(.timeLimit(.minutes(2))) struct MakefileTests {
    struct Call {
        var args: [String]
        var env: [String: String]
        func has(_ arg: String) -> Bool { args.contains(arg) }
    }

    final class Scratch: @unchecked Sendable {
        let dir = TempDir()
        var root: String { dir.file("a checkout/cued") }
        var log: String { dir.file("calls") }

        init() throws {
            let fm = FileManager.default
            try fm.createDirectory(atPath: root + "/.build/release", withIntermediateDirectories: true)
            // What an unquoted "…/a checkout/…" would reach: `rm -rf …/a` among others.
            try fm.createDirectory(atPath: dir.file("a"), withIntermediateDirectories: true)
            try fm.copyItem(atPath: TestPaths.repoRoot.path + "/Makefile", toPath: root + "/Makefile")
            for sub in ["Sounds", "docs", "completions", "systemd"] {
                try fm.createSymbolicLink(atPath: root + "/" + sub, withDestinationPath: TestPaths.repoRoot.path + "/" + sub)
            }
            // The release build install copies (stripped by `true`), and a cuesynth that writes nothing.
            for name in ["cued", "cuectl", "cuesynth"] { try script(root + "/.build/release/" + name, "exit 0") }
            // One line a call: its arguments, then the environment make test sets and what
            // the scratch prefix held by then, each field ended by \037.
            try script(dir.file("swift"), """
                { for a in "$@"; do printf '%s\\037' "$a"; done
                  printf 'ENV\\037'
                  printf 'SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH=%s\\037' "${SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH-}"
                  printf 'CUED_BIN_DIR=%s\\037CUED_TEST_PREFIX=%s\\037' "${CUED_BIN_DIR-}" "${CUED_TEST_PREFIX-}"
                  printf 'installed=%s\\037\\n' "$(ls "${CUED_TEST_PREFIX:-/nonexistent}/bin" 2>/dev/null | tr '\\n' ' ')"
                } >> "$CALLS"
                case " $* " in *" --show-bin-path "*) printf '%s/.build/debug\\n' "$PWD";; esac
                """)
        }

        func script(_ path: String, _ body: String) throws {
            try ("#!/bin/sh\n" + body + "\n").write(toFile: path, atomically: false, encoding: .utf8)
            chmod(path, 0o755)
        }

        /// `make VARS TARGETS` in the scratch checkout; `deps` installs nothing (APT_PKGS empty).
        func make(_ args: [String]) throws -> (status: Int32, out: String, err: String) {
            var env = ProcessInfo.processInfo.environment
            env["CALLS"] = log
            env.removeValue(forKey: "MAKEFLAGS")
            return try runProcess("/usr/bin/make", ["-C", root, "SWIFT=" + dir.file("swift"), "STRIP=true", "APT_PKGS="] + args, env: env)
        }

        var calls: [Call] {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            return text.split(separator: "\n").map { line in
                let fields = line.split(separator: "\u{1F}", omittingEmptySubsequences: false).map(String.init)
                let split = fields.firstIndex(of: "ENV") ?? fields.count
                var env: [String: String] = [:]
                for f in fields[split...].dropFirst() where f.contains("=") {
                    let kv = f.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                    env[String(kv[0])] = String(kv[1])
                }
                return Call(args: Array(fields[..<split]), env: env)
            }
        }
    }

    /// SwiftPM passes -color-diagnostics only when its output is a terminal,
    /// so a build after one whose output went elsewhere recompiled everything
    /// (a full release rebuild): every build says which it wants. The release
    /// configuration is one: the Swift runtime linked in.
    @Test func everyBuildFixesTheColourFlag() throws {
        let s = try Scratch()
        let prefix = s.dir.file("prefix")
        let r = try s.make(["build", "sounds", "install", "test", "PREFIX=" + prefix, "UNITDIR=" + prefix + "/units"])
        #expect(r.status == 0, "\(r.err)")
        let builds = s.calls.filter { $0.args.first == "build" && !$0.has("--show-bin-path") }
        #expect(builds.filter { $0.has("-c") }.count >= 2)  // the release build, cuesynth
        #expect(builds.contains { $0.has("--build-tests") })
        for call in builds { #expect(call.has("--no-color-diagnostics"), "\(call.args)") }
        for call in builds where call.has("release") { #expect(call.has("--static-swift-stdlib"), "\(call.args)") }
    }

    /// make test: the debug build with the tests, the release build installed into
    /// a scratch prefix the install tests are pointed at, then Swift Testing only
    /// (no XCTest, whose "Executed 0 tests" lines only confuse), everything but
    /// PipeWireTests and then those on their own, each run as wide as the cores
    /// (a case's time limit counts from when it runs). From a path with a space:
    /// nothing outside the checkout is removed.
    @Test func testRunsTheSuitesAgainstTheScratchInstall() throws {
        let s = try Scratch()
        let r = try s.make(["test"])
        #expect(r.status == 0, "\(r.err)")
        let tests = s.calls.filter { $0.args.first == "test" }
        #expect(tests.count == 2, "\(tests.map(\.args))")
        for call in tests {
            #expect(call.has("--disable-xctest") && call.has("--skip-build"), "\(call.args)")
            let width = Int(call.env["SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH"] ?? "") ?? 0
            #expect(width >= 1, "\(call.env)")
            #expect(call.env["CUED_BIN_DIR"] == s.root + "/.build/debug", "\(call.env)")
        }
        guard tests.count == 2 else { return }
        #expect(tests[0].args.suffix(2) == ["--skip", "PipeWireTests"])
        #expect(tests[0].env["CUED_TEST_PREFIX"] == s.root + "/.build/test-install")
        let installed = Set((tests[0].env["installed"] ?? "").split(separator: " "))
        #expect(installed == ["cued", "cuectl"], "the scratch prefix was not installed first")
        #expect(tests[1].args.suffix(2) == ["--filter", "PipeWireTests"])
        #expect(s.calls.firstIndex { $0.has("--build-tests") }! < s.calls.firstIndex { $0.args.first == "test" }!)
        #expect(FileManager.default.fileExists(atPath: s.dir.file("a")), "make test removed a directory outside the checkout")
        // Installed as make install would: the units' ExecStart quoted for systemd.
        let unit = try String(contentsOfFile: s.root + "/.build/test-install/units/cued.service", encoding: .utf8)
        #expect(unit.contains("\nExecStart=\"\(s.root)/.build/test-install/bin/cued\"\n"))
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
