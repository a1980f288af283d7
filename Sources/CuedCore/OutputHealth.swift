import CuedProtocol

/// How an output has done since a cue was last heard whole through it, as one clocked value: no
/// I/O, no clock reads. An output can open, accept every frame cued writes and still play
/// nothing (a stream that takes no frame and is reopened again and again, cues cut off or dropped
/// each time): its state is then "running" while nothing is heard. This is what says so.
///
/// Two keep one: the server's, for `status`, `doctor` and `why` (the output cued plays to now),
/// and `--sink auto`'s, one a candidate (`FollowingSink`), which benches a candidate that failed
/// twice with no cue heard in between, so that the next open takes the next candidate; after
/// `retryAt` it is tried again (once: a failure then benches it again, for twice as long), and a
/// cue heard whole through it clears everything.
public struct OutputHealth: Sendable, Equatable {
    /// The words of the two failures the device machine finds itself (the server and auto's
    /// candidates say them alike).
    public static let stalled = "stalled: it took no frames", lostDevice = "lost: recovering made no progress"

    public enum Outcome: Sendable, Equatable {
        /// A cue's last frame sounded.
        case heard
        /// A cue was cut off or dropped (it could not start in time) by the output.
        case lost
        /// The output failed: it stalled, was lost, failed a write or did not open.
        case failed(String)
    }

    /// The first bench; each one after a retry that failed is twice as long, up to `maxBenchNs`.
    public static let firstBenchNs: UInt64 = 30_000_000_000
    public static let maxBenchNs: UInt64 = 480_000_000_000
    /// Faults, or cues lost, since a cue was heard whole that bench a candidate.
    public static let faultsToBench = 2, lostToBench = 3

    public private(set) var faults = 0
    public private(set) var lost = 0
    public private(set) var lastFault: String?
    public private(set) var lastFaultAt: UInt64 = 0
    /// Benched until then (nil: not benched).
    public private(set) var retryAt: UInt64?
    private var benchNs = OutputHealth.firstBenchNs
    private var probation = false

    public init() {}

    /// Something failed or was lost since a cue was last heard whole.
    public var failing: Bool { faults > 0 || lost > 0 }

    public mutating func note(_ outcome: Outcome, now: UInt64) {
        switch outcome {
        case .heard:
            self = OutputHealth()
        case .lost:
            lost += 1
            if lost >= Self.lostToBench { bench(now) }
        case .failed(let why):
            faults += 1
            lastFault = why
            lastFaultAt = now
            if probation || faults >= Self.faultsToBench { bench(now) }
        }
    }

    private mutating func bench(_ now: UInt64) {
        guard retryAt == nil else { return }
        retryAt = now &+ benchNs
        benchNs = min(benchNs * 2, Self.maxBenchNs)
        probation = false
    }

    /// Whether it is benched at `now`; once its time is over it is tried again, on probation
    /// (the next failure benches it at once).
    public mutating func benched(now: UInt64) -> Bool {
        guard let t = retryAt else { return false }
        if now < t { return true }
        retryAt = nil
        probation = true
        return false
    }

    /// What happened, in words (`Status.Sink.failingWords`); nil when nothing did.
    public var summary: String? { Status.Sink.failingWords(faults: faults, lost: lost, last: lastFault) }
}
