#if canImport(Glibc)
import Glibc
#endif

/// systemd's notification protocol, spoken directly: one datagram per message
/// to `$NOTIFY_SOCKET` (a path, or `@name` in the abstract namespace). No
/// libsystemd needed; a no-op when not run by systemd.
public final class SystemdNotifier: Sendable {
    public let socketPath: String?

    public init(environment: [String: String]) {
        socketPath = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
    }

    public var isEnabled: Bool { socketPath != nil }

    /// Sends `KEY=VALUE` lines; returns false if it could not be delivered.
    @discardableResult
    public func notify(_ fields: String...) -> Bool { notify(fields) }

    @discardableResult
    public func notify(_ fields: [String]) -> Bool {
        guard let path = socketPath else { return false }
        let message = Array(fields.joined(separator: "\n").utf8)
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        var bytes = Array(path.utf8)
        if bytes.first == UInt8(ascii: "@") { bytes[0] = 0 }  // abstract namespace
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else { return false }
        withUnsafeMutableBytes(of: &addr.sun_path) { $0.copyBytes(from: bytes) }
        let len = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + (bytes.first == 0 ? 0 : 1))
        let sent = withUnsafePointer(to: &addr) { a in
            a.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                // Never wait: this runs on the event loop, and a notify socket whose queue is
                // full (a manager not reading) would block it. An undelivered notice is lost.
                message.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT), sa, len) }
            }
        }
        return sent == message.count
    }

    /// CLOCK_MONOTONIC in µs, for `RELOADING=1` + `MONOTONIC_USEC=`.
    public static func monotonicMicroseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000 + UInt64(ts.tv_nsec) / 1000
    }

    /// The watchdog interval systemd asked for, if it is meant for this process.
    public static func watchdogInterval(environment: [String: String]) -> Duration? {
        guard let usec = environment["WATCHDOG_USEC"].flatMap(UInt64.init), usec > 0 else { return nil }
        if let pid = environment["WATCHDOG_PID"].flatMap(Int32.init), pid != getpid() { return nil }
        return .microseconds(Int64(usec))
    }
}

/// Socket activation: the listening socket systemd passed as fd 3, if it is
/// meant for this process (`LISTEN_PID` is our pid and `LISTEN_FDS` is 1).
/// The variables are unset so children don't inherit them.
public enum SocketActivation {
    public static let firstFD: Int32 = 3

    /// True when systemd passed exactly one socket to this process.
    public static func isActivated(environment: [String: String]) -> Bool {
        guard let pid = environment["LISTEN_PID"].flatMap(Int32.init), pid == getpid() else { return false }
        return environment["LISTEN_FDS"] == "1"
    }

    public static func inheritedSocket(environment: [String: String]) -> Int32? {
        guard isActivated(environment: environment) else { return nil }
        unsetenv("LISTEN_PID")
        unsetenv("LISTEN_FDS")
        unsetenv("LISTEN_FDNAMES")
        _ = fcntl(firstFD, F_SETFD, FD_CLOEXEC)
        return firstFD
    }
}
