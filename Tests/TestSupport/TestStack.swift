import Foundation

/// The desktop stack the PipeWire tests run their programs on: this machine's own (`host`, the
/// default), or a Debian 13 root (`CUED_TEST_STACK=debian13`: PipeWire 1.4, WirePlumber 0.5), built
/// and entered by `Tests/stacks/debian13.sh`. There every program a stack test starts — the sound
/// servers, their tools, the buses, cued and cuectl — runs inside the root on its libraries, as
/// users run them, with /tmp and the checkout at their own paths, so the test process (on the host)
/// reaches their sockets, files and pids as on the host's stack.
public enum TestStack {
    /// `host` or `debian13`.
    public static let name: String = {
        let n = ProcessInfo.processInfo.environment["CUED_TEST_STACK"] ?? ""
        return n.isEmpty ? "host" : n
    }()

    public static var inRoot: Bool { name != "host" }

    static let script = TestPaths.repoRoot.appendingPathComponent("Tests/stacks/debian13.sh").path

    /// The root's directory (`debian13.sh root` printed it; make passes it as `CUED_TEST_ROOT`,
    /// else the one already built is looked up), nil on the host's stack or when none is built.
    public static let root: String? = {
        guard inRoot else { return nil }
        if let r = ProcessInfo.processInfo.environment["CUED_TEST_ROOT"], !r.isEmpty { return r }
        guard let r = try? runProcess("/bin/bash", [script, "path"], timeout: 30), r.status == 0 else { return nil }
        let dir = r.out.trimmingCharacters(in: .whitespacesAndNewlines)
        return dir.isEmpty ? nil : dir
    }()

    /// Why the asked stack cannot be used, or nil.
    public static var unavailableReason: String? {
        switch name {
        case "host": return nil
        case "debian13":
            guard let root else { return "no Debian 13 root built (Tests/stacks/debian13.sh root builds one; make test does)" }
            return FileManager.default.fileExists(atPath: root + "/stamp") ? nil : "\(root) is not a built Debian 13 root"
        default: return "CUED_TEST_STACK=\(name): unknown (host or debian13)"
        }
    }

    /// A short description for messages: `host` or `debian13 (pipewire 1.4.2-1, wireplumber 0.5.8-1)`.
    public static let summary: String = {
        guard let root, let stamp = try? String(contentsOfFile: root + "/stamp", encoding: .utf8) else { return name }
        let versions = stamp.split(separator: "\n").filter { $0.hasPrefix("pipewire ") || $0.hasPrefix("wireplumber ") }
        return "\(name) (\(versions.joined(separator: ", ")))"
    }()

    /// Where a file of the stack is, seen from the host (`/usr/bin/pipewire` in the root is
    /// `ROOT/root/usr/bin/pipewire`).
    public static func hostPath(_ path: String) -> String {
        guard let root else { return path }
        return root + "/root" + path
    }

    /// Whether the stack has the program `path` (an absolute path as the stack sees it).
    public static func hasProgram(_ path: String) -> Bool {
        FileManager.default.isExecutableFile(atPath: hostPath(path))
    }

    /// `path args` as run on the stack: unchanged on the host's; else through `debian13.sh run`,
    /// which execs it in the root in the same process (the pid the caller gets is the program's).
    /// `files`: (host file, path inside) copied into the root's writable layer for this program
    /// only; `binds`: (host directory, path inside) bound over the root's.
    public static func command(_ path: String, _ args: [String], files: [(String, String)] = [],
                               binds: [(String, String)] = []) -> (String, [String]) {
        guard let root else { return (path, args) }
        let extra = files.flatMap { ["--file", "\($0.0):\($0.1)"] } + binds.flatMap { ["--bind", "\($0.0):\($0.1)"] }
        return ("/bin/bash", [script, "run", root] + extra + ["--", path] + args)
    }
}

extension Subprocess {
    /// `path args` started on the test stack (`TestStack`).
    public convenience init(onStack path: String, _ args: [String], env: [String: String]? = nil,
                            stdin: String? = nil, stdout: String? = nil, stderr: String? = nil,
                            files: [(String, String)] = []) throws {
        let (p, a) = TestStack.command(path, args, files: files)
        try self.init(p, a, env: env, stdin: stdin, stdout: stdout, stderr: stderr)
    }
}

/// `runProcess` on the test stack (`TestStack`).
@discardableResult
public func runOnStack(_ path: String, _ args: [String], env: [String: String]? = nil,
                       stdin: String? = nil, timeout: Double = 60) throws -> (status: Int32, out: String, err: String) {
    let (p, a) = TestStack.command(path, args)
    return try runProcess(p, a, env: env, stdin: stdin, timeout: timeout)
}
