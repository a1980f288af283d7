// `cuectl run -- COMMAND`: the command is a refresh. psst2 as it starts, pop
// when it exits 0, fail otherwise. The child inherits cuectl's standard
// descriptors, signal mask and dispositions; cuectl waits for it with every
// forwarded signal blocked and taken by sigwaitinfo, so nothing interrupts it
// and nothing is lost between spawn and wait.
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

        let status = waitForChild(pid, waited)
        finish(daemon, success: status == 0, socketPath: socketPath, preamble: preamble, namedSession: namedSession)
        exit(status)
    }

    /// Waits for the child, forwarding signals; its exit status, 128+N if signal N killed it.
    static func waitForChild(_ pid: pid_t, _ set: sigset_t) -> Int32 {
        var set = set
        while true {
            var info = siginfo_t()
            let sig = sigwaitinfo(&set, &info)
            if sig < 0 { continue }  // EINTR
            if sig == SIGCHLD {
                var st: Int32 = 0
                let r = waitpid(pid, &st, WNOHANG)
                if r == pid {
                    let term = st & 0x7F
                    return term == 0 ? (st >> 8) & 0xFF : 128 + term
                }
                if r < 0 && errno == ECHILD { return 127 }
                continue
            }
            // SI_USER (kill), SI_QUEUE (sigqueue), SI_TKILL (tgkill): sent by a process.
            let code = info.si_code
            if code == 0 || code == -1 || code == -6, info._sifields._kill.si_pid != pid {
                kill(pid, sig)
            }
        }
    }

    /// Ends the refresh. A connection the daemon closed meanwhile (a restart,
    /// or evicted to make room) gets one fresh try: its private session is
    /// gone, so the cue is played by name.
    static func finish(_ daemon: Daemon?, success: Bool, socketPath: String?, preamble: [String], namedSession: Bool) {
        guard let daemon else { return }
        let lines = success ? ["state idle"] : ["state idle quiet", "play fail"]
        daemon.client.setTimeout(milliseconds: 1000)
        guard !send(daemon.client, lines, pending: daemon.pendingReplies) else { return }
        guard let socketPath, let fresh = try? CueClient(path: socketPath, timeoutSeconds: 1, connectTimeoutMilliseconds: 100) else { return }
        _ = send(fresh, preamble + (namedSession ? lines : [success ? "play pop" : "play fail"]), pending: 0)
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
