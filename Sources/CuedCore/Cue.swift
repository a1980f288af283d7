import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A decoded cue, already in the output format: 32-bit float, interleaved
/// stereo, at the engine's sample rate. Immutable once loaded, so the audio
/// thread can read it without locks.
///
/// The samples live in memory from `malloc` that the cue owns and frees when
/// the last reference goes (a voice still playing holds one). Decoding
/// allocates them with `malloc` so that a failed allocation is an error the
/// loader reports, not a trap as a Swift array's would be.
public final class Cue: @unchecked Sendable {  // immutable after init; `played` is atomic
    public let name: String
    /// Interleaved stereo samples, full scale = 1.0.
    public let samples: UnsafeBufferPointer<Float>
    /// Where it was loaded from, for status and errors.
    public let source: String
    /// How many times the audio thread started it.
    public let played = Atomic<Int>(0)

    public var frames: Int { samples.count / 2 }

    /// Takes ownership of `buffer`, which must come from `malloc` (or be
    /// empty with a nil base); it is freed when the cue is. `buffer.count` is
    /// the number of samples (2 per frame).
    public init(name: String, adopting buffer: UnsafeMutableBufferPointer<Float>, source: String = "") {
        precondition(buffer.count % 2 == 0, "interleaved stereo has an even number of samples")
        self.name = name; self.samples = UnsafeBufferPointer(buffer); self.source = source
    }

    /// A copy of `samples` (tests, synthesized cues). Traps if the memory
    /// cannot be had, like any array; decoders use `init(adopting:)`.
    public convenience init(name: String, stereo samples: [Float], source: String = "") {
        guard let base = malloc(max(samples.count, 1) * MemoryLayout<Float>.stride)?.assumingMemoryBound(to: Float.self) else {
            fatalError("cannot allocate \(samples.count) samples for cue '\(name)'")
        }
        let buffer = UnsafeMutableBufferPointer(start: base, count: samples.count)
        _ = buffer.initialize(from: samples)
        self.init(name: name, adopting: buffer, source: source)
    }

    deinit { free(UnsafeMutableRawPointer(mutating: samples.baseAddress)) }
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
