import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A decoded cue, already in the output format: 32-bit float, interleaved
/// stereo (or mono, for a mono source: the mixer plays it on both sides), at the
/// engine's sample rate. Immutable once loaded, so the audio thread can read it
/// without locks.
///
/// Its samples are a `SoundBuffer`, which cues naming the same file share (decoded
/// once, counted once against the budget); the buffer is freed when the last cue
/// holding it goes (a voice still playing holds one).
public final class Cue: @unchecked Sendable {  // immutable after init
    public let name: String
    /// The decoded samples, maybe shared with other cues.
    public let sound: SoundBuffer
    /// Interleaved samples of `channels` (1 or 2), full scale = 1.0 (`sound`'s).
    public let samples: UnsafeBufferPointer<Float>
    public let channels: Int
    /// Where it was loaded from, for status and errors.
    public let source: String

    public var frames: Int { samples.count / channels }

    public init(name: String, sound: SoundBuffer, source: String = "") {
        self.name = name; self.sound = sound; self.samples = sound.samples; self.channels = sound.channels; self.source = source
    }

    /// A copy of `samples` (tests, synthesized cues), not counted against any budget.
    /// Traps if the memory cannot be had, like any array; decoders use `init(sound:)`.
    public convenience init(name: String, stereo samples: [Float], source: String = "") {
        precondition(samples.count % 2 == 0, "interleaved stereo has an even number of samples")
        self.init(name: name, sound: SoundBuffer(copying: samples), source: source)
    }

    /// A copy of mono `samples` (tests), played on both sides.
    public convenience init(name: String, mono samples: [Float], source: String = "") {
        self.init(name: name, sound: SoundBuffer(copying: samples, channels: 1), source: source)
    }

    /// The same samples under another name (a cue of the config naming a file another cue names).
    public func named(_ other: String) -> Cue { Cue(name: other, sound: sound, source: source) }
}

/// The set of cues the daemon can play, by name; a cue may have several variants
/// (`pop.wav`, `pop-2.wav`…, or the config's `files`), all named as the cue. Replaced
/// whole on reload.
public struct CueBank: Sendable {
    /// Each cue's first variant.
    public let cues: [String: Cue]
    /// Every variant of each cue, the first first (at least one each).
    public let variants: [String: [Cue]]
    public static let required = ["psst1", "psst2", "pop"]
    /// Bytes of its samples, each shared buffer once (what it holds of the budget).
    public let bytes: Int

    /// One variant each.
    public init(_ cues: [Cue]) {
        self.init(variants: Dictionary(cues.map { ($0.name, [$0]) }, uniquingKeysWith: { $1 }))
    }

    public init(variants: [String: [Cue]]) {
        var seen = Set<ObjectIdentifier>()
        var bytes = 0
        for c in variants.values.joined() where seen.insert(ObjectIdentifier(c.sound)).inserted { bytes += c.sound.bytes }
        self.variants = variants.filter { !$0.value.isEmpty }
        cues = self.variants.mapValues { $0[0] }
        self.bytes = bytes
    }

    public subscript(name: String) -> Cue? { cues[name] }
    public var names: [String] { cues.keys.sorted() }
}

public func decibelsToGain(_ db: Double) -> Float { Float(pow(10, db / 20)) }
