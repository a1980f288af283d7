import CuectlCommands
import Foundation
import Testing
import TestSupport

/// libcanberra with cued's plug-in, for one test's processes only. libcanberra loads
/// drivers from one directory compiled into it (`/usr/lib/x86_64-linux-gnu/libcanberra-0.30`
/// on Debian 12), so each client runs in a mount namespace of its own (`unshare -m`; as
/// another user than root, `unshare -r -m`) where a temp directory holding that directory's
/// drivers (pulse, alsa) and the freshly built `libcanberra-cued.so` is bind-mounted over
/// it. Nothing outside those processes sees the change; the machine's directory is never
/// written.
final class CanberraSandbox: @unchecked Sendable {
    static let plugin = TestPaths.repoRoot.appendingPathComponent(".build/canberra/libcanberra-cued.so").path
    static let client = TestPaths.repoRoot.appendingPathComponent("bench/canberra_client.py").path

    /// The directory libcanberra loads drivers from, read from the library itself.
    static let systemDirectory: String? = {
        for lib in CanberraRouting.libraryCandidates(machine: machine()) {
            if let data = FileManager.default.contents(atPath: TestStack.hostPath(lib)), let dir = CanberraRouting.pluginDirectory(inLibrary: [UInt8](data)) {
                return dir
            }
        }
        return nil
    }()

    static func machine() -> String {
        var u = utsname()
        uname(&u)
        return withUnsafeBytes(of: u.machine) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    }

    /// Why the libcanberra tests cannot run here, or nil.
    static var unavailableReason: String? {
        guard systemDirectory != nil else { return "libcanberra tests skipped: no libcanberra.so.0 (make deps installs libcanberra-dev)" }
        guard FileManager.default.fileExists(atPath: plugin) else { return "libcanberra tests skipped: \(plugin) not built (make build)" }
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare") else { return "libcanberra tests skipped: no unshare (util-linux)" }
        let probe = try? runProcess("/usr/bin/unshare", namespaceFlags + ["/bin/true"])
        guard probe?.status == 0 else { return "libcanberra tests skipped: no mount namespace here (\(probe?.err ?? "unshare failed"))" }
        return nil
    }

    static var namespaceFlags: [String] { MountNamespace.unshareFlags }

    let dir = TempDir()
    var drivers: String { dir.file("drivers") }
    /// systemd's user environment generators, where the package puts its login hook.
    static let generators = "/usr/lib/systemd/user-environment-generators"
    private var mounts: [(from: String, to: String)] = []

    /// `plugin`: the plug-in to put in place (nil: none, only the system's drivers).
    /// `hook`: the login hook to put among systemd's user environment generators too.
    init(plugin: String? = CanberraSandbox.plugin, hook: Bool = false) throws {
        let fm = FileManager.default
        try fm.createDirectory(atPath: drivers, withIntermediateDirectories: true)
        if let system = Self.systemDirectory {
            let hostSystem = TestStack.hostPath(system)
            for name in try fm.contentsOfDirectory(atPath: hostSystem) where name != CanberraRouting.pluginFile {
                try fm.copyItem(atPath: hostSystem + "/" + name, toPath: drivers + "/" + name)
            }
            mounts.append((drivers, system))
        }
        if let plugin { try fm.copyItem(atPath: plugin, toPath: drivers + "/" + CanberraRouting.pluginFile) }
        if hook, fm.fileExists(atPath: TestStack.hostPath(Self.generators)), let system = Self.systemDirectory {
            let hooks = dir.file("generators")
            try fm.createDirectory(atPath: hooks, withIntermediateDirectories: true)
            for name in try fm.contentsOfDirectory(atPath: TestStack.hostPath(Self.generators)) {
                try fm.copyItem(atPath: TestStack.hostPath(Self.generators) + "/" + name, toPath: hooks + "/" + name)
            }
            let script = try String(contentsOfFile: TestPaths.repoRoot.path + "/canberra/60-cued-canberra.in", encoding: .utf8)
                .replacingOccurrences(of: "@PLUGINDIR@", with: system)
            let path = hooks + "/" + CanberraRouting.generatorName
            try script.write(toFile: path, atomically: true, encoding: .utf8)
            chmod(path, 0o755)
            mounts.append((hooks, Self.generators))
        }
    }

    var hook: String { Self.generators + "/" + CanberraRouting.generatorName }

    /// `argv` run with the drivers directory (and the hook) in place: the program and its arguments.
    func wrap(_ argv: [String]) -> (String, [String]) {
        // On a Debian 13 test stack the root's own mount namespace holds the binds.
        if TestStack.inRoot { return TestStack.command(argv[0], Array(argv.dropFirst()), binds: mounts) }
        let script = mounts.indices.map { "mount --bind \"$\($0 * 2 + 1)\" \"$\($0 * 2 + 2)\"" }.joined(separator: " && ")
            + " && shift \(mounts.count * 2) && exec \"$@\""
        return ("/usr/bin/unshare", Self.namespaceFlags + ["/bin/sh", "-c", script, "sh"] + mounts.flatMap { [$0.from, $0.to] } + argv)
    }

    func run(_ argv: [String], env: [String: String], timeout: Double = 60) throws -> (status: Int32, out: String, err: String) {
        let (path, args) = wrap(argv)
        return try runProcess(path, args, env: env, timeout: timeout)
    }

