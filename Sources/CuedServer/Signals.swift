#if canImport(Glibc)
import Glibc
#endif

/// Signals are blocked in every thread and taken synchronously by the main
/// thread with sigwaitinfo: no handler runs at an arbitrary point, and no
/// thread is ever interrupted.
public enum Signals {
    /// What cued does with each signal it takes.
    public enum Meaning: Equatable, Sendable {
        case stop      // TERM, INT
        case reload    // HUP (also what a terminal's hangup sends: a reload is harmless)
        case ignore    // USR1, USR2 and other signals that would kill by default
        case overran   // XCPU: a real-time thread ran past RLIMIT_RTTIME's soft limit (see AudioEngine)
    }

    /// Signals whose default action would end cued though nothing in it
    /// raises them: a stray `kill -USR1` must not take the daemon down.
    static let stray: [Int32] = [SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF, SIGIO, SIGPWR, SIGSTKFLT]

    public static func meaning(_ signal: Int32) -> Meaning {
        switch signal {
        case SIGTERM, SIGINT: return .stop
        case SIGHUP: return .reload
        case SIGXCPU: return .overran
        default: return .ignore
        }
    }

    /// Blocks the handled signals in the calling thread, and so in every
    /// thread it starts later (they inherit the mask). SIGPIPE is ignored:
    /// a write to a closed socket or pipe returns EPIPE instead.
    public static func block() -> sigset_t {
        signal(SIGPIPE, SIG_IGN)
        var set = sigset_t()
        sigemptyset(&set)
        var all = [SIGTERM, SIGINT, SIGHUP, SIGXCPU] + stray
        // Real-time signals also end a process by default.
        for s in __libc_current_sigrtmin()...__libc_current_sigrtmax() { all.append(s) }
        for s in all { sigaddset(&set, s) }
        pthread_sigmask(SIG_SETMASK, &set, nil)
        return set
    }

    /// The next of the blocked signals.
    public static func wait(_ set: sigset_t) -> Int32 {
        var set = set
        while true {
            let s = sigwaitinfo(&set, nil)
            if s > 0 { return s }
        }
    }
}
