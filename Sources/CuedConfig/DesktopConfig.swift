import CuedProtocol

/// `[dbus]`: cued on the session bus. Read at start (a change takes effect at
/// the next start).
public struct BusSetting: Sendable, Equatable {
    /// Connect to the session bus at all (when there is one).
    public var enabled = true
    /// Own org.sigxcpu.Feedback, feedbackd's interface (queued behind feedbackd if it runs).
    public var feedback = true
    /// Take org.sigxcpu.Feedback from its owner (feedbackd's `--replace`).
    public var replace = false
    /// The feedbackd theme events resolve through (feedbackd's `theme` setting).
    public var feedbackTheme = "default"
    public init() {}
}

/// `[desktop]`: whether cued follows the desktop's sound settings (the Settings portal), and
/// each one pinned instead (nil: follow the desktop). The theme is pinned by the top-level `theme`.
public struct DesktopSetting: Sendable, Equatable {
    /// Read the desktop's settings at all (read at start).
    public var follow = true
    public var eventSounds: Bool?
    public var inputFeedbackSounds: Bool?
    public var doNotDisturb: Bool?
    public init() {}

    static let keys = ["follow", "event_sounds", "input_feedback_sounds", "do_not_disturb"]
}

/// `[notifications]`: sounds for desktop notifications (opt-in).
public struct NotificationSetting: Sendable, Equatable {
    /// Watch org.freedesktop.Notifications.Notify calls (read at start).
    public var enabled = false
    /// The sound for a notification without a sound hint, by urgency; "" for none.
    /// A cue or sound-theme name, or an absolute file path.
    public var low = ""
    public var normal = "message-new-instant"
    public var critical = "dialog-warning"
    /// In the `silent` profile (do not disturb), whether critical notifications still sound.
    public var criticalInSilent = true
    /// A sound per app (the Notify call's app name, or its desktop-entry hint), replacing the urgency's; "" for none.
    public var apps: [String: String] = [:]
    public init() {}

    /// The urgency's sound (0 low, 1 normal, 2 critical).
    public func sound(urgency: Int) -> String { urgency <= 0 ? low : urgency == 1 ? normal : critical }
}

/// A notification sound's name: empty, a cue or sound-theme name, or an absolute path.
enum NotificationSoundSyntax {
    static func problem(_ s: String) -> String? {
        if s.isEmpty || Label.isValid(s) { return nil }
        if s.hasPrefix("/") { return s.utf8.count <= 4096 ? nil : "a path is at most 4096 bytes" }
        return "'\(s)' is not a sound: a cue or sound-theme name (letters, digits, . _ -), an absolute file path, or \"\" for none"
    }
}

extension Checker {
    mutating func readBus(_ v: TOMLNode, into c: inout Config) {
        guard let t = table(v, "dbus") else { return }
        for field in t.keys.sorted() {
            let k = "dbus.\(field)", f = t[field]!
            lines[k] = f.line
            switch field {
            case "enabled": c.dbus.enabled = bool(f, k) ?? c.dbus.enabled
            case "feedback": c.dbus.feedback = bool(f, k) ?? c.dbus.feedback
            case "replace": c.dbus.replace = bool(f, k) ?? c.dbus.replace
            case "feedback_theme":
                guard let s = string(f, k) else { break }
                if Label.isValid(s) { c.dbus.feedbackTheme = s } else { fail(k, f, Label.problem(s, what: "theme")) }
            default: unknown(k, f, expected: ["enabled", "feedback", "replace", "feedback_theme"])
            }
        }
    }

    mutating func readDesktop(_ v: TOMLNode, into c: inout Config) {
        guard let t = table(v, "desktop") else { return }
        for field in t.keys.sorted() {
            let k = "desktop.\(field)", f = t[field]!
            lines[k] = f.line
            switch field {
            case "follow": c.desktop.follow = bool(f, k) ?? c.desktop.follow
            case "event_sounds": c.desktop.eventSounds = followOrPinned(f, k)
            case "input_feedback_sounds": c.desktop.inputFeedbackSounds = followOrPinned(f, k)
            case "do_not_disturb": c.desktop.doNotDisturb = followOrPinned(f, k)
            default: unknown(k, f, expected: DesktopSetting.keys)
            }
        }
    }

    /// `"follow"` (nil), or true or false: the setting pinned.
    private mutating func followOrPinned(_ f: TOMLNode, _ k: String) -> Bool? {
        switch f.value {
        case .bool(let b): return b
        case .string("follow"): return nil
        default:
            fail(k, f, "expected \"follow\", true or false, found \(f.value.typeName)")
            return nil
        }
    }

    mutating func readNotifications(_ v: TOMLNode, into c: inout Config) {
        guard let t = table(v, "notifications") else { return }
        for field in t.keys.sorted() {
            let k = "notifications.\(field)", f = t[field]!
            lines[k] = f.line
            switch field {
            case "enabled": c.notifications.enabled = bool(f, k) ?? c.notifications.enabled
            case "critical_in_silent": c.notifications.criticalInSilent = bool(f, k) ?? c.notifications.criticalInSilent
            case "low", "normal", "critical":
                guard let s = sound(f, k) else { break }
                switch field {
                case "low": c.notifications.low = s
                case "normal": c.notifications.normal = s
                default: c.notifications.critical = s
                }
            case "apps":
                guard let apps = table(f, k) else { break }
                for name in apps.keys.sorted() {
                    let ak = "\(k).\(quoted(name))", node = apps[name]!
                    lines[ak] = node.line
                    guard !name.isEmpty, name.utf8.count <= 128 else { fail(ak, node, "an app name is 1 to 128 bytes"); continue }
                    if let s = sound(node, ak) { c.notifications.apps[name] = s }
                }
            default: unknown(k, f, expected: ["enabled", "low", "normal", "critical", "critical_in_silent", "apps"])
            }
        }
    }

    private mutating func sound(_ f: TOMLNode, _ k: String) -> String? {
        guard let s = string(f, k) else { return nil }
        if let problem = NotificationSoundSyntax.problem(s) { fail(k, f, problem); return nil }
        return s.hasPrefix("/") ? expand(s) : s
    }
}
