import CuedConfig
import CuedProtocol
@testable import CuedServer
import Testing

/// What the portal's values mean (GNOME's, KDE's, Do Not Disturb from either), and the rule per
/// source with the config's pins, without a bus.
@Suite struct DesktopRulesTests {
    typealias P = PortalSettings

    @Test func gnomesKeysAreReadAsGSettingsHasThem() {
        var p = P()
        p.replaceAll([(P.gnomeSound, "theme-name", .string("Yaru")), (P.gnomeSound, "event-sounds", .bool(false)),
                      (P.gnomeSound, "input-feedback-sounds", .bool(false)), ("org.gnome.desktop.interface", "gtk-theme", .string("x"))])
        let d = p.sound
        #expect(d.theme == Said("Yaru", from: "org.gnome.desktop.sound theme-name"))
        #expect(d.eventSounds == Said(false, from: "org.gnome.desktop.sound event-sounds"))
        #expect(d.inputFeedbackSounds?.value == false)
        #expect(d.doNotDisturb == nil)
        #expect(p.values["org.gnome.desktop.interface"] == nil, "a namespace cued does not follow is not kept")
    }

    @Test func kdesKeysAreKConfigTextAndWinInAKDESession() {
        var p = P(preferKDE: false)
        p.replaceAll([(P.kdeSounds, "Theme", .string("ocean")), (P.kdeSounds, "Enable", .string("false")),
                      (P.gnomeSound, "theme-name", .string("freedesktop")), (P.gnomeSound, "event-sounds", .bool(true))])
        #expect(p.sound.theme?.value == "freedesktop" && p.sound.eventSounds?.value == true)
        p.preferKDE = true
        #expect(p.sound.theme == Said("ocean", from: "org.kde.kdeglobals.Sounds Theme"))
        #expect(p.sound.eventSounds == Said(false, from: "org.kde.kdeglobals.Sounds Enable"))
        var kdeOnly = P()
        kdeOnly.set(P.kdeSounds, "Enable", .string("garbage"))
        #expect(kdeOnly.sound.eventSounds == nil, "text that is not a boolean says nothing")
        #expect(P.isKDE(environment: ["XDG_CURRENT_DESKTOP": "ubuntu:KDE"]) && !P.isKDE(environment: ["XDG_CURRENT_DESKTOP": "GNOME"]))
    }

    @Test func doNotDisturbIsEitherDesktopsSwitch() {
        var p = P()
        #expect(p.sound.doNotDisturb == nil)
        p.set(P.gnomeNotifications, "show-banners", .bool(true))
        p.inhibited = false
        #expect(p.sound.doNotDisturb?.value == false)
        p.inhibited = true
        #expect(p.sound.doNotDisturb == Said(true, from: "org.freedesktop.Notifications Inhibited"))
        p.inhibited = nil
        p.set(P.gnomeNotifications, "show-banners", .bool(false))
        #expect(p.sound.doNotDisturb == Said(true, from: "org.gnome.desktop.notifications show-banners (false: Do Not Disturb)"))
    }

    @Test func aChangeReplacesOneKeyAndAReadAllReplacesEverything() {
        var p = P()
        p.replaceAll([(P.gnomeSound, "theme-name", .string("a")), (P.gnomeSound, "event-sounds", .bool(false))])
        p.set(P.gnomeSound, "theme-name", .string("b"))
        #expect(p.sound.theme?.value == "b" && p.sound.eventSounds?.value == false)
        p.replaceAll([(P.gnomeSound, "theme-name", .string("c"))])
        #expect(p.sound.theme?.value == "c" && p.sound.eventSounds == nil)
        // A theme name is a directory's: anything else is not followed.
        p.set(P.gnomeSound, "theme-name", .string("../../etc"))
        #expect(p.sound.theme == nil)
    }

    static func config(_ text: String) throws(ConfigErrors) -> Config { try ConfigLoader.parse(text, file: "t.toml", home: "/home/u") }

    static func said(theme: String? = nil, eventSounds: Bool? = nil, inputFeedback: Bool? = nil, dnd: Bool? = nil) -> DesktopSound {
        var d = DesktopSound()
        d.theme = theme.map { Said($0, from: "portal") }
        d.eventSounds = eventSounds.map { Said($0, from: "portal") }
        d.inputFeedbackSounds = inputFeedback.map { Said($0, from: "portal") }
        d.doNotDisturb = dnd.map { Said($0, from: "portal") }
        return d
    }

    static func client(_ kind: Client.Kind, via: String? = nil) -> Client {
        var c = Client(kind, id: 1, limits: Daemon.Limits(), now: 0)
        c.via = via
        return c
    }

