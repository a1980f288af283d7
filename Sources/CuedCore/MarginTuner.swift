/// How much margin a device is given against the machine's stalls, as one clocked value,
/// after AAudio/Oboe's latency tuner: start at the smallest margin that is safe on a quiet
/// machine, grow it when the device or its graph reports a miss (an xrun, a graph cycle played
/// without cued's audio), so that the same stall never clicks twice, and shrink it a step
/// again after a quiet while, so that a machine that was busy for a while (a build on a
/// laptop) does not keep the latency it needed then.
///
/// What a step is depends on the device (`Margin`): a period more of low water or of what a
/// rewind leaves (ALSA), or a graph cycle twice as long (the native PipeWire stream, whose
/// whole margin is the cycle: cued's audio thread answers each of the graph's cycles itself,
/// and may be late by up to one). Decided from what this machine showed (docs/decisions/0017):
/// its threads wake 1–12 ms late now and then, in episodes of a few late cycles whose worst is
/// up to 6 times the first, against the native stream's 2.7 ms cycle at 128 frames.
///
/// A miss grows the native stream's cycle at once to twice what the stall it saw needs (a
/// one-cycle miss at 128 frames: 512), so that the rest of the episode and the next do not
/// click again; the ALSA margins a step a miss. Shrinking waits `quietNs` after the last miss or change, and waits twice as
/// long each time a miss follows a shrink within that while (the shrink was too early), up to
/// `maxQuietNs`. No I/O, no clock reads: times are monotonic ns handed in.
public struct MarginTuner: Sendable, Equatable {
    /// A quiet while: 10 minutes without a miss.
    public static let defaultQuietNs: UInt64 = 600_000_000_000
    public static let maxQuietNs: UInt64 = 4 * 3_600_000_000_000

    public private(set) var margin: Margin
    /// Steps above the start.
    public private(set) var level = 0
    /// Since the tuner was made (across devices): times it grew, and shrank.
    public private(set) var growths = 0
    public private(set) var shrinks = 0
    /// Misses reported (each at most one growth).
    public private(set) var misses = 0
    public private(set) var quietNs: UInt64
    /// Misses this close together are one stall.
    public static let sameStallNs: UInt64 = 100_000_000
    /// The last miss or change (0: none yet).
    private var since: UInt64 = 0
    /// The stall being counted: the level before it, and the frames it missed so far.
    private var stallLevel = 0
    private var stallFrames = 0
    /// The last change was a shrink.
    private var shrank = false

    public init(_ margin: Margin = .fixed, quietNs: UInt64 = MarginTuner.defaultQuietNs) {
        self.margin = margin
        self.quietNs = quietNs
    }

    /// The margin now, in frames (nil: fixed).
    public var frames: Int? { Self.frames(margin, level: level) }

    static func frames(_ margin: Margin, level: Int) -> Int? {
        switch margin {
        case .fixed: return nil
        case .frames(let start, let step, let limit): return min(max(start, limit), start + level * max(1, step))
        case .quantum(let start, let limit): return min(max(start, limit), start << min(level, 16))
        }
    }

    /// The highest level, where the margin reaches its limit.
    public var maxLevel: Int {
        var l = 0
        while let f = Self.frames(margin, level: l), let g = Self.frames(margin, level: l + 1), g > f, l < 64 { l += 1 }
        return l
    }

    /// A device was opened with `margin`: the level learnt is kept if it is the same kind of
    /// margin (a reopen of the same device), else it starts again from the bottom.
    public mutating func use(_ margin: Margin) {
        guard margin != self.margin else { return }
        self.margin = margin
        level = 0
        shrank = false
    }

    /// A miss at `now`: `cycles` graph cycles played without cued's audio (0: an xrun, whose
    /// length is not known). Misses within `sameStallNs` of the last are one stall (it is found a
    /// look at a time, and the margin may have grown in between): counted once, grown to cover
    /// all of it. Returns whether the margin grew.
    public mutating func missed(cycles: Int = 0, now: UInt64) -> Bool {
        let sameStall = misses > 0 && now &- since < Self.sameStallNs && !shrank
        if !sameStall {
            misses += 1
            if shrank && now &- since < quietNs { quietNs = min(quietNs &* 2, Self.maxQuietNs) }
            stallLevel = level
            stallFrames = 0
        }
        since = now
        shrank = false
        let top = maxLevel
        var want = stallLevel + 1
        if case .quantum = margin, let f = frames, let first = Self.frames(margin, level: stallLevel) {
            // Late by up to the frames missed and a cycle more; the machine's next late wake-up
            // can be longer than the one that missed (measured: within one episode the worst
            // was 1.5–6 times the first), so a cycle twice that long.
            stallFrames += max(1, cycles) * f
            while want < top, let g = Self.frames(margin, level: want), g < 2 * (stallFrames + first) { want += 1 }
        } else if sameStall {
            return false  // an xrun's length is not known: one step a stall
        }
        guard min(want, top) > level else { return false }
        if level == stallLevel { growths += 1 }
        level = min(want, top)
        return true
    }

    /// Time passes (called as the stream writes): a step down after a quiet while. Returns whether it shrank.
    public mutating func tick(now: UInt64) -> Bool {
        guard level > 0, now &- since >= quietNs else { return false }
        level -= 1
        shrinks += 1
        since = now
        shrank = true
        return true
    }
}
