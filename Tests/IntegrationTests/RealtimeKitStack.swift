import Foundation
import TestSupport

/// What a desktop gives a user's programs for real time, private to a test: a system bus of its
/// own (`DBUS_SYSTEM_BUS_ADDRESS`), polkitd on it, and rtkit-daemon (without its canary, the
/// chroot and the resource limits it cannot set outside systemd), as PipeWire's clients and cued
/// ask it. An active desktop session is granted `org.freedesktop.RealtimeKit1.*` by polkit; the
/// test user has no session, so a rule grants it (`grant`), for this polkitd alone (`PolkitGrant`).
/// The daemons run as root: the tests', or a normal user's through `sudo -n`. Every process is
/// killed when the stack is released.
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
    /// `DesktopUser`), or a normal user's `sudo -n` (cued runs as that user, who is granted).
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
        // The rule (or, refusing, none) for this polkitd alone: copied into the Debian 13 root's
        // /etc, or bound over this machine's rules directory in polkitd's own mount namespace.
        let rules = dir.file("rules.d")
        try FileManager.default.createDirectory(atPath: rules, withIntermediateDirectories: true)
        if grant { try PolkitGrant.rule.write(toFile: rules + "/" + PolkitGrant.file, atomically: true, encoding: .utf8) }
        let polkitFiles = grant && TestStack.inRoot ? [(rules + "/" + PolkitGrant.file, PolkitGrant.directory + "/" + PolkitGrant.file)] : []
        let polkitRules = TestStack.inRoot ? nil : rules
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

    /// One of the stack's daemons, run as root (`privilege`: the tests', or sudo's), its stderr to
    /// NAME.log; `rules`: a directory bound over polkit's rules directory for it alone.
    private func daemon(_ name: String, _ path: String, _ args: [String], files: [(String, String)] = [],
                        rules: String? = nil) throws -> Daemon {
        let (p, a) = TestStack.command(path, args, files: files)
        // Its pid is written for signals (sudo cannot relay SIGKILL); a socket others can connect to.
        let pidFile = dir.file(name + ".pid")
        let bind = rules == nil ? "" : "mount --bind \"$2\" \(PolkitGrant.directory) || exit 1; "
        let namespace = rules == nil ? [] : ["/usr/bin/unshare", "--mount", "--propagation", "private"]
        let command = namespace + ["/bin/sh", "-c", "umask 0; echo $$ > \"$1\"; \(bind)shift 2; exec \"$@\"", "sh", pidFile, rules ?? "-", p] + a
        let log = dir.file(name + ".log")
        guard Self.privilege == .sudo else {
            return Daemon(process: try Subprocess(command[0], Array(command.dropFirst()), env: environment(), stderr: log), pidFile: nil)
        }
        // sudo resets the environment: the bus address is given again.
        return Daemon(process: try Subprocess("/usr/bin/sudo", ["-n", "/usr/bin/env", "DBUS_SYSTEM_BUS_ADDRESS=" + address] + command,
                                              env: environment(), stderr: log), pidFile: pidFile)
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
        guard let priority = maxPriority else { return false }
        let r = try? runOnStack("/usr/bin/gdbus", ["call", "--system", "-d", "org.freedesktop.RealtimeKit1", "-o", "/org/freedesktop/RealtimeKit1",
                                                   "-m", "org.freedesktop.RealtimeKit1.MakeThreadRealtimeWithPID", "\(pid)", "\(tid)", "\(priority)"],
                                env: environment(), timeout: 5)
        return r?.status == 0
    }

    /// RTKit's highest priority (MaxRealtimePriority), asked once.
    private lazy var maxPriority: UInt32? = {
        guard let max = try? get("org.freedesktop.RealtimeKit1", "/org/freedesktop/RealtimeKit1", "org.freedesktop.RealtimeKit1", "MaxRealtimePriority"),
              max.status == 0 else { return nil }
        return max.out.split(whereSeparator: { !$0.isNumber }).last.flatMap { UInt32($0) }
    }()

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
    }
}

/// The polkit rule that grants RTKit's actions to the test user, as to an active desktop session.
/// polkitd reads rules from its rules directory only: the stack binds a directory of its own over
/// it, in polkitd's mount namespace (the machine's /etc is never written).
enum PolkitGrant {
    static let directory = "/etc/polkit-1/rules.d"
    static let file = "49-cued-test-rtkit.rules"

    static let rule = """
        // Written by cued's tests for their run: the test user gets RTKit's real time as an
        // active desktop session does.
        polkit.addRule(function(action, subject) {
            if (action.id.indexOf("org.freedesktop.RealtimeKit1.") == 0 && subject.user == "\(RealtimeKitStack.grantedUser)")
                return polkit.Result.YES;
        });
        """
}
