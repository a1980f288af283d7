import CuedClient
import CuedProtocol
import CuectlCommands
import Foundation
import Testing
import TestSupport

/// `make deb`'s package, packed from the release build already there (`make test`
/// builds it first): its name and fields, lintian without errors, then installed
/// with dpkg into a throwaway root (its database a copy of this machine's, so the
/// Depends are checked against what is really installed), the installed cued and
/// cuectl run from there, and purged: nothing of it is left.
enum DebTools {
    static let tools = ["dpkg", "dpkg-deb", "dpkg-shlibdeps", "lintian", "gzip", "md5sum"]

    static func which(_ tool: String) -> String? {
        for dir in ["/usr/bin", "/bin", "/usr/sbin", "/sbin"] where FileManager.default.isExecutableFile(atPath: dir + "/" + tool) {
            return dir + "/" + tool
        }
        return nil
    }

    /// The environment dpkg runs in: this one, with the system directories on PATH. dpkg checks
    /// that ldconfig and start-stop-daemon are on PATH before it installs anything, and they are in
    /// /sbin and /usr/sbin, which root's PATH has and a user's usually not.
    static var dpkgEnvironment: [String: String] {
        var env = ProcessInfo.processInfo.environment
        var path = (env["PATH"] ?? "/usr/bin:/bin").split(separator: ":").map(String.init)
        for dir in ["/usr/sbin", "/sbin"] where !path.contains(dir) { path.append(dir) }
        env["PATH"] = path.joined(separator: ":")
        return env
    }

    /// Why the suite cannot run here, or nil.
    static var missing: String? {
        if let tool = tools.first(where: { which($0) == nil }) { return "needs \(tool) (make test-deps installs it)" }
        let release = TestPaths.repoRoot.path + "/.build/release/"
        if !FileManager.default.isExecutableFile(atPath: release + "cued") || !FileManager.default.isExecutableFile(atPath: release + "cuectl") {
            return "needs the release build (make build, or make test)"
        }
        return nil
    }
}

@Suite(.enabled(if: DebTools.missing == nil, "needs dpkg-dev, lintian and the release build"), .timeLimit(.minutes(3)))
struct DebTests {
    /// Every path below `root` (relative, sorted).
    func tree(_ root: String) throws -> [String] {
        try runProcess("/usr/bin/find", [root, "-mindepth", "1"]).out.split(separator: "\n")
            .map { String($0.dropFirst(root.count + 1)) }.sorted()
    }

