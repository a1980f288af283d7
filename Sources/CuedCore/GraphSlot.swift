/// The native PipeWire stream's hold on the graph's buffers, as one value: no
/// libpipewire call, no clock read. `PipeWireSink` does the calls (dequeue a buffer, copy
/// frames into it, hand it to the graph, read the graph's time) and tells this value what
/// happened; it decides what to do and keeps the accounts. Generic over the buffer handle
/// (`pw_buffer *` in the sink, a number in the tests, which drive it on a fake graph clock).
///
/// The slot holds at most one buffer of the graph's:
///
///     empty ──room (dequeue)──▶ filling ──full──▶ ready ──the graph's cycle takes it──▶ empty
///                                  ▲                │ rewind: taken back before its cycle
///                                  │                ▼
///                                  └──(a write)── refilling ──full──▶ ready
///
/// A buffer is filled to at least one whole cycle of the graph's, across writes if cued's
/// period is smaller: to what the graph asks for it (`pw_buffer.requested`, what its resampler
/// needs), to the cycle the graph runs, and to the cycle cued asks of it (`want`), whichever is
/// largest. Less loses a cycle: the stream's converter takes a cycle's frames from as many
/// buffers as it needs, asking again within the cycle, and cued has one ready; with a shorter
/// one it gives up, plays silence and asks for the rest next cycle, and a stream that follows
/// `requested` then stays a part-cycle out of step, every other cycle silent (measured: a
/// graph at 512 frames, 0 of 10 cues whole). More is kept by the converter for the next
/// cycle (a cycle cued asks for that the graph has not switched to yet). Once full it is `ready`, and the stream's process callback, inside the graph's next cycle, queues it
/// and the graph plays it in that same cycle. Until then it is still cued's: a cue that arrives
/// mid-stream takes it back (`rewind`) and is mixed into it, so it is heard in the graph's next
/// cycle. While it is being filled again (`refilling`, microseconds: its mix is at hand) the
/// graph's cycle must not run (`cycleMayRun`), else that cycle would find nothing where the
/// buffer was: a hole. Silence between cues (the linger) is written by the engine like any
/// other frames, so the slot has no state of its own for it.
///
/// Accounts: the frames not heard yet (`delay`), and the graph cycles that ran without cued's
/// audio (`missedCycles`, through `CycleAccount`, looked at just before each buffer is handed over).
public struct GraphSlot<Buffer: Equatable>: Equatable {
    public enum State: Equatable {
        /// No buffer held: the next write dequeues one.
        case empty
        /// A dequeued buffer being filled up to `target` frames.
        case filling(Buffer, frames: Int, target: Int)
        /// Full: the graph's next cycle takes it.
        case ready(Buffer, frames: Int)
        /// The ready buffer, given back by a rewind, filled again from `frames`.
        case refilling(Buffer, frames: Int, target: Int)
    }

    /// What the stream's clock said at the graph's last cycle (`pw_stream_get_time_n`), and
    /// what the process callback counted.
    public struct GraphTime: Equatable, Sendable {
        /// When the last cycle began (monotonic ns; 0: no cycle yet), and the graph's position then.
        public var now: UInt64
        public var ticks: UInt64
        /// `rateNum / rateDenom` s per unit of `delay`.
        public var rateNum: Int
        public var rateDenom: Int
        /// The device's delay after the graph (in rate units).
        public var delay: Int64
        /// Frames queued to the stream and not taken yet, and in its converter.
        public var queued: UInt64
        public var buffered: UInt64
        /// Frames cued queued since the stream's counters were reset, and what the last cycle took (0: none ready).
        public var queuedTotal: UInt64
        public var lastTook: UInt64
        public init(now: UInt64, ticks: UInt64 = 0, rateNum: Int = 1, rateDenom: Int = 48_000, delay: Int64 = 0,
                    queued: UInt64 = 0, buffered: UInt64 = 0, queuedTotal: UInt64 = 0, lastTook: UInt64 = 0) {
            self.now = now; self.ticks = ticks; self.rateNum = rateNum; self.rateDenom = rateDenom; self.delay = delay
            self.queued = queued; self.buffered = buffered; self.queuedTotal = queuedTotal; self.lastTook = lastTook
        }
    }

    public let rate: Int
    /// What a buffer is filled to when the graph asks nothing (cued's own cycle, at first).
    public let quantum: Int
    public private(set) var state: State = .empty
    /// The stream is active: the graph schedules it.
    public private(set) var active = false
    /// The graph's last cycle when the stream was made active: one after it has run with it.
    private var activatedAfter: UInt64 = 0
    /// The frames of the last buffer handed over: what the graph takes a cycle.
    private var lastBufferFrames = 0
    /// What the stream's buffers hold at most (frames).
    private var capacity = 0
    private var cycles = CycleAccount()
    private var missed = 0

