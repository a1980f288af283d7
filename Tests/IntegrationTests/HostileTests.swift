import CuedClient
import CuedProtocol
import Foundation
import Testing
import TestSupport

/// A per-user daemon every tool talks to must not be the thing that breaks.
@Suite(.timeLimit(.minutes(3))) struct HostileTests {
    func anonKiB(_ pid: pid_t) -> Int {
        let text = (try? String(contentsOfFile: "/proc/\(pid)/smaps_rollup", encoding: .utf8)) ?? ""
        let line = text.split(separator: "\n").first { $0.hasPrefix("Anonymous:") } ?? ""
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? -1
    }

    func fdCount(_ pid: pid_t) -> Int { ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []).count }

    @Test func garbageNulAndInvalidUTF8GetOneErrorEach() throws {
        let d = try DaemonHarness(args: ["--sink", "null"])
        let c = try d.client()
        var rng = SystemRandomNumberGenerator()
        var lines = 0
        var payload: [UInt8] = []
        for _ in 0..<2000 {
            let n = Int.random(in: 0...100, using: &rng)
            payload += (0..<n).map { _ in UInt8.random(in: 0...255, using: &rng) }.filter { $0 != 0x0A } + [0x0A]
            lines += 1
        }
        payload += Array("ping\0\n\0\0\n".utf8) + [0xC0, 0x80, 0x0A]
        lines += 3
        try c.send(payload)
        var replies = 0
        for _ in 0..<lines {
            let r = try c.readLine()
            #expect(r.hasPrefix("ok") || r.hasPrefix("err "))
            replies += 1
        }
        #expect(replies == lines)
        #expect(try c.request("ping") == "ok pong")
    }

    @Test func megabyteWithoutNewlineIsCutOffAndMemoryStaysFlat() throws {
        let d = try DaemonHarness(args: ["--sink", "null"])
        let before = anonKiB(d.pid)
        let c = try d.client()
        let chunk = [UInt8](repeating: UInt8(ascii: "a"), count: 64 * 1024)
        var sent = 0
        do {
            for _ in 0..<16 { try c.send(chunk); sent += chunk.count }
        } catch {}  // the daemon may close before the whole megabyte is in
        #expect(try c.readLine().hasPrefix("err line-too-long "))
        #expect(throws: ClientError.self) { try c.readLine() }
        let after = anonKiB(d.pid)
        #expect(after - before < 2048, "anonymous memory grew \(after - before) KiB")
        #expect(try d.request("ping") == "ok pong")
    }

    @Test func slowWriterDoesNotHoldUpOthers() throws {
        let d = try DaemonHarness(args: ["--sink", "null"])
        let slow = try d.client()
        let other = try d.client()
        for byte in Array("ping".utf8) {
            try slow.send([byte])
            #expect(try other.request("ping") == "ok pong")  // answered while the slow line is half written
            usleep(200_000)  // a writer slow on the wire is the stimulus: a byte every 0.2 s
        }
        try slow.send([0x0A])
        #expect(try slow.readLine() == "ok pong")
    }

    @Test func tenThousandConnectsAndDisconnects() throws {
        let d = try DaemonHarness(args: ["--sink", "null"])
        let fds = fdCount(d.pid)
        for i in 0..<10_000 {
            let c = try d.client()
            if i % 1000 == 0 { #expect(try c.request("ping") == "ok pong") }
        }
        #expect(try d.request("ping") == "ok pong")
        #expect(eventually { self.fdCount(d.pid) <= fds + 1 }, "descriptors leaked: \(fds) → \(fdCount(d.pid))")
        #expect(eventually { ((try? d.status())?.clients).map { $0 == 1 } ?? false })
    }

    @Test func clientVanishingBeforeItsReplyKillsNothing() throws {
        let d = try DaemonHarness(args: ["--sink", "null"])
        for _ in 0..<200 {
            let s = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            var addr = sockaddr_un()
            addr.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &addr.sun_path) { raw in
                let b = Array(d.socketPath.utf8); raw.copyBytes(from: b); raw[b.count] = 0
            }
            _ = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(s, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
            let burst = Array(String(repeating: "status\n", count: 500).utf8)
            _ = burst.withUnsafeBytes { send(s, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            var linger = linger(l_onoff: 1, l_linger: 0)  // reset: replies hit a dead socket
            setsockopt(s, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<linger>.size))
            close(s)
        }
        #expect(d.process.isRunning)
        #expect(try d.request("ping") == "ok pong")
    }

    @Test func manyClientsEachGetEveryReplyInOrder() throws {
        // 100 × 100 here (make reliability runs 1,000 × 1,000): `threshold K` echoes K,
        // so each connection checks its replies are its own, complete and in order.
        let d = try DaemonHarness(args: ["--sink", "null", "--max-clients", "2000"])
        let clients = try (0..<100).map { _ in try d.client() }
        for c in clients { try c.send(Array((1...100).map { "threshold \($0)\n" }.joined().utf8)) }
        for c in clients {
            for k in 1...100 { #expect(try c.readLine() == "ok \(k)") }
        }
    }

    @Test func cueNamesAreNeverPaths() throws {
        let d = try DaemonHarness(args: ["--sink", "null"])
        let c = try d.client()
        for line in ["play ../../etc/passwd", "play /etc/passwd", "play ..", "app ../x", "session /tmp", "mute app a/b"] {
            #expect(try c.request(line).hasPrefix("err bad-argument "), "\(line)")
        }
    }

    @Test(.enabled(if: OtherUser.unavailableReason == nil, Comment(rawValue: OtherUser.unavailableReason ?? "")))
    func otherUsersAreRefused() throws {
        let d = try DaemonHarness(args: ["--sink", "null"])
        let dir = (d.socketPath as NSString).deletingLastPathComponent
        let other = OtherUser.launcher
        // As created: the directory (0700) keeps everyone else out of reach.
        let blocked = try runProcess(other[0], Array(other.dropFirst()) + ["/usr/bin/socat", "-", "UNIX-CONNECT:" + d.socketPath], stdin: "ping\n")
        #expect(blocked.status != 0)
        #expect(blocked.out.isEmpty)
        #expect(blocked.err.contains("Permission denied"), "refused by the directory, not by anything else: \(blocked.err)")
        // Even with the permissions opened up, the peer's uid (SO_PEERCRED) decides.
        chmod(d.dir.path, 0o755)
        chmod(d.dir.file("run"), 0o755)
        chmod(dir, 0o777)
        chmod(d.socketPath, 0o777)
        // Read-only (-u): cued answers and closes at once; a client writing first could fail before reading.
        let refused = try runProcess(other[0], Array(other.dropFirst()) + ["/usr/bin/socat", "-u", "UNIX-CONNECT:" + d.socketPath, "-"])
        #expect(refused.out.hasPrefix("err forbidden "), "\(refused.out) \(refused.err)")
        #expect(!refused.out.contains("ok"))
        #expect(try d.request("ping") == "ok pong")
    }

    @Test func killNineDuringPlaybackThenRestartKeepsState() throws {
        var cues = Fixture.standard
        cues["long"] = Fixture.constant(100, frames: 96_000)
        let d = try DaemonHarness(cues: cues, args: ["--sink", "null"], config: "[apps.mail]\nmuted = true\n")
        #expect(try d.request("mute") == "ok muted")
        #expect(try d.request("unmute") == "ok unmuted")
        #expect(try d.request("mute app feeds") == "ok muted feeds")
        // Saves are written off the event loop, coalesced, within milliseconds of
        // the reply (a SIGKILL in that window loses only that window's change):
        // wait for the last one, the only state with the app's mute in it.
        let statePath = d.dir.file("state/cued/state")
        #expect(eventually {
            let lines = ((try? String(contentsOfFile: statePath, encoding: .utf8)) ?? "").split(separator: "\n")
            return lines.contains("app.feeds.muted=true") && lines.contains("muted=false")
        })
        #expect(try d.request("play long") == "ok")
        d.process.signal(SIGKILL)
        d.process.wait()
        let again = try DaemonHarness(cues: cues, args: ["--sink", "null", "--socket", d.socketPath, "--sounds", d.soundsDir],
                                      extraEnv: ["XDG_STATE_HOME": d.dir.file("state"), "XDG_CONFIG_HOME": d.dir.file("config")])
        let c = try again.client()
        #expect(try c.request("app feeds") == "ok feeds")
        #expect(try c.request("play pop") == "ok muted")   // the saved app mute
        #expect(try c.request("app mail") == "ok mail")
        #expect(try c.request("play pop") == "ok muted")   // the config
        #expect(try c.request("app other") == "ok other")
        #expect(try c.request("play pop") == "ok")         // global state: unmuted, as saved
    }

    @Test func unwritableStateIsReportedNotFatal() throws {
        // The state directory's place is taken by a file: every save fails.
        let d = try DaemonHarness(args: ["--sink", "null"])
        try FileManager.default.createDirectory(atPath: d.dir.file("state2"), withIntermediateDirectories: true)
        try "x".write(toFile: d.dir.file("state2/cued"), atomically: true, encoding: .utf8)
        let e = try DaemonHarness(args: ["--sink", "null"], extraEnv: ["XDG_STATE_HOME": d.dir.file("state2")])
        #expect(try e.request("mute") == "ok muted")
        #expect(try e.request("ping") == "ok pong")
        e.stop()
        #expect(e.readStderr().contains("cannot save state"))
    }

    /// A real full disk: the state directory on a 4 KiB tmpfs filled to the last byte (mounted in
    /// a mount namespace of the test's own, where cued runs: `PrivateTmpfs`).
    @Test(.enabled(if: MountNamespace.unavailableReason == nil, Comment(rawValue: MountNamespace.unavailableReason ?? "")))
    func fullDiskIsReportedNotFatal() throws {
        let dir = TempDir()
        let disk = try PrivateTmpfs(at: dir.file("full"), options: "size=4k")
        let mnt = disk.path
        try FileManager.default.createDirectory(atPath: disk.outside("/cued"), withIntermediateDirectories: true)
        _ = try runProcess("/bin/dd", ["if=/dev/zero", "of=\(disk.outside("/cued/filler"))", "bs=1k", "count=64"])
        let d = try DaemonHarness(args: ["--sink", "null"], extraEnv: ["XDG_STATE_HOME": mnt], launcher: disk.launcher)
        #expect(try d.request("mute") == "ok muted")
        #expect(try d.request("play pop") == "ok muted")
        #expect(try d.request("ping") == "ok pong")
        d.stop()
        let log = d.readStderr()
        #expect(log.contains("cannot save state") && log.contains("No space left on device"), "\(log)")
    }

    @Test func configThatCrashedTheOldTOMLLibraryIsASyntaxError() throws {
        // Found by cuedfuzz: toml++ (TOMLKit) aborted on this header. cued's own
        // parser reports it like any other syntax error, with its line.
        let bad = "[|ransitions]\n\"release->pull\" = \"\"\n"
        let d = try DaemonHarness(args: ["--sink", "null"])
        try d.writeConfig(bad)
        let r = try d.request("reload")
        #expect(r.hasPrefix("err reload-failed \(d.configPath):1: TOML syntax: expected a key"), "\(r)")
        #expect(try d.request("ping") == "ok pong")
        let e = try DaemonHarness(args: ["--sink", "null"], config: bad, waitReady: false)
        #expect(e.waitForExit() == 78)
        #expect(e.readStderr().contains("cued.toml:1: TOML syntax"))
        let check = try runProcess(TestPaths.binary("cuectl"), ["config", "check", d.configPath])
        #expect(check.status == 78)
    }

    /// Files nested 40,000 levels deep (80–100 KB, under every size cap) killed cued on
    /// the stack (SIGSEGV): a config on reload, SIGHUP, at start and in `cuectl config
    /// check`; a feedbackd theme at start, bus or no bus. Each is now an error naming the
    /// file and the limit, and cued lives on.
    @Test func deeplyNestedFilesAreErrorsNotCrashes() throws {
        let header = "[" + Array(repeating: "a", count: 40_000).joined(separator: ".") + "]\n"
        let dotted = Array(repeating: "a", count: 40_000).joined(separator: ".") + " = 1\n"
        let d = try DaemonHarness(args: ["--sink", "null"])
        func failures() -> Int { d.readStderr().components(separatedBy: "nested deeper than 32").count - 1 }
        for deep in [header, dotted] {
            try d.writeConfig(deep)
            let before = failures()
            let r = try d.request("reload")
            #expect(r.hasPrefix("err reload-failed \(d.configPath):1: TOML syntax: nested deeper than 32 levels"), "\(r)")
            kill(d.pid, SIGHUP)
            #expect(eventually { failures() >= before + 2 }, "\(d.readStderr().suffix(600))")
            #expect(try d.request("ping") == "ok pong")
            let check = try runProcess(TestPaths.binary("cuectl"), ["config", "check", d.configPath])
            #expect(check.status == 78 && (check.out + check.err).contains("nested deeper than 32"), "\(check)")
            let e = try DaemonHarness(args: ["--sink", "null"], config: deep, waitReady: false)
            #expect(e.waitForExit() == 78)
            #expect(e.readStderr().contains("cued.toml:1: TOML syntax: nested deeper than 32"), "\(e.readStderr().suffix(600))")
        }
        // The user's feedbackd theme, 100,000 `[`, with no bus: cued starts and says why the theme is not used.
        let themes = TempDir()
        try FileManager.default.createDirectory(atPath: themes.file("feedbackd/themes"), withIntermediateDirectories: true)
        try String(repeating: "[", count: 100_000).write(toFile: themes.file("feedbackd/themes/default.json"), atomically: true, encoding: .utf8)
        let t = try DaemonHarness(args: ["--sink", "null"], extraEnv: ["XDG_CONFIG_HOME": themes.path])
        #expect(try t.request("ping") == "ok pong")
        #expect(eventually { t.readStderr().contains("feedbackd theme \(themes.file("feedbackd/themes/default.json")): arrays and objects nested deeper than 64 levels") },
                "\(t.readStderr().suffix(800))")
    }

    /// SIGHUP sent in a loop made 6,258 reloads and 488 KB of log in 10 s (about a core):
    /// reloads are spaced 200 ms apart, those asked for meanwhile sharing the next.
    @Test func aSIGHUPStormCostsAFewReloadsASecond() throws {
        let d = try DaemonHarness(args: ["--sink", "null"])
        let end = Date().addingTimeInterval(1)
        var signals = 0
        while Date() < end { kill(d.pid, SIGHUP); signals += 1; usleep(50) }  // the storm's pace is the stimulus
        #expect(try d.request("ping") == "ok pong")
        usleep(300_000)  // the storm's last reload: a signal has no reply, so no event says it was taken
        let reloads = d.readStderr().components(separatedBy: ": reloaded").count - 1
        #expect((1...7).contains(reloads), "\(reloads) reloads for \(signals) SIGHUPs")
    }
}
