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

    /// A `sound-file` hint as a path: a `file://` URI (host empty or `localhost`, %-escapes
    /// decoded) or a plain path. Anything else comes back as it is (and is refused later).
    static func path(fromURI s: String) -> String {
        guard s.hasPrefix("file://") else { return s }
        var rest = Substring(s.dropFirst(7))
        if rest.hasPrefix("localhost/") { rest = rest.dropFirst(9) }
        guard rest.hasPrefix("/") else { return s }
        var bytes: [UInt8] = []
        var u = Array(rest.utf8)[...]
        while let c = u.popFirst() {
            if c == UInt8(ascii: "%"), u.count >= 2, let h = hex(u[u.startIndex]), let l = hex(u[u.startIndex + 1]) {
                bytes.append(h << 4 | l)
                u = u.dropFirst(2)
            } else {
                bytes.append(c)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func hex(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    init(now: UInt64) { bucket = TokenBucket(rate: Self.perSecond, burst: Self.burst, now: now) }

    mutating func decide(_ n: NotificationSeen, setting: NotificationSetting, silent: Bool, now: UInt64) -> Decision {
        if n.suppressSound { return .none("suppress-sound") }
        let appSound = setting.apps[n.appName] ?? n.desktopEntry.flatMap { setting.apps[$0] }
        if appSound == "" { return .none("the app's sound is \"\" in [notifications.apps]") }
        let urgency = n.urgency ?? 1
        let sound: String
        if let f = n.soundFile, !f.isEmpty {
            sound = Self.path(fromURI: f)
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
