import Foundation
import TestSupport

/// Another uid than the test's, for a client or a file that must not be the test user's: as root,
/// nobody's (`setpriv`); as a user, uid 1 of a user namespace mapped onto the user's subordinate
/// uids (`unshare --map-auto`: the user's ranges in /etc/subuid and /etc/subgid, mapped by uidmap's
/// newuidmap and newgidmap, as rootless containers get theirs). The kernel tells it from the
/// user's own everywhere: file permissions, a socket peer's SO_PEERCRED.
enum OtherUser {
    /// What a command is run under to run as the other uid.
    static let launcher: [String] = getuid() == 0
        ? ["/usr/bin/setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
        : ["/usr/bin/unshare", "--map-auto", "--setuid", "1", "--setgid", "1"]

    /// The other uid as the kernel has it (seen from outside any namespace), or nil where there is none.
    static var uid: uid_t? { probed.uid }

    /// Why no command can be run as another uid here, or nil.
    static var unavailableReason: String? { probed.why }

    /// `launcher` tried once: its program's uid, read from /proc, or why there is none.
    private static let probed: (uid: uid_t?, why: String?) = {
        let dir = TempDir()
        let sleeper = try? Subprocess(launcher[0], Array(launcher.dropFirst()) + ["/bin/sleep", "30"], stderr: dir.file("err"))
        defer { sleeper?.stop(grace: 0) }
        var seen: uid_t?
        _ = eventually(timeout: 5) {
            guard let sleeper, sleeper.isRunning else { return true }
            // The uid once the launcher has run the program (the launcher's own, before, is the test's).
            guard (try? String(contentsOfFile: "/proc/\(sleeper.pid)/comm", encoding: .utf8)) == "sleep\n" else { return false }
            seen = realUid(sleeper.pid)
            return seen != nil
        }
        if let seen, seen != getuid() { return (seen, nil) }
        let err = (try? String(contentsOfFile: dir.file("err"), encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        return (nil, getuid() == 0
            ? "needs another uid: setpriv as nobody failed (\(err))"
            : "needs another uid: as a user, a range in /etc/subuid and /etc/subgid and uidmap's newuidmap (unshare --map-auto failed: \(err))")
    }()

    /// The real uid of `pid` (the first field of /proc/PID/status's `Uid:` line), nil if gone.
    static func realUid(_ pid: pid_t) -> uid_t? {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("Uid:") } ?? ""
        return line.split(whereSeparator: { $0 == "\t" || $0 == " " }).dropFirst().first.flatMap { uid_t($0) }
    }
}