    /// The rule per source (DesktopRules' table), as admission applies it.
    @Test func theRulePerSource() throws {
        let socket = Self.client(.socket), canberra = Self.client(.socket, via: "libcanberra")
        let bus = Self.client(.bus(sender: ":1.7")), notifications = Self.client(.cued)
        #expect(DesktopRules.source(socket) == .socket && DesktopRules.source(canberra) == .libcanberra)
        #expect(DesktopRules.source(bus) == .desktop && DesktopRules.source(notifications) == .desktop)
        func holds(_ said: DesktopSound, _ c: Client, _ sound: String? = "bell", important: Bool = false) -> [Hold] {
            var view = AdmissionView(mutes: MuteState(muted: false), profiles: ProfileState(global: .full, settings: ProfileSettings(importantApps: ["clock"])),
                                     picker: CuePicker.Cooldowns(), stopping: false, now: 0)
            view.desktop = DesktopRules(said: said, config: Config())
            var options = PlayOptions()
            options.important = important
            return Admission.all(PlayAsk(options, client: c, sound: sound), c, view)
        }
        let quiet = Self.said(eventSounds: false)
        #expect(holds(quiet, socket).isEmpty)
        #expect(holds(quiet, canberra) == [.eventSoundsOff(from: "portal")])
        #expect(holds(quiet, canberra, nil) == [.eventSoundsOff(from: "portal")], "a file a canberra app plays too")
        #expect(holds(quiet, bus) == [.eventSoundsOff(from: "portal")])
        var clock = bus
        clock.app = "clock"
        #expect(holds(quiet, clock, important: true).isEmpty, "an important event of an allowed app passes, as in silent")
        #expect(holds(quiet, notifications, important: true).isEmpty, "cued's critical notification passes, as in silent")

        let noFeedback = Self.said(eventSounds: true, inputFeedback: false)
        #expect(holds(noFeedback, canberra, "button-pressed") == [.inputFeedbackOff(sound: "button-pressed", from: "portal")])
        #expect(holds(noFeedback, canberra, "bell").isEmpty)
        #expect(holds(noFeedback, socket, "button-pressed").isEmpty && holds(noFeedback, bus, "button-pressed").isEmpty)

        let dnd = Self.said(dnd: true)
        #expect(holds(dnd, bus) == [.doNotDisturb(from: "portal")] && holds(dnd, notifications) == [.doNotDisturb(from: "portal")])
        #expect(holds(dnd, canberra).isEmpty && holds(dnd, socket).isEmpty)
        #expect(holds(dnd, clock, important: true).isEmpty)
        #expect(DesktopRules(said: Self.said(eventSounds: false, dnd: true), config: Config()).quietsDesktopSources == .doNotDisturb(from: "portal"),
                "Do Not Disturb is named first for the level of feedbackd's events")

        let nothing = DesktopRules(said: DesktopSound(), config: Config())
        #expect(holds(DesktopSound(), canberra, "button-pressed").isEmpty && nothing.quietsDesktopSources == nil)
        #expect(nothing.eventSounds == Said(true, from: "default: the desktop says nothing"))
        #expect(nothing == DesktopRules.none)
    }

    @Test func theConfigPinsEachSettingAndTheTheme() throws {
        let pinned = try Self.config("theme = \"ocean\"\n[desktop]\nevent_sounds = false\ninput_feedback_sounds = true\ndo_not_disturb = \"follow\"\n")
        let r = DesktopRules(said: Self.said(theme: "Yaru", eventSounds: true, inputFeedback: false, dnd: true), config: pinned)
        #expect(r.eventSounds == Said(false, from: "config: [desktop] event_sounds"))
        #expect(r.inputFeedbackSounds == Said(true, from: "config: [desktop] input_feedback_sounds"))
        #expect(r.doNotDisturb == Said(true, from: "portal"))
        #expect(r.theme == nil && r.themeInForce == Said("ocean", from: "config: theme"))
        // Do Not Disturb pinned both ways, whatever the desktop says; the others follow it then.
        let noDND = DesktopRules(said: Self.said(eventSounds: false, dnd: true), config: try Self.config("[desktop]\ndo_not_disturb = false\n"))
        #expect(noDND.doNotDisturb == Said(false, from: "config: [desktop] do_not_disturb") && noDND.quietsDesktopSources == .eventSoundsOff(from: "portal"))
        let dnd = DesktopRules(said: Self.said(dnd: false), config: try Self.config("[desktop]\ndo_not_disturb = true\n"))
        #expect(dnd.doNotDisturb == Said(true, from: "config: [desktop] do_not_disturb") && dnd.quietsDesktopSources == .doNotDisturb(from: "config: [desktop] do_not_disturb"))

        let following = DesktopRules(said: Self.said(theme: "Yaru"), config: Config())
        #expect(following.theme == Said("Yaru", from: "portal") && following.themeInForce.value == "Yaru")
        let off = DesktopRules(said: Self.said(theme: "Yaru", eventSounds: false), config: try Self.config("[desktop]\nfollow = false\n"))
        #expect(off.theme == nil && off.themeInForce.value == "freedesktop" && off.eventSounds.value)
    }

    @Test func desktopKeysAreChecked() {
        #expect(throws: ConfigErrors.self) { try Self.config("[desktop]\nevent_sounds = \"off\"\n") }
        #expect(throws: ConfigErrors.self) { try Self.config("[desktop]\nvolume = 1\n") }
        do throws(ConfigErrors) {
            _ = try Self.config("[desktop]\ndo_not_disturb = 1\n")
            Issue.record("an integer was taken")
        } catch {
            #expect(error.description == "t.toml:2: desktop.do_not_disturb: expected \"follow\", true or false, found an integer")
        }
    }
}
