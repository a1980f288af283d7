import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A decoded cue, already in the output format: 32-bit float, interleaved
/// stereo, at the engine's sample rate. Immutable once loaded, so the audio
/// thread can read it without locks.
public final class Cue: Sendable {
    public let name: String
    /// Interleaved stereo samples, full scale = 1.0.
    public let samples: [Float]
    /// Where it was loaded from, for status and errors.
    public let source: String
    /// How many times the audio thread started it.
    public let played = Atomic<Int>(0)

    public var frames: Int { samples.count / 2 }

    public init(name: String, stereo samples: [Float], source: String = "") {
        self.name = name; self.samples = samples; self.source = source
    }
}

/// The set of cues the daemon can play, by name. Replaced whole on reload.
public struct CueBank: Sendable {
    public let cues: [String: Cue]
    public static let required = ["psst1", "psst2", "pop"]

    public init(_ cues: [Cue]) {
        var d: [String: Cue] = [:]
        for c in cues { d[c.name] = c }
        self.cues = d
    }

    public subscript(name: String) -> Cue? { cues[name] }
    public var names: [String] { cues.keys.sorted() }
}

public func decibelsToGain(_ db: Double) -> Float { Float(pow(10, db / 20)) }
