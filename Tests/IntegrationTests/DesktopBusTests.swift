import CuedProtocol
import Foundation
import Testing
import TestSupport

/// A private session bus for one test: dbus-daemon on a socket in a temp
/// directory, allow-all, and no service directories, so no D-Bus activation
/// can start the system's own feedbackd. Its programs run on the test stack
/// (`TestStack`: this machine's, or Debian 13's feedbackd 0.8, fbcli and gdbus).
/// Killed when released.
final class PrivateBus: @unchecked Sendable {
    static let tools = ["/usr/bin/dbus-daemon", "/usr/bin/fbcli", "/usr/bin/gdbus", "/usr/bin/notify-send", "/usr/libexec/feedbackd"]
    static var unavailableReason: String? {
        if let why = TestStack.unavailableReason { return why }
        let missing = tools.filter { !TestStack.hasProgram($0) }
        if !missing.isEmpty { return "D-Bus tests skipped: \(missing.joined(separator: ", ")) missing (make test-deps installs dbus, feedbackd, libnotify-bin, libglib2.0-bin)" }
        let gi = try? runOnStack("/usr/bin/python3", ["-c", "import gi; gi.require_version('Lfb', '0.0'); from gi.repository import Lfb"])
        if gi?.status != 0 { return "D-Bus tests skipped: python3-gi or gir1.2-lfb-0.0 missing (make test-deps installs them)" }
        return nil
    }

    let dir = TempDir()
    private var daemon: Subprocess?
    private var others: [Subprocess] = []
    var socket: String { dir.file("bus") }
    var address: String { "unix:path=\(socket)" }

    init() throws {
        try """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>session</type>
              <listen>unix:path=\(socket)</listen>
              <auth>EXTERNAL</auth>
              <policy context="default">
                <allow send_destination="*" eavesdrop="true"/>
                <allow eavesdrop="true"/>
                <allow own="*"/>
              </policy>
            </busconfig>
            """.write(toFile: dir.file("bus.conf"), atomically: true, encoding: .utf8)
        try start()
    }

    func start() throws {
        daemon = try Subprocess(onStack: "/usr/bin/dbus-daemon", ["--config-file=\(dir.file("bus.conf"))", "--nofork", "--nopidfile"],
                                stderr: dir.file("dbus.log"))
        guard eventually({ FileManager.default.fileExists(atPath: socket) }) else { throw HarnessError.timeout("dbus-daemon did not start") }
    }

    /// The bus goes away (as at a logout or a crash of the session's bus).
    func kill() {
        daemon?.signal(SIGKILL)
        daemon?.wait()
        try? FileManager.default.removeItem(atPath: socket)
    }

    /// What a client on this bus runs with.
    func environment(_ extra: [String: String] = [:]) -> [String: String] {
        var env = ProcessInfo.processInfo.environment
        env["DBUS_SESSION_BUS_ADDRESS"] = address
        env["GSETTINGS_BACKEND"] = "memory"
        for key in ["DISPLAY", "WAYLAND_DISPLAY"] { env.removeValue(forKey: key) }
        return env.merging(extra) { $1 }
    }

    /// A process kept until the bus is released (a monitor, a stand-in server, feedbackd), on the
    /// test stack (`onStack` false: `path args` already runs there, e.g. `CanberraSandbox.wrap`'s).
    @discardableResult
    func spawn(_ path: String, _ args: [String], stdin: String? = nil, stdout: String? = nil, env: [String: String] = [:],
               onStack: Bool = true) throws -> Subprocess {
        let (p0, a0) = onStack ? TestStack.command(path, args) : (path, args)
        let p = try Subprocess(p0, a0, env: environment(env), stdin: stdin, stdout: stdout, stderr: dir.file("spawn-\(others.count).log"))
        others.append(p)
        return p
    }

    /// A command's status and output, on this bus.
    func run(_ path: String, _ args: [String], env: [String: String] = [:], timeout: Double = 30) throws -> (status: Int32, out: String, err: String) {
        try runOnStack(path, args, env: environment(env), timeout: timeout)
    }

