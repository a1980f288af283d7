import CuedClient
import CuedProtocol
import Foundation
import Testing
import TestSupport

enum TestInstall {
    static var prefix: String? {
        ProcessInfo.processInfo.environment["CUED_TEST_PREFIX"].flatMap { $0.isEmpty ? nil : $0 }
    }
}

/// What `make install` puts in a prefix: `make test` installs the release
/// build into .build/test-install and names it in CUED_TEST_PREFIX (a plain
/// `swift test` has no release build to install, so these are skipped there).
@Suite(.enabled(if: TestInstall.prefix != nil, "needs CUED_TEST_PREFIX (make test)"), .timeLimit(.minutes(3)))
struct InstallTests {
    var prefix: String { TestInstall.prefix ?? "/nonexistent" }

    /// The toolchain directory: the one holding usr/bin/swift.
    static func toolchain() throws -> String {
        let which = try runProcess("/bin/sh", ["-c", "readlink -f \"$(command -v swift)\""])
        let swift = which.out.trimmingCharacters(in: .whitespacesAndNewlines)
        guard let r = swift.range(of: "/usr/bin/") else { throw HarnessError.timeout("no toolchain: '\(swift)'") }
        return String(swift[..<r.lowerBound])
    }

    /// `unshare`'s arguments for `sh -c SCRIPT` in a private mount namespace (as a user, in a user
    /// namespace of its own too: `MountNamespace`) where the toolchain directory is an empty tmpfs.
    func withoutToolchain(_ script: String) throws -> [String] {
        let tc = try Self.toolchain()
        return MountNamespace.unshareFlags + ["/bin/sh", "-c", "mount -t tmpfs none '\(tc)' && test ! -e '\(tc)/usr/bin/swift' && \(script)"]
    }

    @Test(arguments: ["cued", "cuectl"])
    func binariesAreStrippedAndNeedNoToolchainLibrary(name: String) throws {
        let bin = prefix + "/bin/" + name
        let sections = try runProcess("/usr/bin/readelf", ["-S", "-W", bin])
        #expect(sections.status == 0)
        #expect(!sections.out.contains(".symtab"), "\(name) is not stripped")
        let ldd = try runProcess("/usr/bin/ldd", [bin])
        let tc = try Self.toolchain()
        #expect(!ldd.out.contains(tc) && !ldd.out.contains("libswift") && !ldd.out.contains("libFoundation"), "\(ldd.out)")
    }

    /// The installed cued serves a real `play` and the installed cuectl sends
    /// it, both with the toolchain hidden from them.
    @Test(.enabled(if: MountNamespace.unavailableReason == nil, Comment(rawValue: MountNamespace.unavailableReason ?? "")))
    func runWithTheToolchainHidden() throws {
        let dir = TempDir()
        let sock = dir.file("cued.sock"), capture = dir.file("capture.wav")
        var env = ProcessInfo.processInfo.environment
        env["XDG_RUNTIME_DIR"] = dir.path
        env["XDG_STATE_HOME"] = dir.file("state")
        env["XDG_CONFIG_HOME"] = dir.file("config")
        env["XDG_DATA_HOME"] = dir.file("data")
        env.removeValue(forKey: "CUED_SOCKET")
        env.removeValue(forKey: "NOTIFY_SOCKET")
        let cued = try Subprocess(MountNamespace.unshareTool, try withoutToolchain("exec '\(prefix)/bin/cued' --socket \(sock) --sink wav:\(capture)"),
                                  env: env, stderr: dir.file("cued.err"))
        let answered = eventually(timeout: 15) { (try? CueClient(path: sock, timeoutSeconds: 2).request("ping")) == "ok pong" }
        #expect(answered, "\((try? String(contentsOfFile: dir.file("cued.err"), encoding: .utf8)) ?? "")")
        guard answered else { return }
        let play = try runProcess(MountNamespace.unshareTool, try withoutToolchain("'\(prefix)/bin/cuectl' --socket \(sock) play pop && '\(prefix)/bin/cuectl' --version"), env: env)
        #expect(play.status == 0, "\(play.err)")
        #expect(play.out.hasPrefix("cuectl "))
        #expect(eventually { ((try? WAV.read(capture))?.samples.filter { $0 != 0 }.count ?? 0) > 0 })
        #expect(cued.stop() == 0)
    }

