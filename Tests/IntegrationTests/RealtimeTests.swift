import CuedProtocol
import Foundation
import Testing
import TestSupport

/// cued run as a desktop user (`DesktopUser`: no CAP_SYS_NICE, RLIMIT_RTPRIO 0) gets its audio
/// thread real-time the way the desktop grants it: from RTKit on the system bus
/// (`RealtimeKitStack`: a real rtkit-daemon and polkitd on a private bus), asked once cued is up;
/// without RTKit it runs normal and says why, and `cuectl doctor` says how to fix it.
@Suite(.serialized, .timeLimit(.minutes(2)),
       .enabled(if: RealtimeKitStack.unavailableReason == nil, Comment(rawValue: RealtimeKitStack.unavailableReason ?? "")))
struct RealtimeTests {
    /// The audio thread's kernel id and scheduling: (policy without SCHED_RESET_ON_FORK, priority, reset-on-fork).
    static func audioThread(of pid: pid_t) -> (tid: Int32, policy: Int32, priority: Int32, resetOnFork: Bool)? {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        for t in tasks {
            guard (try? String(contentsOfFile: "/proc/\(pid)/task/\(t)/comm", encoding: .utf8)) == "cued-audio\n",
                  let tid = Int32(t) else { continue }
            let policy = sched_getscheduler(tid)
            var p = sched_param()
            _ = sched_getparam(tid, &p)
            return (tid, policy & ~0x4000_0000, p.sched_priority, policy & 0x4000_0000 != 0)
        }
        return nil
    }

    /// The hard RLIMIT_RTTIME of `pid`, µs (nil: unlimited or unreadable).
    static func rttimeHard(of pid: pid_t) -> Int? {
        let limits = (try? String(contentsOfFile: "/proc/\(pid)/limits", encoding: .utf8)) ?? ""
        guard let line = limits.split(separator: "\n").first(where: { $0.hasPrefix("Max realtime timeout") }) else { return nil }
        return line.split(separator: " ").compactMap { Int($0) }.dropFirst().first
    }

    /// `cuectl ARGS` (through the harness's socket: the user's proxy).
    static func cuectl(_ d: DaemonHarness, _ args: String...) throws -> (status: Int32, out: String, err: String) {
        try runProcess(TestPaths.binary("cuectl"), ["--socket", d.socketPath] + args, env: d.environment)
    }

