import CuedProtocol

/// One refresh session: the state machine plus the gesture input of the
/// original controller (pull distance against a threshold). A value type
/// that returns what to do; no I/O.
public struct RefreshSession: Sendable, Equatable {
    public static let defaultThreshold = 65.0
    /// A pull in release must come back this many points below the threshold
    /// before it flips back to pull (pop). Without it, a finger resting on the
    /// threshold (65.1, 64.9, 65.2…) would chatter psst1/pop/psst1; the original
    /// controller compared raw offsets and could. 2 points is below what a user
    /// can intend, so deliberate pulls back still pop at once.
    public static let hysteresis = 2.0

    public struct Outcome: Equatable, Sendable {
        public var action: RefreshMachine.Action
        /// The event was ignored (scrolling or letting go while loading).
        public var ignored = false
        /// The user showed intent to pull: open the output device now so the
        /// cue that follows starts warm.
        public var prewarm = false
        /// The transition made, when the state changed (for remapping its cue).
        public var from: RefreshState?
        public var to: RefreshState?
        /// The pull crossed a detent (`detentEvery`): play a tick; how far the pull has
        /// come towards the threshold (0…1), for a tick that rises as it nears.
        public var tick: Double?

        public init(_ action: RefreshMachine.Action, ignored: Bool = false, prewarm: Bool = false,
                    from: RefreshState? = nil, to: RefreshState? = nil) {
            self.action = action; self.ignored = ignored; self.prewarm = prewarm
            if from != to { self.from = from; self.to = to }
        }
    }

    /// Moves the machine and records the transition with its outcome.
    private mutating func move(_ target: RefreshState, prewarm: Bool = false) -> Outcome {
        let from = machine.state
        let action = machine.handle(target)
        return Outcome(action, prewarm: prewarm, from: from, to: machine.state)
    }

    public private(set) var machine = RefreshMachine()
    public var threshold = RefreshSession.defaultThreshold
    /// Points between detent ticks for this session (`ticks N`; 0: none), over the config's.
    public var detentOverride: Double?
    /// The detent the pull is in (distance ÷ detent), while pulling below the threshold.
    private var detent = 0

    public init() {}

    public var state: RefreshState { machine.state }

    /// The current pull distance (points, ≥ 0). `detentEvery` (points, 0: off): below the
    /// threshold, each detent the pull moves into (either way) is a tick, one per event at
    /// most: a ratchet you can hear. The detent is `detentOverride` if the session set one.
    public mutating func drag(_ points: Double, detentEvery: Double = 0) -> Outcome {
        switch machine.state {
        case .loading:
            return Outcome(.none, ignored: true)
        case .release:
            if points < threshold - Self.hysteresis {  // back above: pop
                detent = detentIndex(points, detentEvery)
                return move(.pull)
            }
            return Outcome(.none)
        case .idle, .pull:
            let wasIdle = machine.state == .idle
            if points >= threshold { return move(.release) }  // psst1
            let now = detentIndex(points, detentEvery)
            defer { detent = now }
            if points > 0 {
                var outcome = move(.pull, prewarm: wasIdle)
                if now != detent, outcome.action == .none {
                    outcome.tick = min(1, max(0, points / threshold))
                }
                return outcome
            }
            return move(.idle)
        }
    }

    private func detentIndex(_ points: Double, _ configured: Double) -> Int {
        let every = detentOverride ?? configured
        guard every > 0, points.isFinite, points > 0 else { return 0 }
        return Int(min(points / every, 1e6))
    }

    /// The finger lifted: past the threshold starts loading (psst2), else back to idle.
    public mutating func drop() -> Outcome {
        detent = 0
        switch machine.state {
        case .loading: return Outcome(.none, ignored: true)
        case .release: return move(.loading)
        case .idle, .pull: return move(.idle)
        }
    }

    /// `state STATE [quiet]`.
    public mutating func set(_ target: RefreshState, quiet: Bool) -> Outcome {
        if quiet {
            machine.force(target)
            return Outcome(.none)
        }
        return move(target, prewarm: machine.state == .idle && target == .pull)
    }
}

/// Named sessions shared across connections (each `cuectl` call is a new
/// connection). Bounded: idle sessions expire after `ttl`, and at most
/// `capacity` exist (the longest idle is evicted). Time is passed in, so
/// tests drive it with a fake clock.
public struct SessionRegistry: Sendable {
    public let ttlNanoseconds: UInt64
    public let capacity: Int
    private var entries: [String: Entry] = [:]
    private var lastSweep: UInt64 = 0
    public private(set) var expiredCount = 0
    public private(set) var evictedCount = 0

    struct Entry: Sendable {
        var session: RefreshSession
        var lastUsed: UInt64
    }

    public init(ttlSeconds: Double = 300, capacity: Int = 1024) {
        ttlNanoseconds = UInt64(max(0, ttlSeconds) * 1_000_000_000)
        self.capacity = max(1, capacity)
    }

    /// Runs `body` on the named session, creating it (fresh) if it does not
    /// exist or has expired, and marks it used at `now`.
    public mutating func withSession<R>(_ name: String, now: UInt64, _ body: (inout RefreshSession) -> R) -> R {
        sweepIfDue(now)
        var entry: Entry
        if let e = entries[name], !isExpired(e, now) {
            entry = e
        } else {
            if entries.removeValue(forKey: name) != nil { expiredCount += 1 }
            if entries.count >= capacity { evictLongestIdle() }
            entry = Entry(session: RefreshSession(), lastUsed: now)
        }
        let result = body(&entry.session)
        entry.lastUsed = now
        entries[name] = entry
        return result
    }

    /// Live sessions at `now`.
    public mutating func count(now: UInt64) -> Int {
        sweep(now)
        return entries.count
    }

    /// The session's state if it exists and is live (does not touch it).
    public func peek(_ name: String, now: UInt64) -> RefreshSession? {
        guard let e = entries[name], !isExpired(e, now) else { return nil }
        return e.session
    }

    private func isExpired(_ e: Entry, _ now: UInt64) -> Bool { now &- e.lastUsed > ttlNanoseconds && now > e.lastUsed }

    /// A full sweep costs O(sessions): done at most once a second on the request path.
    private mutating func sweepIfDue(_ now: UInt64) {
        if now &- lastSweep >= 1_000_000_000 || now < lastSweep { sweep(now) }
    }

    private mutating func sweep(_ now: UInt64) {
        lastSweep = now
        let before = entries.count
        entries = entries.filter { !isExpired($0.value, now) }
        expiredCount += before - entries.count
    }

    private mutating func evictLongestIdle() {
        guard let oldest = entries.min(by: { $0.value.lastUsed < $1.value.lastUsed }) else { return }
        entries.removeValue(forKey: oldest.key)
        evictedCount += 1
    }
}
