import CuedProtocol
import CuedSystem

/// A volume the sound server keeps and restores (WirePlumber's state): linear gains, nil
/// where the entry does not say.
public struct KeptVolume: Sendable, Equatable {
    public var volume: Double?
    public var mute: Bool?
    public var channelVolumes: [Double] = []
    public init(volume: Double? = nil, mute: Bool? = nil, channelVolumes: [Double] = []) {
        self.volume = volume; self.mute = mute; self.channelVolumes = channelVolumes
    }

    /// Whether it silences what it applies to: muted, or every volume at 0.
    public var silenced: Bool {
        mute == true || volume == 0 || (!channelVolumes.isEmpty && channelVolumes.allSatisfy { $0 == 0 })
    }
}

/// What WirePlumber keeps that decides whether cued is heard, read from its state files
/// (`$XDG_STATE_HOME/wireplumber`, key files): a pure parse, tested without WirePlumber.
/// WirePlumber 0.4 keeps stream volumes in `restore-stream`, one field a key
/// (`Output/Audio:media.role:Notification:volume=1.0`); 0.5 in `stream-properties`, one JSON
/// object a key (`Output/Audio:media.role:Notification={"mute":true, "volume":0.2,
/// "channelVolumes":[…], "channelMap":[…]}`), with no migration from 0.4's file: where 0.5's
/// file says something of an entry, it is the one in force (a 0.4 file beside it is a leftover).
///
/// - The desktop's "System Sounds" volume: restore-stream's entry for the Notification role
///   (`Output/Audio:media.role:Notification`, scripts/restore-stream.lua's `findSuitableKey`),
///   which WirePlumber restores onto every new stream of that role, cued's native one among
///   them (its `media.role` is Notification). GNOME Settings' System Sounds slider and
///   pavucontrol write it through pipewire-pulse's stream-restore
///   (`sink-input-by-media-role:event`, into the `route-settings` metadata), which
///   WirePlumber saves about a second later.
/// - The volume of the sinks it keeps there (`Audio/Sink:node.name:NAME`: null and virtual
///   sinks; a sound card's route volume lives elsewhere and is not read), and the default sink
///   the user chose (default-nodes' `default.configured.audio.sink`).
public struct WirePlumberState: Sendable, Equatable {
    public static let notificationKey = "Output/Audio:media.role:Notification"
    static let sinkPrefix = "Audio/Sink:node.name:"
    /// The files read, in its state directory.
    static let files = ["restore-stream", "default-nodes", "stream-properties"]
    /// Each file is small (an entry per stream and sink it ever saw); bigger is not read.
    static let maxBytes = 1 << 20
    /// Sinks kept at most.
    static let maxSinks = 64

    public var notificationRole: KeptVolume?
    /// The file the role's entry was read from: `restore-stream` (0.4) or `stream-properties` (0.5).
    public var notificationFile = "restore-stream"
    public var sinks: [String: KeptVolume] = [:]
    public var defaultSink: String?
    /// Where they were read.
    public var directory = ""
    public init() {}

    /// Where the role's entry was read, in words.
    public var notificationWhere: String {
        "WirePlumber's \(notificationFile) key \(Self.notificationKey), \(directory)/\(notificationFile)"
    }

