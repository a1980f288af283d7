import CuedProtocol

/// What the D-Bus face needs of the daemon's profiles.
extension Daemon {
    /// The level an event plays at, feedbackd's rule: the lowest of the profile
    /// an app's plays get and the event's hint; an important event from an app
    /// of `[profiles] important_apps` keeps its hint's level.
    func feedbackLevel(app: String?, hint: Profile, important: Bool) -> Profile {
        if profiles.passes(app: app, important: important) { return hint }
        return min(effectiveProfile(app: app), hint)
    }

    /// The bus's `Profile` property follows the daemon's profile, whoever changes it.
    func connectProfile(to bus: DesktopBus) {
        bus.setInitialProfile(profile.rawValue)
        let previous = onProfileChange
        onProfileChange = { [unowned self] p in
            previous?(p)
            desktop?.profileChanged(p)
            bus.profileChanged(p.rawValue)
        }
    }
}
