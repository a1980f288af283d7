/// `why CUE`'s answer: every reason the next play of CUE by the asking connection's app would not
/// be heard, in the order they apply, each worded with its one-line fix. One type for cued (which
/// fills and encodes it), cuectl (which prints it) and the tests; every JSON key spelled once.
public struct WhyReport: Sendable, Equatable {
    public static let defaultCue = "pop"

    public struct Reason: Sendable, Equatable {
        /// A machine word: admission's rule names (`muted`, `profile`, `cooldown`, `event-sounds`…)
        /// and the output's (`system-sounds`, `stream-muted`, `output-muted`, `no-output`, `device-failing`).
        public var name: String
        /// What holds the sound back, in a sentence.
        public var says: String
        /// The one-line fix.
        public var fix: String
        public init(_ name: String, says: String, fix: String) { self.name = name; self.says = says; self.fix = fix }
    }

    public var cue: String
    public var app: String?
    /// The app has played through libcanberra (cued's plug-in): its routing matters (cuectl's to tell).
    public var canberraApp = false
    public var reasons: [Reason] = []
    public init(cue: String, app: String? = nil) { self.cue = cue; self.app = app }

    /// The output's reasons, after admission's (cuectl puts libcanberra's routing before the first).
    public static let outputReasons: Set<String> = ["event-sounds", "input-feedback", "do-not-disturb", "stopping", "system-sounds",
                                                    "stream-muted", "output-muted", "no-output", "device-failing"]

    enum Key: String { case cue, app, canberraApp = "canberra_app", reasons, name, says, fix }

    public var json: JSON {
        .object([
            (Key.cue.rawValue, .string(cue)), (Key.app.rawValue, app.map(JSON.string) ?? .null),
            (Key.canberraApp.rawValue, .bool(canberraApp)),
            (Key.reasons.rawValue, .array(reasons.map { r in
                .object([(Key.name.rawValue, .string(r.name)), (Key.says.rawValue, .string(r.says)), (Key.fix.rawValue, .string(r.fix))])
            })),
        ])
    }

    public init?(json j: JSON) {
        guard case .string(let cue)? = j[Key.cue.rawValue] else { return nil }
        self.cue = cue
        if case .string(let a)? = j[Key.app.rawValue] { app = a }
        if case .bool(let b)? = j[Key.canberraApp.rawValue] { canberraApp = b }
        guard case .array(let items)? = j[Key.reasons.rawValue] else { return }
        for item in items {
            guard case .string(let n)? = item[Key.name.rawValue], case .string(let s)? = item[Key.says.rawValue],
                  case .string(let f)? = item[Key.fix.rawValue] else { continue }
            reasons.append(Reason(n, says: s, fix: f))
        }
    }

    /// Parses a `why` reply's payload (the JSON after `ok `).
    public static func parse(_ payload: String) -> WhyReport? {
        guard let j = try? JSON.parse(payload) else { return nil }
        return WhyReport(json: j)
    }
}
