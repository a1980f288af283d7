import CuedProtocol

// The settings of one part of the config: a cue, the pull, an app, the profiles, a
// transition. `Config` (Config.swift) holds them; the checker (ConfigChecker.swift) fills them.

/// `[cues.NAME]`: where a cue comes from, how loud it is, and how it varies and is
/// limited from play to play (its design: see `CueDesign`).
public struct CueSetting: Sendable, Equatable {
    /// A file of any format libsndfile reads; relative paths are relative to the config file.
    public var file: String?
    /// The cue's variants, as files (instead of `file`, and of `NAME-2.wav`… in the directories).
    public var files: [String]?
    public var gainDB: Double = 0
    public var order: VariantOrder?
    public var pitchJitterCents: Double = 0
    public var gainJitterDB: Double = 0
    public var maxVoices: Int?
    public var steal: VoiceSteal = .oldest
    public var cooldownMs: Double = 0
    public var cooldown: CooldownMode = .drop
    public init(file: String? = nil, gainDB: Double = 0) { self.file = file; self.gainDB = gainDB }

    static let keys = ["file", "files", "gain_db", "order", "pitch_jitter_cents", "gain_jitter_db", "max_voices", "steal",
                       "cooldown_ms", "cooldown"]
}

/// `[pull]`: a pull you can hear, off by default: below the release threshold, a soft
/// tick each `detent_points` of pull, rising `detent_pitch_cents` towards the threshold.
public struct PullSetting: Sendable, Equatable {
    public var detentPoints: Double = 0
    public var detentCue = "tick"
    public var detentGainDB: Double = -12
    public var detentPitchCents: Double = 0
    public init() {}

    static let keys = ["detent_points", "detent_cue", "detent_gain_db", "detent_pitch_cents"]
}

/// `[apps.NAME]`: one client app's mute, gain and profile.
public struct AppSetting: Sendable, Equatable {
    public var muted: Bool?
    public var gainDB: Double = 0
    public var profile: Profile?
    public init(muted: Bool? = nil, gainDB: Double = 0, profile: Profile? = nil) {
        self.muted = muted; self.gainDB = gainDB; self.profile = profile
    }
}

/// `[profiles]`: what the `quiet` profile plays, and who gets through `silent`.
public struct ProfileSettings: Sendable, Equatable {
    /// Added to every cue's gain under the `quiet` profile.
    public var quietGainDB: Double = -12
    /// Apps whose `important` voices pass `silent` and `quiet` (feedbackd's allow-important).
    public var importantApps: Set<String> = []
    public init(quietGainDB: Double = -12, importantApps: Set<String> = []) {
        self.quietGainDB = quietGainDB; self.importantApps = importantApps
    }
}

/// A refresh transition, written `"release->pull"` in `[transitions]`.
public struct Transition: Hashable, Sendable, CustomStringConvertible {
    public let from: RefreshState
    public let to: RefreshState
    public init(from: RefreshState, to: RefreshState) { self.from = from; self.to = to }

    public init?(key: String) {
        // "FROM->TO": split at the one '-' followed by '>' (state names have neither).
        let chars = Array(key)
        let arrows = chars.indices.dropLast().filter { chars[$0] == "-" && chars[$0 + 1] == ">" }
        guard arrows.count == 1, let at = arrows.first else { return nil }
        let parts = [String(chars[..<at]).trimmingSpaces(), String(chars[(at + 2)...]).trimmingSpaces()]
        guard let f = RefreshState(rawValue: parts[0]), let t = RefreshState(rawValue: parts[1]), f != t
        else { return nil }
        from = f; to = t
    }

    public var description: String { "\(from.rawValue)->\(to.rawValue)" }
}
