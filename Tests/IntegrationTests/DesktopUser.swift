import Foundation
import TestSupport

/// A desktop user, for the tests that run cued as one (the PipeWire tests, the real-time tests):
/// the tests run as root, where cued's audio thread would get SCHED_FIFO by itself; a user has no
/// CAP_SYS_NICE and RLIMIT_RTPRIO 0, and gets real time only from the desktop (RTKit). cued runs
/// as uid 65534 (nobody) through `setpriv`, with no capability left, from a copy of the binary the
/// user can reach (a checkout under /root is not), in directories it owns.
enum DesktopUser {
    static let uid: uid_t = 65534
    static let gid: gid_t = 65534
    /// The name polkit knows it by (its rules match on it).
    static let name = "nobody"

    /// Why cued cannot be run as another user here (the tests are not root), or nil.
    static var unavailableReason: String? {
        if getuid() != 0 { return "not root: cued runs as this user, as it is" }
        if !FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") { return "no /usr/bin/setpriv (util-linux)" }
        return nil
    }

    /// What a command is run under to run as the user: no capabilities, no privilege to gain.
    static let launcher = ["/usr/bin/setpriv", "--reuid", "\(uid)", "--regid", "\(gid)", "--clear-groups",
                           "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"]

    /// A copy of the built binary `name` that the user can run, made once per test process in a
    /// directory of its own (removed at exit).
    static func binary(_ name: String) throws -> String {
        try copies.withLock { c in
            if let path = c[name] { return path }
            let dir = binDir
            let path = dir + "/" + name
            try? FileManager.default.removeItem(atPath: path)
            try FileManager.default.copyItem(atPath: TestPaths.binary(name), toPath: path)
            chmod(path, 0o755)
            c[name] = path
            return path
        }
    }

    private static let copies = LockedPaths()
    private static let binDir: String = {
        let dir = "/tmp/cued-user-bin.\(getpid())"
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        chmod(dir, 0o755)
        atexit { try? FileManager.default.removeItem(atPath: "/tmp/cued-user-bin.\(getpid())") }
        return dir
    }()

    /// Gives `path` and everything under it to the user.
    static func own(_ path: String) {
        _ = chown(path, uid, gid)
        guard let e = FileManager.default.enumerator(atPath: path) else { return }
        for case let sub as String in e { _ = lchown(path + "/" + sub, uid, gid) }
    }

    /// Lets the user through `path` (a directory of root's: searchable, not listable).
    static func traverse(_ path: String) { chmod(path, 0o711) }
}

/// Paths by name behind a lock (the copies are made once, whichever test asks first).
final class LockedPaths: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [String: String] = [:]
    func withLock<T>(_ body: (inout [String: String]) throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(&values)
    }
}
