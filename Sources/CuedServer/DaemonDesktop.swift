import CuedProtocol

/// What the D-Bus face needs of the daemon's profiles.
extension Daemon {
    /// The bus's `Profile` property follows the daemon's profile, whoever changes it.
    func connectProfile(to bus: DesktopBus) {
        bus.setInitialProfile(switches.profile.rawValue)
        let previous = switches.onProfileChange
        switches.onProfileChange = { [unowned self] p in
            previous?(p)
            desktop?.profileChanged(p)
            bus.profileChanged(p.rawValue)
        }
    }
}

/// Following the desktop's sound settings (`DesktopRules`: what the desktop says, the config's
/// pins). Admission holds back what they govern (`Admission.rules`); here: the theme of a play
/// naming none, the level of feedbackd's events, the changes, and `status`.
extension Daemon {
    /// The settings in force now.
    var desktopRules: DesktopRules { DesktopRules(said: desktop?.desktopSaid ?? DesktopSound(), config: current.config) }

    /// The theme a play that names none is looked up in, when the desktop's is followed.
    var desktopTheme: ThemeChoice? { desktopRules.theme.map { ThemeChoice(name: $0.value) } }

    /// The level a feedbackd event (or a notification) plays at: the switches' (feedbackd's rule),
    /// `silent` while the desktop's Do Not Disturb is on or its event sounds are off, but for an
    /// important event of an app the config allows.
    func feedbackLevel(app: String?, hint: Profile, important: Bool) -> Profile {
        let level = switches.feedbackLevel(app: app, hint: hint, important: important)
        if switches.profiles.passes(app: app, important: important) { return level }
        return desktopRules.quietsDesktopSources != nil ? .silent : level
    }

    /// What the desktop says changed (the bus thread's news, on the loop): it applies to the plays
    /// that follow. Feedbacks still sounding end when the desktop goes quiet, as in `silent`.
    func desktopChanged(from old: DesktopSound, to d: DesktopSound) {
        let before = DesktopRules(said: old, config: current.config)
        let after = DesktopRules(said: d, config: current.config)
        let values = { (r: DesktopRules) in [r.themeInForce.value, "\(r.eventSounds.value)", "\(r.inputFeedbackSounds.value)", "\(r.doNotDisturb.value)"] }
        guard values(after) != values(before) else { return }
        logger.info("desktop settings", metadata: [
            "theme": "\(after.themeInForce.value)", "event_sounds": "\(after.eventSounds.value)",
            "input_feedback_sounds": "\(after.inputFeedbackSounds.value)", "do_not_disturb": "\(after.doNotDisturb.value)",
            "portal": "\(d.portal)"])
        if before.quietsDesktopSources == nil && after.quietsDesktopSources != nil { desktop?.profileChanged(.silent) }
    }

    /// `status`'s `desktop`.
    var desktopStatus: Status.Desktop {
        let r = desktopRules
        var s = Status.Desktop()
        s.portal = current.config.desktop.follow ? (desktop.map(\.desktopSaid.portal) ?? "off (the bus is off: [dbus] enabled = false)")
            : "off ([desktop] follow = false)"
        s.theme = .init(r.themeInForce.value, from: r.themeInForce.from)
        s.eventSounds = .init(r.eventSounds.value, from: r.eventSounds.from)
        s.inputFeedbackSounds = .init(r.inputFeedbackSounds.value, from: r.inputFeedbackSounds.from)
        s.doNotDisturb = .init(r.doNotDisturb.value, from: r.doNotDisturb.from)
        return s
    }
}
