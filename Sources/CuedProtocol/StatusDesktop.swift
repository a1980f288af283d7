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
        /// The volume the sound server keeps for cued's role (nil: none kept, or not read);
        /// `open` and `nodeID` unused.
        public var systemSounds: StreamVolume?
        public init() {}
    }

    enum DesktopKey: String {
        case portal, theme, eventSounds = "event_sounds", inputFeedbackSounds = "input_feedback_sounds"
        case doNotDisturb = "do_not_disturb", value, from, systemSounds = "system_sounds"
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
            (K.systemSounds.rawValue, systemSounds?.keptJSON ?? .null),
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
        if let s = j?[K.systemSounds.rawValue], s != .null { systemSounds = Status.StreamVolume(json: s) }
    }
}

/// `status`'s `sink.stream` and `desktop.system_sounds`: cued's own stream as the sound server's
/// graph sets it, and the volume the server keeps for its role (GNOME's System Sounds).
extension Status {
    public struct StreamVolume: Sendable, Equatable {
        /// A native stream is open now (what follows is as last seen, if ever).
        public var open = false
        /// Its node on the graph while open (`wpctl set-volume ID 1`).
        public var nodeID: Int?
        /// Linear gains (1: unity); nil where cued cannot tell.
        public var volume: Double?
        public var mute: Bool?
        public var channelVolumes: [Double] = []
        /// Where they come from, when cued can tell; else why it cannot.
        public var from: String?
        public init() {}
    }

    enum StreamKey: String {
        case open, nodeID = "node_id", volume, mute, channelVolumes = "channel_volumes", from
    }
}

extension Status.StreamVolume {
    /// A volume the server keeps (no stream, no node): what `json` has but `open` and `node_id`.
    var keptJSON: JSON {
        guard case .object(let pairs) = json else { return .null }
        return .object(pairs.filter { $0.0 != Status.StreamKey.open.rawValue && $0.0 != Status.StreamKey.nodeID.rawValue })
    }

    var json: JSON {
        typealias K = Status.StreamKey
        return .object([
            (K.open.rawValue, .bool(open)), (K.nodeID.rawValue, nodeID.map { .number(Double($0)) } ?? .null),
            (K.volume.rawValue, volume.map(JSON.number) ?? .null), (K.mute.rawValue, mute.map(JSON.bool) ?? .null),
            (K.channelVolumes.rawValue, .array(channelVolumes.map(JSON.number))), (K.from.rawValue, from.map(JSON.string) ?? .null),
        ])
    }

    init(json j: JSON?) {
        typealias K = Status.StreamKey
        self.init()
        func num(_ k: K) -> Double? { if case .number(let d)? = j?[k.rawValue], d.isFinite { return d }; return nil }
        if case .bool(let b)? = j?[K.open.rawValue] { open = b }
        nodeID = num(.nodeID).map { Int($0) }
        volume = num(.volume)
        if case .bool(let b)? = j?[K.mute.rawValue] { mute = b }
        if case .array(let a)? = j?[K.channelVolumes.rawValue] { channelVolumes = a.compactMap { if case .number(let d) = $0 { d } else { nil } } }
        if case .string(let s)? = j?[K.from.rawValue] { from = s }
    }
}
