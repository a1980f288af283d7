import CuedConfig
import CuedProtocol

/// Profiles, global and per app, and what they make of a play. An app's own
/// profile is its run-time one (`profile app NAME LEVEL`), else the config's
/// `[apps.NAME] profile`, else `full`; the profile its plays get is the stricter
/// of the global one and its own (feedbackd's rule: an app can only lower it).
/// Run-time app profiles are kept as set (`default` forgets one), for at most
/// `SavedState.maxAppProfiles` apps. A value: the daemon saves it when a change
/// says so.
struct ProfileState: Equatable {
    private(set) var global: Profile
    /// Run-time per-app profiles, by app; they override the config's.
    private(set) var appProfiles: [String: Profile]
    /// The config's `[apps.NAME] profile`, for the apps where it is set.
    private(set) var configured: [String: Profile]
    /// The config's `[profiles]`.
    private(set) var settings: ProfileSettings

    init(global: Profile = .full, appProfiles: [String: Profile] = [:], configured: [String: Profile] = [:],
         settings: ProfileSettings = ProfileSettings()) {
        self.global = global
        self.appProfiles = appProfiles
        self.configured = configured
        self.settings = settings
    }

    /// At start: the saved global profile, else the config's, else `full`.
    init(saved: SavedState, config: Config) {
        self.init(global: saved.profile ?? config.profile ?? .full, appProfiles: saved.appProfiles,
                  configured: Self.configured(config), settings: config.profiles)
    }

    static func configured(_ config: Config) -> [String: Profile] { config.apps.compactMapValues(\.profile) }

    /// After a reload: the new config's app profiles and `[profiles]` (run-time ones stay).
    mutating func configure(_ config: Config) {
        configured = Self.configured(config)
        settings = config.profiles
    }

    /// The global profile a reload sets: the config's `profile`, only if the reload changed it.
    static func profileAfterReload(old: Config, new: Config) -> Profile? {
        guard let p = new.profile, p != old.profile else { return nil }
        return p
    }

    /// The app's own profile, regardless of the global one.
    func appProfile(_ app: String) -> Profile {
        appProfiles[app] ?? configured[app] ?? .full
    }

    /// The app's own profile where the run time or the config sets one (for `status`).
    func appProfileIfSet(_ app: String) -> Profile? {
        appProfiles[app] ?? configured[app]
    }

    /// The profile a play of `app` gets (a connection without an app: the global one).
    func effective(app: String?) -> Profile {
        min(global, app.map(appProfile) ?? .full)
    }

    /// An `important` voice of an app the config allows passes every profile, as
    /// feedbackd's allow-important does; for any other app the flag is ignored.
    func passes(app: String?, important: Bool) -> Bool {
        important && app.map { settings.importantApps.contains($0) } ?? false
    }

    /// True if the global profile changed (and is to be saved).
    mutating func setGlobal(_ value: Profile) -> Bool {
        defer { global = value }
        return global != value
    }

    /// Sets (or, with nil, forgets) the app's run-time profile.
    mutating func setApp(_ app: String, _ value: Profile?) -> MuteState.AppChange {
        if value != nil, appProfiles[app] == nil, appProfiles.count >= SavedState.maxAppProfiles { return .tooMany }
        let old = appProfiles[app]
        appProfiles[app] = value
        return old == value ? .unchanged : .changed
    }

    /// `state` with the profiles written in: what the state file holds.
    func recorded(in state: SavedState) -> SavedState {
        var s = state
        s.profile = global
        s.appProfiles = appProfiles
        return s
    }
}
