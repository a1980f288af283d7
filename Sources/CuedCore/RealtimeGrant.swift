/// How cued's audio thread is scheduled and who granted it, as one clocked value: the order a
/// desktop grants real time in, what each answer means, and when to ask again. No I/O, no clock
/// reads (times are monotonic ns handed in): the audio thread reports its own attempt, the
/// asking thread (`RealtimeAsker` in the server) carries out each `Ask` and hands back the
/// `Answer`, and `status` reads it.
///
/// The order, as PipeWire's module-rt and the desktop do it: the thread's own SCHED_FIFO where
/// the process may (root, CAP_SYS_NICE, RLIMIT_RTPRIO; not under `RestrictRealtime=`); else
/// RTKit on the system bus (real time within its `MaxRealtimePriority`, else a nice level within
/// its `MinNiceLevel`), or, where cued runs sandboxed (Flatpak), the Realtime portal first; else
/// the thread's own nice level (asked at once, while the bus is asked); else nothing. A missing
/// or slow bus or service is not an error: the thread runs as it is, and is asked for again at
/// the next chance (a device opening) once a backoff has passed (30 s, doubling to 10 min). A
/// grant taken away (the kernel shows the thread normal again: RTKit's watchdog demotes real-time
/// threads when the machine starves) is asked for again the same way.
public struct RealtimeGrant: Sendable, Equatable {
    /// Who granted it.
    public enum Via: String, Sendable { case own = "self", rtkit, portal }

    /// How the thread runs.
    public enum Scheduling: Equatable, Sendable {
        case realtime(priority: Int, via: Via)
        case nice(Int, via: Via)
        case normal

        var isRealtime: Bool { if case .realtime = self { return true } else { return false } }
        /// Better than `other` (real time over a nice level over normal; a lower nice value).
        func betterThan(_ other: Scheduling) -> Bool {
            switch (self, other) {
            case (.realtime, .realtime), (.normal, _): return false
            case (.realtime, _): return true
            case (.nice(let a, _), .nice(let b, _)): return a < b
            case (.nice, .normal): return true
            case (.nice, .realtime): return false
            }
        }
    }

    /// What one exchange with a service ended with.
    public enum Answer: Equatable, Sendable {
        /// Real time at this priority.
        case realtime(priority: Int)
        /// Real time refused (why), a nice level granted instead.
        case nice(Int, realtimeRefused: String)
        /// Refused, with the service's words.
        case refused(String)
        /// No bus, no such service, or no answer in time.
        case unreachable(String)
    }

    /// Ask `via` for real time at `priority`, else for nice `nice` (nil: the thread has that already).
    public struct Ask: Equatable, Sendable {
        public var via: Via
        public var priority: Int
        public var nice: Int?
        public init(via: Via, priority: Int, nice: Int?) { self.via = via; self.priority = priority; self.nice = nice }
    }

    public static let firstBackoffNs: UInt64 = 30_000_000_000
    public static let maxBackoffNs: UInt64 = 600_000_000_000

    /// The priority and nice level wanted (below PipeWire's own threads, 88; RTKit grants up to 20).
    public let priority: Int
    public let niceLevel: Int
    /// Where cued runs sandboxed (Flatpak): the portal is asked before RTKit.
    public let sandboxed: Bool
    /// How the thread runs, as far as cued knows (`observed` corrects it from the kernel).
    public private(set) var scheduling: Scheduling = .normal
    /// Why it is not real time (the last refusal, or a missing bus), for status and `cuectl doctor`.
    public private(set) var reason: String?
    /// The service asked now, if any.
    public private(set) var asking: Via?
    /// The thread has made its own attempt (its tid is known): asking may begin.
    public private(set) var threadStarted = false
    /// A chance came before the thread's own attempt (cued up first, its thread late to run on a
    /// busy machine): `ownAttempt` says to give it again, else nothing would be asked until a
    /// device opens.
    private var chanceWaiting = false
    /// No ask before this (0: at the next chance); nil: nothing left to ask.
    private var nextAskAt: UInt64? = 0
    private var backoffNs = RealtimeGrant.firstBackoffNs
    /// Services already asked in this round (each at most once a round).
    private var askedThisRound: [Via] = []

    public init(priority: Int = 20, niceLevel: Int = -11, sandboxed: Bool = false) {
        self.priority = priority
        self.niceLevel = niceLevel
        self.sandboxed = sandboxed
    }

