import CuedProtocol

// What the D-Bus face and the daemon tell each other: the bus's status, a TriggerFeedback
// call, a Notify call seen, the host protocol the bus thread calls, FeedbackEnded's reasons.

/// Where cued stands on the session bus (`status`'s `bus`).
public struct BusStatus: Sendable, Equatable {
    public enum Connection: String, Sendable {
        /// `[dbus] enabled = false`.
        case off
        /// No session bus answers (none in this session, or it went away): retried.
        case absent
        case connected
    }
    /// org.sigxcpu.Feedback: cued's, queued behind another owner (feedbackd), or not asked for.
    public enum Name: String, Sendable { case none, owner, queued }
    public var connection: Connection = .off
    public var feedback: Name = .none
    /// `off`, `watching`, or why not (the bus refused to make cued a monitor).
    public var notifications = "off"
    /// The last failure to connect, while absent.
    public var error: String?
    public init() {}
}

/// A TriggerFeedback call, copied off its message.
public struct FeedbackTrigger: Sendable, Equatable {
    public var id: UInt32
    /// The caller's unique bus name (its feedbacks end when it leaves the bus).
    public var sender: String
    public var appID: String
    public var event: String
    /// -1: each feedback once; 0: loop until ended; N: at most N seconds.
    public var timeout: Int32
    public var profile: String?
    public var important: Bool
    public var soundFile: String?
    public init(id: UInt32, sender: String, appID: String, event: String, timeout: Int32,
                profile: String? = nil, important: Bool = false, soundFile: String? = nil) {
        self.id = id; self.sender = sender; self.appID = appID; self.event = event; self.timeout = timeout
        self.profile = profile; self.important = important; self.soundFile = soundFile
    }
}

/// A Notify call seen on the bus, as far as its sound goes.
public struct NotificationSeen: Sendable, Equatable {
    public var appName: String
    public var soundFile: String?
    public var soundName: String?
    public var desktopEntry: String?
    public var category: String?
    public var suppressSound: Bool
    /// 0 low, 1 normal, 2 critical; nil when the hint is absent (normal).
    public var urgency: Int?
    public init(appName: String, soundFile: String? = nil, soundName: String? = nil, desktopEntry: String? = nil,
                category: String? = nil, suppressSound: Bool = false, urgency: Int? = nil) {
        self.appName = appName; self.soundFile = soundFile; self.soundName = soundName; self.desktopEntry = desktopEntry
        self.category = category; self.suppressSound = suppressSound; self.urgency = urgency
    }
}

/// What the bus asks of the daemon. Called on the bus thread: an implementation
/// hops to the event loop and never blocks.
public protocol DesktopBusHost: Sendable {
    func trigger(_ t: FeedbackTrigger)
    func end(_ id: UInt32)
    /// A valid profile name, set through the `Profile` property by `sender`.
    func setProfile(_ name: String, sender: String)
    func notified(_ n: NotificationSeen)
    /// A bus client left: its feedbacks end (as feedbackd does).
    func left(_ sender: String)
    func statusChanged(_ s: BusStatus)
    /// What the desktop says about sound changed (the Settings portal, the notification server).
    func desktopChanged(_ d: DesktopSound)
}

/// FeedbackEnded's reasons, as feedbackd numbers them (`u` on the bus: -1 is 4294967295).
public enum FeedbackEndReason: Int32, Sendable {
    /// No usable feedback for the event (nothing to play in this profile, no such sound, muted).
    case notFound = -1
    /// Every feedback ran its natural length.
    case natural = 0
    /// The timeout expired.
    case expired = 1
    /// EndFeedback, or cued stopped it (stop, mute).
    case explicit = 2
}

/// A profile's name as a C string that lives forever (the property getter returns it to sd-bus).
enum FeedbackProfiles {
    static func cString(_ p: Profile) -> UnsafePointer<CChar> {
        let s: StaticString = switch p {
        case .full: "full"
        case .quiet: "quiet"
        case .silent: "silent"
        }
        return UnsafeRawPointer(s.utf8Start).assumingMemoryBound(to: CChar.self)
    }
}
