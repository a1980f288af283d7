import CuedProtocol

/// Profiles on the daemon: the global one (read and set by requests, a reload,
/// and whatever else holds the daemon, e.g. a D-Bus `Profile` property), the
/// per-app ones, and what they make of a play (`Admission`). On the loop, as
/// the rest of the daemon.
extension Daemon {
    /// The global profile.
    public var profile: Profile { profiles.global }

    /// Sets the global profile: logged, saved, systemd's status line updated, and
    /// `onProfileChange` told, if it changed. Voices already playing go on; the
    /// plays that follow get the new profile.
    public func setProfile(_ p: Profile) {
        guard profiles.setGlobal(p) else { return }
        logger.info("profile", metadata: ["profile": "\(p.rawValue)"])
        notify(["STATUS=" + statusLine()])
        save()
        onProfileChange?(p)
    }

    /// The profile a play of `app` gets: the stricter of the global one and the app's own.
    func effectiveProfile(app: String?) -> Profile { profiles.effective(app: app) }

    /// `profile app NAME LEVEL|default`: the reply says the profile the app's plays get now.
    func setAppProfile(_ app: String, _ choice: ProfileChoice) -> Reply {
        let value: Profile? = if case .profile(let p) = choice { p } else { nil }
        switch profiles.setApp(app, value) {
        case .tooMany:
            return .err(.tooMany, "at most \(SavedState.maxAppProfiles) apps can have a profile set at run time; "
                        + "set one back to default first")
        case .changed:
            logger.info("app profile", metadata: ["app": "\(app)", "profile": "\(choice.word)"])
            save()
        case .unchanged:
            break
        }
        return .ok("\(app) \(effectiveProfile(app: app).rawValue)")
    }

    /// What mute and profile make of a play by `app` with `options`.
    /// `trusted`: cued itself decided the play is important (a critical notification in silent,
    /// `critical_in_silent`): it passes the profile as an allow-listed app's would.
    func admission(_ app: String?, _ options: PlayOptions, trusted: Bool = false) -> Admission {
        if trusted && options.important && !isMuted(app: app) { return .play(gainDB: 0) }
        return Admission(muted: isMuted(app: app), profiles: profiles, app: app, important: options.important)
    }
}