    /// The audio thread's own attempt, at its start (SCHED_FIFO, else a nice level, else nothing).
    /// True: a chance came before it, to be given again now.
    @discardableResult
    public mutating func ownAttempt(_ got: Scheduling, refused: String? = nil) -> Bool {
        defer { chanceWaiting = false }
        threadStarted = true
        scheduling = got
        if got.isRealtime {
            nextAskAt = nil
            reason = nil
        } else if reason == nil {
            reason = refused
        }
        return chanceWaiting && !got.isRealtime
    }

    /// A chance to ask (cued is up, or a device opened): what to ask now, if anything.
    public mutating func chance(now: UInt64) -> Ask? {
        guard threadStarted else { chanceWaiting = true; return nil }
        guard asking == nil, !scheduling.isRealtime, let at = nextAskAt, now >= at else { return nil }
        askedThisRound = []
        return next()
    }

    /// The answer to the last `Ask`; another ask to make at once (the next service), if any.
    public mutating func answered(_ answer: Answer, now: UInt64) -> Ask? {
        guard let via = asking else { return nil }
        asking = nil
        switch answer {
        case .realtime(let p):
            scheduling = .realtime(priority: p, via: via)
            reason = nil
            nextAskAt = nil
            backoffNs = Self.firstBackoffNs
            return nil
        case .nice(let level, let why):
            if Scheduling.nice(level, via: via).betterThan(scheduling) { scheduling = .nice(level, via: via) }
            reason = "\(via.rawValue) refused real time: \(why)"
        case .refused(let why):
            reason = "\(via.rawValue) refused: \(why)"
        case .unreachable(let why):
            reason = "no \(via.rawValue): \(why)"
            // The other service may answer (RTKit where the portal is missing).
            if let ask = next() { return ask }
        }
        nextAskAt = now &+ backoffNs
        backoffNs = min(backoffNs &* 2, Self.maxBackoffNs)
        return nil
    }

    /// What the kernel says the thread runs now (read at status and at each chance; its `via` is
    /// not the kernel's to say): a grant taken away is asked for again at the next chance.
    public mutating func observed(_ actual: Scheduling, now: UInt64) {
        guard threadStarted else { return }
        switch (scheduling, actual) {
        case (.realtime(_, let via), .realtime(let p, _)):
            scheduling = .realtime(priority: p, via: via)
        case (.realtime(_, let via), _):
            reason = "real time (\(via.rawValue)) taken away"
            if case .nice(let n, _) = actual { scheduling = .nice(n, via: .own) } else { scheduling = .normal }
            nextAskAt = now
            backoffNs = Self.firstBackoffNs
        case (_, .realtime(let p, _)):
            // Granted by the service being asked, whose answer is on its way.
            scheduling = .realtime(priority: p, via: asking ?? .own)
        case (.nice(_, let via), .nice(let n, _)):
            scheduling = .nice(n, via: via)
        case (_, .nice(let n, _)):
            scheduling = .nice(n, via: asking ?? .own)
        case (_, .normal):
            scheduling = .normal
        }
    }

    /// The thread ran past its real-time budget (RLIMIT_RTTIME's soft limit: SIGXCPU) and was
    /// dropped to normal scheduling: a spinning thread must not hold a core, so it is not asked again.
    public mutating func overran() {
        scheduling = .normal
        reason = "it ran past its real-time budget without sleeping (SIGXCPU): dropped to normal, not asked again"
        nextAskAt = nil
    }

    /// The next service to ask in this round, if any.
    private mutating func next() -> Ask? {
        let order: [Via] = sandboxed ? [.portal, .rtkit] : [.rtkit]
        guard let via = order.first(where: { !askedThisRound.contains($0) }) else { return nil }
        askedThisRound.append(via)
        asking = via
        var wantNice: Int? = niceLevel
        if case .nice(let n, _) = scheduling, n <= niceLevel { wantNice = nil }
        return Ask(via: via, priority: priority, nice: wantNice)
    }

    /// For `status`: `realtime (rtkit)`, `nice -11 (self); rtkit refused real time: …`,
    /// `normal: rtkit refused: …`, `normal: asking rtkit`.
    public var status: String {
        var s: String
        switch scheduling {
        case .realtime(_, let via): return "realtime (\(via.rawValue))"
        case .nice(let n, let via): s = "nice \(n) (\(via.rawValue))"
        case .normal: s = "normal"
        }
        if let asking { s += (s == "normal" ? ": " : "; ") + "asking \(asking.rawValue)" }
        else if let reason { s += (s == "normal" ? ": " : "; ") + reason }
        return s
    }
}
