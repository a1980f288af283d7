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
            for sub in ["Sounds", "docs", "completions", "systemd", "dbus", "canberra"] {
                try fm.createSymbolicLink(atPath: root + "/" + sub, withDestinationPath: TestPaths.repoRoot.path + "/" + sub)
            }
            // make test's phase runner, the real one.
            try fm.createDirectory(atPath: root + "/Tests", withIntermediateDirectories: true)
            try fm.createSymbolicLink(atPath: root + "/Tests/phase.sh", withDestinationPath: TestPaths.repoRoot.path + "/Tests/phase.sh")
            // The release build install copies (stripped by `true`), and a cuesynth that writes nothing.
            for name in ["cued", "cuectl", "cuesynth"] { try script(root + "/.build/release/" + name, "exit 0") }
            // One line a call: its arguments, then the environment make test sets and what
            // the scratch prefix held by then, each field ended by \037.
            try script(dir.file("swift"), """
                { for a in "$@"; do printf '%s\\037' "$a"; done
                  printf 'ENV\\037'
                  printf 'SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH=%s\\037' "${SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH-}"
                  printf 'CUED_BIN_DIR=%s\\037CUED_TEST_PREFIX=%s\\037' "${CUED_BIN_DIR-}" "${CUED_TEST_PREFIX-}"
                  printf 'CUED_TEST_RTKIT=%s\\037CUED_TEST_STACK=%s\\037CUED_TEST_ROOT=%s\\037' "${CUED_TEST_RTKIT-}" "${CUED_TEST_STACK-}" "${CUED_TEST_ROOT-}"
                  printf 'installed=%s\\037\\n' "$(ls "${CUED_TEST_PREFIX:-/nonexistent}/bin" 2>/dev/null | tr '\\n' ' ')"
                } >> "$CALLS"
                case " $* " in *" --show-bin-path "*) printf '%s/.build/debug\\n' "$PWD";; esac
                # A test run writes its results where --xunit-output says, unless the runner died (FAKE_DIED).
                prev=; for a in "$@"; do [ "$prev" = --xunit-output ] && out=$a; prev=$a; done
                [ "$1" != test ] || [ -n "${FAKE_DIED-}" ] || [ -z "${out-}" ] ||
                  printf '<testsuite name="TestResults" errors="0" tests="0" failures="0" skipped="0">\\n' > "$out"
                """)
        }

        /// Written by a child `sh`, not by this (threaded) process: a descriptor open
        /// for writing here is inherited by whatever another test forks meanwhile,
        /// and exec of the script then fails with ETXTBSY ("Text file busy").
        func script(_ path: String, _ body: String) throws {
            let r = try runProcess("/bin/sh", ["-c", "cat > \"$1\" && chmod 0755 \"$1\"", "sh", path], stdin: "#!/bin/sh\n" + body + "\n")
            guard r.status == 0 else { throw HarnessError.exited(r.status, r.err) }
        }

        /// Every package list empty: the deps targets install nothing.
        static let noPackages = ["RUN_PKGS=", "TEST_PKGS=", "DEB_PKGS=", "BENCH_PKGS="]

        /// `make VARS TARGETS` in the scratch checkout; the deps targets install nothing (`noPackages`).
        func make(_ args: [String], extraEnv: [String: String] = [:]) throws -> (status: Int32, out: String, err: String) {
            var env = ProcessInfo.processInfo.environment.merging(extraEnv) { $1 }
            env["CALLS"] = log
            env.removeValue(forKey: "MAKEFLAGS")
            env.removeValue(forKey: "TEST_DEBIAN13")  // an outer make test TEST_DEBIAN13=1 exports it
            // The Debian 13 phase only where a test asks for it (the scratch checkout has no root).
            let stack = args.contains { $0.hasPrefix("TEST_DEBIAN13=") } ? [] : ["TEST_DEBIAN13=0"]
            return try runProcess("/usr/bin/make", ["-C", root, "SWIFT=" + dir.file("swift"), "STRIP=true"] + Self.noPackages + stack + args, env: env)
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
        // The libcanberra plug-in is built with the rest (by the C compiler, not SwiftPM).
        #expect(FileManager.default.fileExists(atPath: s.root + "/.build/canberra/libcanberra-cued.so"))
    }

    /// make test: the debug build with the tests, the release build installed into
    /// a scratch prefix the install tests are pointed at, then Swift Testing only
    /// (no XCTest, whose "Executed 0 tests" lines only confuse), everything but
    /// PipeWireTests and then those on their own (with RTKit, then those whose verdict the
    /// audio thread's scheduling can change once more without: CUED_TEST_RTKIT=off), each
    /// run as wide as the cores
    /// (a case's time limit counts from when it runs). From a path with a space:
    /// nothing outside the checkout is removed.
    @Test func testRunsTheSuitesAgainstTheScratchInstall() throws {
        let s = try Scratch()
        let r = try s.make(["test"])
        #expect(r.status == 0, "\(r.err)")
        let tests = s.calls.filter { $0.args.first == "test" }
        #expect(tests.count == 3, "\(tests.map(\.args))")
        for call in tests {
            #expect(call.has("--disable-xctest") && call.has("--skip-build"), "\(call.args)")
            let width = Int(call.env["SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH"] ?? "") ?? 0
            #expect(width >= 1, "\(call.env)")
            #expect(call.env["CUED_BIN_DIR"] == s.root + "/.build/debug", "\(call.env)")
        }
        guard tests.count == 3 else { return }
        #expect(tests[0].args.suffix(2) == ["--skip", "PipeWireTests"])
        #expect(tests[0].env["CUED_TEST_PREFIX"] == s.root + "/.build/test-install")
        let installed = Set((tests[0].env["installed"] ?? "").split(separator: " "))
        #expect(installed == ["cued", "cuectl"], "the scratch prefix was not installed first")
        #expect(tests[1].args.suffix(2) == ["--filter", "PipeWireTests"] && tests[1].env["CUED_TEST_RTKIT"] == "")
        // Without RTKit: the PipeWire tests whose verdict the thread's scheduling can change.
        #expect(tests[2].args.suffix(2).first == "--filter" && tests[2].env["CUED_TEST_RTKIT"] == "off")
        let timing = try Regex(tests[2].args.last ?? "")
        for id in ["IntegrationTests.PipeWireTests/fiftyCuesInARowAreAllHeardSampleExact(sink:)",
                   "IntegrationTests.PipeWireTests/cuesMidStreamAreMixedInSampleExactAndTheBedNeverBreaks(sink:)",
                   "IntegrationTests.PipeWireTests/theNativeStreamAsksTheQuantumItIsTold()",
                   "IntegrationTests.PipeWireTests/aStreamStoppedMidCueLeavesAHoleMissedCyclesCounts()"] {
            #expect(id.contains(timing), "\(id) is not run without RTKit")
        }
        #expect(!"IntegrationTests.PipeWireTests/doctorExplainsPipeWireUpAndDown()".contains(timing))
        #expect(s.calls.firstIndex { $0.has("--build-tests") }! < s.calls.firstIndex { $0.args.first == "test" }!)
        #expect(FileManager.default.fileExists(atPath: s.dir.file("a")), "make test removed a directory outside the checkout")
        // Installed as make install would: the units' ExecStart quoted for systemd.
        let unit = try String(contentsOfFile: s.root + "/.build/test-install/units/cued.service", encoding: .utf8)
        #expect(unit.contains("\nExecStart=\"\(s.root)/.build/test-install/bin/cued\"\n"))
    }

    /// TEST_DEBIAN13=1 (the default): the PipeWire phase once more, on the Debian 13 root `Tests/stacks/debian13.sh`
    /// built before the tests start (here a fake that prints a directory): every PipeWire test and the desktop's suites, cued's
    /// release build (it runs on the root's libraries), CUED_TEST_STACK and CUED_TEST_ROOT set.
    @Test func debian13RunsThePipeWirePhaseInTheRoot() throws {
        let s = try Scratch()
        try FileManager.default.createDirectory(atPath: s.root + "/Tests/stacks", withIntermediateDirectories: true)
        try s.script(s.root + "/Tests/stacks/debian13.sh", "echo \"$1\" >> \"$CALLS.root\"; echo /fake/debian13-root")
        let r = try s.make(["test", "TEST_DEBIAN13=1"])
        #expect(r.status == 0, "\(r.err)")
        let tests = s.calls.filter { $0.args.first == "test" }
        #expect(tests.count == 4, "\(tests.map(\.args))")
        guard let last = tests.last, tests.count == 4 else { return }
        #expect(last.args.suffix(2) == ["--filter", "PipeWireTests|DesktopBusTests|DesktopSettingsTests|RealPortalTests|CanberraTests"], "\(last.args)")
        #expect(last.env["CUED_TEST_STACK"] == "debian13" && last.env["CUED_TEST_ROOT"] == "/fake/debian13-root", "\(last.env)")
        #expect(last.env["CUED_BIN_DIR"] == s.root + "/.build/release", "\(last.env)")
        // Built (`root`) before the first test run, looked up (`path`) for its phase.
        #expect((try? String(contentsOfFile: s.log + ".root", encoding: .utf8)) == "root\npath\n")
        for call in tests.dropLast() { #expect(call.env["CUED_TEST_STACK"] == "", "\(call.env)") }
        let off = try s.make(["test", "TEST_DEBIAN13=0"])
        #expect(off.out.contains("make test: the PipeWire phase on Debian 13's stack is off (make test TEST_DEBIAN13=1 runs it)"), "\(off.out)")
    }

    /// A log that lost the runner's last lines says nothing of how it ended (seen: the summary
    /// and ~30 tests' ends missing, swift test's status 0): each run writes its results itself
    /// (--xunit-output), make test shows the runner's own count, and a run without results
    /// (a runner that died) fails make test, saying so; every phase runs all the same, and the
    /// summary at the end names each with its count or why it has none.
    @Test func aTestRunWithoutItsResultsFailsMakeTest() throws {
        let s = try Scratch()
        let ok = try s.make(["test"])
        #expect(ok.status == 0 && ok.out.contains("make test: the runner's own count: tests=\"0\" failures=\"0\""), "\(ok.out) \(ok.err)")
        #expect(ok.out.contains("make test: the phases\n  ok everything but PipeWire: tests=\"0\" failures=\"0\" skipped=\"0\", exit 0\n"), "\(ok.out)")
        #expect(s.calls.filter { $0.args.first == "test" }.allSatisfy { $0.has("--xunit-output") })
        let r = try s.make(["test"], extraEnv: ["FAKE_DIED": "1"])
        #expect(r.status != 0, "\(r.out)")
        #expect(r.err.contains("make test: the test runner ended without writing its results"), "\(r.err)")
        #expect(s.calls.filter { $0.args.first == "test" }.count == 3 + 3, "every phase runs, whatever the one before did")
        #expect(r.out.contains("  FAILED PipeWire (Debian 12): no results (the runner exited 0)"), "\(r.out)")
        #expect(r.err.contains("make test: 3 of 3 phases failed"), "\(r.err)")
    }

    /// `make run`: cued with the sink SINK names, else no `--sink` (the config's sink, else
    /// auto: cued picks and says why, AutoSinkTests) with one line on how to force one; ARGS follow.
    func run(_ s: Scratch, _ vars: [String], unset: [String] = []) throws -> (status: Int32, out: String, err: String, argv: [String]) {
        try s.script(s.root + "/.build/release/cued", "printf '%s\\n' \"$@\" > \"$CALLS.cued\"; printf '%s' \"$CUED_SOCKET\" > \"$CALLS.socket\"")
        var env = ProcessInfo.processInfo.environment
        env["XDG_RUNTIME_DIR"] = env["XDG_RUNTIME_DIR"] ?? s.dir.path
        for key in unset { env.removeValue(forKey: key) }
        env["CALLS"] = s.log
        env.removeValue(forKey: "MAKEFLAGS")
        env.removeValue(forKey: "TEST_DEBIAN13")  // an outer make test TEST_DEBIAN13=1 exports it
        env.removeValue(forKey: "SINK")
        let r = try runProcess("/usr/bin/make", ["-s", "-C", s.root, "SWIFT=" + s.dir.file("swift")] + Scratch.noPackages + vars + ["run"], env: env)
        let argv = ((try? String(contentsOfFile: s.log + ".cued", encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        return (r.status, r.out, r.err, argv)
    }

    @Test func runWithoutSinkLetsCuedPick() throws {
        let r = try run(try Scratch(), [])
        #expect(r.status == 0, "\(r.err)")
        #expect(r.argv == [], "\(r.argv)")
        #expect(r.out.hasPrefix("make run: cued picks where sound goes (its config's sink, else auto) and says why; "), "\(r.out)")
        #expect(r.out.contains("make run SINK=wav:/tmp/cued.wav"), "\(r.out)")
    }

    /// Where there is no XDG_RUNTIME_DIR (a container, `su`) and no CUED_SOCKET, `make run`
    /// gives cued ~/.cued.sock and says how cuectl finds it; with either set it adds nothing.
    @Test func runWithoutARuntimeDirectoryUsesASocketInHome() throws {
        let s = try Scratch()
        let r = try run(s, [], unset: ["XDG_RUNTIME_DIR", "CUED_SOCKET"])
        #expect(r.status == 0, "\(r.err)")
        let home = ProcessInfo.processInfo.environment["HOME"] ?? ""
        #expect(r.out.contains("make run: XDG_RUNTIME_DIR is not set, so the socket is \(home)/.cued.sock; where you run cuectl: export CUED_SOCKET=\(home)/.cued.sock"), "\(r.out)")
        #expect((try? String(contentsOfFile: s.log + ".socket", encoding: .utf8)) == home + "/.cued.sock")
        let set = try run(s, [], unset: ["CUED_SOCKET"])
        #expect(!set.out.contains("XDG_RUNTIME_DIR"), "\(set.out)")
        #expect((try? String(contentsOfFile: s.log + ".socket", encoding: .utf8)) == "")
    }

    @Test func runWithSinkForcesIt() throws {
        let r = try run(try Scratch(), ["SINK=wav:/tmp/x.wav", "ARGS=--log-level debug"])
        #expect(r.status == 0, "\(r.err)")
        #expect(r.argv == ["--sink", "wav:/tmp/x.wav", "--log-level", "debug"])
        #expect(r.out == "")
    }

    /// `make TARGET` with nothing installed (a fake dpkg), so that every package is asked of apt-get
    /// (a fake that records it): the packages it asked for.
    func packagesAsked(_ target: String) throws -> Set<String> {
        let s = try Scratch()
        let bin = s.dir.file("bin")
        try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
        try s.script(bin + "/dpkg", "exit 1")
        try s.script(bin + "/apt-get", "echo \"$*\" >> \"$CALLS.apt\"")
        try s.script(bin + "/sudo", "exec \"$@\"")
        var env = ProcessInfo.processInfo.environment
        env["CALLS"] = s.log
        env["PATH"] = bin + ":" + (env["PATH"] ?? "/usr/bin:/bin")
        env.removeValue(forKey: "MAKEFLAGS")
        env.removeValue(forKey: "TEST_DEBIAN13")  // an outer make test TEST_DEBIAN13=1 exports it
        let r = try runProcess("/usr/bin/make", ["-s", "-C", s.root, target], env: env)
        #expect(r.status == 0, "\(r.err)")
        let apt = (try? String(contentsOfFile: s.log + ".apt", encoding: .utf8)) ?? ""
        return Set(apt.split(separator: "\n").filter { $0.hasPrefix("install ") }.flatMap { $0.split(separator: " ").map(String.init) })
    }

    /// make test-deps installs what the tests need and dpkg says is missing, including bash-completion
    /// (the bash completions load through it), dpkg-dev and lintian (make deb's test), and debootstrap
    /// (the Debian 13 root).
    @Test func testDepsInstallWhatTheTestsNeed() throws {
        let install = try packagesAsked("test-deps")
        for package in ["bash-completion", "dpkg-dev", "lintian", "scdoc", "socat", "pipewire", "debootstrap", "pkg-config"] {
            #expect(install.contains(package), "\(install.sorted())")
        }
    }

    /// make deps (what make build and make run install) is what building and running cued needs: the
    /// compilers' inputs, no test tool, no sound server, no system service (feedbackd's D-Bus service
    /// would race cued for its name; rtkit and polkitd are the machine's to run).
    @Test func runInstallsOnlyWhatBuildingAndRunningNeeds() throws {
        let install = try packagesAsked("deps")
        for package in ["pkg-config", "libasound2-dev", "libsndfile1-dev", "libsamplerate0-dev", "libpipewire-0.3-dev",
                        "libsystemd-dev", "gcc", "libcanberra-dev"] {
            #expect(install.contains(package), "\(install.sorted())")
        }
        let services = ["feedbackd", "rtkit", "polkitd", "pipewire", "pipewire-pulse", "wireplumber", "dbus", "dbus-daemon",
                        "systemd", "pulseaudio", "xdg-desktop-portal", "xdg-desktop-portal-gtk", "dconf-service"]
        #expect(install.isDisjoint(with: services), "make deps installs \(install.intersection(services).sorted())")
        for tool in ["socat", "sox", "lintian", "xvfb", "zsh", "fish", "fuse3", "debootstrap", "gnome-session-canberra"] {
            #expect(!install.contains(tool), "make deps installs \(tool), a test's tool")
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