    /// org.sigxcpu.Feedback's owner, or nil.
    func owner(_ name: String = "org.sigxcpu.Feedback") -> String? {
        guard let r = try? run("/usr/bin/gdbus", ["call", "--session", "--dest", "org.freedesktop.DBus", "--object-path", "/org/freedesktop/DBus",
                                                  "--method", "org.freedesktop.DBus.GetNameOwner", name]), r.status == 0 else { return nil }
        return r.out.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    deinit {
        for p in others.reversed() { p.stop(grace: 2) }
        daemon?.stop(grace: 2)
    }
}

/// cued's D-Bus face against real clients on a private bus: Debian's fbcli,
/// libfeedback (through python3-gi), gdbus, notify-send, and the real feedbackd.
/// Sounds are checked sample-exact at a WAV capture: a feedbackd theme
/// (FEEDBACK_THEME) points the events at the tests' own cues.
@Suite(.serialized, .timeLimit(.minutes(3)), .disabled(if: PrivateBus.unavailableReason != nil, "\(PrivateBus.unavailableReason ?? "")"))
struct DesktopBusTests {
    static let theme = """
        { "name": "cued-tests", "profiles": [
          { "name": "full", "feedbacks": [
            { "event-name": "message-new-instant", "type": "Sound", "effect": "pop" },
            { "event-name": "phone-incoming-call", "type": "Sound", "effect": "psst1" },
            { "event-name": "button-pressed", "type": "VibraRumble", "duration": 10 } ] },
          { "name": "quiet", "feedbacks": [ { "event-name": "phone-incoming-call", "type": "VibraPeriodic" } ] },
          { "name": "silent", "feedbacks": [ { "event-name": "message-new-instant", "type": "Led", "color": "blue" } ] } ] }
        """
    static let client = TestPaths.repoRoot.appendingPathComponent("bench/feedback_client.py").path
    static let notificationServer = TestPaths.repoRoot.appendingPathComponent("bench/notification_server.py").path

    /// cued on `bus`, recording to a WAV, the test theme in force.
    static func cued(on bus: PrivateBus, config: String? = nil, cues: [String: [Int16]] = Fixture.standard) throws -> DaemonHarness {
        try Self.theme.write(toFile: bus.dir.file("theme.json"), atomically: true, encoding: .utf8)
        let d = try DaemonHarness(cues: cues, args: ["--sink", "wav:%DIR%/capture.wav"],
                                  extraEnv: ["DBUS_SESSION_BUS_ADDRESS": bus.address, "FEEDBACK_THEME": bus.dir.file("theme.json")],
                                  config: config)
        #expect(eventually { (try? d.status().bus.feedback) == "owner" }, "\(d.readStderr())")
        return d
    }

    /// The capture's left channel.
    static func left(_ d: DaemonHarness) throws -> [Int16] {
        let cap = try WAV.read(d.capturePath)
        return stride(from: 0, to: cap.samples.count, by: 2).map { cap.samples[$0] }
    }

    /// Where `cue` starts in `samples`, sample-exact, or nil.
    static func find(_ cue: [Int16], in samples: [Int16], from: Int = 0) -> Int? {
        guard samples.count >= cue.count, from <= samples.count - cue.count else { return nil }
        return (from...(samples.count - cue.count)).first { i in samples[i] == cue[0] && Array(samples[i..<(i + cue.count)]) == cue }
    }

    /// `gdbus monitor` of org.sigxcpu.Feedback into monitor.log, returned once its match is
    /// in place: it asks who owns the name after sending its AddMatch, so its line about the
    /// owner means the bus has the match.
    @discardableResult
    static func monitor(_ bus: PrivateBus) throws -> Subprocess {
        let p = try bus.spawn("/usr/bin/gdbus", ["monitor", "--session", "--dest", "org.sigxcpu.Feedback"], stdout: bus.dir.file("monitor.log"))
        let ready = eventually {
            let log = (try? String(contentsOfFile: bus.dir.file("monitor.log"), encoding: .utf8)) ?? ""
            return log.contains("is owned by") || log.contains("does not have an owner")
        }
        #expect(ready, "gdbus monitor did not start")
        return p
    }

