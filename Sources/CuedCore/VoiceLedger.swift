import CuedProtocol

/// How often a voice plays its cue.
public enum VoiceLoop: Equatable, Sendable {
    /// Once (the default).
    case once
    /// N plays in all (N ≥ 1), back to back.
    case times(Int)
    /// Again and again until stopped (a ringtone).
    case forever
    /// Again and again for at most this many seconds of sound, then a short fade.
    case seconds(Double)

    public static let maxSeconds = 3_600.0
}

/// Why a voice ended: a word of the protocol (`end ID REASON`), so defined with the wire's words.
public typealias VoiceEndReason = EndReason

/// Who hears of a voice's end.
public struct VoiceNotify: OptionSet, Sendable, Hashable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    /// A `play … wait` reply waits for it.
    public static let wait = VoiceNotify(rawValue: 1)
    /// The connection asked for `end ID REASON` lines.
    public static let events = VoiceNotify(rawValue: 2)
}

/// Everything about a voice, from the request on: what the server hands the audio thread.
public struct VoiceRequest: Sendable {
    /// Unique for the daemon's life (the server counts them); never 0.
    public var id: UInt64
    public var cue: Cue
    public var gain: Float
    /// When the request was read (monotonic ns); 0: never too late.
    public var requestTime: UInt64
    /// The app name, or a per-connection label: what `stop` matches.
    public var owner: String
    /// The connection that asked (0: none).
    public var connection: UInt64
    /// Higher wins a voice slot; equal: the oldest voice is taken.
    public var priority: Int
    /// Never refused a slot (`important`, from an app the config allows).
    public var important: Bool
    /// Cue frames per output frame (`rate=`, `pitch=`, pitch jitter): 1 as recorded.
    public var rate: Double = 1
    /// At most this many voices of its cue at once (`max_voices`, a cooldown's restart).
    public var limit: CueVoiceLimit?
    public var loop: VoiceLoop
    /// A loop that goes on after its connection closes (`detach`); other loops end with it.
    public var detached: Bool
    public var notify: VoiceNotify
    /// `owner` as the mixer's fair share counts it (FNV-1a: no string on the audio thread).
    public internal(set) var ownerKey: UInt64

    public init(id: UInt64, cue: Cue, gain: Float = 1, requestTime: UInt64 = 0, owner: String = "", connection: UInt64 = 0,
                priority: Int = 0, important: Bool = false, loop: VoiceLoop = .once, detached: Bool = false,
                notify: VoiceNotify = []) {
        self.id = id; self.cue = cue; self.gain = gain; self.requestTime = requestTime; self.owner = owner
        self.connection = connection; self.priority = priority; self.important = important; self.loop = loop
        self.detached = detached; self.notify = notify
        ownerKey = owner.utf8.reduce(0xcbf2_9ce4_8422_2325) { ($0 ^ UInt64($1)) &* 0x100_0000_01b3 }
    }
}

/// A voice's one end: what the server maps to a reply, an event line, a count and a log line.
public struct VoiceEnd: Sendable, Equatable {
    public var id: UInt64
    public var cue: String
    public var owner: String
    public var connection: UInt64
    public var notify: VoiceNotify
    public var reason: VoiceEndReason
    /// Its first frame had been rendered (it sounded, at least in part).
    public var started: Bool
    /// For `late`: how late it was, ns.
    public var lateNs: UInt64

    public init(id: UInt64, cue: String, owner: String = "", connection: UInt64 = 0, notify: VoiceNotify = [],
                reason: VoiceEndReason, started: Bool, lateNs: UInt64 = 0) {
        self.id = id; self.cue = cue; self.owner = owner; self.connection = connection; self.notify = notify
        self.reason = reason; self.started = started; self.lateNs = lateNs
    }

    /// The ends the server is told of: anyone waiting, and every one that did not play
    /// (logged, counted per app). A voice that simply played, unwatched, needs no hop.
    public var isReported: Bool { !notify.isEmpty || reason != .played }
}

