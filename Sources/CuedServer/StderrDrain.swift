import CuedSystem
import CuedCore
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// Descriptor 2 belongs to cued. C libraries write to it themselves (libmpg123
/// through libsndfile prints a line per damaged frame, ALSA and libsndfile
/// print too), from whatever thread called them; when stderr was a pipe
/// nobody read, the decoding thread blocked in write(2) for good. At start-up
/// fd 2 becomes the write end of a pipe that a thread of its own (not the
/// event loop, not the audio thread) drains into cued's log: at most
/// `linesPerSecond` lines a second, then one line saying how many were
/// suppressed. The drain only hands lines to `LogWriter`, whose bounded buffer
/// drops what an unread stderr cannot take, so the drain never blocks and a
/// library's write never waits longer than the drain takes to read it.
/// cued's own log lines go to the original stderr (moved to another
/// descriptor, close-on-exec), as before.
public enum StderrDrain {
    /// Lines from the C libraries logged a second at most.
    public static let linesPerSecond = 20
    /// A longer line is cut here (its rest dropped).
    public static let maxLineBytes = 512
    /// F_SETPIPE_SZ (F_LINUX_SPECIFIC_BASE + 7), which Glibc shows only with _GNU_SOURCE.
    static let setPipeSize: Int32 = 1031

    /// Takes fd 2 over; false (and fd 2 left as it was) if a descriptor or the
    /// thread could not be had. Call once, before threads that may write to fd 2 start.
    @discardableResult
    public static func install(logger: Logger) -> Bool {
        let original = fcntl(2, F_DUPFD_CLOEXEC, 3)
        guard original >= 0 else { return false }
        var fds: [Int32] = [-1, -1]
        // pipe2 needs _GNU_SOURCE: pipe, then close-on-exec (cued execs nothing meanwhile).
        guard pipe(&fds) == 0 else { close(original); return false }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        // Room for bursts while the drain is scheduled (1 MiB, the unprivileged maximum).
        _ = fcntl(fds[1], Self.setPipeSize, 1 << 20)
        LogWriter.setDestination(original)
        // dup2 clears close-on-exec on fd 2, as a standard stream has it.
        guard dup2(fds[1], 2) == 2 else {
            LogWriter.setDestination(2)
            close(fds[0]); close(fds[1]); close(original)
            return false
        }
        close(fds[1])
        CrashPath.install(pipe: fds[0], original: original)
        let drain = Drain(fd: fds[0], logger: logger)
        guard case .success = CuedThread.start("cued-stderr", { drain.run() }) else {
            // No drain: give fd 2 back to the original stderr.
            CrashPath.uninstall()
            dup2(original, 2)
            LogWriter.setDestination(2)
            close(fds[0]); close(original)
            return false
        }
        return true
    }

    private final class Drain {
        let fd: Int32
        let logger: Logger
        init(fd: Int32, logger: Logger) { self.fd = fd; self.logger = logger }

        func run() {
            var lines = LineAssembler(maxLineBytes: StderrDrain.maxLineBytes)
            var limiter = LineLimiter(perSecond: StderrDrain.linesPerSecond)
            var buffer = [UInt8](repeating: 0, count: 16 * 1024)
            while true {
                // Wake when a window with dropped lines ends, to say so even if nothing follows.
                let wait = limiter.untilReport(now: MonotonicClock.now()).map { Int32(clamping: $0 / 1_000_000 + 1) } ?? -1
                var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                let ready = poll(&p, 1, wait)
                if ready < 0 && errno != EINTR { return }
                if let n = limiter.endWindow(now: MonotonicClock.now()) { reportSuppressed(n) }
                guard ready > 0 else { continue }
                let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n < 0 { if errno == EINTR || errno == EAGAIN { continue }; return }
                if n == 0 { return }  // every write end closed: nothing more can come
                let now = MonotonicClock.now()
                for line in lines.append(buffer[0..<n]) where !line.isEmpty {
                    let (log, report) = limiter.admit(now: now)
                    if let report { reportSuppressed(report) }
                    if log { logger.warning("stderr: \(line)") }
                }
            }
        }

        func reportSuppressed(_ n: Int) {
            logger.warning("stderr: \(n) more lines written by C libraries (libsndfile, mpg123, ALSA) suppressed; at most \(StderrDrain.linesPerSecond) a second are logged")
        }
    }
}

/// What a dying process writes to fd 2 (the Swift runtime's "Fatal error: …",
/// a backtrace, glibc's abort messages) must not die with it in the pipe. On a
/// fatal signal, before the action that was there runs: what is in the pipe is
/// copied to the original stderr, and fd 2 is the original stderr again, so
/// what follows goes there directly. A fault then happens again under the
/// previous action (the Swift runtime's backtracer, or the default); a signal
/// sent by kill is raised again. What the drain had already taken is in the
/// log writer's queue, like cued's own last lines: written if its thread gets
/// to it within the 0.1 s the handler waits.
enum CrashPath {
    static let signals: [Int32] = [SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT]
    // Set before the handlers are installed (a static is initialized on first
    // use, which must not be inside a handler); then read only by them.
    nonisolated(unsafe) private static var pipeFD: Int32 = -1
    nonisolated(unsafe) private static var originalFD: Int32 = -1
    nonisolated(unsafe) private static let previous = UnsafeMutablePointer<sigaction>.allocate(capacity: 65)
    nonisolated(unsafe) private static let buffer = UnsafeMutableRawPointer.allocate(byteCount: 4096, alignment: 16)

    static func install(pipe: Int32, original: Int32) {
        pipeFD = pipe
        originalFD = original
        _ = (previous, buffer)
        for sig in signals {
            var action = sigaction()
            action.__sigaction_handler.sa_sigaction = { sig, info, _ in CrashPath.handle(sig, info) }
            action.sa_flags = SA_SIGINFO | SA_ONSTACK
            sigemptyset(&action.sa_mask)
            sigaction(sig, &action, previous + Int(sig))
        }
    }

    static func uninstall() {
        for sig in signals { sigaction(sig, previous + Int(sig), nil) }
    }

    /// Async-signal-safe: fcntl, read, write, dup2, nanosleep, sigaction, raise.
    private static func handle(_ sig: Int32, _ info: UnsafeMutablePointer<siginfo_t>?) {
        let flags = fcntl(pipeFD, F_GETFL)
        if flags >= 0 { _ = fcntl(pipeFD, F_SETFL, flags | O_NONBLOCK) }
        while true {
            let n = read(pipeFD, buffer, 4096)
            if n <= 0 { break }
            var done = 0
            while done < n {
                let w = write(originalFD, buffer + done, n - done)
                if w <= 0 { break }
                done += w
            }
            if done < n { break }
        }
        dup2(originalFD, 2)
        // Lines the drain took just before are in the log writer's queue: give
        // its thread a moment to write them (0.1 s, once, on the way out).
        var pause = timespec(tv_sec: 0, tv_nsec: 100_000_000)
        nanosleep(&pause, nil)
        sigaction(sig, previous + Int(sig), nil)
        // Sent (kill, raise, abort): send it again, now to the previous action.
        // A fault: returning runs the faulting instruction again, under it.
        if let info, info.pointee.si_code <= 0 { raise(sig) }
    }
}