    @Test func packageBuildsInstallsRunsAndPurgesCleanly() throws {
        let dir = TempDir()
        let out = dir.file("deb")
        let make = try runProcess("/usr/bin/make", ["-s", "-C", TestPaths.repoRoot.path, "deb-package", "DEB_DIR=" + out])
        #expect(make.status == 0, "\(make.err)")
        let arch = try runProcess("/usr/bin/dpkg", ["--print-architecture"]).out.trimmingCharacters(in: .whitespacesAndNewlines)
        let deb = out + "/cued_\(CuedVersion.string)_\(arch).deb"
        let built = try tree(out)
        try #require(FileManager.default.fileExists(atPath: deb), "\(built)")

        // Fields: Depends computed from what the binaries link.
        let fields = try runProcess("/usr/bin/dpkg-deb", ["-f", deb, "Package", "Version", "Architecture", "Depends", "Recommends", "Installed-Size"]).out
        #expect(fields.contains("Package: cued\n") && fields.contains("Version: \(CuedVersion.string)\n"), "\(fields)")
        for lib in ["libasound2 (>=", "libsndfile1 (>=", "libsamplerate0 (>=", "libc6 (>=", "libcanberra0 (>="] {
            #expect(fields.contains(lib), "Depends lacks \(lib): \(fields)")
        }
        // Loaded when used (dlopen), not linked: recommended.
        #expect(fields.contains("Recommends: libpipewire-0.3-0, libsystemd0\n"), "\(fields)")
        let size = Int(fields.split(separator: "\n").first { $0.hasPrefix("Installed-Size: ") }?.split(separator: " ").last ?? "") ?? 0
        #expect(size > 0)
        print("cued package: \(size) KiB installed")

        // Where each file goes.
        let contents = try runProcess("/usr/bin/dpkg-deb", ["-c", deb]).out
        for path in ["./usr/bin/cued", "./usr/bin/cuectl", "./usr/share/cued/cues/pop.wav", "./usr/share/cued/cues/fail.wav",
                     "./usr/lib/systemd/user/cued.service", "./usr/lib/systemd/user/cued.socket",
                     "./usr/share/man/man1/cued.1.gz", "./usr/share/man/man1/cuectl.1.gz", "./usr/share/man/man5/cued.toml.5.gz",
                     "./usr/share/bash-completion/completions/cuectl", "./usr/share/zsh/vendor-completions/_cuectl",
                     "./usr/share/fish/vendor_completions.d/cuectl.fish",
                     "./usr/share/doc/cued/copyright", "./usr/share/doc/cued/changelog.gz", "./usr/share/lintian/overrides/cued",
                     "./usr/lib/systemd/user-environment-generators/60-cued-canberra"]
            + (CanberraSandbox.systemDirectory.map { ["." + $0 + "/libcanberra-cued.so"] } ?? []) {
            #expect(contents.contains(" " + path + "\n"), "\(path) not in the package")
        }
        #expect(!contents.contains("/home/") && !contents.contains(".local"), "\(contents)")

        // lintian: no errors (its warnings are listed in the report, not failures).
        let lint = try runProcess(DebTools.which("lintian")!, ["--no-cfg", deb])
        let errors = lint.out.split(separator: "\n").filter { $0.hasPrefix("E: ") }
        #expect(errors.isEmpty, "\(lint.out)")

        // Installed into a throwaway root.
        let root = dir.file("root"), admin = root + "/var/lib/dpkg"
        for sub in ["info", "updates", "triggers"] {
            try FileManager.default.createDirectory(atPath: admin + "/" + sub, withIntermediateDirectories: true)
        }
        try FileManager.default.copyItem(atPath: "/var/lib/dpkg/status", toPath: admin + "/status")
        _ = FileManager.default.createFile(atPath: admin + "/available", contents: nil)
        let before = try tree(root)
        let dpkg = ["--root=" + root, "--force-not-root", "--force-script-chrootless"]
        let install = try runProcess("/usr/bin/dpkg", dpkg + ["-i", deb], env: DebTools.dpkgEnvironment)
        #expect(install.status == 0, "\(install.out)\(install.err)")
        let unit = try String(contentsOfFile: root + "/usr/lib/systemd/user/cued.service", encoding: .utf8)
        #expect(unit.contains("\nExecStart=\"/usr/bin/cued\"\n"), "\(unit)")

        // The installed cued finds its sounds beside itself (../share/cued/cues) and plays.
        var env = ProcessInfo.processInfo.environment
        for (key, sub) in [("XDG_RUNTIME_DIR", "run"), ("XDG_STATE_HOME", "state"), ("XDG_CONFIG_HOME", "config"), ("XDG_DATA_HOME", "data")] {
            env[key] = dir.file(sub)
        }
        mkdir(dir.file("run"), 0o700)
        env.removeValue(forKey: "CUED_SOCKET")
        env.removeValue(forKey: "NOTIFY_SOCKET")
        let sock = dir.file("run/cued.sock")
        let cued = try Subprocess(root + "/usr/bin/cued", ["--sink", "null", "--socket", sock], env: env, stderr: dir.file("cued.err"))
        let answered = eventually(timeout: 15) { (try? CueClient(path: sock, timeoutSeconds: 2).request("ping")) == "ok pong" }
        #expect(answered, "\((try? String(contentsOfFile: dir.file("cued.err"), encoding: .utf8)) ?? "")")
        let cuectl = root + "/usr/bin/cuectl"
        #expect(try runProcess(cuectl, ["--socket", sock, "ping"], env: env).out == "pong\n")
        #expect(try runProcess(cuectl, ["--socket", sock, "cues"], env: env).out == "fail pop psst1 psst2 tick\n")
        let play = try runProcess(cuectl, ["--socket", sock, "play", "pop", "--wait"], env: env)
        #expect(play.status == 0, "\(play.err)")

        // libcanberra plays through the installed plug-in: the package's libcanberra directory
        // stands for the system's (a mount namespace of the client's own), and the login hook
        // sets CANBERRA_DRIVER=cued there only for a user who turned it on.
        if CanberraSandbox.unavailableReason == nil, let system = CanberraSandbox.systemDirectory {
            let sandbox = try CanberraSandbox(plugin: root + system + "/" + CanberraRouting.pluginFile)
            var cenv = CanberraSandbox.environment(env)
            cenv["CUED_SOCKET"] = sock
            let run = try sandbox.client([["props", ["application.name": "Packaged"]], ["play", 1, ["event.id": "bell"]],
                                          ["wait_callbacks", 1, 10]], env: cenv)
            #expect(run.ret(1) == 0 && run.codes(1) == [0], "\(run)")
            let app = try CueClient(path: sock, timeoutSeconds: 5).request("status")
            #expect(app.contains(#""Packaged":{"played":1"#) && app.contains(#""via":["libcanberra"]"#), "\(app)")
            let hook = root + "/usr/lib/systemd/user-environment-generators/60-cued-canberra"
            var henv = ["HOME": dir.file("home"), "PATH": "/usr/bin:/bin"]
            #expect(try sandbox.run([hook], env: henv).out == "", "off: nothing")
            try FileManager.default.createDirectory(atPath: dir.file("home/.config/cued"), withIntermediateDirectories: true)
            _ = FileManager.default.createFile(atPath: dir.file("home/.config/cued/libcanberra"), contents: nil)
            #expect(try sandbox.run([hook], env: henv).out == "CANBERRA_DRIVER=cued\n", "on, with the plug-in in place")
            henv["CANBERRA_DRIVER"] = "pulse"
            #expect(try sandbox.run([hook], env: henv).out == "", "a driver the user chose is left alone")
            henv.removeValue(forKey: "CANBERRA_DRIVER")
            let bare = try CanberraSandbox(plugin: nil)
            #expect(try bare.run([hook], env: henv).out == "", "on, but no plug-in where libcanberra looks: nothing, so nothing goes silent")
        }
        #expect(cued.stop() == 0)

        // Purged: every file and directory it brought is gone; dpkg's own database is all that is left.
        let purge = try runProcess("/usr/bin/dpkg", dpkg + ["-P", "cued"], env: DebTools.dpkgEnvironment)
        #expect(purge.status == 0, "\(purge.out)\(purge.err)")
        let left = try tree(root).filter { !$0.hasPrefix("var/lib/dpkg/") }
        #expect(left == before.filter { !$0.hasPrefix("var/lib/dpkg/") }, "left behind: \(left)")
        #expect(try tree(admin + "/info").filter { $0.hasPrefix("cued.") }.isEmpty)
    }
}