/// Which voices a `stop` fades out.
public enum StopScope: Sendable, Equatable {
    case all
    /// Every voice this owner (app name or connection label) started.
    case owner(String)
    /// This owner's voices of one cue.
    case cue(name: String, owner: String)
    /// One voice.
    case id(UInt64)
    /// The loops a connection that closed started, but those it detached.
    case loopsOf(connection: UInt64)

    public var reason: VoiceEndReason {
        switch self {
        case .all: return .stoppedAll
        case .owner, .cue: return .stoppedByOwner
        case .id: return .stoppedByID
        case .loopsOf: return .disconnected
        }
    }

    func matches(_ r: VoiceRequest) -> Bool {
        switch self {
        case .all: return true
        case .owner(let o): return o == r.owner
        case .cue(let name, let o): return name == r.cue.name && o == r.owner
        case .id(let id): return id == r.id
        case .loopsOf(let c): return c == r.connection && r.loop != .once && !r.detached
        }
    }
}

/// Every voice from its request to its one end. The audio thread's single record
/// of who asked for what; the mixer and the device machine hold only ids. Pure:
/// times and frame positions are given. Reserves its storage up front, so the
/// audio thread does not allocate while fewer than `capacity` voices are live.
///
///     admit ──▶ held (device opening) ──start──▶ playing ──rendered──▶ sounding ──sounded──▶ end(played)
///       └─────────────┴──────────────── finish(reason) ───────────┴──────────▶ end(reason)
public struct VoiceLedger {
    public enum Phase: Equatable, Sendable {
        /// Accepted; waiting for the device (held by the device machine) or about to start.
        case held
        /// In a mixer slot.
        case playing
        /// Its last frame is rendered at stream position `lastFrame`: it ends when that has sounded.
        case sounding(lastFrame: Int)
    }

    struct Record {
        var request: VoiceRequest
        var phase: Phase
    }

    public let capacity: Int
    private var records: [UInt64: Record] = [:]
    /// Ids in `sounding`, in the order they were rendered.
    private var sounding: [UInt64] = []
    /// Ends not yet handed over (`takeEnds`).
    public private(set) var ends: [VoiceEnd] = []
    /// The requests of ended voices, not yet handed over (`takeRetired`): the audio thread
    /// gives them away rather than release their cue and strings itself.
    private var retired: [VoiceRequest] = []

    public init(capacity: Int = 512) {
        self.capacity = capacity
        records.reserveCapacity(capacity)
        sounding.reserveCapacity(capacity)
        ends.reserveCapacity(capacity)
        retired.reserveCapacity(capacity)
    }

    public var count: Int { records.count }
    public var soundingCount: Int { sounding.count }
    public func phase(of id: UInt64) -> Phase? { records[id]?.phase }
    public func request(_ id: UInt64) -> VoiceRequest? { records[id]?.request }

    /// Takes a new voice in (held until it starts). A duplicate id ends the new one at once.
    public mutating func admit(_ request: VoiceRequest) {
        guard records[request.id] == nil else {
            ends.append(Self.end(request, .busy, started: false))
            retire(request)
            return
        }
        if records.count >= capacity, let oldest = sounding.first {
            // Full: the oldest voice waiting to be heard is taken as heard (it is written).
            soundedOne(oldest)
        }
        records[request.id] = Record(request: request, phase: .held)
    }

    /// It got a mixer slot.
    public mutating func playing(_ id: UInt64) {
        // Read and set, not modified in place: a debug build allocates the modify's frame.
        guard var r = records[id] else { return }
        r.phase = .playing
        records[id] = r
    }

    /// The mixer rendered its last frame at stream position `lastFrame`.
    public mutating func rendered(_ id: UInt64, lastFrame: Int) {
        guard var r = records[id] else { return }
        if case .sounding = r.phase { return }
        r.phase = .sounding(lastFrame: lastFrame)
        records[id] = r
        sounding.append(id)
    }

