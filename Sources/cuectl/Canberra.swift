// `cuectl canberra [on|off]` and doctor's libcanberra lines: the I/O (files, the user
// manager through systemctl, cued's status). What it means is CanberraRouting's.
import CuedClient
import CuedProtocol
import CuectlCommands
#if canImport(Glibc)
import Glibc
#endif

enum Canberra {
    static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

    /// A whole file, at most `limit` bytes (libcanberra.so.0 is about 100 KB).
    static func readFile(_ path: String, limit: Int = 4 << 20) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, Int(st.st_size) <= limit else { return nil }
        var bytes = [UInt8](repeating: 0, count: Int(st.st_size))
        var got = 0
        while got < bytes.count {
            let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + got, $0.count - got) }
            if n <= 0 { break }
            got += n
        }
        return Array(bytes[0..<got])
    }

    static func machine() -> String {
        var u = utsname()
        uname(&u)
        return withUnsafeBytes(of: u.machine) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    }

    /// A program's exit status and standard output, or nil if it could not run or took
    /// longer than `timeoutMs` (then it is killed).
    static func capture(_ argv: [String], timeoutMs: Int32 = 3000) -> (status: Int32, out: String)? {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { return nil }
        _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let args = argv.map { strdup($0) } + [nil]
        defer { args.forEach { free($0) } }
        var pid = pid_t()
        let rc = posix_spawnp(&pid, argv[0], &actions, nil, args, environ)
        close(fds[1])
        guard rc == 0 else { close(fds[0]); return nil }
        var out: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 4096)
        var pfd = pollfd(fd: fds[0], events: Int16(POLLIN), revents: 0)
        var timedOut = false
        while out.count < 1 << 20 {
            let r = poll(&pfd, 1, timeoutMs)
            if r == 0 { timedOut = true; break }
            if r < 0 { if errno == EINTR { continue }; break }
            let n = read(fds[0], &buf, buf.count)
            if n <= 0 { break }
            out += buf[0..<n]
        }
        close(fds[0])
        if timedOut { kill(pid, SIGKILL) }
        var st: Int32 = 0
        while waitpid(pid, &st, 0) < 0 && errno == EINTR {}
        guard !timedOut else { return nil }
        return ((st & 0x7F) == 0 ? (st >> 8) & 0xFF : 128 + (st & 0x7F), String(decoding: out, as: UTF8.self))
    }

    /// `CANBERRA_DRIVER` in the user manager's environment: nil when none answers.
    static func managerValue() -> String?? {
        guard let r = capture(["systemctl", "--user", "show-environment"]), r.status == 0 else { return nil }
        for line in r.out.split(separator: "\n") where line.hasPrefix("CANBERRA_DRIVER=") {
            return .some(String(line.dropFirst("CANBERRA_DRIVER=".count)))
        }
        return .some(nil)
    }

    static func facts(environment env: [String: String], status: Status?) -> CanberraRouting.Facts {
        var f = CanberraRouting.Facts()
        f.on = exists(CanberraRouting.switchPath(environment: env))
        for lib in CanberraRouting.libraryCandidates(machine: machine()) {
            if let bytes = readFile(lib), let dir = CanberraRouting.pluginDirectory(inLibrary: bytes) {
                f.pluginDirectory = dir
                f.pluginInstalled = exists(dir + "/" + CanberraRouting.pluginFile)
                break
            }
        }
        f.generator = CanberraRouting.generatorDirectories.map { $0 + "/" + CanberraRouting.generatorName }.first(where: exists)
        f.shellValue = env["CANBERRA_DRIVER"]
        f.managerValue = managerValue()
        f.apps = status.map(CanberraRouting.apps)
        return f
    }

    /// cued's status, if it answers within a second.
    static func status(socket: String?) -> Status? {
        guard let socket, let client = try? CueClient(path: socket, timeoutSeconds: 1) else { return nil }
        return client.status()
    }

    /// `cuectl canberra [on|off]`.
    static func run(_ on: Bool?, environment env: [String: String], socket: String?) -> Never {
        let f = facts(environment: env, status: on == nil ? status(socket: socket) : nil)
        guard let on else {
            print(CanberraRouting.report(f).joined(separator: "\n"))
            exit(0)
        }
        let path = CanberraRouting.switchPath(environment: env)
        if on {
            if let (problem, fix) = CanberraRouting.missing(f) {
                printErr("cuectl: not turned on: \(problem)\n  fix: \(fix)")
                exit(1)
            }
            let dir = String(path[..<path.lastIndex(of: "/")!])
            let parent = String(dir[..<dir.lastIndex(of: "/")!])
            mkdir(parent, 0o755)
            mkdir(dir, 0o755)
            let text = CanberraRouting.switchText + "\n"
            let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o644)
            guard fd >= 0, text.withCString({ write(fd, $0, strlen($0)) }) == text.utf8.count else {
                die("cannot write \(path): \(String(cString: strerror(errno)))", 1)
            }
            close(fd)
        } else if unlink(path) != 0 && errno != ENOENT {
            die("cannot remove \(path): \(String(cString: strerror(errno)))", 1)
        }
        // What the user manager starts from now on; already running programs keep theirs.
        var managerChanged = false
        if on, f.managerValue != nil {
            managerChanged = capture(["systemctl", "--user", "set-environment", "CANBERRA_DRIVER=" + CanberraRouting.driverName])?.status == 0
        } else if !on, case .some(let v) = f.managerValue {
            managerChanged = !CanberraRouting.isCued(v)
                || capture(["systemctl", "--user", "unset-environment", "CANBERRA_DRIVER"])?.status == 0
        }
        print(CanberraRouting.switched(on, managerChanged: managerChanged).joined(separator: "\n"))
        exit(0)
    }
}
