import CuedProtocol
import Foundation
import Testing
import TestSupport

/// The desktop's settings on a private session bus, from a stand-in for xdg-desktop-portal's
/// Settings interface (bench/desktop_portal.py: ReadAll, SettingChanged, and KDE's notification
/// server's Inhibited), changed with gdbus as a settings backend would; what cued then plays,
/// found sample-exact in its WAV capture (or found absent), from real clients: the socket,
/// libcanberra through cued's plug-in, libfeedback, notify-send.
@Suite(.serialized, .timeLimit(.minutes(3)), .disabled(if: PrivateBus.unavailableReason != nil, "\(PrivateBus.unavailableReason ?? "")"))
struct DesktopSettingsTests {
    static let standIn = TestPaths.repoRoot.appendingPathComponent("bench/desktop_portal.py").path
    /// Each theme's bell, and a cue named as an input-feedback sound.
    static let bellA = Fixture.samples(seed: 21, frames: 1_800)
    static let bellB = Fixture.samples(seed: 22, frames: 1_800)
    static let cues = Fixture.standard.merging(["button-pressed": Fixture.samples(seed: 23, frames: 1_200)]) { $1 }

    /// Two sound themes, `theme-a` and `theme-b`, each with its own bell, under `data`.
    static func writeThemes(_ data: String) throws {
        for (name, bell) in [("theme-a", bellA), ("theme-b", bellB)] {
            let dir = data + "/sounds/" + name
            try FileManager.default.createDirectory(atPath: dir + "/stereo", withIntermediateDirectories: true)
            try "[Sound Theme]\nName=\(name)\nInherits=freedesktop\nDirectories=stereo\n\n[stereo]\nOutputProfile=stereo\n"
                .write(toFile: dir + "/index.theme", atomically: true, encoding: .utf8)
            try WAV.write(dir + "/stereo/bell.wav", int16: bell, sampleRate: 48_000, channels: 1)
        }
    }

