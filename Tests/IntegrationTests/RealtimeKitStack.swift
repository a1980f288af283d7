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
        if let why = DesktopUser.unavailableReason { return why }
        let missing = tools.filter { !TestStack.hasProgram($0) }
        return missing.isEmpty ? nil : "\(missing.joined(separator: ", ")) missing (make test-deps installs dbus, polkitd, rtkit)"
    }

    let dir = TempDir()
    let address: String
    private var bus: Subprocess?
    private var polkit: Subprocess?
    private var rtkit: Subprocess?
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
        var polkitFiles: [(String, String)] = []
        if grant && TestStack.inRoot {
            try PolkitGrant.rule.write(toFile: dir.file("rtkit.rules"), atomically: true, encoding: .utf8)
            polkitFiles = [(dir.file("rtkit.rules"), PolkitGrant.directory + "/" + PolkitGrant.prefix + "stack.rules")]
        } else if grant { try PolkitGrant.acquire(); granted = true }
        bus = try Subprocess(onStack: "/usr/bin/dbus-daemon", ["--config-file=" + dir.file("system.conf"), "--nofork", "--nopidfile"],
                             env: environment(), stderr: dir.file("bus.log"))
        guard eventually(interval: 0.005, { FileManager.default.fileExists(atPath: socket) }) else {
            throw HarnessError.timeout("the system bus did not start: \(log("bus.log"))")
        }
        polkit = try Subprocess(onStack: "/usr/lib/polkit-1/polkitd", ["--no-debug"], env: environment(), stderr: dir.file("polkit.log"),
                                files: polkitFiles)
        rtkit = try Subprocess(onStack: "/usr/libexec/rtkit-daemon", ["--no-canary", "--no-chroot", "--no-limit-resources", "--stderr"],
                               env: environment(), stderr: dir.file("rtkit.log"))
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
            if (action.id.indexOf("org.freedesktop.RealtimeKit1.") == 0 && subject.user == "\(DesktopUser.name)")
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