    public init(rate: Int = 48_000, quantum: Int = 128) {
        self.rate = max(1, rate)
        self.quantum = max(1, quantum)
    }

    /// The buffer held, being filled (for the callback that says the stream took it away).
    public var held: Buffer? {
        switch state {
        case .filling(let b, _, _), .refilling(let b, _, _): return b
        case .empty, .ready: return nil
        }
    }

    /// The buffer the graph's next cycle takes (the process callback's).
    public var ready: Buffer? {
        if case .ready(let b, _) = state { return b }
        return nil
    }

    /// Whether the graph's cycle may run now: not while a buffer taken back is filled again.
    public var cycleMayRun: Bool {
        if case .refilling = state { return false }
        return true
    }

    /// Frames cued holds: being filled or ready.
    public var holding: Int {
        switch state {
        case .empty: return 0
        case .filling(_, let f, _), .refilling(_, let f, _), .ready(_, let f): return f
        }
    }

    /// The frames a write can take now: the rest of the buffer being filled, else a new buffer's
    /// worth if none is ready (one buffer ready for the graph's next cycle is enough). `want`: the
    /// cycle the graph runs or cued asks of it, whichever is larger (0: not known). `dequeue` gives
    /// a new buffer: what the graph asks for it (0: nothing said) and what it holds, or nil.
    public mutating func room(want: Int, dequeue: () -> (buffer: Buffer, requested: Int, capacity: Int)?) -> Int {
        switch state {
        case .filling(let b, 0, _):
            // Nothing in it yet (a buffer kept while the stream was stopped): sized for the cycle now.
            let target = Self.target(requested: 0, want: want, capacity: capacity, fallback: max(lastBufferFrames, quantum))
            state = .filling(b, frames: 0, target: target)
            return target
        case .filling(_, let f, let t), .refilling(_, let f, let t): return t - f
        case .ready: return 0
        case .empty:
            guard let d = dequeue() else { return 0 }
            capacity = d.capacity
            let target = Self.target(requested: d.requested, want: want, capacity: d.capacity, fallback: max(lastBufferFrames, quantum))
            state = .filling(d.buffer, frames: 0, target: target)
            return target
        }
    }

    private static func target(requested: Int, want: Int, capacity: Int, fallback: Int) -> Int {
        let asked = max(requested, want)
        return max(1, min(asked > 0 ? asked : fallback, capacity))
    }

    /// Takes up to `frames` more into the buffer held: where they go (frames from its start), and
    /// whether it is then full (then hand it over: `handOver`). Nil: nothing held (`room` first).
    public mutating func fill(_ frames: Int) -> (buffer: Buffer, offset: Int, count: Int, full: Bool)? {
        switch state {
        case .filling(let b, let f, let t):
            let n = max(0, min(frames, t - f))
            state = .filling(b, frames: f + n, target: t)
            return (b, f, n, f + n >= t)
        case .refilling(let b, let f, let t):
            let n = max(0, min(frames, t - f))
            state = .refilling(b, frames: f + n, target: t)
            return (b, f, n, f + n >= t)
        case .empty, .ready:
            return nil
        }
    }

    /// The full buffer becomes the one the graph's next cycle takes; `time` is what the graph said
    /// last (nil: nothing yet), `quantum` the frames of its last cycle (0: not known). Before that,
    /// the cycles the graph ran without cued's audio are looked for. Returns the buffer, its frames,
    /// and whether the stream must be made active first (the first buffer is ready before the stream
    /// is scheduled: its first cycle has it).
    public mutating func handOver(time: GraphTime?, quantum: Int) -> (buffer: Buffer, frames: Int, activate: Bool)? {
        let (b, frames): (Buffer, Int)
        switch state {
        case .filling(let x, let f, let t) where f >= t: (b, frames) = (x, f)
        case .refilling(let x, let f, let t) where f >= t: (b, frames) = (x, f)
        default: return nil
        }
        if active {
            // Compared only between buffers of the graph's cycle (see `CycleAccount`), and once the
            // graph has run a cycle since the counts were reset. In step from a stream's first look
            // when the graph has run a cycle since the stream was made active and the buffer it
            // started with (the last one handed over) was a whole cycle: the stream was flushed when
            // it stopped, so its converter held nothing part-played.
            if let t = time, t.now > 0, t.queued <= t.queuedTotal {
                let whole = quantum == frames ? frames : nil
                missed += cycles.look(ticks: t.ticks, taken: Int(clamping: t.queuedTotal - t.queued), quantum: whole,
                                      aligned: t.now > activatedAfter && whole != nil && lastBufferFrames == frames)
            } else {
                cycles.restart()
            }
        }
        state = .ready(b, frames: frames)
        lastBufferFrames = frames
        let activate = !active
        if activate {
            active = true
            activatedAfter = time?.now ?? 0
        }
        return (b, frames, activate)
    }

