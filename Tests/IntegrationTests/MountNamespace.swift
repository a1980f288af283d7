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
