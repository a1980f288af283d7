import CuedConfig
import CuedCore
import CuedProtocol

/// Which sound, if any, a desktop notification makes: a pure value, tested
/// with a fake clock.
///
/// The rules, in order:
/// 1. `suppress-sound` true: none.
/// 2. The app's entry in `[notifications.apps]` (by the Notify call's app
///    name, else its `desktop-entry` hint) set to "": none, whatever the hints.
/// 3. The `sound-file` hint, else the `sound-name` hint, else the app's entry,
///    else the urgency's sound (`low`, `normal`, `critical`; "" for none).
/// 4. The profile: `silent` (do not disturb) lets only critical ones through
///    (`critical_in_silent`, on by default); `quiet` plays them quieter, as every cue.
/// 5. Bursts: at most `burst` sounds at once, then one a second; the rest are
///    dropped (the notification still shows: cued only watches). 50
///    notifications in a second make 4 sounds.
struct NotificationPolicy {
    static let burst = 3.0
    static let perSecond = 1.0

    enum Decision: Equatable {
        /// A cue or sound-theme name, or an absolute path; `critical` lets it through silent.
        case play(String, critical: Bool)
        case none(String)
    }

    private var bucket: TokenBucket

    init(now: UInt64) { bucket = TokenBucket(rate: Self.perSecond, burst: Self.burst, now: now) }

    mutating func decide(_ n: NotificationSeen, setting: NotificationSetting, silent: Bool, now: UInt64) -> Decision {
        if n.suppressSound { return .none("suppress-sound") }
        let appSound = setting.apps[n.appName] ?? n.desktopEntry.flatMap { setting.apps[$0] }
        if appSound == "" { return .none("the app's sound is \"\" in [notifications.apps]") }
        let urgency = n.urgency ?? 1
        let sound: String
        if let f = n.soundFile, !f.isEmpty {
            sound = f.hasPrefix("file://") ? String(f.dropFirst(7)) : f
        } else if let name = n.soundName, !name.isEmpty {
            sound = name
        } else if let s = appSound {
            sound = s
        } else {
            sound = setting.sound(urgency: urgency)
        }
        if sound.isEmpty { return .none("no sound for this urgency") }
        let critical = urgency >= 2
        if silent && !(critical && setting.criticalInSilent) { return .none("the profile is silent") }
        guard bucket.take(now: now) else { return .none("burst: more than \(Int(Self.burst)) notification sounds at once") }
        return .play(sound, critical: critical)
    }
}
