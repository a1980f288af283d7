import CuedSystem
import Logging
import CuedCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// swift-log to stderr. Under journald (JOURNAL_STREAM set) lines carry a
/// `<N>` priority prefix and no timestamp of their own; otherwise a local
/// timestamp leads. Lines go through `LogWriter`, so logging never blocks
/// and never kills the daemon.
public struct StderrLogHandler: LogHandler {
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    private let label: String
    private let journal: Bool

    public init(label: String, level: Logger.Level, journal: Bool) {
        self.label = label; self.logLevel = level; self.journal = journal
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        let level = event.level
        let message = "\(event.message)".escapingControls()
        var all = metadata
        if let extra = event.metadata { all.merge(extra) { $1 } }
        let meta = all.isEmpty ? "" : " " + all.sorted { $0.key < $1.key }.map { "\($0.key)=\("\($0.value)".escapingControls())" }.joined(separator: " ")
        let text: String
        if journal {
            text = "<\(Self.priority(level))>\(message)\(meta)\n"
        } else {
            text = "\(Self.timestamp()) \(level) \(label): \(message)\(meta)\n"
        }
        LogWriter.shared.enqueue(text)
    }

    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: return 7
        case .info: return 6
        case .notice: return 5
        case .warning: return 4
        case .error: return 3
        case .critical: return 2
        }
    }

    static func timestamp() -> String {
        var t = time(nil)
        var tm = tm()
        localtime_r(&t, &tm)
        var buf = [UInt8](repeating: 0, count: 32)
        let n = strftime(&buf, buf.count, "%Y-%m-%dT%H:%M:%S", &tm)
        return String(decoding: buf[0..<n], as: UTF8.self)
    }
}

/// Writes log lines to cued's stderr from a thread of its own. The event loop only
/// appends to a bounded buffer: a terminal that stops reading (Ctrl-S, a
/// full pipe) cannot stall it, a reader that went away (EPIPE) or a closed
/// stderr (EBADF) just loses lines, and a full buffer drops lines and says
/// how many once it drains.
public final class LogWriter: @unchecked Sendable {
    public static let shared = LogWriter()
    static let maxBufferedBytes = 256 * 1024
    /// Where log lines go: fd 2, or the descriptor the original stderr was
    /// moved to once `StderrDrain` took fd 2 for the C libraries.
    private static let destinationFD = Atomic<Int32>(2)
    public static var destination: Int32 { destinationFD.load(ordering: .acquiring) }
    static func setDestination(_ fd: Int32) { destinationFD.store(fd, ordering: .releasing) }

    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let cond = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    // Guarded by `mutex`.
    private var lines: [String] = []
    private var bytes = 0
    private var dropped = 0
    private var writing = false
    private var started = false

    private init() {
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(cond, nil)
    }

    public func enqueue(_ text: String) {
        pthread_mutex_lock(mutex)
        if bytes + text.utf8.count > Self.maxBufferedBytes {
            dropped += 1
        } else {
            lines.append(text)
            bytes += text.utf8.count
        }
        let start = !started
        started = true
        pthread_cond_signal(cond)
        pthread_mutex_unlock(mutex)
        if start { startThread() }
    }

    /// Waits up to `timeoutMs` for what is buffered to be written (at exit).
    public func flush(timeoutMs: Int) {
        var deadline = timespec()
        clock_gettime(CLOCK_REALTIME, &deadline)
        deadline.tv_sec += timeoutMs / 1000
        deadline.tv_nsec += (timeoutMs % 1000) * 1_000_000
        if deadline.tv_nsec >= 1_000_000_000 { deadline.tv_sec += 1; deadline.tv_nsec -= 1_000_000_000 }
        pthread_mutex_lock(mutex)
        while (!lines.isEmpty || writing) && started {
            if pthread_cond_timedwait(cond, mutex, &deadline) == ETIMEDOUT { break }
        }
        pthread_mutex_unlock(mutex)
    }

    private func startThread() {
        CuedThread.start("cued-log") { [self] in run() }
    }

    private func run() {
        while true {
            pthread_mutex_lock(mutex)
            while lines.isEmpty {
                writing = false
                pthread_cond_broadcast(cond)  // wakes `flush`
                pthread_cond_wait(cond, mutex)
            }
            var batch = lines
            lines.removeAll(keepingCapacity: true)
            bytes = 0
            if dropped > 0 {
                batch.append("cued: \(dropped) log lines dropped (stderr was not being read)\n")
                dropped = 0
            }
            writing = true
            pthread_mutex_unlock(mutex)
            for text in batch { Self.write(text) }
        }
    }

    /// write(2) to `destination`, retried on EINTR and short writes; any other
    /// error drops the line. Blocking: only the writer thread, and cued's last
    /// words at exit, call it.
    public static func write(_ text: String) {
        let fd = destination
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n < 0 { if errno == EINTR { continue }; return }
            bytes = bytes.dropFirst(n)
        }
    }
}

/// Makes sure fds 0, 1 and 2 are open (on /dev/null if not), so that a
/// socket or file cued opens later can never land on "stderr" and receive
/// log lines.
public enum StandardStreams {
    public static func ensureOpen() {
        for fd: Int32 in 0...2 where fcntl(fd, F_GETFD) < 0 && errno == EBADF {
            let null = open("/dev/null", O_RDWR)
            if null >= 0 && null != fd { dup2(null, fd); close(null) }
        }
    }
}
