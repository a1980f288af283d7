import CuedCore

/// Which sound a bank cue plays this time, and how: the next of its variants in the
/// cue's order, its pitch and gain jitter, its cooldown (`[cues.NAME]`). Whether it may
/// play at all is the voice broker's; the picker only remembers what its cooldown rule
/// needs (`cooldowns`). A value on the event loop; the random source is its own.
struct CuePicker {
    /// The last start of each cue with a cooldown (bounded by the bank's names).
    struct Cooldowns: Sendable {
        fileprivate var lastStarts: [String: UInt64] = [:]

        /// How long (ns) until `cue` may start again, or nil if it may now.
        func left(_ cue: String, _ design: CueDesign, now: UInt64) -> UInt64? {
            guard design.cooldownNanoseconds > 0, let last = lastStarts[cue] else { return nil }
            let since = now &- last
            return since < design.cooldownNanoseconds ? design.cooldownNanoseconds - since : nil
        }
    }

    /// One play's pick.
    struct Pick {
        var cue: Cue
        /// The jitter's rate and gain (dB).
        var rate: Double
        var gainDB: Double
        /// The cue's voice limit, or one voice that steals (a `restart` cooldown).
        var limit: CueVoiceLimit?
    }

    private(set) var cooldowns = Cooldowns()
    /// Each bank cue's variant order (bounded by the bank's names).
    private var pickers: [String: VariantPicker] = [:]
    private var random = SystemRandomNumberGenerator()

    /// Picks `name`'s next variant (at least one) and its jitter, and notes its start for its cooldown.
    /// Admission has checked a `drop` cooldown; a `restart` one makes the playing voice give way.
    mutating func pick(_ name: String, _ variants: [Cue], _ design: CueDesign, now: UInt64) -> Pick {
        var limit = design.limit
        if design.cooldownNanoseconds > 0 {
            if cooldowns.left(name, design, now: now) != nil {
                limit = CueVoiceLimit(maxVoices: 1, steal: .oldest)  // the playing one gives way
            }
            cooldowns.lastStarts[name] = now
        }
        var picker = pickers[name].flatMap { $0.count == variants.count && $0.order == design.order ? $0 : nil }
            ?? VariantPicker(order: design.order, count: variants.count)
        let cue = variants[picker.next(using: &random)]
        pickers[name] = picker
        let (rate, db) = design.jitter(using: &random)
        return Pick(cue: cue, rate: rate, gainDB: db, limit: limit)
    }

    /// A reload replaced the bank: variant orders start afresh, cooldowns are forgotten.
    mutating func bankReplaced() {
        pickers = [:]
        cooldowns = Cooldowns()
    }
}