    /// The ctypes client (bench/canberra_client.py) through `steps`: what it printed.
    func client(_ steps: [Any], env: [String: String], timeout: Double = 60) throws -> CanberraRun {
        let json = String(decoding: try JSONSerialization.data(withJSONObject: steps), as: UTF8.self)
        let r = try run(["/usr/bin/python3", Self.client, json], env: env, timeout: timeout)
        guard r.status == 0, let object = try? JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any] else {
            throw HarnessError.timeout("the libcanberra client failed (\(r.status)): \(r.out) \(r.err)")
        }
        return CanberraRun(object, stderr: r.err)
    }

    /// A client's environment: cued's (its socket), libcanberra told to use cued.
    static func environment(_ base: [String: String], driver: String? = "cued") -> [String: String] {
        var env = base
        env["CANBERRA_DRIVER"] = driver
        // Freed memory overwritten (glibc): a use after free in the plug-in shows as a crash or a hang.
        env["GLIBC_TUNABLES"] = "glibc.malloc.perturb=165"
        env.removeValue(forKey: "CANBERRA_DEVICE")
        return env
    }
}

/// What the ctypes client printed: each call's return and time, each callback.
struct CanberraRun: CustomStringConvertible {
    struct Call {
        var op: String; var id: Int?; var ret: Int; var ms: Double; var playing: Int?
        /// `fds` steps: the client's descriptors and threads.
        var fds: Int?; var tasks: Int?
        /// `contexts` steps: each context's play's return.
        var rets: [Int]?
    }
    struct Callback { var context: Int; var id: Int; var code: Int; var callerThread: Bool }
    let calls: [Call]
    let callbacks: [Callback]
    let stderr: String
    let raw: [String: Any]

    init(_ o: [String: Any], stderr: String) {
        raw = o
        self.stderr = stderr
        calls = (o["calls"] as? [[String: Any]] ?? []).map {
            Call(op: $0["op"] as? String ?? "", id: $0["id"] as? Int, ret: $0["ret"] as? Int ?? 0, ms: $0["ms"] as? Double ?? 0,
                 playing: $0["playing"] as? Int, fds: $0["fds"] as? Int, tasks: $0["tasks"] as? Int, rets: $0["rets"] as? [Int])
        }
        callbacks = (o["callbacks"] as? [[String: Any]] ?? []).map {
            Callback(context: $0["context"] as? Int ?? 0, id: $0["id"] as? Int ?? 0, code: $0["code"] as? Int ?? 0,
                     callerThread: $0["caller_thread"] as? Bool ?? true)
        }
    }

    /// For a failure's message: each call (op, id, return, ms) and each callback (context/id: code).
    var description: String {
        "calls: " + calls.map { "\($0.op)\($0.id.map { " \($0)" } ?? ""): \($0.ret) (\(String(format: "%.1f", $0.ms)) ms)" }.joined(separator: ", ")
            + "; callbacks: " + callbacks.map { "\($0.context)/\($0.id): \($0.code)\($0.callerThread ? " on the caller's thread" : "")" }.joined(separator: ", ")
            + (stderr.isEmpty ? "" : "; stderr: \(stderr.suffix(500))")
    }

    /// The return of the play with `id`.
    func ret(_ id: Int) -> Int? { calls.first { $0.op.hasPrefix("play") && $0.id == id }?.ret }
    /// The codes of the callbacks for `id` (of the main context).
    func codes(_ id: Int) -> [Int] { callbacks.filter { $0.context == 0 && $0.id == id }.map(\.code) }
}

/// libcanberra's codes the tests look for (canberra.h).
enum CA {
    static let success = 0, invalid = -2, notFound = -9, destroyed = -10, canceled = -11, disabled = -16
}

/// Sound-theme fixtures: sounds only these tests have, in the freedesktop theme of a
/// data directory (`$XDG_DATA_HOME/sounds/freedesktop/stereo`) and in a theme of their own
/// (`cuedalt`, inheriting freedesktop), so what is heard says which was played.
enum CanberraFixture {
    static let bell = Fixture.samples(seed: 21, frames: 2_400)
    static let altBell = Fixture.samples(seed: 22, frames: 2_400)
    static let other = Fixture.samples(seed: 23, frames: 1_800)
    static let long = Fixture.samples(seed: 24, frames: 96_000, amplitude: 4000)
    static let file = Fixture.samples(seed: 25, frames: 1_600)

    /// Writes the themes under `dataHome` (an XDG_DATA_HOME) and the plain file `file.wav` beside it.
    static func install(dataHome: String) throws {
        let fm = FileManager.default
        let stereo = dataHome + "/sounds/freedesktop/stereo", alt = dataHome + "/sounds/cuedalt/stereo"
        try fm.createDirectory(atPath: stereo, withIntermediateDirectories: true)
        try fm.createDirectory(atPath: alt, withIntermediateDirectories: true)
        try WAV.write(stereo + "/cuedtest-bell.wav", int16: bell, sampleRate: 48_000, channels: 1)
        try WAV.write(stereo + "/cuedtest-other.wav", int16: other, sampleRate: 48_000, channels: 1)
        try WAV.write(stereo + "/cuedtest-long.wav", int16: long, sampleRate: 48_000, channels: 1)
        try WAV.write(alt + "/cuedtest-bell.wav", int16: altBell, sampleRate: 48_000, channels: 1)
        try "[Sound Theme]\nName=cuedalt\nInherits=freedesktop\nDirectories=stereo\n\n[stereo]\nOutputProfile=stereo\n"
            .write(toFile: dataHome + "/sounds/cuedalt/index.theme", atomically: true, encoding: .utf8)
        try WAV.write(filePath(dataHome), int16: file, sampleRate: 48_000, channels: 1)
    }

    static func filePath(_ dataHome: String) -> String { dataHome + "/file.wav" }
}