    /// The stand-in portal on `bus`, with `values` ({namespace: {key: value}}), and KDE's notification server.
    @discardableResult
    static func portal(_ bus: PrivateBus, _ values: [String: [String: Any]], withoutSettings: Int = 0) throws -> Subprocess {
        let json = String(decoding: try JSONSerialization.data(withJSONObject: values), as: UTF8.self)
        let p = try bus.spawn("/usr/bin/python3", [standIn, json, "--notifications", "--without-settings", "\(withoutSettings)"],
                              stdout: bus.dir.file("portal.out"))
        #expect(eventually { bus.owner("org.freedesktop.portal.Desktop") != nil && bus.owner("org.freedesktop.Notifications") != nil },
                "the stand-in portal did not start")
        return p
    }

    /// A desktop setting changed, as its backend would: `value` in GVariant text (`<false>`, `<'name'>`).
    static func set(_ bus: PrivateBus, _ namespace: String, _ key: String, _ value: String) throws {
        let r = try bus.run("/usr/bin/gdbus", ["call", "--session", "--dest", "org.freedesktop.portal.Desktop", "--object-path",
                                               "/org/freedesktop/portal/desktop", "--method", "org.cued.test.Desktop.Set", namespace, key, value])
        #expect(r.status == 0, "\(r)")
    }

    static func inhibit(_ bus: PrivateBus, _ on: Bool) throws {
        let r = try bus.run("/usr/bin/gdbus", ["call", "--session", "--dest", "org.freedesktop.portal.Desktop", "--object-path",
                                               "/org/freedesktop/portal/desktop", "--method", "org.cued.test.Desktop.SetInhibited", "\(on)"])
        #expect(r.status == 0, "\(r)")
    }

    /// cued on `bus`, recording, with the test themes and DesktopBusTests' feedbackd theme.
    static func cued(on bus: PrivateBus, config: String = "") throws -> DaemonHarness {
        try writeThemes(bus.dir.file("data"))
        try DesktopBusTests.theme.write(toFile: bus.dir.file("theme.json"), atomically: true, encoding: .utf8)
        return try DaemonHarness(cues: cues, args: ["--sink", "wav:%DIR%/capture.wav"],
                                 extraEnv: ["DBUS_SESSION_BUS_ADDRESS": bus.address, "FEEDBACK_THEME": bus.dir.file("theme.json"),
                                            "XDG_DATA_HOME": bus.dir.file("data")],
                                 config: config)
    }

    /// How many times `sound` is in the capture, back to back or apart.
    static func count(_ sound: [Int16], _ d: DaemonHarness) -> Int {
        guard let samples = try? DesktopBusTests.left(d) else { return 0 }
        var n = 0, from = 0
        while let at = DesktopBusTests.find(sound, in: samples, from: from) { n += 1; from = at + sound.count }
        return n
    }

    /// Until `sound` is in the capture `times` times, whole: a sound played without `wait` has
    /// then ended, and the next is alone in the capture (cued mixes sounds that overlap).
    static func heard(_ sound: [Int16], _ times: Int, _ d: DaemonHarness) {
        #expect(eventually { count(sound, d) >= times }, "heard \(count(sound, d)) times, not \(times)")
    }

    /// Waits for a status that satisfies `ok`; how long it took, in seconds (nil: never, within 5 s).
    static func untilStatus(_ d: DaemonHarness, _ ok: (Status) -> Bool) -> Double? {
        let start = Date()
        let seen = eventually(timeout: 5, interval: 0.005) { (try? d.status()).map(ok) ?? false }
        return seen ? Date().timeIntervalSince(start) : nil
    }

    @Test func changingTheThemeInThePortalChangesWhichBellPlaysWithinASecond() throws {
        let bus = try PrivateBus()
        try Self.portal(bus, ["org.gnome.desktop.sound": ["theme-name": "theme-a", "event-sounds": true]])
        let d = try Self.cued(on: bus)
        #expect(Self.untilStatus(d) { $0.desktop.portal == "following" && $0.desktop.theme.value == "theme-a" } != nil, "\(d.readStderr())")
        #expect(try d.status().desktop.theme.from == "org.gnome.desktop.sound theme-name")
        #expect(try d.request("play bell wait") == "ok")
        #expect(Self.count(Self.bellA, d) == 1)

        try Self.set(bus, "org.gnome.desktop.sound", "theme-name", "<'theme-b'>")
        let took = Self.untilStatus(d) { $0.desktop.theme.value == "theme-b" }
        print("the portal's theme change applied in \(took.map { String(format: "%.1f ms", $0 * 1000) } ?? "never")")
        #expect(took != nil && took! < 1, "\(String(describing: took))")
        #expect(try d.request("play bell wait") == "ok")
        #expect(Self.count(Self.bellB, d) == 1, "the desktop's new theme's bell is not in the capture")
        // A request naming a theme still wins, and so does the config's `theme`.
        #expect(try d.request("play bell wait theme=theme-a") == "ok")
        #expect(Self.count(Self.bellA, d) == 2)
        try d.writeConfig("theme = \"theme-a\"\n")
        #expect(try d.request("reload") == "ok reloaded")
        #expect(try d.status().desktop.theme == .init("theme-a", from: "config: theme"))
        #expect(try d.request("play bell wait") == "ok")
        #expect(Self.count(Self.bellA, d) == 3 && Self.count(Self.bellB, d) == 1)
    }

    /// Event sounds off: what libcanberra (GTK, GNOME Shell, KDE) and the desktop's own sources
    /// (feedbackd's events, notification sounds) play is held back; cues asked for on the socket
    /// still sound; input-feedback sounds are their own switch.
    @Test func eventSoundsOffSilenceTheDesktopsSourcesAndNothingElse() throws {
        let bus = try PrivateBus()
        try Self.portal(bus, ["org.gnome.desktop.sound": ["theme-name": "theme-a", "event-sounds": true, "input-feedback-sounds": true]])
        let d = try Self.cued(on: bus, config: "[notifications]\nenabled = true\nnormal = \"psst2\"\ncritical = \"psst2\"\n")
        #expect(Self.untilStatus(d) { $0.desktop.portal == "following" } != nil)
        let psst1 = Fixture.standard["psst1"]!, psst2 = Fixture.standard["psst2"]!, pop = Fixture.standard["pop"]!

        try Self.set(bus, "org.gnome.desktop.sound", "event-sounds", "<false>")
        #expect(Self.untilStatus(d) { !$0.desktop.eventSounds.value } != nil)
        #expect(try d.status().desktop.eventSounds.from == "org.gnome.desktop.sound event-sounds")
        let canberra = try d.client()
        #expect(try canberra.request("app org.gnome.Shell via=libcanberra") == "ok org.gnome.Shell")
        #expect(try canberra.request("play bell") == "ok disabled")
        #expect(try canberra.request("play psst1") == "ok disabled")
        // why names it, where it comes from and its fix; for a socket client nothing holds it back.
        let why = try #require(WhyReport.parse(String(try canberra.request("why psst1").dropFirst(3))))
        #expect(why.reasons.map(\.name) == ["event-sounds"] && why.reasons[0].says.contains("org.gnome.desktop.sound event-sounds"),
                "\(why)")
        #expect(why.reasons[0].fix.contains("gsettings set org.gnome.desktop.sound event-sounds true"))
        #expect(WhyReport.parse(String(try d.request("why psst1").dropFirst(3)))?.reasons.isEmpty == true)
        if CanberraSandbox.unavailableReason == nil {
            // A real libcanberra context through cued's plug-in: libcanberra's own answer for a disabled sound.
            let run = try CanberraSandbox().client([["props", ["application.name": "Canberra Test"]], ["play", 1, ["event.id": "psst1"]],
                                                    ["sleep", 0.1]], env: CanberraSandbox.environment(d.environment))
            #expect((run.ret(1) == CA.disabled && run.codes(1).isEmpty) || (run.ret(1) == CA.success && run.codes(1) == [CA.disabled]), "\(run)")
        }
        #expect(try d.request("play psst1 wait") == "ok", "a cue asked for on the socket still sounds")
        // feedbackd's event: nothing to play, its id ends at once; a notification: no sound but a critical one.
        let lfb = try bus.run("/usr/bin/python3", [DesktopBusTests.client, "message-new-instant"])
        #expect(lfb.status == 0 && lfb.out.contains("ended not-found"), "\(lfb)")
        try DesktopBusTests.notify(bus, d, ["plain"])
        #expect(try d.status().apps["notifications"]?.played ?? 0 == 0)
        try DesktopBusTests.notify(bus, d, ["-u", "critical", "disk full"])
        #expect(try d.status().apps["notifications"]?.played == 1)
        Self.heard(psst2, 1, d)

        // Back on, input feedback off: only the input-feedback sounds of libcanberra's clients.
        try Self.set(bus, "org.gnome.desktop.sound", "event-sounds", "<true>")
        try Self.set(bus, "org.gnome.desktop.sound", "input-feedback-sounds", "<false>")
        #expect(Self.untilStatus(d) { $0.desktop.eventSounds.value && !$0.desktop.inputFeedbackSounds.value } != nil)
        #expect(try canberra.request("play button-pressed") == "ok disabled")
        #expect(WhyReport.parse(String(try canberra.request("why button-pressed").dropFirst(3)))?.reasons.map(\.name) == ["input-feedback"])
        #expect(try canberra.request("play pop wait") == "ok")
        #expect(try d.request("play button-pressed wait") == "ok")
        d.stop()
        #expect(Self.count(psst1, d) == 1, "psst1: the socket's, not the canberra app's")
        #expect(Self.count(psst2, d) == 1, "psst2: the critical notification's only")
        #expect(Self.count(pop, d) == 1, "pop: the canberra app's once event sounds were back; not feedbackd's event")
        #expect(Self.count(Self.bellA, d) == 0)
        #expect(Self.count(Self.cues["button-pressed"]!, d) == 1, "the input-feedback sound: the socket's only")
    }

    /// Do Not Disturb (KDE's Inhibited, then GNOME's show-banners): notification sounds and
    /// feedbackd's events as in the silent profile; libcanberra's and the socket's sound.
    @Test func doNotDisturbSilencesNotificationAndFeedbackSoundsOnly() throws {
        let bus = try PrivateBus()
        try Self.portal(bus, ["org.gnome.desktop.notifications": ["show-banners": true]])
        let d = try Self.cued(on: bus, config: "[notifications]\nenabled = true\nnormal = \"psst2\"\ncritical = \"psst2\"\n"
                                              + "[profiles]\nimportant_apps = [\"org.example.Alarm\"]\n")
        #expect(Self.untilStatus(d) { $0.desktop.portal == "following" } != nil)
        try Self.inhibit(bus, true)
        #expect(Self.untilStatus(d) { $0.desktop.doNotDisturb == .init(true, from: "org.freedesktop.Notifications Inhibited") } != nil,
                "\((try? d.status().desktop) ?? Status.Desktop())")
        let lfb = try bus.run("/usr/bin/python3", [DesktopBusTests.client, "message-new-instant"])
        #expect(lfb.status == 0 && lfb.out.contains("ended not-found"), "\(lfb)")
        try DesktopBusTests.notify(bus, d, ["plain"])
        #expect(try d.status().apps["notifications"]?.played ?? 0 == 0)
        let dnd = try runProcess(TestPaths.binary("cuectl"), ["--socket", d.socketPath, "--app", "notifications", "why", "psst2"])
        #expect(WhyTests.names(dnd.out) == ["do-not-disturb"] && dnd.out.contains("org.freedesktop.Notifications Inhibited"), "\(dnd)")
        let canberra = try d.client()
        _ = try canberra.request("app org.gnome.Shell via=libcanberra")
        #expect(try canberra.request("play psst1 wait") == "ok")
        #expect(try d.request("play pop wait") == "ok")
        // An important event of an allowed app, and a critical notification, pass as in silent.
        let alarm = try bus.run("/usr/bin/gdbus", ["call", "--session", "--dest", "org.sigxcpu.Feedback", "--object-path", "/org/sigxcpu/Feedback",
                                                   "--method", "org.sigxcpu.Feedback.TriggerFeedback", "--", "'org.example.Alarm'",
                                                   "'phone-incoming-call'", "{'important': <true>}", "-1"])
        #expect(alarm.status == 0, "\(alarm)")
        #expect(eventually { (try? d.status().apps["org.example.Alarm"]?.played) == 1 })
        Self.heard(Fixture.standard["psst1"]!, 2, d)
        try DesktopBusTests.notify(bus, d, ["-u", "critical", "disk full"])
        #expect(try d.status().apps["notifications"]?.played == 1)
        Self.heard(Fixture.standard["psst2"]!, 1, d)
        // GNOME's switch, KDE's off.
        try Self.inhibit(bus, false)
        try Self.set(bus, "org.gnome.desktop.notifications", "show-banners", "<false>")
        #expect(Self.untilStatus(d) { $0.desktop.doNotDisturb.value && $0.desktop.doNotDisturb.from.hasPrefix("org.gnome.desktop.notifications") } != nil)
        try DesktopBusTests.notify(bus, d, ["plain again"])
        #expect(try d.status().apps["notifications"]?.played == 1)
        try Self.set(bus, "org.gnome.desktop.notifications", "show-banners", "<true>")
        #expect(Self.untilStatus(d) { !$0.desktop.doNotDisturb.value } != nil)
        try DesktopBusTests.notify(bus, d, ["after"])
        #expect(eventually { (try? d.status().apps["notifications"]?.played) == 2 })
        Self.heard(Fixture.standard["psst2"]!, 2, d)
        d.stop()
        #expect(Self.count(Fixture.standard["psst1"]!, d) == 2, "psst1: the canberra app's and the allowed alarm's")
        #expect(Self.count(Fixture.standard["pop"]!, d) == 1, "pop: the socket's only, not feedbackd's event")
        #expect(Self.count(Fixture.standard["psst2"]!, d) == 2, "psst2: the critical notification and the one after Do Not Disturb")
    }

    /// No portal on the bus: `status` says so and cued's own settings apply; the portal coming
    /// later is followed; the config pins a setting whatever the desktop says.
    @Test func withoutAPortalStatusSaysSoAndTheConfigPins() throws {
        let bus = try PrivateBus()
        let d = try Self.cued(on: bus, config: "[desktop]\nevent_sounds = false\n")
        #expect(Self.untilStatus(d) { $0.desktop.portal.hasPrefix("absent: no org.freedesktop.portal.Desktop on the session bus") } != nil,
                "\((try? d.status().desktop.portal) ?? "")")
        #expect(try d.status().desktop.theme == .init("freedesktop", from: "default: the desktop says nothing"))
        try Self.portal(bus, ["org.gnome.desktop.sound": ["theme-name": "theme-b", "event-sounds": true]])
        #expect(Self.untilStatus(d) { $0.desktop.portal == "following" && $0.desktop.theme.value == "theme-b" } != nil,
                "the portal that appeared later is not followed: \((try? d.status().desktop.portal) ?? "")")
        #expect(try d.status().desktop.eventSounds == .init(false, from: "config: [desktop] event_sounds"))
        let canberra = try d.client()
        _ = try canberra.request("app org.gnome.Shell via=libcanberra")
        #expect(try canberra.request("play pop") == "ok disabled")
        let off = try DaemonHarness(args: ["--sink", "null"], extraEnv: ["DBUS_SESSION_BUS_ADDRESS": bus.address],
                                    config: "[dbus]\nfeedback = false\n[desktop]\nfollow = false\n")
        #expect(try off.status().desktop.portal == "off ([desktop] follow = false)")
        #expect(try off.status().desktop.theme.value == "freedesktop")
    }

    /// A portal that answers without its Settings interface (xdg-desktop-portal 1.20 started by D-Bus
    /// activation before its backend: UnknownMethod) is asked again, 1 s, then 2 s later, and
    /// `status` says so each time; once it has them they are followed, without the portal's owner
    /// changing.
    @Test func aPortalThatAnswersWithoutSettingsIsAskedAgain() throws {
        let bus = try PrivateBus()
        try Self.portal(bus, ["org.gnome.desktop.sound": ["theme-name": "theme-b", "event-sounds": true]], withoutSettings: 2)
        let d = try Self.cued(on: bus)
        let first = Self.untilStatus(d) { $0.desktop.portal.hasSuffix("asked again in 1 s") }
        #expect(first != nil, "\((try? d.status().desktop.portal) ?? "")")
        #expect(try d.status().desktop.portal.hasPrefix("error: org.freedesktop.DBus.Error.UnknownMethod: No such interface"))
        #expect(Self.untilStatus(d) { $0.desktop.portal.hasSuffix("asked again in 2 s") } != nil, "\((try? d.status().desktop.portal) ?? "")")
        #expect(eventually(timeout: 6) { (try? d.status()).map { $0.desktop.portal == "following" && $0.desktop.theme.value == "theme-b" } ?? false },
                "\((try? d.status().desktop.portal) ?? "")")
        #expect(!d.readStderr().contains("no session bus"), "a false alarm at start: \(d.readStderr())")
    }
}

