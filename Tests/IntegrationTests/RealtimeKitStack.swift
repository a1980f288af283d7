import Foundation
import TestSupport

/// What a desktop gives a user's programs for real time, private to a test: a system bus of its
/// own (`DBUS_SYSTEM_BUS_ADDRESS`), polkitd on it, and rtkit-daemon (without its canary, the
/// chroot and the resource limits it cannot set outside systemd), as PipeWire's clients and cued
/// ask it. An active desktop session is granted `org.freedesktop.RealtimeKit1.*` by polkit; the
/// test user has no session, so a rule grants it (`grant`), in /etc/polkit-1/rules.d for as long
/// as a stack needs it (`PolkitGrant`). Every process is killed when the stack is released.
final class RealtimeKitStack: @unchecked Sendable {
    static let tools = ["/usr/bin/dbus-daemon", "/usr/lib/polkit-1/polkitd", "/usr/libexec/rtkit-daemon"]

    /// Why the stack cannot run here, or nil.
    static var unavailableReason: String? {
        if getuid() == 0, let why = DesktopUser.unavailableReason { return why }
        if privilege == nil {
            return "not root, and sudo asks for a password: RTKit's private stack runs its daemons as root (make test asks for sudo at its start; or run sudo -v first)"
        }
        let missing = tools.filter { !TestStack.hasProgram($0) }
        return missing.isEmpty ? nil : "\(missing.joined(separator: ", ")) missing (make test-deps installs dbus, polkitd, rtkit)"
    }

    /// How the stack's daemons run as root, as on a desktop: the tests are root (cued then runs as
    /// `DesktopUser`), or a normal user's `sudo -n` (cued runs as that user, who is granted). The
    /// machine's /etc is never written in the second case: polkitd reads the rule in a mount
    /// namespace of its own.
    enum Privilege { case root, sudo }
    static let privilege: Privilege? = {
        if getuid() == 0 { return .root }
        return (try? runProcess("/usr/bin/sudo", ["-n", "/bin/true"], timeout: 10))?.status == 0 ? .sudo : nil
    }()

    /// The user polkit grants RTKit's actions to: the user cued runs as.
    static let grantedUser: String = {
        if getuid() == 0 { return DesktopUser.name }
        guard let pw = getpwuid(getuid()) else { return "\(getuid())" }
        return String(cString: pw.pointee.pw_name)
    }()

    let dir = TempDir()
    let address: String
    private var bus: Daemon?
    private var polkit: Daemon?
    private var rtkit: Daemon?
    private var granted = false

