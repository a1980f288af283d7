/// A feedback profile, as feedbackd's: how much cued lets sound. `full` plays
/// as asked; `quiet` plays every cue `[profiles] quiet_gain_db` lower; `silent`
/// plays nothing but an `important` voice of an app the config allows. Ordered
/// silent < quiet < full: the stricter of two profiles is their `min`.
public enum Profile: String, Sendable, CaseIterable, Comparable {
    case full, quiet, silent

    private var rank: Int {
        switch self {
        case .silent: return 0
        case .quiet: return 1
        case .full: return 2
        }
    }

    public static func < (a: Profile, b: Profile) -> Bool { a.rank < b.rank }

    /// `full, quiet or silent`, for messages.
    public static let names = "full, quiet or silent"
}

/// What `profile app NAME …` sets: a profile, or `default` (forget the run-time one).
public enum ProfileChoice: Equatable, Sendable {
    case profile(Profile)
    case `default`

    public init?(word: Substring) {
        if word == "default" { self = .default } else if let p = Profile(rawValue: String(word)) { self = .profile(p) } else { return nil }
    }

    public var word: String {
        switch self {
        case .profile(let p): return p.rawValue
        case .default: return "default"
        }
    }
}
