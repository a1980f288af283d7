// `cuectl run -- COMMAND`: the command is a refresh. psst2 as it starts, pop
// when it exits 0, fail otherwise. The child inherits cuectl's standard
// descriptors, signal mask and dispositions; cuectl waits for it with every
// forwarded signal blocked and taken by sigwaitinfo, so nothing interrupts it
// and nothing is lost between spawn and wait. When the command died of a
// signal, cuectl dies of the same one once the end cue is sent (as `time` and
// `nice` do), so a shell loop `for …; do cuectl run -- make; done` stops on
// Ctrl-C as it does without cuectl.
import CuedClient
#if canImport(Glibc)
import Glibc
#endif

enum Run {
    /// Signals a process sends cuectl are passed on to the command. The
    /// terminal's own (Ctrl-C, Ctrl-\, hangup, resize) reach the command
    /// directly, as it shares cuectl's process group: those are not sent twice.
    /// SIGTSTP/SIGCONT are left alone so job control stops and resumes both.
    static let forwarded: [Int32] = [SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM, SIGWINCH]

    /// The cue requests before the command starts (replies are read at the end).
    struct Daemon {
        let client: CueClient
        var pendingReplies: Int
    }

    static func run(_ command: [String], socketPath: String?, preamble: [String], namedSession: Bool) -> Never {
        var waited = sigset_t(), old = sigset_t()
        sigemptyset(&waited)
        for s in forwarded + [SIGCHLD] { sigaddset(&waited, s) }
        // A parent may have set SIGCHLD to SIG_IGN, which would reap the child for us.
        signal(SIGCHLD, SIG_DFL)
        sigprocmask(SIG_BLOCK, &waited, &old)

        // A daemon that does not answer at once is no daemon: the command must not wait.
        let client = socketPath.flatMap { try? CueClient(path: $0, timeoutSeconds: 1, connectTimeoutMilliseconds: 100) }

        var attr = posix_spawnattr_t()
        posix_spawnattr_init(&attr)
        posix_spawnattr_setsigmask(&attr, &old)
        posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETSIGMASK))
        let argv = command.map { strdup($0) } + [nil]
        var pid = pid_t()
        let rc = posix_spawnp(&pid, command[0], nil, &attr, argv, environ)
        posix_spawnattr_destroy(&attr)
        argv.forEach { free($0) }
        guard rc == 0 else {
            printErr("cuectl: \(command[0]): \(String(cString: strerror(rc)))")
            exit(rc == ENOENT ? 127 : 126)
        }

        var daemon: Daemon?
        if let client {
            let lines = preamble + ["state loading"]
            if (try? client.send(Array(lines.map { $0 + "\n" }.joined().utf8))) != nil {
                daemon = Daemon(client: client, pendingReplies: lines.count)
            }
        }

        var before = sigaction()
        sigaction(SIGINT, nil, &before)
        let interruptIgnored = unsafeBitCast(before.__sigaction_handler.sa_handler, to: Int.self) == unsafeBitCast(SIG_IGN, to: Int.self)
        let end = waitForChild(pid, waited)
        finish(daemon, success: end.status == 0, socketPath: socketPath, preamble: preamble, namedSession: namedSession)
        // The command's death signal; or SIGINT that cuectl got too, when the
        // command caught it and exited 130 (128 + SIGINT) to say so. A command
        // that caught SIGINT and exited otherwise decided: its status stands.
        if let sig = end.signal { die(of: sig) }
        if end.interrupted, end.status == 128 + SIGINT, !interruptIgnored { die(of: SIGINT) }
        exit(end.status)
    }

    struct ChildEnd {
        /// Its exit status, 128+N if signal N killed it.
        var status: Int32
        /// The signal that killed it.
        var signal: Int32?
        /// cuectl got SIGINT while waiting (from the terminal or a process).
        var interrupted = false
    }

    /// Waits for the child, forwarding signals.
    static func waitForChild(_ pid: pid_t, _ set: sigset_t) -> ChildEnd {
        var set = set
        var interrupted = false
        while true {
            var info = siginfo_t()
            let sig = sigwaitinfo(&set, &info)
            if sig < 0 { continue }  // EINTR
            if sig == SIGINT { interrupted = true }
            if sig == SIGCHLD {
                var st: Int32 = 0
                let r = waitpid(pid, &st, WNOHANG)
                if r == pid {
                    let term = st & 0x7F
                    if term == 0 { return ChildEnd(status: (st >> 8) & 0xFF, interrupted: interrupted) }
                    return ChildEnd(status: 128 + term, signal: term, interrupted: interrupted)
                }
                if r < 0 && errno == ECHILD { return ChildEnd(status: 127, interrupted: interrupted) }
                continue
            }
            // SI_USER (kill), SI_QUEUE (sigqueue), SI_TKILL (tgkill): sent by a process.
            let code = info.si_code
            if code == 0 || code == -1 || code == -6, info._sifields._kill.si_pid != pid {
                kill(pid, sig)
            }
        }
    }

    /// Dies of `sig` with its default action (no core file of cuectl's own:
    /// the command's is the one that matters); exits 128+sig if it survives.
    static func die(of sig: Int32) -> Never {
        if [SIGQUIT, SIGILL, SIGTRAP, SIGABRT, SIGBUS, SIGFPE, SIGSEGV, SIGSYS, SIGXCPU, SIGXFSZ].contains(sig) {
            var none = rlimit(rlim_cur: 0, rlim_max: 0)
            setrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &none)
        }
        signal(sig, SIG_DFL)
        var one = sigset_t()
        sigemptyset(&one)
        sigaddset(&one, sig)
        raise(sig)  // pending while blocked: delivered by the unblock
        sigprocmask(SIG_UNBLOCK, &one, nil)
        exit(128 + sig)
    }

    /// Ends the refresh. A connection the daemon closed meanwhile (a restart,
    /// or evicted to make room) gets one fresh try: its private session is
    /// gone, so the cue is played by name; a named session is declared
    /// loading again (quietly: a new daemon never heard of it) and then ended.
    static func finish(_ daemon: Daemon?, success: Bool, socketPath: String?, preamble: [String], namedSession: Bool) {
        guard let daemon else { return }
        let lines = success ? ["state idle"] : ["state idle quiet", "play fail"]
        daemon.client.setTimeout(milliseconds: 1000)
        guard !send(daemon.client, lines, pending: daemon.pendingReplies) else { return }
        guard let socketPath, let fresh = try? CueClient(path: socketPath, timeoutSeconds: 1, connectTimeoutMilliseconds: 100) else { return }
        _ = send(fresh, preamble + (namedSession ? ["state loading quiet"] + lines : [success ? "play pop" : "play fail"]), pending: 0)
    }

    /// Sends `lines`, then reads every reply owed, so cuectl exits only once
    /// cued has them (a hung daemon costs at most the 1 s timeout). False if
    /// the connection was gone before the lines could be sent.
    static func send(_ client: CueClient, _ lines: [String], pending: Int) -> Bool {
        guard (try? client.send(Array(lines.map { $0 + "\n" }.joined().utf8))) != nil else { return false }
        for _ in 0..<(pending + lines.count) {
            guard (try? client.readLine()) != nil else { break }
        }
        return true
    }
}