    /// `grant`: polkit grants RTKit's actions to the test user (as to an active session); else it
    /// refuses them (as to a user logged in remotely).
    init(grant: Bool = true) throws {
        DesktopUser.traverse(dir.path)
        let socket = dir.file("system_bus_socket")
        address = "unix:path=" + socket
        try """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>system</type>
              <listen>\(address)</listen>
              <auth>EXTERNAL</auth>
              <policy context="default">
                <allow user="*"/>
                <allow own="*"/>
                <allow send_destination="*"/>
                <allow receive_sender="*"/>
              </policy>
            </busconfig>
            """.write(toFile: dir.file("system.conf"), atomically: true, encoding: .utf8)
        // On a Debian 13 test stack polkitd runs in the root: the rule is copied into its /etc for it
        // alone (the machine's /etc is not touched).
        // A normal user's (sudo): the same, with the rule bound over the host's rules directory
        // in polkitd's own mount namespace.
        var polkitFiles: [(String, String)] = [], polkitRules: String?
        if grant && (TestStack.inRoot || Self.privilege == .sudo) {
            let rules = dir.file("rules.d")
            try FileManager.default.createDirectory(atPath: rules, withIntermediateDirectories: true)
            try PolkitGrant.rule.write(toFile: rules + "/" + PolkitGrant.prefix + "stack.rules", atomically: true, encoding: .utf8)
            if TestStack.inRoot { polkitFiles = [(rules + "/" + PolkitGrant.prefix + "stack.rules", PolkitGrant.directory + "/" + PolkitGrant.prefix + "stack.rules")] }
            else { polkitRules = rules }
        } else if grant { try PolkitGrant.acquire(); granted = true }
        bus = try daemon("bus", "/usr/bin/dbus-daemon", ["--config-file=" + dir.file("system.conf"), "--nofork", "--nopidfile"])
        guard eventually(interval: 0.005, { FileManager.default.fileExists(atPath: socket) }) else {
            throw HarnessError.timeout("the system bus did not start: \(log("bus.log"))")
        }
        polkit = try daemon("polkit", "/usr/lib/polkit-1/polkitd", ["--no-debug"], files: polkitFiles, rules: polkitRules)
        rtkit = try daemon("rtkit", "/usr/libexec/rtkit-daemon", ["--no-canary", "--no-chroot", "--no-limit-resources", "--stderr"])
        // Up once both answer on the bus (polkitd takes ~50 ms).
        for (name, path, interface, property) in [("org.freedesktop.RealtimeKit1", "/org/freedesktop/RealtimeKit1", "org.freedesktop.RealtimeKit1", "MaxRealtimePriority"),
                                                  ("org.freedesktop.PolicyKit1", "/org/freedesktop/PolicyKit1/Authority", "org.freedesktop.PolicyKit1.Authority", "BackendName")] {
            guard eventually(interval: 0.02, { (try? self.get(name, path, interface, property))?.status == 0 }) else {
                throw HarnessError.timeout("\(name) did not answer on the private system bus: \(log("rtkit.log")) \(log("polkit.log"))")
            }
        }
    }

    /// The environment that points a program at this system bus.
    func environment(_ base: [String: String] = ProcessInfo.processInfo.environment) -> [String: String] {
        var env = base
        env["DBUS_SYSTEM_BUS_ADDRESS"] = address
        return env
    }

    /// SIGSTOP/SIGCONT the bus: a system bus that does not answer.
    func freezeBus(_ frozen: Bool) { bus?.signal(frozen ? SIGSTOP : SIGCONT) }

    /// One of the stack's daemons, run as root (`privilege`), its stderr to NAME.log; `rules`: a
    /// directory bound over polkit's rules directory for it alone (a normal user's stack).
    private func daemon(_ name: String, _ path: String, _ args: [String], files: [(String, String)] = [],
                        rules: String? = nil) throws -> Daemon {
        let (p, a) = TestStack.command(path, args, files: files)
        let log = dir.file(name + ".log")
        guard Self.privilege == .sudo else { return Daemon(process: try Subprocess(p, a, env: environment(), stderr: log), pidFile: nil) }
        // sudo resets the environment (the bus address is given again) and its child's pid is
        // the one to signal (sudo itself cannot relay SIGKILL); a socket others can connect to.
        let pidFile = dir.file(name + ".pid")
        let bind = rules == nil ? "" : "mount --bind \"$2\" \(PolkitGrant.directory) || exit 1; "
        let namespace = rules == nil ? [] : ["/usr/bin/unshare", "--mount", "--propagation", "private"]
        let command = ["-n", "/usr/bin/env", "DBUS_SYSTEM_BUS_ADDRESS=" + address] + namespace
            + ["/bin/sh", "-c", "umask 0; echo $$ > \"$1\"; \(bind)shift 2; exec \"$@\"", "sh", pidFile, rules ?? "-", p] + a
        return Daemon(process: try Subprocess("/usr/bin/sudo", command, env: environment(), stderr: log), pidFile: pidFile)
    }

    /// A daemon of the stack: its process (sudo's, for a normal user's stack) and where the pid to
    /// signal as root was written.
    struct Daemon {
        let process: Subprocess
        let pidFile: String?

        func signal(_ sig: Int32) {
            guard let pidFile else { process.signal(sig); return }
            guard let pid = (try? String(contentsOfFile: pidFile, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines),
                  !pid.isEmpty else { process.signal(sig); return }
            _ = try? runProcess("/usr/bin/sudo", ["-n", "/bin/kill", "-\(sig)", pid], timeout: 10)
        }

        func wait(timeout: Double) { process.wait(timeout: timeout) }
    }