    /// FeedbackEnded signals seen by a `gdbus monitor`, as (id, reason).
    static func ended(_ log: String) -> [(UInt32, UInt32)] {
        log.split(separator: "\n").compactMap { line in
            guard let r = line.range(of: "FeedbackEnded (") else { return nil }
            // "(uint32 7, uint32 0)"
            let nums = line[r.upperBound...].split(separator: ",").compactMap { part in
                UInt32(part.replacingOccurrences(of: "uint32", with: "").filter(\.isNumber))
            }
            return nums.count >= 2 ? (nums[0], nums[1]) : nil
        }
    }

    @Test func fbcliAndALibfeedbackAppSoundThroughCuedWithOneEndEach() throws {
        let bus = try PrivateBus()
        let d = try Self.cued(on: bus)
        try Self.monitor(bus)
        // fbcli ends the feedback when its stdin closes: hold it open with a FIFO.
        let fifo = bus.dir.file("stdin")
        #expect(mkfifo(fifo, 0o600) == 0)
        let holder = open(fifo, O_RDWR)
        defer { close(holder) }
        let fbcli = try bus.spawn("/usr/bin/fbcli", ["-E", "message-new-instant"], stdin: fifo, stdout: bus.dir.file("fbcli.out"))
        #expect(fbcli.wait(timeout: 20) == 0, "\(d.readStderr())")
        let lfb = try bus.run("/usr/bin/python3", [Self.client, "phone-incoming-call", "--app", "org.example.Lfb"])
        #expect(lfb.status == 0 && lfb.out.contains("ended natural"), "\(lfb)")
        let pop = Fixture.standard["pop"]!, psst1 = Fixture.standard["psst1"]!
        #expect(eventually { ((try? Self.left(d)).map { Self.find(psst1, in: $0) != nil }) ?? false })
        let status = try d.status()
        #expect(status.apps["org.sigxcpu.fbcli"]?.played == 1, "\(status.apps)")
        #expect(status.apps["org.example.Lfb"]?.played == 1, "\(status.apps)")
        #expect(status.bus.live == 0)
        d.stop()
        let samples = try Self.left(d)
        let at = Self.find(pop, in: samples)
        #expect(at != nil, "the pop is not in the capture: \(sampleDifference(Array(samples.prefix(pop.count)), pop) ?? "")")
        #expect(at.map { Self.find(psst1, in: samples, from: $0 + pop.count) != nil } == true)
        // Exactly one FeedbackEnded per id, reason natural (0).
        let ends = Self.ended((try? String(contentsOfFile: bus.dir.file("monitor.log"), encoding: .utf8)) ?? "")
        #expect(ends.map(\.0) == [1, 2] && ends.allSatisfy { $0.1 == 0 }, "\(ends)")
    }

    @Test func aLoopLoopsUntilEndFeedbackAndATimeoutExpires() throws {
        let bus = try PrivateBus()
        let d = try Self.cued(on: bus)
        // timeout 0: loops until the app ends it.
        let looped = try bus.run("/usr/bin/python3", [Self.client, "message-new-instant", "--timeout", "0", "--end-after", "0.6"])
        #expect(looped.status == 0 && looped.out.contains("ended explicit"), "\(looped)")
        #expect(eventually { (try? d.status().voicesActive) == 0 })
        // timeout 1: loops for a second, then ends by itself (fbcli waits for it).
        let fbcli = try bus.run("/usr/bin/python3", [Self.client, "message-new-instant", "--timeout", "1"])
        #expect(fbcli.status == 0 && fbcli.out.contains("ended expired"), "\(fbcli)")
        // Unknown to the theme and to cued: an id, then at once not found.
        let none = try bus.run("/usr/bin/python3", [Self.client, "no-such-event-anywhere"])
        #expect(none.status == 0 && none.out.contains("ended not-found"), "\(none)")
        d.stop()
        let samples = try Self.left(d)
        let pop = Fixture.standard["pop"]!
        // The loop: the pop again and again, back to back.
        let found = Self.find(pop, in: samples)
        #expect(found != nil, "no pop in the capture")
        guard let first = found else { return }
        var loops = 1
        while Array(samples.dropFirst(first + loops * pop.count).prefix(pop.count)) == pop { loops += 1 }
        #expect(loops >= 3, "the loop played \(loops) pop(s) back to back")
    }

