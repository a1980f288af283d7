import CuedProtocol

/// What the D-Bus face needs of the daemon's profiles.
extension Daemon {
    /// The level an event plays at, feedbackd's rule: the lowest of the global
    /// profile, the app's and the event's hint; an important event from an app
    /// allowed to send them keeps its hint's level.
    func feedbackLevel(app: String?, hint: FeedbackTheme.Level, important: Bool) -> FeedbackTheme.Level {
        hint  // PROFILES: replaced once profiles land
    }

    /// Marks a play as important (it may sound in `silent`): for an allow-listed
    /// app, or, `trusted`, when cued itself decided (a critical notification).
    func markImportant(_ options: inout PlayOptions, _ important: Bool, trusted: Bool = false) {}

    func setProfileByName(_ name: String) {}

    /// The bus's `Profile` property follows the daemon's profile, whoever changes it.
    func connectProfile(to bus: DesktopBus) {}
}
