import CuedProtocol
import Foundation
import Testing
import TestSupport

/// Receives sd_notify datagrams on a socket of the test's own (a fake NOTIFY_SOCKET).
final class NotifyListener: @unchecked Sendable {
    let path: String
    private let fd: Int32

    init(path: String) throws {
        self.path = path
        fd = try boundUnixSocket(path, type: Int32(SOCK_DGRAM.rawValue))
    }

    deinit { close(fd) }

    /// The next message, or nil after `timeout` seconds.
    func next(timeout: Double) -> String? {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&pfd, 1, Int32(timeout * 1000)) == 1 else { return nil }
        var buf = [UInt8](repeating: 0, count: 4096)
        let n = recv(fd, &buf, buf.count, 0)
        return n > 0 ? String(decoding: buf[0..<n], as: UTF8.self) : nil
    }

    /// Waits for a message containing `field`; returns all messages seen on the way.
    func wait(for field: String, timeout: Double = 10) -> [String]? {
        let deadline = Date().addingTimeInterval(timeout)
        var seen: [String] = []
        while Date() < deadline {
            guard let m = next(timeout: deadline.timeIntervalSinceNow) else { break }
            seen.append(m)
            if m.split(separator: "\n").contains(Substring(field)) { return seen }
        }
        return nil
    }

    func drain() { while next(timeout: 0) != nil {} }
}

