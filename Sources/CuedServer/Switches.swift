import CuedConfig
import CuedProtocol
import Logging

/// The user's switches: mute and profiles, global and per app (`MuteState`,
/// `ProfileState`), as requests, the D-Bus face's Profile property and reloads set
/// them. Each change is logged, saved (the state file) and told: `onChange` (systemd's
/// status line), `onProfileChange` (the bus's Profile property). Admission reads them
/// as they are (`AdmissionView`). Loop-confined.
final class Switches {
    private(set) var mutes: MuteState
    private(set) var profiles: ProfileState
    private let saver: StateSaver?
    private let logger: Logger
    /// Told after a change of the global mute or profile (on the loop).
    var onChange: (() -> Void)?
    /// Told of every change of the global profile (a request, a reload, the bus), on the loop.
    var onProfileChange: ((Profile) -> Void)?

    init(muted: Bool, saved: SavedState, config: Config, saver: StateSaver?, logger: Logger) {
        mutes = MuteState(muted: muted, saved: saved, config: config)
        profiles = ProfileState(saved: saved, config: config)
        self.saver = saver
        self.logger = logger
    }

    var muted: Bool { mutes.muted }
    /// The global profile.
    var profile: Profile { profiles.global }

    func isMuted(app: String?) -> Bool { mutes.isMuted(app: app) }

    /// The profile a play of `app` gets: the stricter of the global one and the app's own.
    func effectiveProfile(app: String?) -> Profile { profiles.effective(app: app) }

    /// The level an event plays at, feedbackd's rule: the lowest of the profile
    /// an app's plays get and the event's hint; an important event from an app
    /// of `[profiles] important_apps` keeps its hint's level.
    func feedbackLevel(app: String?, hint: Profile, important: Bool) -> Profile {
        if profiles.passes(app: app, important: important) { return hint }
        return min(effectiveProfile(app: app), hint)
    }

    /// Sets the global mute; true if it changed (then logged, told and saved).
    @discardableResult
    func setMuted(_ value: Bool) -> Bool {
        guard mutes.setMuted(value) else { return false }
        logger.info(value ? "muted" : "unmuted")
        onChange?()
        save()
        return true
    }

    func setAppMuted(_ app: String, _ value: Bool) -> MuteState.AppChange {
        let change = mutes.setAppMuted(app, value)
        if change == .changed {
            logger.info(value ? "app muted" : "app unmuted", metadata: ["app": "\(app)"])
            save()
        }
        return change
    }

    /// Sets the global profile: logged, told and saved if it changed. Voices already
    /// playing go on; the plays that follow get the new profile.
    func setProfile(_ p: Profile) {
        guard profiles.setGlobal(p) else { return }
        logger.info("profile", metadata: ["profile": "\(p.rawValue)"])
        onChange?()
        save()
        onProfileChange?(p)
    }

    /// `profile app NAME LEVEL|default` (nil: default).
    func setAppProfile(_ app: String, _ value: Profile?) -> MuteState.AppChange {
        let change = profiles.setApp(app, value)
        if change == .changed {
            logger.info("app profile", metadata: ["app": "\(app)", "profile": "\(value?.rawValue ?? "default")"])
            save()
        }
        return change
    }

    /// A reload replaced the config: its app mutes and profiles, and its global mute and
    /// profile where the reload changed them (run-time settings stay).
    func reloaded(old: Config, new: Config) {
        mutes.configure(new)
        profiles.configure(new)
        if let m = MuteState.mutedAfterReload(old: old, new: new) { setMuted(m) }
        if let p = ProfileState.profileAfterReload(old: old, new: new) { setProfile(p) }
    }

    private func save() { saver?.save(profiles.recorded(in: mutes.saved)) }
}
