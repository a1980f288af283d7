/// The words of a cue's design (`[cues.NAME]` in the config: `order`, `steal`,
/// `cooldown`), shared by the config that reads them and the engine that uses them.

/// The order a cue's variants play in.
public enum VariantOrder: String, Sendable, CaseIterable {
    /// Every variant once in a random order, then again: never the same twice in a row
    /// (a shuffled deck, whose next deck never starts with the last card).
    case shuffle
    /// Any variant each time, repeats allowed.
    case random
    /// In turn: 1, 2, 3, 1…
    case sequence
}

/// Which of a cue's voices gives way when it has `max_voices` playing.
public enum VoiceSteal: String, Sendable, CaseIterable { case oldest, quietest }

/// What a play within a cue's `cooldown_ms` does.
public enum CooldownMode: String, Sendable, CaseIterable {
    /// It does not sound (`ok cooldown`).
    case drop
    /// It takes the place of the cue's voice that is playing.
    case restart
}