    @Test func introspectionShowsFeedbackdsInterfaceAndBadCallsGetDBusErrors() throws {
        let bus = try PrivateBus()
        let d = try Self.cued(on: bus)
        let intro = try bus.run("/usr/bin/gdbus", ["introspect", "--session", "--dest", "org.sigxcpu.Feedback", "--object-path", "/org/sigxcpu/Feedback"])
        #expect(intro.status == 0)
        for part in ["interface org.sigxcpu.Feedback", "TriggerFeedback(in  s app_id,", "in  a{sv} hints,", "out u id);",
                     "EndFeedback(in  u id);", "FeedbackEnded(u id,", "readwrite s Profile"] {
            #expect(intro.out.contains(part), "\(part) not in \(intro.out)")
        }
        func call(_ args: [String]) throws -> (status: Int32, out: String, err: String) {
            try bus.run("/usr/bin/gdbus", ["call", "--session", "--dest", "org.sigxcpu.Feedback", "--object-path", "/org/sigxcpu/Feedback"] + args)
        }
        let noApp = try call(["--method", "org.sigxcpu.Feedback.TriggerFeedback", "--", "''", "'message-new-instant'", "@a{sv} {}", "-1"])
        #expect(noApp.status != 0 && noApp.err.contains("org.freedesktop.DBus.Error.InvalidArgs") && noApp.err.contains("Invalid app id"), "\(noApp)")
        let badHint = try call(["--method", "org.sigxcpu.Feedback.TriggerFeedback", "--", "'a.b'", "'message-new-instant'", "{'profile': <'loud'>}", "-1"])
        #expect(badHint.status != 0 && badHint.err.contains("profile 'loud' is not one of full, quiet, silent"), "\(badHint)")
        let badProfile = try call(["--method", "org.freedesktop.DBus.Properties.Set", "'org.sigxcpu.Feedback'", "'Profile'", "<'loud'>"])
        #expect(badProfile.status != 0 && badProfile.err.contains("Profile 'loud' is not one of full, quiet, silent"), "\(badProfile)")
        // Ending an id that never was is not an error (as feedbackd).
        #expect(try call(["--method", "org.sigxcpu.Feedback.EndFeedback", "4242"]).status == 0)
        // A sound-file hint plays that file (the untrusted-file rules of play-file apply).
        let file = bus.dir.file("hint.wav")
        let tone = Fixture.samples(seed: 11, frames: 1_200)
        try WAV.write(file, int16: tone, sampleRate: 48_000, channels: 1)
        let hinted = try call(["--method", "org.sigxcpu.Feedback.TriggerFeedback", "--", "'a.b'", "'anything'", "{'sound-file': <'\(file)'>}", "-1"])
        #expect(hinted.status == 0 && hinted.out.hasPrefix("(uint32 "), "\(hinted)")
        #expect(eventually { ((try? Self.left(d)).map { Self.find(tone, in: $0) != nil }) ?? false }, "\(d.readStderr())")
        #expect(d.stop() == 0)
    }