    /// The graph's cycle took the ready buffer.
    public mutating func taken() {
        if case .ready = state { state = .empty }
    }

    /// The stream took its buffers away (renegotiated): what was held or ready is gone.
    public mutating func buffersGone() {
        state = .empty
    }

    /// What a rewind can give back: the frames not handed to the graph yet.
    public var rewindable: Int { active ? holding : 0 }

    /// Gives back up to `frames` of the last frames written and not handed over; returns how
    /// many. The ready buffer becomes one being filled again, from where the next write goes on.
    public mutating func rewind(_ frames: Int) -> Int {
        guard frames > 0, active else { return 0 }
        switch state {
        case .empty: return 0
        case .filling(let b, let f, let t):
            let n = min(frames, f)
            state = .filling(b, frames: f - n, target: t)
            return n
        case .refilling(let b, let f, let t):
            let n = min(frames, f)
            state = .refilling(b, frames: f - n, target: t)
            return n
        case .ready(let b, let f):
            let n = min(frames, f)
            state = .refilling(b, frames: f - n, target: f)
            return n
        }
    }

    /// Cued now asks the graph for cycles of `want` frames, and the graph switches at its next
    /// cycle: a buffer held for a shorter one (being filled, or ready) gives back its frames (up to
    /// `canGiveBack`, those whose mix is at hand; all or none) to be written again into it, now
    /// sized for the new cycle; until it is full the graph's cycle does not run. Returns how many.
    /// (Not doing so lost the first cycle after every switch to a longer one: the converter, asked
    /// for the new cycle, found the old one's frames.)
    public mutating func resize(to want: Int, canGiveBack: Int) -> Int {
        let size = min(want, capacity > 0 ? capacity : want)
        let (b, frames, target): (Buffer, Int, Int)
        switch state {
        case .empty: return 0
        case .filling(let x, let f, let t), .refilling(let x, let f, let t): (b, frames, target) = (x, f, t)
        case .ready(let x, let f): (b, frames, target) = (x, f, f)
        }
        guard target < size, frames <= canGiveBack else { return 0 }
        state = active && frames > 0 ? .refilling(b, frames: 0, target: size) : .filling(b, frames: 0, target: size)
        return frames
    }

    /// Cycles found missed since the last call.
    public mutating func takeMissedCycles() -> Int {
        defer { missed = 0 }
        return missed
    }

    /// The stream goes inactive (stopped, or its counters reset): what cued holds is dropped, a
    /// buffer it holds is kept, empty, for the next write (dequeued, it is handed back to the
    /// stream only by queueing it). Returns whether it was active.
    @discardableResult
    public mutating func deactivate() -> Bool {
        switch state {
        case .empty: break
        case .filling(let b, _, let t), .refilling(let b, _, let t), .ready(let b, let t): state = .filling(b, frames: 0, target: t)
        }
        cycles.restart()
        missed = 0
        defer { active = false }
        return active
    }

    /// The stream is gone (closed): nothing held.
    public mutating func reset() {
        self = GraphSlot(rate: rate, quantum: quantum)
    }

    /// Frames written and not heard yet at `now`: what cued holds, plus what is queued and in the
    /// converter, plus what the graph holds: the rest of the buffer it took in its last cycle and
    /// the device's delay, less the time since that cycle began.
    public func delay(now: UInt64, time: GraphTime?) -> Int {
        guard let t = time else { return holding }
        // Queued and not yet taken: none but in the moment inside a cycle. Not `t.queued` alone
        // after a flush, which zeroes the counters it is the difference of.
        let queued = Int(clamping: min(t.queued, t.queuedTotal))
        let frames = holding + queued + min(Int(clamping: t.buffered), rate)
        // Until the graph has run a cycle since the stream was made active, nothing handed over has played.
        guard active, t.now > 0, t.now > activatedAfter, t.rateDenom > 0, t.rateNum > 0 else { return frames }
        let took = Int(clamping: t.lastTook)
        let device = Int(clamping: min(max(0, t.delay), Int64(t.rateDenom))) * rate * t.rateNum / t.rateDenom
        let elapsed = Int(min(now &- min(now, t.now), 1_000_000_000)) * rate / 1_000_000_000
        return frames + max(0, took + device - elapsed)
    }
}

extension GraphSlot: Sendable where Buffer: Sendable {}
extension GraphSlot.State: Sendable where Buffer: Sendable {}
