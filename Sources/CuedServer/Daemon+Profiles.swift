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
            return Replies.tooManyAppProfiles
        case .changed:
            logger.info("app profile", metadata: ["app": "\(app)", "profile": "\(choice.word)"])
            save()
        case .unchanged:
            break
        }
        return .ok("\(app) \(effectiveProfile(app: app).rawValue)")
    }
}