/// The real xdg-desktop-portal with its GTK backend on a private session bus (the backend needs a
/// display: Xvfb), GSettings on a keyfile: `gsettings set` changes the theme as GNOME Settings
/// does, and cued's next bell is the new theme's, within a second.
@Suite(.serialized, .timeLimit(.minutes(2)), .disabled(if: RealPortal.unavailableReason != nil, "\(RealPortal.unavailableReason ?? "")"))
struct RealPortalTests {
    @Test func gsettingsThroughTheRealPortalChangesTheNextBellWithinASecond() throws {
        let bus = try PrivateBus()
        let portal = try RealPortal(bus)
        try portal.gsettings(["set", "org.gnome.desktop.sound", "theme-name", "theme-a"])
        try portal.start()
        let d = try DesktopSettingsTests.cued(on: bus)
        #expect(DesktopSettingsTests.untilStatus(d) { $0.desktop.portal == "following" && $0.desktop.theme.value == "theme-a" } != nil,
                "\((try? d.status().desktop) ?? Status.Desktop()) \(portal.logs)")
        #expect(try d.request("play bell wait") == "ok")
        #expect(DesktopSettingsTests.count(DesktopSettingsTests.bellA, d) == 1)
        let start = Date()
        try portal.gsettings(["set", "org.gnome.desktop.sound", "theme-name", "theme-b"])
        #expect(eventually(timeout: 1, interval: 0.005) { (try? d.status().desktop.theme.value) == "theme-b" }, "\(portal.logs)")
        print("RealPortalTests: gsettings set -> cued's theme in \(Int(Date().timeIntervalSince(start) * 1000)) ms")
        #expect(try d.request("play bell wait") == "ok")
        #expect(DesktopSettingsTests.count(DesktopSettingsTests.bellB, d) == 1, "the new theme's bell is not in the capture")
        try portal.gsettings(["set", "org.gnome.desktop.sound", "event-sounds", "false"])
        #expect(eventually(timeout: 1, interval: 0.005) { (try? d.status().desktop.eventSounds.value) == false })
    }
}