    /// libpipewire and libsystemd are not linked but loaded when used (a PipeWire output opened,
    /// a session bus there): the installed cued on null with no session bus maps neither, and
    /// says why its D-Bus face is absent. (Their loading and relocations cost every start.)
    @Test func pipeWireAndSDBusAreLoadedOnlyWhenUsed() throws {
        let needed = try runProcess("/usr/bin/readelf", ["-d", prefix + "/bin/cued"]).out
        #expect(!needed.contains("libpipewire") && !needed.contains("libsystemd"), "\(needed)")
        let dir = TempDir()
        let sock = dir.file("cued.sock")
        var env = ProcessInfo.processInfo.environment
        env["XDG_RUNTIME_DIR"] = dir.path  // no bus socket there
        env["XDG_STATE_HOME"] = dir.file("state")
        env["XDG_CONFIG_HOME"] = dir.file("config")
        for key in ["DBUS_SESSION_BUS_ADDRESS", "CUED_SOCKET", "NOTIFY_SOCKET"] { env.removeValue(forKey: key) }
        let cued = try Subprocess(prefix + "/bin/cued", ["--socket", sock, "--sink", "null"], env: env, stderr: dir.file("cued.err"))
        defer { _ = cued.stop() }
        let client = { try CueClient(path: sock, timeoutSeconds: 2) }
        #expect(eventually(timeout: 15) { (try? client().request("play pop wait")) == "ok" }, "\((try? String(contentsOfFile: dir.file("cued.err"), encoding: .utf8)) ?? "")")
        var bus = ""
        #expect(eventually { bus = (try? client().request("status")) ?? ""; return bus.contains(#""connection":"absent""#) }, "\(bus)")
        #expect(bus.contains("no session bus at \(dir.path)/bus"), "\(bus)")
        let maps = try String(contentsOfFile: "/proc/\(cued.pid)/maps", encoding: .utf8)
        #expect(!maps.contains("libpipewire") && !maps.contains("libsystemd"), "\(maps.split(separator: "\n").filter { $0.contains(".so") }.map { $0.split(separator: " ").last ?? "" })")
    }

    @Test func manPagesAreFoundInThePrefix() throws {
        for (section, page) in [("1", "cued"), ("1", "cuectl"), ("5", "cued.toml")] {
            let r = try runProcess("/usr/bin/man", ["-M", prefix + "/share/man", "-w", section, page])
            #expect(r.out == "\(prefix)/share/man/man\(section)/\(page).\(section)\n", "\(r)")
        }
    }

    /// `make uninstall` removes every file `make install` wrote and says
    /// nothing about a systemctl that is not there.
    @Test func uninstallRemovesEverythingQuietly() throws {
        let dir = TempDir()
        let root = TestPaths.repoRoot.path
        let dirs = ["PREFIX=\(dir.path)", "UNITDIR=\(dir.file("units"))"]
        let install = try runProcess("/usr/bin/make", ["-s", "-C", root, "install-files"] + dirs)
        #expect(install.status == 0, "\(install.err)")
        let files = try runProcess("/usr/bin/find", [dir.path, "-type", "f"]).out.split(separator: "\n")
        #expect(files.count >= 14, "\(files)")
        let uninstall = try runProcess("/usr/bin/make", ["-s", "-C", root, "uninstall", "SYSTEMCTL=/nonexistent/systemctl"] + dirs)
        #expect(uninstall.status == 0)
        #expect(uninstall.err == "", "\(uninstall.err)")
        #expect(uninstall.out == "", "\(uninstall.out)")
        #expect(try runProcess("/usr/bin/find", [dir.path, "-type", "f"]).out == "")
        // …and the directories it made, now empty; the prefix itself stays.
        #expect(try runProcess("/usr/bin/find", [dir.path, "-mindepth", "1"]).out == "")
        #expect(FileManager.default.fileExists(atPath: dir.path))
    }

    /// A directory install did not empty (something else of the user's in it) stays, and the
    /// user's own cues are never touched: with the default PREFIX (~/.local) the user's cue
    /// directory, $XDG_DATA_HOME/cued/sounds, is share/cued/sounds under it, beside the shipped
    /// share/cued/cues (one directory for both once cost a user their cues at uninstall).
    @Test func uninstallKeepsDirectoriesWithOtherFiles() throws {
        let dir = TempDir()
        let root = TestPaths.repoRoot.path
        let dirs = ["PREFIX=\(dir.path)", "UNITDIR=\(dir.file("config/systemd/user"))"]
        try FileManager.default.createDirectory(atPath: dir.file("share/cued/sounds"), withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: dir.file("share/cued/sounds/pop.wav"), contents: Data("mine".utf8))
        #expect(try runProcess("/usr/bin/make", ["-s", "-C", root, "install-files"] + dirs).status == 0)
        #expect(FileManager.default.contents(atPath: dir.file("share/cued/sounds/pop.wav")) == Data("mine".utf8), "install replaced the user's cue")
        #expect(FileManager.default.fileExists(atPath: dir.file("share/cued/cues/pop.wav")))
        for f in ["bin/mine", "share/man/man1/mine.1", "config/systemd/user/mine.service", "share/cued/cues/mine.wav"] {
            _ = FileManager.default.createFile(atPath: dir.file(f), contents: nil)
        }
        let uninstall = try runProcess("/usr/bin/make", ["-s", "-C", root, "uninstall", "SYSTEMCTL=/nonexistent/systemctl"] + dirs)
        #expect(uninstall.status == 0 && uninstall.err == "", "\(uninstall.err)")
        let left = try runProcess("/usr/bin/find", [dir.path, "-mindepth", "1"]).out.split(separator: "\n").map { String($0.dropFirst(dir.path.count + 1)) }
        #expect(Set(left) == ["bin", "bin/mine", "share", "share/man", "share/man/man1", "share/man/man1/mine.1",
                              "share/cued", "share/cued/sounds", "share/cued/sounds/pop.wav", "share/cued/cues", "share/cued/cues/mine.wav",
                              "config", "config/systemd", "config/systemd/user", "config/systemd/user/mine.service"], "\(left.sorted())")
        #expect(FileManager.default.contents(atPath: dir.file("share/cued/sounds/pop.wav")) == Data("mine".utf8))
    }
}