    /// Its state directory (its `wp_get_xdg_state_dir`).
    static func directory(environment env: [String: String]) -> String {
        let base = env["XDG_STATE_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? Path.join(Environment.home(env), ".local/state")
        return base + "/wireplumber"
    }

    /// The sink cued's sound goes to, as far as the state says: the target cued names, else
    /// the default the user chose, else the only sink kept.
    public func sink(target: String?) -> (name: String, volume: KeptVolume)? {
        let name = target ?? defaultSink ?? (sinks.count == 1 ? sinks.keys.first : nil)
        guard let name, let v = sinks[name] else { return nil }
        return (name, v)
    }

    /// The state in the files' text (nil: a file that is not there).
    static func parse(restoreStream: String?, defaultNodes: String?, streamProperties: String? = nil, directory: String) -> WirePlumberState {
        var s = WirePlumberState()
        s.directory = directory
        var role = KeptVolume(), roleSaid = false
        for (section, name, value) in entries(restoreStream ?? "") where section == "restore-stream" {
            if name.hasPrefix(notificationKey + ":") {
                roleSaid = set(&role, field: name.dropFirst(notificationKey.count + 1), value) || roleSaid
            } else if name.hasPrefix(sinkPrefix), let colon = name.lastIndex(of: ":"), colon > name.index(name.startIndex, offsetBy: sinkPrefix.count) {
                let sink = String(name[name.index(name.startIndex, offsetBy: sinkPrefix.count)..<colon])
                guard s.sinks[sink] != nil || s.sinks.count < maxSinks else { continue }
                var v = s.sinks[sink] ?? KeptVolume()
                if set(&v, field: name[name.index(after: colon)...], value) { s.sinks[sink] = v }
            }
        }
        if roleSaid { s.notificationRole = role }
        for (section, name, value) in entries(defaultNodes ?? "") where section == "default-nodes" && name == "default.configured.audio.sink" {
            s.defaultSink = value.isEmpty ? nil : value
        }
        s.readStreamProperties(streamProperties ?? "")
        return s
    }

    /// WirePlumber 0.5's entries, over 0.4's: an entry a key, its value a JSON object.
    private mutating func readStreamProperties(_ text: String) {
        for (section, name, value) in Self.entries(text) where section == "stream-properties" {
            let isRole = name == Self.notificationKey
            let sink = name.hasPrefix(Self.sinkPrefix) ? String(name.dropFirst(Self.sinkPrefix.count)) : nil
            guard isRole || sink.map({ !$0.isEmpty }) == true, let v = Self.keptVolume(json: value) else { continue }
            if isRole {
                notificationRole = v
                notificationFile = "stream-properties"
            } else if let sink, sinks[sink] != nil || sinks.count < Self.maxSinks {
                sinks[sink] = v
            }
        }
    }

    /// `{"mute":true, "volume":0.2, "channelVolumes":[0.5,0.5], …}`; nil: not such an object.
    static func keptVolume(json text: String) -> KeptVolume? {
        guard text.utf8.count <= 4096, case .object(let pairs)? = try? JSON.parse(text, maxDepth: 4) else { return nil }
        func gain(_ j: JSON?) -> Double? { if case .number(let d)? = j, d.isFinite, d >= 0 { d } else { nil } }
        var v = KeptVolume(), said = false
        for (key, value) in pairs {
            switch key {
            case "volume": v.volume = gain(value); said = true
            case "mute": if case .bool(let b) = value { v.mute = b }; said = true
            case "channelVolumes":
                if case .array(let a) = value { v.channelVolumes = a.prefix(64).compactMap { gain($0) } }
                said = true
            default: break
            }
        }
        return said ? v : nil
    }

    /// One field of an entry (`volume`, `mute`, `channelVolumes`); whether it was one.
    private static func set(_ v: inout KeptVolume, field: Substring, _ value: String) -> Bool {
        func gain(_ s: Substring) -> Double? { Double(s).flatMap { $0.isFinite && $0 >= 0 ? $0 : nil } }
        switch field {
        case "volume": v.volume = gain(Substring(value))
        case "mute": v.mute = value == "true" ? true : value == "false" ? false : nil
        // restore-stream.lua's serializeArray: "0.5;0.5;"
        case "channelVolumes": v.channelVolumes = value.split(separator: ";").compactMap(gain)
        default: return false
        }
        return true
    }

    /// A key file's entries: (section, key, value), WirePlumber's escapes in keys undone.
    private static func entries(_ text: String) -> [(String, String, String)] {
        var out: [(String, String, String)] = []
        var section = ""
        for raw in text.split(whereSeparator: { $0 == "\n" || $0 == "\r" }) {
            let line = raw.drop { $0 == " " || $0 == "\t" }
            if line.hasPrefix("#") || line.isEmpty { continue }
            if line.hasPrefix("["), let end = line.firstIndex(of: "]") { section = String(line[line.index(after: line.startIndex)..<end]); continue }
            guard let eq = line.firstIndex(of: "=") else { continue }
            out.append((section, unescape(line[..<eq]), String(line[line.index(after: eq)...])))
        }
        return out
    }

    /// WirePlumber's state.c escapes: `\\s` a space, `\\e` =, `\\o` [, `\\c` ], `\\\\` a backslash.
    private static func unescape(_ key: Substring) -> String {
        guard key.contains("\\") else { return String(key) }
        var out = "", escaped = false
        for c in key {
            if escaped {
                out.append(["s": " ", "e": "=", "o": "[", "c": "]"][c] ?? c)
                escaped = false
            } else if c == "\\" { escaped = true } else { out.append(c) }
        }
        return out
    }
}
