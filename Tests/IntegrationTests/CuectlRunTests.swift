import CuedProtocol
import Foundation
import Testing
import TestSupport

/// `cuectl run -- COMMAND`: the command's status, streams and signals pass
/// through; psst2 as it starts, pop or fail as it ends.
@Suite(.timeLimit(.minutes(2))) struct CuectlRunTests {
    /// One constant value per cue, 20 ms each: the capture shows which played, in which order.
    static let cues: [String: [Int16]] = [
        "psst1": Fixture.constant(100, frames: 960), "psst2": Fixture.constant(200, frames: 960),
        "pop": Fixture.constant(300, frames: 960), "fail": Fixture.constant(400, frames: 960),
    ]

    /// `cuectl --socket SOCKET ARGS…` with files for its streams.
    func cuectl(_ socket: String, _ args: [String], stdin: String? = nil, env: [String: String]? = nil) throws -> (status: Int32, out: String, err: String) {
        try runProcess(TestPaths.binary("cuectl"), ["--socket", socket] + args, env: env, stdin: stdin)
    }

    /// The cues a capture holds, in order (each run of one value is one cue).
    func order(_ d: DaemonHarness) throws -> [Int16] {
        var out: [Int16] = []
        for v in try WAV.read(d.capturePath).samples where v != 0 && out.last != v { out.append(v) }
        return out
    }

    func waitForFrames(_ d: DaemonHarness, _ frames: Int) -> Bool {
        eventually { ((try? WAV.read(d.capturePath))?.samples.filter { $0 != 0 }.count ?? 0) >= frames * 2 }
    }

    static let statuses: [([String], Int32)] = [
        (["true"], 0), (["sh", "-c", "exit 3"], 3), (["sh", "-c", "exit 255"], 255),
        (["sh", "-c", "kill -TERM $$"], 128 + SIGTERM), (["sh", "-c", "kill -KILL $$"], 128 + SIGKILL),
        (["/nonexistent/cmd"], 127),
    ]

    @Test(arguments: statuses)
    func exitStatusPassesThrough(command: [String], status: Int32) throws {
        let dir = TempDir()
        let r = try cuectl(dir.file("none.sock"), ["run", "--"] + command)
        #expect(r.status == status)
        #expect(r.out == "")
        if status != 127 { #expect(r.err == "") } else { #expect(r.err == "cuectl: /nonexistent/cmd: No such file or directory\n") }
    }

    @Test func standardStreamsPassThrough() throws {
        let dir = TempDir()
        let r = try cuectl(dir.file("none.sock"), ["run", "--", "sh", "-c", "cat; echo to-stderr >&2"], stdin: "line 1\nline 2\n")
        #expect(r == (0, "line 1\nline 2\n", "to-stderr\n"))
        // The command's stdin is cuectl's own descriptor, not a copy through a pipe.
        let fd = try cuectl(dir.file("none.sock"), ["run", "sh", "-c", "readlink /proc/self/fd/0"], stdin: "x")
        #expect(fd.out.hasSuffix("/in\n"), "\(fd.out)")
    }

    static let forwarded: [(Int32, Int32)] = [(SIGTERM, 42), (SIGINT, 43), (SIGHUP, 44), (SIGUSR1, 45)]

    @Test(arguments: forwarded)
    func signalsSentToCuectlReachTheCommand(signal: Int32, exit: Int32) throws {
        let dir = TempDir()
        let script = "trap 'exit \(exit)' \(signal); echo ready; while :; do sleep 0.05; done"
        let p = try Subprocess(TestPaths.binary("cuectl"), ["--socket", dir.file("none.sock"), "run", "--", "sh", "-c", script],
                               stdout: dir.file("out"))
        #expect(eventually { ((try? String(contentsOfFile: dir.file("out"), encoding: .utf8)) ?? "") == "ready\n" })
        p.signal(signal)
        #expect(p.wait(timeout: 10) == exit)
    }

    /// ^C at a terminal signals the whole foreground process group: the
    /// command gets it from the terminal, cuectl neither dies of it nor sends
    /// it again, and exits with what the command made of it.
    @Test func terminalInterruptReachesTheCommandOnce() throws {
        let dir = TempDir()
        let script = "n=0; trap 'n=$((n+1)); : > \(dir.file("int"))' INT; echo ready; while [ ! -e \(dir.file("go")) ]; do sleep 0.05; done; echo \"ints=$n\"; exit 5"
        let pty = try PTY(TestPaths.binary("cuectl"), ["--socket", dir.file("none.sock"), "run", "--", "sh", "-c", script],
                          env: ProcessInfo.processInfo.environment)
        #expect(pty.waitFor("ready"))
        pty.type("\u{3}")
        #expect(eventually { FileManager.default.fileExists(atPath: dir.file("int")) })
        usleep(300_000)  // an absence is tested (no event to wait on): room for a second SIGINT, if one were sent, to arrive
        _ = FileManager.default.createFile(atPath: dir.file("go"), contents: nil)
        #expect(pty.wait() == 5)
        #expect(pty.waitFor("ints=1"), "\(pty.text)")
    }

    /// The command's death signal is cuectl's own (as with `time` and `nice`),
    /// not an exit status 128+N: a shell sees the signal.
    static let deaths: [([String], Int32)] = [
        (["sh", "-c", "kill -INT $$"], SIGINT), (["sh", "-c", "kill -TERM $$"], SIGTERM),
        (["sh", "-c", "kill -SEGV $$"], SIGSEGV), (["sh", "-c", "trap 'exit 130' INT; kill -INT $$; exit 3"], 0),
    ]

    @Test(arguments: deaths)
    func cuectlDiesOfTheSignalTheCommandDiedOf(command: [String], signal: Int32) throws {
        let dir = TempDir()
        // Python's subprocess says how a child ended: -N for death by signal N.
        let r = try runProcess("/usr/bin/python3", ["-c", "import subprocess, sys; print(subprocess.run(sys.argv[1:]).returncode)",
                                                    TestPaths.binary("cuectl"), "--socket", dir.file("none.sock"), "run", "--"] + command)
        // signal 0: the command caught SIGINT (its own: cuectl got none) and exited 130 by choice; the status stands.
        #expect(r.out == (signal == 0 ? "130\n" : "-\(signal)\n"), "\(r)")
    }

    /// ^C in a shell loop over `cuectl run` stops the loop, as it does without
    /// cuectl: bash ends a loop when its child dies of SIGINT (cuectl exited
    /// 130 before, and the loop went on). Also when the command catches SIGINT
    /// and exits 130 to say so.
    @Test(arguments: ["sleep 20", "trap 'exit 130' INT; while :; do sleep 0.05; done"])
    func controlCStopsAShellLoop(command: String) throws {
        let cuectl = TestPaths.binary("cuectl")
        let dir = TempDir()
        let script = "for i in 1 2; do '\(cuectl)' --socket '\(dir.file("none.sock"))' run -- sh -c \"echo ready$i; \(command)\"; done; echo finished"
        let pty = try PTY("/bin/bash", ["-c", script], env: ProcessInfo.processInfo.environment)
        #expect(pty.waitFor("ready1"))
        // ^C until the loop ends: once in a fresh-clone run the first was lost (the loop went
        // on sleeping, no ready2). A loop that goes on after a ^C prints ready2: that fails below.
        var status: Int32?
        for _ in 0..<3 where status == nil && !pty.text.contains("ready2") {
            pty.type("\u{3}")
            status = pty.wait(timeout: 5)
        }
        #expect(status == 128 + SIGINT, "\(pty.text)")
        #expect(!pty.text.contains("ready2") && !pty.text.contains("finished"), "\(pty.text)")
    }

    @Test func withoutADaemonTheCommandRunsSilently() throws {
        let dir = TempDir()
        #expect(try cuectl(dir.file("none.sock"), ["run", "--", "sh", "-c", "echo ran"]) == (0, "ran\n", ""))
        // No socket path at all (no XDG_RUNTIME_DIR, no CUED_SOCKET): the same.
        var env = ProcessInfo.processInfo.environment
        env.removeValue(forKey: "XDG_RUNTIME_DIR")
        env.removeValue(forKey: "CUED_SOCKET")
        #expect(try runProcess(TestPaths.binary("cuectl"), ["run", "--", "sh", "-c", "echo ran"], env: env) == (0, "ran\n", ""))
    }

    static let endings: [([String], [Int16])] = [
        (["sleep", "0.3"], [200, 300]),
        (["sh", "-c", "sleep 0.3; exit 2"], [200, 400]),
        (["sh", "-c", "sleep 0.3; kill -INT $$"], [200, 400]),
    ]

    /// A daemon that takes the requests but never answers: the command runs
    /// at once and cuectl gives up on the replies after its short timeout.
    @Test func aHungDaemonDoesNotHoldTheCommand() throws {
        let dir = TempDir()
        let fake = try FakeDaemon(path: dir.file("hung.sock")) { _ in nil }
        let p = try Subprocess(TestPaths.binary("cuectl"), ["--socket", fake.path, "--app", "t", "run", "--", "sh", "-c", "echo started"],
                               stdout: dir.file("out"))
        #expect(p.wait(timeout: 10) == 0)
        #expect(try String(contentsOfFile: dir.file("out"), encoding: .utf8) == "started\n")
        #expect(fake.lines == ["app t", "state loading", "state idle"])
    }

    /// A daemon whose listen queue is full (it stopped accepting): connecting
    /// gives up after 100 ms and the command runs without cues.
    @Test func aDaemonThatDoesNotAcceptIsNoDaemon() throws {
        let dir = TempDir()
        let sock = dir.file("full.sock")
        let listener = try boundUnixSocket(sock, type: Int32(SOCK_STREAM.rawValue))
        defer { close(listener) }
        #expect(listen(listener, 0) == 0)
        // Fill the queue (backlog 0 holds one) with connections nobody accepts.
        var fillers: [Int32] = []
        defer { fillers.forEach { close($0) } }
        while fillers.count < 8 {
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            var addr = sockaddr_un()
            addr.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &addr.sun_path) { raw in let b = Array(sock.utf8); raw.copyBytes(from: b); raw[b.count] = 0 }
            let rc = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            if rc != 0 { close(fd); break }
            fillers.append(fd)
        }
        #expect(!fillers.isEmpty)
        let r = try cuectl(sock, ["run", "--", "sh", "-c", "echo ran; exit 4"])
        #expect(r == (4, "ran\n", ""))
    }

    @Test(arguments: endings)
    func loadingThenPopOrFail(command: [String], cues: [Int16]) throws {
        let d = try DaemonHarness(cues: Self.cues, args: DaemonTests.wavSink)
        let r = try cuectl(d.socketPath, ["run", "--"] + command)
        #expect(r.err == "")
        #expect(waitForFrames(d, 2 * 960))
        #expect(try order(d) == cues)
        // The app is the command's name unless given.
        let s = try #require(Status.parse(String(try d.request("status").dropFirst(3))))
        #expect(s.apps[command[0]]?.played == 2)
    }

    @Test func sessionAndAppOptions() throws {
        let d = try DaemonHarness(cues: Self.cues, args: DaemonTests.wavSink)
        let r = try cuectl(d.socketPath, ["run", "--session", "build", "--app", "ci", "--", "sleep", "0.3"])
        #expect(r.status == 0)
        #expect(try cuectl(d.socketPath, ["--session", "build", "session"]).out == "build idle 65\n")
        #expect(waitForFrames(d, 2 * 960))
        let s = try #require(Status.parse(String(try d.request("status").dropFirst(3))))
        #expect(s.apps["ci"]?.played == 2)
        #expect(try order(d) == [200, 300])
    }

    /// A daemon restarted while the command runs: the end cue still sounds.
    @Test func daemonRestartedDuringTheCommand() throws {
        let dir = TempDir()
        let first = try DaemonHarness(cues: Self.cues, args: ["--sink", "null"])
        let script = "echo ready; while [ ! -e \(dir.file("go")) ]; do sleep 0.05; done"
        let p = try Subprocess(TestPaths.binary("cuectl"), ["--socket", first.socketPath, "run", "--", "sh", "-c", script],
                               stdout: dir.file("out"))
        #expect(eventually { ((try? String(contentsOfFile: dir.file("out"), encoding: .utf8)) ?? "") == "ready\n" })
        #expect(eventually { (try? first.request("status")).flatMap { Status.parse(String($0.dropFirst(3))) }?.cues["psst2"]?.played == 1 })
        first.stop()
        let second = try DaemonHarness(cues: Self.cues, args: ["--sink", "wav:%DIR%/capture.wav", "--socket", first.socketPath])
        _ = FileManager.default.createFile(atPath: dir.file("go"), contents: nil)
        #expect(p.wait(timeout: 10) == 0)
        #expect(waitForFrames(second, 960))
        #expect(try order(second) == [300])
    }

    /// The same with a named session: the new daemon never heard of it, so
    /// cuectl declares it loading again (quietly) and ends it: the pop sounds.
    @Test(arguments: [(true, [Int16(300)]), (false, [Int16(400)])])
    func namedSessionSurvivesADaemonRestart(success: Bool, cues: [Int16]) throws {
        let dir = TempDir()
        let first = try DaemonHarness(cues: Self.cues, args: ["--sink", "null"])
        let script = "echo ready; while [ ! -e \(dir.file("go")) ]; do sleep 0.05; done; exit \(success ? 0 : 2)"
        let p = try Subprocess(TestPaths.binary("cuectl"), ["--socket", first.socketPath, "--session", "build", "run", "--", "sh", "-c", script],
                               stdout: dir.file("out"))
        #expect(eventually { ((try? String(contentsOfFile: dir.file("out"), encoding: .utf8)) ?? "") == "ready\n" })
        #expect(eventually { (try? first.status())?.cues["psst2"]?.played == 1 })
        first.stop()
        let second = try DaemonHarness(cues: Self.cues, args: ["--sink", "wav:%DIR%/capture.wav", "--socket", first.socketPath])
        _ = FileManager.default.createFile(atPath: dir.file("go"), contents: nil)
        #expect(p.wait(timeout: 10) == (success ? 0 : 2))
        #expect(waitForFrames(second, 960))
        #expect(try order(second) == cues)
        #expect(try second.request("session build") == "ok build idle 65")
    }
}