@Suite(.timeLimit(.minutes(3))) struct SystemdTests {
    /// The units as `make install` writes them, with ExecStart at the built binary.
    func installedUnits(_ dir: TempDir) throws -> String {
        let units = dir.file("units")
        let r = try runProcess("/usr/bin/make", ["-s", "-C", TestPaths.repoRoot.path, "install-units",
                                                 "BINDIR=" + TestPaths.binDir.path, "UNITDIR=" + units])
        #expect(r.status == 0, "\(r.err)")
        return units
    }

    @Test func unitsVerifyCleanAndScoreSafe() throws {
        let dir = TempDir()
        let units = try installedUnits(dir)
        var env = ProcessInfo.processInfo.environment
        env["XDG_RUNTIME_DIR"] = dir.path
        let verify = try runProcess("/usr/bin/systemd-analyze", ["--user", "verify", units + "/cued.socket", units + "/cued.service"], env: env)
        #expect(verify.status == 0)
        #expect(verify.err.isEmpty, "systemd-analyze verify: \(verify.err)")
        #expect(verify.out.isEmpty, "systemd-analyze verify: \(verify.out)")
        for file in [units + "/cued.service", TestPaths.repoRoot.path + "/systemd/cued.service"] {
            let sec = try runProcess("/usr/bin/systemd-analyze", ["--user", "security", "--offline=true", file], env: env)
            guard let line = sec.out.split(separator: "\n").first(where: { $0.contains("Overall exposure level") }),
                  let score = line.split(separator: " ").compactMap({ Double($0) }).first else {
                Issue.record("no exposure score: \(sec.out.suffix(300)) \(sec.err)"); continue
            }
            // What docs/operations.md states (0.9 with Debian 12's systemd): a setting lost would raise it.
            #expect(score <= 0.9, "exposure \(score)")
            let doc = try String(contentsOfFile: TestPaths.repoRoot.path + "/docs/operations.md", encoding: .utf8)
            #expect(doc.contains("exposure \(score)"), "docs/operations.md does not state exposure \(score)")
        }
        let service = try String(contentsOfFile: units + "/cued.service", encoding: .utf8)
        #expect(service.contains("ExecStart=\"" + TestPaths.binDir.path + "/cued\"\n"))
        #expect(service.contains("DeviceAllow=char-alsa"))
        #expect(!service.split(separator: "\n").contains { $0.hasPrefix("PrivateDevices=") })
    }

    /// The shipped unit keeps its sandbox and still lets RTKit make the audio thread real-time:
    /// the system bus's socket stays reachable (Unix sockets allowed, the file system read-only
    /// but not hidden), the real-time budget is within RTKit's RTTimeUSecMax, and the process
    /// cannot raise itself (`RestrictRealtime=`, no capabilities). Then cued run the way the unit
    /// runs it, as far as this machine has no systemd to do it (as the user, no capabilities and
    /// no new privileges, the unit's LimitRTTIME, the file system read-only but its own
    /// directories: /tmp here), against a real RTKit: `realtime (rtkit)`.
    @Test(.enabled(if: RealtimeKitStack.unavailableReason == nil, Comment(rawValue: RealtimeKitStack.unavailableReason ?? "")))
    func theShippedUnitLetsRTKitMakeTheAudioThreadRealtime() throws {
        let dir = TempDir()
        let unit = try String(contentsOfFile: try installedUnits(dir) + "/cued.service", encoding: .utf8)
        let settings = unit.split(separator: "\n").filter { !$0.hasPrefix("#") }
        func values(_ key: String) -> [String] { settings.filter { $0.hasPrefix(key + "=") }.map { String($0.dropFirst(key.count + 1)) } }
        #expect(values("RestrictRealtime") == ["yes"], "the sandbox keeps refusing the process's own real time")
        #expect(values("RestrictAddressFamilies").allSatisfy { $0.split(separator: " ").contains("AF_UNIX") })
        #expect(values("ProtectSystem") == ["strict"])
        for key in ["InaccessiblePaths", "TemporaryFileSystem", "BindPaths", "ProtectSystem"] {
            #expect(!values(key).contains { $0.contains("/run") }, "\(key) hides the system bus's socket")
        }
        // LimitRTTIME=SOFT:HARD in ms: within RTKit's 200 ms, the soft limit below the hard one.
        let limit = try #require(values("LimitRTTIME").first?.split(separator: ":").map { Int($0.dropLast(2)) ?? -1 })
        #expect(limit.count == 2 && limit[0] > 0 && limit[0] < limit[1] && limit[1] <= 200, "LimitRTTIME \(limit)")

        let rtkit = try RealtimeKitStack()
        // (Not root: in a user namespace of its own, where it may mount; RTKit sees its real uid.)
        let readOnly = MountNamespace.unshare(["/bin/sh", "-c",
                                               "mount --bind \"$0\" \"$0\" && mount -o remount,bind,ro / && exec \"$@\"", "/tmp",
                                               "/usr/bin/prlimit", "--rttime=\(limit[0] * 1000):\(limit[1] * 1000)", "--"])
        let d = try DaemonHarness(args: ["--sink", "null"], extraEnv: rtkit.environment([:]), launcher: readOnly, asUser: true)
        var thread = ""
        #expect(eventually(timeout: 5) { thread = (try? d.status().audioThread) ?? "?"; return thread == "realtime (rtkit)" }, "\(thread)")
        #expect(try d.request("play pop wait") == "ok")
        // It ran read-only: nothing it may not write was writable.
        let enter = MountNamespace.nsenter(d.pid, ["/bin/sh", "-c", "touch /cued-probe 2>&1; echo $?"])
        let probe = try runProcess(enter[0], Array(enter.dropFirst()))
        #expect(probe.out.hasSuffix("1\n") && !FileManager.default.fileExists(atPath: "/cued-probe"), "\(probe)")
    }

    @Test func socketActivationStartsOnFirstConnection() throws {
        let dir = TempDir()
        let sock = dir.file("activated.sock")
        try Fixture.writeCues(into: dir.file("sounds"), Fixture.standard)
        let p = try Subprocess("/usr/bin/systemd-socket-activate",
                               ["-l", sock, "-E", "XDG_STATE_HOME=" + dir.file("state"),
                                TestPaths.binary("cued"), "--sink", "null", "--sounds", dir.file("sounds")])
        // The activator listens; cued is not running until a client connects.
        #expect(eventually { FileManager.default.fileExists(atPath: sock) })
        #expect(try String(contentsOfFile: "/proc/\(p.pid)/comm", encoding: .utf8) != "cued\n")
        let r1 = try runProcess("/bin/sh", ["-c", "printf 'ping\\n' | socat - UNIX-CONNECT:\(sock)"])
        #expect(r1.out == "ok pong\n")  // the very first connection gets its reply
        let s1 = try #require(Status.parse(String(try runProcess("/bin/sh", ["-c", "printf 'status\\n' | socat - UNIX-CONNECT:\(sock)"]).out.dropFirst(3))))
        let s2 = try #require(Status.parse(String(try runProcess("/bin/sh", ["-c", "printf 'status\\n' | socat - UNIX-CONNECT:\(sock)"]).out.dropFirst(3))))
        // One process serves both: the activator exec'ed into cued.
        #expect(s1.pid == Int(p.pid))
        #expect(s2.pid == s1.pid)
        #expect(p.stop() == 0)
        #expect(FileManager.default.fileExists(atPath: sock))  // cued never unlinks a socket it did not create
    }

    @Test func notifiesReadyReloadingStopping() throws {
        let dir = TempDir()
        let listener = try NotifyListener(path: dir.file("notify.sock"))
        let d = try DaemonHarness(args: ["--sink", "null"], extraEnv: ["NOTIFY_SOCKET": listener.path], waitReady: false)
        guard let boot = listener.wait(for: "READY=1") else { Issue.record("no READY=1"); return }
        // READY=1 comes only once the socket answers.
        #expect(try d.request("ping") == "ok pong")
        #expect(boot.joined().contains("STATUS=3 cues, sink null closed, unmuted"))
        kill(d.pid, SIGHUP)
        guard let reload = listener.wait(for: "READY=1") else { Issue.record("no READY=1 after SIGHUP"); return }
        let reloading = reload.first { $0.contains("RELOADING=1") }
        #expect(reloading?.contains("MONOTONIC_USEC=") == true)
        #expect(reload.firstIndex { $0.contains("RELOADING=1") }! < reload.firstIndex { $0.contains("READY=1") }!)
        _ = try d.request("mute")
        #expect(listener.wait(for: "STATUS=3 cues, sink null closed, muted") != nil)
        d.process.signal(SIGTERM)
        #expect(listener.wait(for: "STOPPING=1") != nil)
        #expect(d.waitForExit() == 0)
    }

    @Test func watchdogPingsStopWhenTheAudioThreadHangs() throws {
        let dir = TempDir()
        let listener = try NotifyListener(path: dir.file("notify.sock"))
        let d = try DaemonHarness(args: ["--sink", "null"], extraEnv: [
            "NOTIFY_SOCKET": listener.path, "WATCHDOG_USEC": "400000", "CUED_TEST_HANG_AUDIO": "1"])
        #expect(listener.wait(for: "WATCHDOG=1") != nil)
        listener.drain()
        #expect(listener.wait(for: "WATCHDOG=1", timeout: 1) != nil)  // still pinging while idle: a ping after those
        #expect(try d.request("play pop") == "ok")  // the audio thread now hangs
        usleep(1_500_000)  // a span of time is the rule: cued allows a stall of up to max(interval/2, 1 s)
        listener.drain()
        #expect(listener.wait(for: "WATCHDOG=1", timeout: 1.5) == nil, "pings went on with a hung audio thread")
        #expect(try d.request("ping") == "ok pong")  // the socket side is unaffected
        kill(d.pid, SIGKILL)
    }

    /// SIGTERM while a 3 s cue plays: cued stops on its own (not by its exit
    /// deadline, nor abandoning the audio thread), without playing the cue out,
    /// and leaves a complete capture. How long it takes: `make bench`.
    @Test func sigtermDuringPlaybackExitsCleanlyWithoutPlayingTheCueOut() throws {
        var cues = Fixture.standard
        cues["long"] = Fixture.constant(1000, frames: 48_000 * 3)
        let d = try DaemonHarness(cues: cues, args: ["--sink", "wav:%DIR%/capture.wav"])
        #expect(try d.request("play long") == "ok")
        #expect(eventually { ((try? WAV.read(d.capturePath))?.frames ?? 0) > 0 })
        d.process.signal(SIGTERM)
        d.expectStopsByItself()
        #expect(!FileManager.default.fileExists(atPath: d.socketPath))
        // The capture (a device clocked in real time) ends well before the cue would have.
        let cap = try WAV.read(d.capturePath)
        #expect(cap.frames > 0 && cap.frames < 48_000 * 3, "\(cap.frames) frames")
        #expect(cap.samples.allSatisfy { $0 >= 0 && $0 <= 1000 })  // the cue, faded out, then silence
    }

    @Test func sighupReloadsCuesAllOrNothing() throws {
        let d = try DaemonHarness(args: ["--sink", "null"])
        // A broken required cue: the old bank stays.
        try Data("garbage".utf8).write(to: URL(fileURLWithPath: d.soundsDir + "/pop.wav"))
        try WAV.write(d.soundsDir + "/extra.wav", int16: Fixture.constant(5, frames: 100), sampleRate: 48_000, channels: 1)
        kill(d.pid, SIGHUP)
        #expect(eventually { d.readStderr().contains("reload failed") }, "the SIGHUP reload did not run")
        #expect(try d.request("cues") == "ok pop psst1 psst2")
        #expect(try d.request("play pop") == "ok")
        // Fixed: the new bank, with the new cue, is swapped in.
        try WAV.write(d.soundsDir + "/pop.wav", int16: Fixture.constant(7, frames: 480), sampleRate: 48_000, channels: 1)
        kill(d.pid, SIGHUP)
        #expect(eventually { (try? d.request("cues")) == "ok extra pop psst1 psst2" })
        let s = try #require(Status.parse(String(try d.request("status").dropFirst(3))))
        #expect(s.cues["pop"]?.frames == 480)
        d.stop()
        #expect(d.readStderr().components(separatedBy: "reload failed").count == 2, "only the first reload fails")
    }
}