    @Test func theProfileIsOneStateForTheBusTheSocketAndCuectl() throws {
        let bus = try PrivateBus()
        let d = try Self.cued(on: bus, config: "[profiles]\nimportant_apps = [\"org.example.Alarm\"]\n")
        try Self.monitor(bus)
        // fbcli sets it through the property and waits for PropertiesChanged.
        let set = try bus.run("/usr/bin/fbcli", ["-P", "quiet"], timeout: 20)
        #expect(set.status == 0 && set.out.contains("Set feedback profile to: 'quiet'"), "\(set)")
        #expect(try d.status().profile == .quiet)
        // A loop sounding when the profile goes silent ends; cuectl sets it on the socket. (An event the
        // theme does not know plays the cue of that name, in quiet quieter; the theme's own sound
        // events have no sound below full, as feedbackd's.)
        let looper = try bus.spawn("/usr/bin/python3", [Self.client, "psst2", "--timeout", "0", "--wait", "30"],
                                   stdout: bus.dir.file("looper.out"))
        #expect(eventually { (try? d.status().voicesActive) == 1 })
        let cuectl = try runProcess(TestPaths.binary("cuectl"), ["--socket", d.socketPath, "profile", "silent"])
        #expect(cuectl.status == 0, "\(cuectl)")
        #expect(looper.wait(timeout: 10) == 0)
        #expect(((try? String(contentsOfFile: bus.dir.file("looper.out"), encoding: .utf8)) ?? "").contains("ended explicit"))
        let got = try bus.run("/usr/bin/gdbus", ["call", "--session", "--dest", "org.sigxcpu.Feedback", "--object-path", "/org/sigxcpu/Feedback",
                                                 "--method", "org.freedesktop.DBus.Properties.Get", "org.sigxcpu.Feedback", "Profile"])
        #expect(got.out.contains("<'silent'>"), "\(got)")
        #expect(eventually {
            ((try? String(contentsOfFile: bus.dir.file("monitor.log"), encoding: .utf8)) ?? "").contains("'Profile': <'silent'>")
        }, "no PropertiesChanged for Profile")
        // Silent: nothing, and the id ends at once (not found)...
        let quiet = try bus.run("/usr/bin/python3", [Self.client, "message-new-instant"])
        #expect(quiet.status == 0 && quiet.out.contains("ended not-found"), "\(quiet)")
        // ...but an important event of an allowed app sounds.
        let alarm = try bus.run("/usr/bin/gdbus", ["call", "--session", "--dest", "org.sigxcpu.Feedback", "--object-path", "/org/sigxcpu/Feedback",
                                                   "--method", "org.sigxcpu.Feedback.TriggerFeedback", "--", "'org.example.Alarm'",
                                                   "'phone-incoming-call'", "{'important': <true>}", "-1"])
        #expect(alarm.status == 0, "\(alarm)")
        #expect(eventually { (try? d.status().apps["org.example.Alarm"]?.played) == 1 })
        // The same hint from another app does not pass.
        let other = try bus.run("/usr/bin/gdbus", ["call", "--session", "--dest", "org.sigxcpu.Feedback", "--object-path", "/org/sigxcpu/Feedback",
                                                   "--method", "org.sigxcpu.Feedback.TriggerFeedback", "--", "'org.example.Other'",
                                                   "'phone-incoming-call'", "{'important': <true>}", "-1"])
        #expect(other.status == 0)
        // Its feedback ends (not found: nothing to play in silent) before anything is counted.
        let otherID = other.out.split(whereSeparator: { !$0.isNumber }).compactMap { UInt32($0) }.last
        #expect(eventually {
            Self.ended((try? String(contentsOfFile: bus.dir.file("monitor.log"), encoding: .utf8)) ?? "").contains { $0.0 == otherID }
        }, "no FeedbackEnded for \(String(describing: otherID))")
        #expect(try d.status().apps["org.example.Other"]?.played ?? 0 == 0)
        d.stop()
        let samples = try Self.left(d)
        #expect(Self.find(Fixture.standard["psst1"]!, in: samples) != nil, "the important call is not in the capture")
    }

    /// Another cued (or any process) taking the name: the loops cued was playing end
    /// (their clients' EndFeedback now goes to the new owner, so they could never be
    /// ended here), and the Profile property obeys the limit on state changes.
    @Test func losingTheNameEndsItsLoopsAndProfileSetsAreRateLimited() throws {
        let bus = try PrivateBus()
        let first = try Self.cued(on: bus)
        let looper = try bus.spawn("/usr/bin/python3", [Self.client, "message-new-instant", "--timeout", "0", "--wait", "60"])
        #expect(eventually { (try? first.status().voicesActive) == 1 })
        let second = try DaemonHarness(args: ["--sink", "null"], extraEnv: ["DBUS_SESSION_BUS_ADDRESS": bus.address],
                                       config: "[dbus]\nreplace = true\n")
        #expect(eventually { (try? second.status().bus.feedback) == "owner" }, "\(second.readStderr())")
        #expect(eventually { (try? first.status().bus.feedback) == "queued" })
        #expect(eventually { (try? first.status().voicesActive) == 0 }, "the loop of a name cued lost still plays")
        #expect(eventually { (try? first.status().bus.live) == 0 })
        looper.stop()
        second.stop()
        #expect(eventually { (try? first.status().bus.feedback) == "owner" }, "the name did not come back from the queue")
        // 200 Sets as fast as one client can: the 20-a-second limit refuses most.
        let flip = """
            from gi.repository import Gio, GLib
            bus = Gio.bus_get_sync(Gio.BusType.SESSION)
            for i in range(200):
                bus.call_sync('org.sigxcpu.Feedback', '/org/sigxcpu/Feedback', 'org.freedesktop.DBus.Properties', 'Set',
                              GLib.Variant('(ssv)', ('org.sigxcpu.Feedback', 'Profile', GLib.Variant('s', 'quiet' if i % 2 else 'full'))),
                              None, Gio.DBusCallFlags.NONE, -1, None)
            """
        let before = try first.status().rateLimited
        let r = try bus.run("/usr/bin/python3", ["-c", flip])
        #expect(r.status == 0, "\(r)")
        #expect(eventually { ((try? first.status().rateLimited) ?? 0) - before >= 100 }, "\((try? first.status().rateLimited) ?? -1)")
    }

    @Test func aClientThatLeavesTheBusEndsItsLoops() throws {
        let bus = try PrivateBus()
        let d = try Self.cued(on: bus)
        let looper = try bus.spawn("/usr/bin/python3", [Self.client, "message-new-instant", "--timeout", "0", "--wait", "60"])
        #expect(eventually { (try? d.status().voicesActive) == 1 })
        looper.signal(SIGKILL)
        looper.wait()
        #expect(eventually { (try? d.status().voicesActive) == 0 }, "the loop of a client that left still plays")
        #expect(eventually { (try? d.status().bus.live) == 0 })
    }

    /// cued watching Notify calls beside the stand-in notification server: (bus, cued).
    static func watchingNotifications(config: String = "") throws -> (PrivateBus, DaemonHarness, Subprocess) {
        let bus = try PrivateBus()
        let d = try Self.cued(on: bus, config: "[notifications]\nenabled = true\nnormal = \"pop\"\n" + config)
        #expect(try d.status().bus.notifications == "watching")
        let server = try bus.spawn("/usr/bin/python3", [Self.notificationServer], stdout: bus.dir.file("ns.out"))
        #expect(eventually { bus.owner("org.freedesktop.Notifications") != nil }, "the stand-in notification server did not start")
        return (bus, d, server)
    }

    /// notify-send, and the wait until cued has read its Notify call (sounded or not): what
    /// a "nothing played" check waits for, instead of a fixed sleep.
    static func notify(_ bus: PrivateBus, _ d: DaemonHarness, _ args: [String]) throws {
        let before = try d.status().bus.notificationsSeen
        #expect(try bus.run("/usr/bin/notify-send", args).status == 0)
        #expect(eventually { ((try? d.status().bus.notificationsSeen) ?? 0) > before }, "cued never saw \(args)")
    }

    @Test func notificationsSoundOnceAndSuppressedOnesDoNot() throws {
        let (bus, d, server) = try Self.watchingNotifications()
        defer { _ = server }
        let psst1 = Fixture.standard["psst1"]!, pop = Fixture.standard["pop"]!
        try Self.notify(bus, d, ["-h", "string:sound-name:psst1", "hi"])
        #expect(eventually { ((try? Self.left(d)).map { Self.find(psst1, in: $0) != nil }) ?? false })
        try Self.notify(bus, d, ["-h", "boolean:suppress-sound:true", "quiet one"])
        try Self.notify(bus, d, ["plain"])  // the urgency's sound: pop
        #expect(try d.status().apps["notifications"]?.played == 2, "\((try? d.status().apps) ?? [:])")
        #expect(eventually { ((try? Self.left(d)).map { Self.find(pop, in: $0) != nil }) ?? false })
    }

    /// A burst: 20 notifications as fast as notify-send goes; 3 at once, then one a second.
    @Test func aBurstOfNotificationsIsLimited() throws {
        let (bus, d, server) = try Self.watchingNotifications()
        defer { _ = server }
        let start = Date()
        for i in 0..<20 { _ = try bus.run("/usr/bin/notify-send", ["burst \(i)"]) }
        let elapsed = Date().timeIntervalSince(start)
        #expect(eventually { (try? d.status().bus.notificationsSeen) == 20 })
        let played = try d.status().apps["notifications"]?.played ?? 0
        #expect(played >= 3 && Double(played) <= 3 + elapsed + 1, "\(played) sounds for 20 notifications in \(elapsed) s")
    }

    /// Silent is do-not-disturb: nothing but critical ones.
    @Test func inSilentOnlyCriticalNotificationsSound() throws {
        let (bus, d, server) = try Self.watchingNotifications()
        defer { _ = server }
        #expect(try d.request("profile silent") == "ok silent")
        try Self.notify(bus, d, ["-h", "string:sound-name:psst2", "in silent"])
        #expect(try d.status().apps["notifications"]?.played ?? 0 == 0)
        try Self.notify(bus, d, ["-u", "critical", "-h", "string:sound-name:psst2", "critical"])
        #expect(try d.status().apps["notifications"]?.played == 1)
        d.stop()
    }

    @Test func cuedOutlivesTheBusAndComesBackWithIt() throws {
        let bus = try PrivateBus()
        let d = try Self.cued(on: bus)
        bus.kill()
        #expect(eventually { (try? d.status().bus.connection) == "absent" })
        #expect(try d.request("play pop") == "ok")  // the socket works without a bus
        try bus.start()
        #expect(eventually(timeout: 15) { (try? d.status().bus.feedback) == "owner" }, "\(d.readStderr())")
        let lfb = try bus.run("/usr/bin/python3", [Self.client, "message-new-instant"])
        #expect(lfb.status == 0 && lfb.out.contains("ended natural"), "\(lfb)")
        #expect(d.stop() == 0)
    }

    @Test func withoutABusOrWithTheBusOffCuedRunsAndSaysSo() throws {
        let none = try DaemonHarness(args: ["--sink", "null"])  // no bus at $XDG_RUNTIME_DIR/bus
        #expect(eventually { (try? none.status().bus.connection) == "absent" })
        #expect(try none.request("play pop") == "ok")
        let bus = try PrivateBus()
        let off = try DaemonHarness(args: ["--sink", "null"], extraEnv: ["DBUS_SESSION_BUS_ADDRESS": bus.address],
                                    config: "[dbus]\nenabled = false\n")
        #expect(try off.status().bus.connection == "off")
        #expect(bus.owner() == nil)
    }

    @Test func feedbackdKeepsTheNameItHasAndCuedTakesItWhenFeedbackdLeaves() throws {
        let bus = try PrivateBus()
        let feedbackd = try bus.spawn("/usr/libexec/feedbackd", [])
        #expect(eventually { bus.owner() != nil }, "feedbackd did not take its name")
        let theirs = bus.owner()
        try Self.theme.write(toFile: bus.dir.file("theme.json"), atomically: true, encoding: .utf8)
        let d = try DaemonHarness(args: ["--sink", "wav:%DIR%/capture.wav"],
                                  extraEnv: ["DBUS_SESSION_BUS_ADDRESS": bus.address, "FEEDBACK_THEME": bus.dir.file("theme.json")])
        #expect(eventually { (try? d.status().bus.feedback) == "queued" })
        #expect(bus.owner() == theirs)
        #expect(d.readStderr().contains("is owned by another process (feedbackd?); cued waits in the queue"))
        feedbackd.stop()
        #expect(eventually { (try? d.status().bus.feedback) == "owner" }, "\(d.readStderr())")
        let lfb = try bus.run("/usr/bin/python3", [Self.client, "message-new-instant"])
        #expect(lfb.status == 0 && lfb.out.contains("ended natural"), "\(lfb)")
        #expect(eventually { ((try? Self.left(d)).map { Self.find(Fixture.standard["pop"]!, in: $0) != nil }) ?? false })
        #expect(d.stop() == 0)
    }
}