    @Test func asAUserWithRTKitTheAudioThreadIsRealtimeThroughRTKit() throws {
        let rtkit = try RealtimeKitStack()
        let d = try DaemonHarness(args: ["--sink", "null"], extraEnv: rtkit.environment([:]), asUser: true)
        var thread = ""
        #expect(eventually(timeout: 5) { thread = (try? Self.cuectlStatus(d)) ?? "?"; return thread == "realtime (rtkit)" },
                "audio thread: \(thread); rtkit: \(rtkit.log("rtkit.log")); cued: \(d.readStderr().suffix(800))")
        // The kernel's word, and RTKit's: SCHED_RR at RTKit's most (20), reset on fork, by RTKit for the user.
        let t = try #require(Self.audioThread(of: d.pid))
        #expect(t.policy == SCHED_RR && t.priority == 20 && t.resetOnFork, "\(t)")
        #expect(rtkit.rtkitLog.contains("Successfully made thread \(t.tid) of process \(d.pid) owned by '\(RealtimeKitStack.grantedUser)' RT at priority 20"), "\(rtkit.rtkitLog)")
        // RTKit's condition, kept: a real-time budget within its RTTimeUSecMax (200 ms).
        #expect((Self.rttimeHard(of: d.pid) ?? .max) <= 200_000)
        // Logged by the asking thread just after it records the grant that `status` shows: waited for.
        #expect(eventually(timeout: 5) { d.readStderr().contains("info cued: audio thread: realtime (rtkit) priority=20") },
                "\(d.readStderr())")
        let doctor = try Self.cuectl(d, "doctor")
        #expect(doctor.out.contains("ok  audio thread: realtime (rtkit)\n"), "\(doctor.out)")
        // Cues play with it.
        #expect(try Self.cuectl(d, "play", "pop", "--wait").status == 0)
    }

    /// `status`'s audio_thread.
    static func cuectlStatus(_ d: DaemonHarness) throws -> String? { try d.status().audioThread }

    /// No RTKit (no system bus at all, as in a container): cued runs, its thread normal, and says why;
    /// `cuectl doctor` names the problem and the fix. Cues play.
    @Test func withoutRTKitTheThreadRunsNormalAndDoctorSaysWhyAndTheFix() throws {
        let dir = TempDir()
        let socket = dir.file("no_system_bus_socket")
        let d = try DaemonHarness(args: ["--sink", "null"], extraEnv: ["DBUS_SYSTEM_BUS_ADDRESS": "unix:path=" + socket], asUser: true)
        var thread = ""
        #expect(eventually(timeout: 5) { thread = (try? Self.cuectlStatus(d)) ?? "?"; return thread.hasPrefix("normal: no rtkit") },
                "audio thread: \(thread)")
        #expect(thread == "normal: no rtkit: no system bus at \(socket)")
        #expect(Self.audioThread(of: d.pid).map { $0.policy == SCHED_OTHER } == true)
        let doctor = try Self.cuectl(d, "doctor")
        #expect(doctor.out.contains("!!  audio thread: \(thread): a busy machine can starve it (clicks, longer latency)\n"), "\(doctor.out)")
        #expect(doctor.out.contains("    fix: no system D-Bus answers: start it (systemctl start dbus) with RTKit (sudo apt install rtkit); cued asks again when it next opens its output\n"), "\(doctor.out)")
        #expect(try Self.cuectl(d, "play", "pop", "--wait").status == 0)
    }

    /// RTKit there, but polkit refuses the user (no active session): RTKit's refusal in its words.
    @Test func whenPolkitRefusesTheRefusalIsShownWithItsFix() throws {
        let rtkit = try RealtimeKitStack(grant: false)
        let d = try DaemonHarness(args: ["--sink", "null"], extraEnv: rtkit.environment([:]), asUser: true)
        var thread = ""
        #expect(eventually(timeout: 5) { thread = (try? Self.cuectlStatus(d)) ?? "?"; return thread.hasPrefix("normal: rtkit") },
                "audio thread: \(thread)")
        #expect(thread == "normal: rtkit refused: MakeThreadRealtimeWithPID: Operation not permitted (org.freedesktop.DBus.Error.AccessDenied)", "\(thread)")
        let doctor = try Self.cuectl(d, "doctor")
        #expect(doctor.out.contains("acquire-real-time for your user in a rule in /etc/polkit-1/rules.d\n"), "\(doctor.out)")
    }

    /// A system bus that takes connections and never answers: cued is up (READY=1) and plays at
    /// once, and the ask gives up on its own bound (2 s), saying so.
    @Test func aSystemBusThatDoesNotAnswerDelaysNeitherTheStartNorACue() throws {
        let rtkit = try RealtimeKitStack()
        rtkit.freezeBus(true)
        defer { rtkit.freezeBus(false) }
        let dir = TempDir()
        DesktopUser.traverse(dir.path)
        let listener = try NotifyListener(path: dir.file("notify.sock"))
        chmod(listener.path, 0o666)
        let started = Date()
        let d = try DaemonHarness(args: ["--sink", "null"], extraEnv: rtkit.environment(["NOTIFY_SOCKET": listener.path]), asUser: true)
        #expect(listener.wait(for: "READY=1") != nil)
        #expect(try Self.cuectlStatus(d) == "normal: asking rtkit", "ready while the ask waits on the bus")
        #expect(try Self.cuectl(d, "play", "pop", "--wait").status == 0)
        #expect(Date().timeIntervalSince(started) < 2, "up and played in \(Date().timeIntervalSince(started)) s")
        var thread = ""
        #expect(eventually(timeout: 5) { thread = (try? Self.cuectlStatus(d)) ?? "?"; return !thread.hasPrefix("normal: asking") })
        #expect(thread.hasPrefix("normal: no rtkit: ") && thread.hasSuffix("no answer in time"), "\(thread)")
    }

    /// An audio thread that spins (a bug) with real time: RLIMIT_RTTIME's soft limit (100 ms)
    /// sends SIGXCPU, cued drops the thread to normal scheduling (not killed at the hard limit),
    /// says so, and goes on answering.
    @Test func aRealtimeThreadThatSpinsIsDroppedToNormalNotKilled() throws {
        let rtkit = try RealtimeKitStack()
        let d = try DaemonHarness(args: ["--sink", "null"], extraEnv: rtkit.environment(["CUED_TEST_SPIN_AUDIO": "1"]), asUser: true)
        #expect(eventually(timeout: 5) { (try? Self.cuectlStatus(d)) == "realtime (rtkit)" })
        _ = try Self.cuectl(d, "play", "pop")
        #expect(eventually(timeout: 5) { d.readStderr().contains("dropped to normal scheduling") }, "\(d.readStderr().suffix(600))")
        #expect(Self.audioThread(of: d.pid).map { $0.policy == SCHED_OTHER } == true, "exit \(d.process.isRunning ? "none" : "\(d.process.terminationStatus)")")
        #expect(try Self.cuectl(d, "ping").out == "pong\n")
        #expect(try Self.cuectlStatus(d)?.hasPrefix("normal: it ran past its real-time budget") == true)
        d.process.signal(SIGKILL)
    }
}