/// xdg-desktop-portal and xdg-desktop-portal-gtk as a GNOME session runs them, on `bus`.
final class RealPortal: @unchecked Sendable {
    static let portal = "/usr/libexec/xdg-desktop-portal", gtk = "/usr/libexec/xdg-desktop-portal-gtk"
    static var unavailableReason: String? {
        if let why = PrivateBus.unavailableReason { return why }
        let missing = [portal, gtk, "/usr/bin/Xvfb", "/usr/bin/gsettings"].filter { !TestStack.hasProgram($0) }
        return missing.isEmpty ? nil : "the real portal's tests skipped: \(missing.joined(separator: ", ")) missing (make test installs xdg-desktop-portal, xdg-desktop-portal-gtk, xvfb, libglib2.0-bin)"
    }

    let bus: PrivateBus
    let display: Int
    private var xvfb: Subprocess?
    init(_ bus: PrivateBus) throws {
        self.bus = bus
        // A display no other X server holds (its lock file), from one the pid picks.
        let first = 200 + Int(getpid() % 500)
        display = (first..<(first + 100)).first { !FileManager.default.fileExists(atPath: "/tmp/.X\($0)-lock") } ?? first
        for d in ["cfg", "rt"] { try FileManager.default.createDirectory(atPath: bus.dir.file(d), withIntermediateDirectories: true) }
        chmod(bus.dir.file("rt"), 0o700)
    }

