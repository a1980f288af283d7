import CuedConfig
import CuedProtocol

/// The desktop's sound settings in force, and what they do to each source of sound: a pure
/// value made from what the desktop says (`DesktopSound`) and the config (`[desktop]` pins each
/// setting, the top-level `theme` pins the theme). Each setting carries where it came from, for
/// `status` and `cuectl why`.
///
/// The rule per source (docs/desktop.md):
///
/// | source | event sounds off | input feedback off | Do Not Disturb |
/// |---|---|---|---|
/// | the socket (cuectl, scripts, refreshes) | plays | plays | plays |
/// | libcanberra (`app NAME via=libcanberra`) | not played (`ok disabled`) | input-feedback sounds not played | plays |
/// | feedbackd's events (the bus) | as the `silent` profile | plays | as the `silent` profile |
/// | notification sounds | as the `silent` profile | plays | as the `silent` profile |
///
/// Socket cues are what a user or a script asked cued for by name: the desktop's switches are
/// for the desktop's own event sounds, so only cued's mute and profiles govern them. As the
/// `silent` profile means: `important` events of `[profiles] important_apps` and, with
/// `critical_in_silent`, critical notifications still sound.
struct DesktopRules: Equatable {
    var eventSounds: Said<Bool>
    var inputFeedbackSounds: Said<Bool>
    var doNotDisturb: Said<Bool>
    /// The theme a play that names none is looked up in, when it is not the config's (or the
    /// default): the desktop's, unless the config's `theme` pins one.
    var theme: Said<String>?
    /// The theme as `status` shows it: name and where it comes from.
    var themeInForce: Said<String>

    /// Where a play comes from, as the rule tells the sources apart.
    enum Source: Equatable {
        case socket
        case libcanberra
        /// feedbackd's events and notification sounds: cued's own clients for the desktop.
        case desktop
    }

    init(said: DesktopSound, config: Config) {
        func pick(_ pinned: Bool?, key: String, _ said: Said<Bool>?, default value: Bool) -> Said<Bool> {
            if let pinned { return Said(pinned, from: "config: [desktop] \(key)") }
            return said ?? Said(value, from: "default: the desktop says nothing")
        }
        let d = config.desktop
        let follow = d.follow
        eventSounds = pick(d.eventSounds, key: "event_sounds", follow ? said.eventSounds : nil, default: true)
        inputFeedbackSounds = pick(d.inputFeedbackSounds, key: "input_feedback_sounds", follow ? said.inputFeedbackSounds : nil, default: true)
        doNotDisturb = pick(d.doNotDisturb, key: "do_not_disturb", follow ? said.doNotDisturb : nil, default: false)
        if let pinned = config.theme {
            theme = nil
            themeInForce = Said(pinned, from: "config: theme")
        } else if follow, let t = said.theme {
            theme = t
            themeInForce = t
        } else {
            theme = nil
            themeInForce = Said(SoundThemeDefault.name, from: "default: the desktop says nothing")
        }
    }

    /// Sounds GTK's libcanberra module plays as input feedback (libcanberra-gtk-module's event
    /// ids, but the message dialogs' alerts): the ones `input-feedback-sounds` governs.
    static let inputFeedbackNames: Set<String> = [
        "window-new", "window-close", "window-minimized", "window-unminimized", "window-maximized", "window-unmaximized",
        "menu-popup", "menu-popdown", "menu-replace", "menu-click", "tooltip-popup", "tooltip-popdown",
        "button-pressed", "button-released", "button-toggle-on", "button-toggle-off", "link-pressed", "link-released",
        "notebook-tab-changed", "item-selected", "dialog-ok", "dialog-cancel",
    ]

    /// What nothing said and nothing pinned makes: every sound plays, the default theme.
    static let none = DesktopRules(said: DesktopSound(), config: Config())

    /// Which source a client is, as the rule tells them apart.
    static func source(_ client: Client) -> Source {
        switch client.kind {
        case .socket: return client.via == "libcanberra" ? .libcanberra : .socket
        case .bus, .cued: return .desktop
        }
    }

    /// Event sounds off: a libcanberra client's sound, or a desktop source's that does not pass
    /// the profiles (`passes`: an important one of an allowed app, a critical notification).
    func eventSoundsHold(_ source: Source, passes: Bool) -> Hold? {
        guard !eventSounds.value else { return nil }
        switch source {
        case .socket: return nil
        case .libcanberra: return .eventSoundsOff(from: eventSounds.from)
        case .desktop: return passes ? nil : .eventSoundsOff(from: eventSounds.from)
        }
    }

    /// Input-feedback sounds off: a libcanberra client's input-feedback sound (by name).
    func inputFeedbackHold(_ source: Source, sound: String?) -> Hold? {
        guard source == .libcanberra, !inputFeedbackSounds.value, let sound, Self.inputFeedbackNames.contains(sound) else { return nil }
        return .inputFeedbackOff(sound: sound, from: inputFeedbackSounds.from)
    }

    /// Do Not Disturb: a desktop source's sound that does not pass the profiles.
    func doNotDisturbHold(_ source: Source, passes: Bool) -> Hold? {
        guard doNotDisturb.value, source == .desktop, !passes else { return nil }
        return .doNotDisturb(from: doNotDisturb.from)
    }

    /// feedbackd's events and notification sounds play as in the `silent` profile: Do Not
    /// Disturb first (the stronger word), then event sounds off.
    var quietsDesktopSources: Hold? {
        if doNotDisturb.value { return .doNotDisturb(from: doNotDisturb.from) }
        if !eventSounds.value { return .eventSoundsOff(from: eventSounds.from) }
        return nil
    }
}

/// The theme cued uses when neither the config nor the desktop names one.
enum SoundThemeDefault {
    static let name = "freedesktop"
}
