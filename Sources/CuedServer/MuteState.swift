import CuedConfig
import CuedProtocol

/// Mute, global and per app: three sources and how they combine. The global
/// mute wins; then a run-time app mute (`mute app NAME`); then the config's
/// `[apps.NAME] muted`. A run-time app mute is kept only where it differs from
/// the config, for at most `SavedState.maxAppMutes` apps; `saved` is what the
/// state file holds. A value: the daemon saves it when a change says so.
struct MuteState: Equatable {
    private(set) var muted: Bool
    /// Run-time per-app mutes, by app; they override the config's.
    private(set) var appMutes: [String: Bool]
    /// The config's `[apps.NAME] muted`, for the apps where it is set.
    private(set) var configured: [String: Bool]

    init(muted: Bool, appMutes: [String: Bool] = [:], configured: [String: Bool] = [:]) {
        self.muted = muted
        self.appMutes = appMutes
        self.configured = configured
    }

    init(muted: Bool, saved: SavedState, config: Config) {
        self.init(muted: muted, appMutes: saved.appMutes, configured: Self.configured(config))
    }

    static func configured(_ config: Config) -> [String: Bool] { config.apps.compactMapValues(\.muted) }

    /// After a reload: the new config's app mutes (run-time ones stay).
    mutating func configure(_ config: Config) { configured = Self.configured(config) }

    /// The global mute a reload sets: the config's `muted`, only if the reload changed it.
    static func mutedAfterReload(old: Config, new: Config) -> Bool? {
        guard let m = new.muted, m != old.muted else { return nil }
        return m
    }

    func isMuted(app: String?) -> Bool {
        muted || app.map { appMuted($0) } ?? false
    }

    /// The app's own mute, regardless of the global one.
    func appMuted(_ app: String) -> Bool {
        appMutes[app] ?? configured[app] ?? false
    }

    /// True if the global mute changed (and is to be saved).
    mutating func setMuted(_ value: Bool) -> Bool {
        defer { muted = value }
        return muted != value
    }

    enum AppChange: Equatable {
        case changed, unchanged
        /// `maxAppMutes` apps are muted or unmuted at run time already.
        case tooMany
    }

    mutating func setAppMuted(_ app: String, _ value: Bool) -> AppChange {
        // Only what differs from the config is kept (and saved).
        let keep: Bool? = value == (configured[app] ?? false) ? nil : value
        if keep != nil, appMutes[app] == nil, appMutes.count >= SavedState.maxAppMutes { return .tooMany }
        let old = appMutes[app]
        appMutes[app] = keep
        return old == keep ? .unchanged : .changed
    }

    var saved: SavedState { SavedState(muted: muted, appMutes: appMutes) }
}