    /// Ends the voice now for `reason` (once: later calls for the same id do nothing).
    public mutating func finish(_ id: UInt64, _ reason: VoiceEndReason, started: Bool, lateNs: UInt64 = 0) {
        guard let r = records.removeValue(forKey: id) else { return }
        if case .sounding = r.phase, let i = sounding.firstIndex(of: id) { sounding.remove(at: i) }
        ends.append(Self.end(r.request, reason, started: started, lateNs: lateNs))
        retire(r.request)
    }

    /// A voice the mixer removed before its end (a reopen, a reset): a stopped one ends as it
    /// was stopped; one that sounded is cut off; one that never sounded was too late (by `now`).
    public mutating func removed(_ v: Mixer.RemovedVoice, now: UInt64) {
        if let reason = v.stopReason {
            finish(v.id, reason, started: v.started)
        } else {
            finish(v.id, v.started ? .cut : .late, started: v.started, lateNs: v.requestTime == 0 ? 0 : now &- v.requestTime)
        }
    }

    private static func end(_ r: VoiceRequest, _ reason: VoiceEndReason, started: Bool, lateNs: UInt64 = 0) -> VoiceEnd {
        VoiceEnd(id: r.id, cue: r.cue.name, owner: r.owner, connection: r.connection, notify: r.notify,
                 reason: reason, started: started, lateNs: lateNs)
    }

    /// Every voice whose last frame is below `frame` has been heard: they end `played`.
    public mutating func sounded(through frame: Int) {
        var kept = 0
        for i in sounding.indices {
            let id = sounding[i]
            if case .sounding(let last)? = records[id]?.phase, last < frame {
                let r = records.removeValue(forKey: id)!
                ends.append(Self.end(r.request, .played, started: true))
                retire(r.request)
            } else {
                sounding[kept] = id
                kept += 1
            }
        }
        sounding.removeLast(sounding.count - kept)
    }

    private mutating func soundedOne(_ id: UInt64) {
        guard let r = records.removeValue(forKey: id) else { return }
        if let i = sounding.firstIndex(of: id) { sounding.remove(at: i) }
        ends.append(Self.end(r.request, .played, started: true))
        retire(r.request)
    }

    /// The earliest stream position a `sounding` voice waits for, if any.
    public var nextSoundingFrame: Int? {
        var best: Int?
        for i in 0..<sounding.count {
            if case .sounding(let last)? = records[sounding[i]]?.phase { best = min(best ?? last, last) }
        }
        return best
    }

    /// Voices rendered but not heard when the stream is thrown away (the device
    /// failed or was reopened): each ends `reason`.
    public mutating func finishSounding(_ reason: VoiceEndReason) {
        for id in sounding {
            guard let r = records.removeValue(forKey: id) else { continue }
            ends.append(Self.end(r.request, reason, started: true))
            retire(r.request)
        }
        sounding.removeAll(keepingCapacity: true)
    }

    /// The stream drained: everything rendered has been heard.
    public mutating func soundedAll() { sounded(through: .max) }

    /// Whether `scope` selects voice `id` (false for an unknown id).
    public func matches(_ id: UInt64, _ scope: StopScope) -> Bool {
        guard let r = records[id] else { return false }
        return scope.matches(r.request)
    }

    /// Kept within the reserved capacity (past it, rare, the request is released where it is).
    private mutating func retire(_ r: VoiceRequest) {
        if retired.count < retired.capacity { retired.append(r) }
    }

    /// Hands over the requests of the voices ended since the last call, and forgets them.
    public mutating func takeRetired(_ each: (VoiceRequest) -> Void) {
        guard !retired.isEmpty else { return }
        for i in 0..<retired.count { each(retired[i]) }
        retired.removeAll(keepingCapacity: true)
    }

    /// Hands over the ends gathered since the last call, in order, and forgets them.
    public mutating func takeEnds(_ each: (VoiceEnd) -> Void) {
        guard !ends.isEmpty else { return }
        for i in 0..<ends.count { each(ends[i]) }
        ends.removeAll(keepingCapacity: true)
    }
}