    /// GSettings on a keyfile of the test's own (the backend and gsettings both read it, and a
    /// change by one reaches the other), the GNOME desktop, the test's display.
    var environment: [String: String] {
        ["GSETTINGS_BACKEND": "keyfile", "XDG_CONFIG_HOME": bus.dir.file("cfg"), "XDG_RUNTIME_DIR": bus.dir.file("rt"),
         "XDG_CURRENT_DESKTOP": "GNOME", "DISPLAY": ":\(display)"]
    }

    func gsettings(_ args: [String]) throws {
        let r = try bus.run("/usr/bin/gsettings", args, env: environment)
        guard r.status == 0 else { throw HarnessError.timeout("gsettings \(args): \(r.err)") }
    }

    func start() throws {
        xvfb = try bus.spawn("/usr/bin/Xvfb", [":\(display)", "-nolisten", "tcp"], env: environment)
        guard eventually({ FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(self.display)") }) else {
            throw HarnessError.timeout("Xvfb :\(display) did not start")
        }
        try bus.spawn(Self.gtk, ["-r"], stdout: bus.dir.file("gtk.out"), env: environment)
        guard eventually({ self.bus.owner("org.freedesktop.impl.portal.desktop.gtk") != nil }) else {
            throw HarnessError.timeout("xdg-desktop-portal-gtk did not start: \(logs)")
        }
        try bus.spawn(Self.portal, ["-r"], stdout: bus.dir.file("portal.out"), env: environment)
        guard eventually({ self.bus.owner("org.freedesktop.portal.Desktop") != nil }) else {
            throw HarnessError.timeout("xdg-desktop-portal did not start: \(logs)")
        }
    }

    var logs: String {
        (0..<8).compactMap { try? String(contentsOfFile: bus.dir.file("spawn-\($0).log"), encoding: .utf8) }.joined(separator: "\n").suffix(2000).description
    }
}