    /// Asks RTKit for real time (its highest priority) for thread `tid` of `pid`, as a desktop
    /// program's thread asks; whether it was granted.
    func makeRealtime(pid: pid_t, tid: pid_t) -> Bool {
        guard let max = try? get("org.freedesktop.RealtimeKit1", "/org/freedesktop/RealtimeKit1", "org.freedesktop.RealtimeKit1", "MaxRealtimePriority"),
              max.status == 0, let priority = max.out.split(whereSeparator: { !$0.isNumber }).last.flatMap({ UInt32($0) }) else { return false }
        let r = try? runOnStack("/usr/bin/gdbus", ["call", "--system", "-d", "org.freedesktop.RealtimeKit1", "-o", "/org/freedesktop/RealtimeKit1",
                                                   "-m", "org.freedesktop.RealtimeKit1.MakeThreadRealtimeWithPID", "\(pid)", "\(tid)", "\(priority)"],
                                env: environment(), timeout: 5)
        return r?.status == 0
    }

    /// RTKit's log (it says each thread it made real-time).
    var rtkitLog: String { (try? String(contentsOfFile: dir.file("rtkit.log"), encoding: .utf8)) ?? "" }

    private func get(_ name: String, _ path: String, _ interface: String, _ property: String) throws -> (status: Int32, out: String, err: String) {
        try runOnStack("/usr/bin/gdbus", ["call", "--system", "-d", name, "-o", path, "-m", "org.freedesktop.DBus.Properties.Get", interface, property],
                       env: environment(), timeout: 5)
    }

    func log(_ name: String) -> String { (try? String(contentsOfFile: dir.file(name), encoding: .utf8))?.suffix(400).description ?? "" }

    deinit {
        bus?.signal(SIGCONT)
        for p in [rtkit, polkit, bus] { p?.signal(SIGKILL); p?.wait(timeout: 5) }
        if granted { PolkitGrant.release() }
    }
}

/// The polkit rule that grants RTKit's actions to the test user, in /etc/polkit-1/rules.d (polkitd
/// reads rules from there only) while any stack needs it: written by the first, removed by the last
/// and at the test process's exit; a rule a killed run left behind (its pid gone) is removed by the next.
enum PolkitGrant {
    static let directory = "/etc/polkit-1/rules.d"
    static let prefix = "49-cued-test-rtkit."
    private static let lock = NSLock()
    nonisolated(unsafe) private static var holders = 0
    static var path: String { directory + "/" + prefix + "\(getpid()).rules" }
    private static let removedAtExit: Void = { atexit { try? FileManager.default.removeItem(atPath: PolkitGrant.path) } }()

    /// The rule: the test user gets RTKit's real time as an active desktop session does.
    static let rule = """
        // Written by cued's tests for their run (removed after): the test user gets RTKit's
        // real time as an active desktop session does.
        polkit.addRule(function(action, subject) {
            if (action.id.indexOf("org.freedesktop.RealtimeKit1.") == 0 && subject.user == "\(RealtimeKitStack.grantedUser)")
                return polkit.Result.YES;
        });
        """

    static func acquire() throws {
        lock.lock()
        defer { lock.unlock() }
        if holders == 0 {
            removeStale()
            try rule.write(toFile: path, atomically: true, encoding: .utf8)
            _ = removedAtExit
        }
        holders += 1
    }

    static func release() {
        lock.lock()
        defer { lock.unlock() }
        holders -= 1
        if holders == 0 { try? FileManager.default.removeItem(atPath: path) }
    }

    /// Rules of test runs whose process is gone.
    private static func removeStale() {
        for f in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] where f.hasPrefix(prefix) {
            guard let pid = Int32(f.dropFirst(prefix.count).prefix { $0 != "." }), kill(pid, 0) != 0 else { continue }
            try? FileManager.default.removeItem(atPath: directory + "/" + f)
        }
    }
}
