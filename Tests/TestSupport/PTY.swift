import Foundation

/// A program on a pseudo-terminal of its own, as a person at a terminal runs
/// it: the leader of a new session with the terminal as its controlling tty,
/// so interactive shells run their prompt hooks and ^C is the terminal's
/// SIGINT to the foreground process group. The whole session is killed when
/// released.
public final class PTY: @unchecked Sendable {
    public let pid: pid_t
    private let master: Int32
    private var bytes: [UInt8] = []
    private var exitStatus: Int32?

    public init(_ path: String, _ args: [String], env: [String: String]) throws {
        // posix_openpt/grantpt/unlockpt do not import into Swift: the Linux ioctls they wrap.
        master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard master >= 0 else { throw POSIXError(.ENODEV) }
        var unlock: Int32 = 0, number: UInt32 = 0
        let TIOCSPTLCK: UInt = 0x4004_5431, TIOCGPTN: UInt = 0x8004_5430
        guard ioctl(master, TIOCSPTLCK, &unlock) == 0, ioctl(master, TIOCGPTN, &number) == 0 else {
            close(master); throw POSIXError(.ENODEV)
        }
        var size = winsize(ws_row: 40, ws_col: 200, ws_xpixel: 0, ws_ypixel: 0)
        _ = ioctl(master, UInt(TIOCSWINSZ), &size)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // Opened after setsid (glibc's order), without O_NOCTTY: it becomes the controlling tty.
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/pts/\(number)", O_RDWR, 0)
        posix_spawn_file_actions_adddup2(&actions, 0, 1)
        posix_spawn_file_actions_adddup2(&actions, 0, 2)
        let POSIX_SPAWN_SETSID: Int32 = 0x80  // a glibc extension the Glibc module does not import
        do {
            pid = try spawnClean(path, args, env: env, actions: &actions, extraFlags: POSIX_SPAWN_SETSID)
        } catch {
            close(master)
            throw error
        }
    }

    /// Types `text` (use "\n" for Enter, "\u{3}" for ^C).
    public func type(_ text: String) {
        let b = Array(text.utf8)
        var off = 0
        while off < b.count {
            let n = b[off...].withUnsafeBytes { write(master, $0.baseAddress, $0.count) }
            if n <= 0 { if errno == EINTR { continue }; return }
            off += n
        }
    }

    /// Everything the terminal showed so far.
    public var text: String { String(decoding: bytes, as: UTF8.self) }

    /// Reads the screen until `needle` appears (after byte `from`); false after `timeout` seconds.
    @discardableResult
    public func waitFor(_ needle: String, from: Int = 0, timeout: Double = 20) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if String(decoding: bytes.dropFirst(from), as: UTF8.self).contains(needle) { return true }
            let left = deadline.timeIntervalSinceNow
            if left <= 0 { return false }
            var pfd = pollfd(fd: master, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, Int32(min(left, 0.2) * 1000)) >= 0 || errno == EINTR else { return false }
            if pfd.revents & Int16(POLLIN) != 0 || pfd.revents & Int16(POLLHUP) != 0 {
                var buf = [UInt8](repeating: 0, count: 4096)
                let n = read(master, &buf, buf.count)
                if n > 0 { bytes += buf[0..<n] } else if n < 0 && errno != EINTR && errno != EAGAIN {
                    // EIO: every slave descriptor is closed (the program ended).
                    return String(decoding: bytes.dropFirst(from), as: UTF8.self).contains(needle)
                }
            }
        }
    }

    /// What the terminal showed from byte `from` on (a `count` taken earlier).
    public func text(from: Int) -> String { String(decoding: bytes.dropFirst(from), as: UTF8.self) }

    /// How many bytes the terminal has shown (a starting point for `waitFor(from:)`).
    public var count: Int { bytes.count }

    /// Exit code (128 + signal), or nil if still running after `timeout`; keeps reading the screen.
    public func wait(timeout: Double = 20) -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        while exitStatus == nil {
            var st: Int32 = 0
            if waitpid(pid, &st, WNOHANG) == pid {
                let sig = st & 0x7F
                exitStatus = sig == 0 ? (st >> 8) & 0xFF : 128 + sig
                break
            }
            if Date() > deadline { break }
            waitFor("\u{0}never\u{0}", from: bytes.count, timeout: 0.05)
        }
        return exitStatus
    }

    deinit {
        // The session's process group: the shell and anything it started in it.
        if exitStatus == nil {
            kill(-pid, SIGKILL)
            kill(pid, SIGKILL)
            var st: Int32 = 0
            waitpid(pid, &st, 0)
        }
        close(master)
    }
}
