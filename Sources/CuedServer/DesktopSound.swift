import CuedProtocol

/// One of the desktop's settings as the desktop said it, and where (`org.gnome.desktop.sound
/// event-sounds`), for `status` and `cuectl why`.
public struct Said<Value: Sendable & Equatable>: Sendable, Equatable {
    public var value: Value
    public var from: String
    public init(_ value: Value, from: String) { self.value = value; self.from = from }
}

/// What the desktop says about sound; each nil where it says nothing of it.
public struct DesktopSound: Sendable, Equatable {
    /// The sound theme (GNOME's theme-name, KDE's [Sounds] Theme).
    public var theme: Said<String>?
    /// Event sounds on (GNOME's event-sounds, KDE's [Sounds] Enable).
    public var eventSounds: Said<Bool>?
    /// Input-feedback sounds on (GNOME's input-feedback-sounds).
    public var inputFeedbackSounds: Said<Bool>?
    /// Do Not Disturb (GNOME's show-banners false, the notification server's Inhibited).
    public var doNotDisturb: Said<Bool>?
    /// The Settings portal: `following`, `reading`, or why not (`absent: …`, `error: …`, `off …`).
    public var portal = "off"
    /// What WirePlumber keeps: the System Sounds volume it restores onto cued's stream, the
    /// sinks' volumes (nil: no state read).
    public var wirePlumber: WirePlumberState?
    public init() {}
}

/// The desktop's settings as the Settings portal and the notification server give them,
/// turned into a `DesktopSound`: a pure value (the bus thread feeds it), tested without a bus.
///
/// Read from the portal (xdg-desktop-portal, which asks the desktop's backend): GNOME's
/// `org.gnome.desktop.sound` (`theme-name`, `event-sounds`, `input-feedback-sounds`), served by
/// xdg-desktop-portal-gtk and -gnome; `org.gnome.desktop.notifications show-banners` (false: Do
/// Not Disturb) where a backend serves it (GNOME's two do not); KDE's `org.kde.kdeglobals.Sounds`
/// (`Theme`, `Enable`: strings), served by xdg-desktop-portal-kde. And the notification server's
/// `Inhibited` property (KDE Plasma's Do Not Disturb). Where both desktops' keys are there
/// (a KDE session whose portal also runs GTK's backend), the running desktop's win
/// (`XDG_CURRENT_DESKTOP`).
struct PortalSettings: Equatable {
    static let gnomeSound = "org.gnome.desktop.sound"
    static let gnomeNotifications = "org.gnome.desktop.notifications"
    static let kdeSounds = "org.kde.kdeglobals.Sounds"
    /// The namespaces asked of ReadAll.
    static let namespaces = [gnomeSound, gnomeNotifications, kdeSounds]
    /// Where KDE's Do Not Disturb is read.
    static let notificationServer = "org.freedesktop.Notifications"

    enum Value: Equatable {
        case string(String)
        case bool(Bool)
    }

    /// KDE's keys win over GNOME's (a KDE session).
    var preferKDE = false
    /// What the portal said, by namespace and key.
    private(set) var values: [String: [String: Value]] = [:]
    /// The notification server's Inhibited; nil: no server answers it.
    var inhibited: Bool?
    /// WirePlumber's state (WirePlumberWatch.swift).
    var wirePlumber: WirePlumberState?
    var portal = "off"

    init(preferKDE: Bool = false) { self.preferKDE = preferKDE }

    /// Whether the desktop that runs is KDE's, by `XDG_CURRENT_DESKTOP` (`KDE`, or a list naming it).
    static func isKDE(environment env: [String: String]) -> Bool {
        (env["XDG_CURRENT_DESKTOP"] ?? "").split(separator: ":").contains { $0.uppercased() == "KDE" }
    }

    /// One setting, from a SettingChanged signal; only the namespaces read are kept.
    mutating func set(_ namespace: String, _ key: String, _ value: Value) {
        guard Self.namespaces.contains(namespace) else { return }
        values[namespace, default: [:]][key] = value
    }

    /// A ReadAll reply: what it holds replaces all that was read (a key gone is forgotten).
    mutating func replaceAll(_ settings: [(namespace: String, key: String, value: Value)]) {
        values = [:]
        for s in settings { set(s.namespace, s.key, s.value) }
    }

    private func string(_ ns: String, _ key: String) -> Said<String>? {
        guard case .string(let s)? = values[ns]?[key], !s.isEmpty else { return nil }
        return Said(s, from: "\(ns) \(key)")
    }

    /// A boolean: GSettings' own, or KConfig's text ("true", "false", "1", "0"…).
    private func bool(_ ns: String, _ key: String) -> Said<Bool>? {
        switch values[ns]?[key] {
        case .bool(let b)?: return Said(b, from: "\(ns) \(key)")
        case .string(let s)?:
            switch s.lowercased() {
            case "true", "1", "yes", "on": return Said(true, from: "\(ns) \(key)")
            case "false", "0", "no", "off": return Said(false, from: "\(ns) \(key)")
            default: return nil
            }
        default: return nil
        }
    }

    private func first<V>(_ gnome: V?, _ kde: V?) -> V? { preferKDE ? kde ?? gnome : gnome ?? kde }

    var sound: DesktopSound {
        var d = DesktopSound()
        d.portal = portal
        d.wirePlumber = wirePlumber
        // A theme name is a label (it names a directory); anything else is not followed.
        d.theme = first(string(Self.gnomeSound, "theme-name"), string(Self.kdeSounds, "Theme")).flatMap { Label.isValid($0.value) ? $0 : nil }
        d.eventSounds = first(bool(Self.gnomeSound, "event-sounds"), bool(Self.kdeSounds, "Enable"))
        d.inputFeedbackSounds = bool(Self.gnomeSound, "input-feedback-sounds")
        let banners = bool(Self.gnomeNotifications, "show-banners").map { Said(!$0.value, from: $0.from + " (false: Do Not Disturb)") }
        let inhibit = inhibited.map { Said($0, from: "\(Self.notificationServer) Inhibited") }
        // Either desktop's switch on is Do Not Disturb; else whichever says it is off.
        d.doNotDisturb = [banners, inhibit].compactMap { $0 }.first { $0.value } ?? banners ?? inhibit
        return d
    }
}
