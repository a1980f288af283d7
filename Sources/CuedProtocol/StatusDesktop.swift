/// `status`'s `desktop`: the desktop's sound settings cued follows, each with where it comes from.
extension Status {
    public struct Desktop: Sendable, Equatable {
        /// A setting in force and where it comes from (`config: [desktop] event_sounds`,
        /// `org.gnome.desktop.sound event-sounds`, `default: …`).
        public struct Setting<Value: Sendable & Equatable>: Sendable, Equatable {
            public var value: Value
            public var from: String
            public init(_ value: Value, from: String) { self.value = value; self.from = from }
        }

        /// The Settings portal: `following`, `reading`, or why not (`absent: …`, `error: …`, `off …`).
        public var portal = "off"
        public var theme = Setting("freedesktop", from: "default")
        public var eventSounds = Setting(true, from: "default")
        public var inputFeedbackSounds = Setting(true, from: "default")
        public var doNotDisturb = Setting(false, from: "default")
        public init() {}
    }

    enum DesktopKey: String {
        case portal, theme, eventSounds = "event_sounds", inputFeedbackSounds = "input_feedback_sounds"
        case doNotDisturb = "do_not_disturb", value, from
    }
}

extension Status.Desktop {
    var json: JSON {
        typealias K = Status.DesktopKey
        func setting(_ s: Setting<Bool>) -> JSON { .object([(K.value.rawValue, .bool(s.value)), (K.from.rawValue, .string(s.from))]) }
        return .object([
            (K.portal.rawValue, .string(portal)),
            (K.theme.rawValue, .object([(K.value.rawValue, .string(theme.value)), (K.from.rawValue, .string(theme.from))])),
            (K.eventSounds.rawValue, setting(eventSounds)),
            (K.inputFeedbackSounds.rawValue, setting(inputFeedbackSounds)),
            (K.doNotDisturb.rawValue, setting(doNotDisturb)),
        ])
    }

    init(json j: JSON?) {
        typealias K = Status.DesktopKey
        self.init()
        func str(_ j: JSON?) -> String? { if case .string(let s)? = j { return s }; return nil }
        func bool(_ j: JSON?, _ k: K, _ fallback: Setting<Bool>) -> Setting<Bool> {
            let o = j?[k.rawValue]
            guard case .bool(let b)? = o?[K.value.rawValue] else { return fallback }
            return Setting(b, from: str(o?[K.from.rawValue]) ?? "")
        }
        portal = str(j?[K.portal.rawValue]) ?? portal
        if let name = str(j?[K.theme.rawValue]?[K.value.rawValue]) {
            theme = Setting(name, from: str(j?[K.theme.rawValue]?[K.from.rawValue]) ?? "")
        }
        eventSounds = bool(j, .eventSounds, eventSounds)
        inputFeedbackSounds = bool(j, .inputFeedbackSounds, inputFeedbackSounds)
        doNotDisturb = bool(j, .doNotDisturb, doNotDisturb)
    }
}
