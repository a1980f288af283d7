// A small blocking client for cued's socket: plain Glibc, no Foundation, so
// a tool that runs `cuectl play pop` pays almost nothing to start.
import CuedProtocol
#if canImport(Glibc)
import Glibc
#endif

public enum ClientError: Error, CustomStringConvertible {
    /// Nobody answers on the socket (missing, refused).
    case noDaemon(path: String, reason: String)
    case io(String)
    /// No reply within the read timeout.
    case timedOut
    case closed

    public var description: String {
        switch self {
        case .noDaemon(let path, let reason): return "no cued answers on \(path) (\(reason))"
        case .io(let m): return m
        case .timedOut: return "cued did not reply in time"
        case .closed: return "cued closed the connection without replying"
        }
    }
}

func errnoString(_ e: Int32 = errno) -> String { String(cString: strerror(e)) }

public final class CueClient {
    private let fd: Int32
    private var pending: [UInt8] = []

    /// Connects to the daemon; `timeoutSeconds` bounds every later read and
    /// write. `connectTimeoutMilliseconds` bounds the wait for a daemon whose
    /// listen queue is full (a dead socket fails at once anyway).
    public init(path: String, timeoutSeconds: Int = 5, connectTimeoutMilliseconds: Int = 1000) throws(ClientError) {
        let s = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard s >= 0 else { throw .io("socket: \(errnoString())") }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else {
            close(s)
            throw .io("socket path too long: \(path)")
        }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        // A Unix-socket connect waits for room in the listen queue up to SO_SNDTIMEO.
        var connectTimeout = timeval(tv_sec: connectTimeoutMilliseconds / 1000, tv_usec: (connectTimeoutMilliseconds % 1000) * 1000)
        setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &connectTimeout, socklen_t(MemoryLayout<timeval>.size))
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(s, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        if rc != 0 {
            let e = errno
            close(s)
            throw .noDaemon(path: path, reason: e == EAGAIN ? "its listen queue stayed full" : errnoString(e))
        }
        fd = s
        setTimeout(milliseconds: timeoutSeconds * 1000)
    }

    /// Bounds every later read and write (a `play … wait` reply comes only once the cue has sounded).
    public func setTimeout(milliseconds: Int) {
        var tv = timeval(tv_sec: milliseconds / 1000, tv_usec: (milliseconds % 1000) * 1000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(fd) }

    /// Sends raw bytes (a line must end in LF).
    public func send(_ bytes: [UInt8]) throws(ClientError) {
        var off = 0
        while off < bytes.count {
            let n = bytes[off...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { throw .io("cued did not take the request in time") }
                throw .io("send: \(errnoString())")
            }
            off += n
        }
    }

    /// Reads one reply line (without its LF).
    public func readLine() throws(ClientError) -> String {
        while true {
            if let lf = pending.firstIndex(of: 0x0A) {
                let line = String(decoding: pending[..<lf], as: UTF8.self)
                pending.removeSubrange(...lf)
                return line
            }
            var buf = [UInt8](repeating: 0, count: 4096)
            let n = buf.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n == 0 { throw .closed }
            if n < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { throw .timedOut }
                throw .io("recv: \(errnoString())")
            }
            pending += buf[0..<n]
        }
    }

    /// True if a reply (or the end of the connection) can be read within `timeoutMs`.
    public func canRead(timeoutMs: Int32) -> Bool {
        if pending.contains(0x0A) { return true }
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&pfd, 1, timeoutMs) == 1
    }

    /// Sends one request line and returns its reply line.
    public func request(_ line: String) throws(ClientError) -> String {
        try send(Array(line.utf8) + [0x0A])
        return try readLine()
    }

    /// cued's status (`line`: `status`, or `status wait`), nil if it does not answer with one.
    public func status(_ line: String = "status") -> Status? {
        guard let reply = try? request(line), reply.hasPrefix("ok ") else { return nil }
        return Status.parse(String(reply.dropFirst(3)))
    }
}
