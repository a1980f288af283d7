import CuedProtocol
#if canImport(Glibc)
import Glibc
#endif

/// How a cue varies from play to play and how often it may sound: its variants' order,
/// pitch and gain jitter, a voice limit and a cooldown (`[cues.NAME]` in the config).
/// Game sound engines' containers (FMOD, Wwise) and SoundPool's rate, for UI cues heard
/// hundreds of times a day. The default is none of it: every play the same sound.
public struct CueDesign: Sendable, Equatable {
    public var order: VariantOrder = .shuffle
    /// Each play's pitch (and speed) drawn within ± this many cents.
    public var pitchJitterCents: Double = 0
    /// Each play's gain drawn within ± this many dB.
    public var gainJitterDB: Double = 0
    /// At most this many voices of the cue at once (nil: no limit but `--voices`).
    public var limit: CueVoiceLimit?
    /// A play within this long of the cue's last start (ns; 0: none) is dropped, or
    /// restarts the one playing.
    public var cooldownNanoseconds: UInt64 = 0
    public var cooldown: CooldownMode = .drop

    public init() {}

    /// Pitch jitter, gain jitter and cooldown: bounds the config enforces.
    public static let pitchJitterRange: ClosedRange<Double> = 0...1_200
    public static let gainJitterRange: ClosedRange<Double> = 0...24
    public static let cooldownMillisecondsRange: ClosedRange<Double> = 0...60_000

    /// This play's rate and gain (dB) from the jitter, drawn with `rng`.
    public func jitter(using rng: inout some RandomNumberGenerator) -> (rate: Double, gainDB: Double) {
        let cents = pitchJitterCents > 0 ? Double.random(in: -pitchJitterCents...pitchJitterCents, using: &rng) : 0
        let db = gainJitterDB > 0 ? Double.random(in: -gainJitterDB...gainJitterDB, using: &rng) : 0
        return (Self.rate(cents: cents), db)
    }

    /// 2^(cents / 1200): 1200 cents an octave.
    public static func rate(cents: Double) -> Double { exp2(cents / 1_200) }
}

/// Which of a cue's variants sounds next, in the cue's order. A value on the event loop;
/// the random source is passed in (seeded in tests).
public struct VariantPicker: Sendable, Equatable {
    public let order: VariantOrder
    public let count: Int
    private var deck: [Int] = []
    private var last: Int?

    public init(order: VariantOrder, count: Int) {
        self.order = order
        self.count = max(1, count)
    }

    public mutating func next(using rng: inout some RandomNumberGenerator) -> Int {
        guard count > 1 else { return 0 }
        let pick: Int
        switch order {
        case .random:
            pick = Int.random(in: 0..<count, using: &rng)
        case .sequence:
            pick = last.map { ($0 + 1) % count } ?? 0
        case .shuffle:
            if deck.isEmpty {
                deck = Array(0..<count).shuffled(using: &rng)
                // Drawn from the end: the next card must not be the one just played.
                if deck.last == last { deck.swapAt(deck.count - 1, Int.random(in: 0..<(deck.count - 1), using: &rng)) }
            }
            pick = deck.removeLast()
        }
        last = pick
        return pick
    }
}

