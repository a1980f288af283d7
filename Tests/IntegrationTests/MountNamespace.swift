import Foundation
import TestSupport

/// Mounts a test makes for its own processes only (a tmpfs, a file bound over another), in a
/// mount namespace of their own: as root `unshare --mount`; as any other user `unshare
/// --map-root-user --mount`, a user namespace of its own in which it is root and may mount a
/// tmpfs or bind one file over another (what the kernel allows every user). Nothing outside those
/// processes sees the mounts; the machine is never changed. A process in such a namespace sees its
/// own uid as 0 and the uid of whoever started it (its clients among them) as 0 too.
enum MountNamespace {
    static let unshareTool = "/usr/bin/unshare"
    static let nsenterTool = "/usr/bin/nsenter"

    /// `unshare`'s options for a private mount namespace (a user namespace with it, as a user).
    static var unshareFlags: [String] {
        (getuid() == 0 ? ["--mount"] : ["--map-root-user", "--mount"]) + ["--propagation", "private"]
    }

    /// `argv` run in a mount namespace of its own: the whole command, `unshare` first.
    static func unshare(_ argv: [String]) -> [String] { [unshareTool] + unshareFlags + argv }

    /// `argv` run in the namespaces of `pid`, a process started under `unshare(_:)`: its mount
    /// namespace and, as a user, the user namespace that owns it (its mounts may be changed only
    /// from there). The credentials are kept: `unshare --map-root-user` denies setgroups, which
    /// nsenter would call otherwise.
    static func nsenter(_ pid: pid_t, _ argv: [String]) -> [String] {
        [nsenterTool, "--target", "\(pid)"] + (getuid() == 0 ? [] : ["--user", "--preserve-credentials"]) + ["--mount", "--"] + argv
    }

    /// `path` as the process `pid` sees it, in its mount namespace (its root, through /proc).
    static func path(_ path: String, in pid: pid_t) -> String { "/proc/\(pid)/root" + path }
}

extension MountNamespace {
    /// Why a test cannot mount in a namespace of its own here (user namespaces turned off, a
    /// sandbox that refuses mounts in them), or nil: a tmpfs mounted and gone, tried once.
    static let unavailableReason: String? = {
        guard FileManager.default.isExecutableFile(atPath: unshareTool), FileManager.default.isExecutableFile(atPath: nsenterTool) else {
            return "needs \(unshareTool) and \(nsenterTool) (util-linux)"
        }
        let dir = TempDir()
        let probe = try? runProcess(unshareTool, unshareFlags + ["/bin/mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", dir.path], timeout: 10)
        guard let probe, probe.status == 0 else {
            return "cannot mount a tmpfs in a mount namespace of its own (\(getuid() == 0 ? "unshare --mount" : "unshare --map-root-user --mount")): "
                + (probe?.err.trimmingCharacters(in: .whitespacesAndNewlines) ?? "unshare did not run")
        }
        return nil
    }()
}

/// A tmpfs at `path` that only the processes run under `launcher` see: mounted in a mount
/// namespace of its own (`MountNamespace`), which a process holds (asleep) until this is
/// released. Several processes one after another (a daemon and its restart) see the same one; the
/// test reads and writes it at `outside(_:)`, through the holder's root in /proc.
final class PrivateTmpfs: @unchecked Sendable {
    let path: String
    private let logs = TempDir()
    private let holder: Subprocess

    /// `options`: mount's, e.g. `size=64k,mode=0700`. Throws when it could not be mounted, with why.
    init(at path: String, options: String) throws {
        self.path = path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        holder = try Subprocess(MountNamespace.unshareTool, MountNamespace.unshareFlags
                                + ["/bin/sh", "-c", "mount -t tmpfs -o \"$1\" tmpfs \"$2\" && exec sleep infinity", "sh", options, path],
                                stderr: logs.file("mount.err"))
        let mounted = eventually(timeout: 10) { !holder.isRunning || isMounted }
        guard mounted, holder.isRunning else {
            let err = (try? String(contentsOfFile: logs.file("mount.err"), encoding: .utf8)) ?? ""
            holder.stop(grace: 0)
            throw MountError(message: "cannot mount a tmpfs at \(path) in a mount namespace of its own: \(err)")
        }
    }

    /// Whether the holder's namespace has a tmpfs at `path` (its mountinfo: mount point, then after
    /// the separator the file system's type).
    private var isMounted: Bool {
        let info = (try? String(contentsOfFile: "/proc/\(holder.pid)/mountinfo", encoding: .utf8)) ?? ""
        return info.split(separator: "\n").contains { line in
            let fields = line.split(separator: " ")
            guard fields.count > 4, fields[4] == path, let dash = fields.firstIndex(of: "-"), dash + 1 < fields.count else { return false }
            return fields[dash + 1] == "tmpfs"
        }
    }

    /// What a command is run under to see the tmpfs: the holder's namespaces (`MountNamespace.nsenter`).
    var launcher: [String] { MountNamespace.nsenter(holder.pid, []) }

    /// `sub` (under `path`, starting with "/"; "" for `path` itself) as this process reaches it.
    func outside(_ sub: String = "") -> String { MountNamespace.path(path + sub, in: holder.pid) }

    deinit { holder.stop(grace: 0) }
}

struct MountError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}
