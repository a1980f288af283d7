/// The output stream's accounting, as one clocked value: what is rendered,
/// written and heard, how far ahead to write, what a device can give back, and
/// when a frame will have sounded. No I/O and no clock reads: the audio thread
/// (`Playback`) tells it what it did and what the device said, with the time.
///
/// Positions count frames from the device's open (they never go back, but for
/// a rewind): `written` frames were handed to the device, `unwritten` more are
/// rendered and wait to be written, `history` frames of float mix (ending at
/// `rendered`) are at hand to be mixed again.
public struct OutputStream: Sendable {
    public let format: SinkFormat
    public let writeAhead: WriteAhead
    /// The device's descriptors can stay readable without room (see `Pacing.descriptorsStayReadable`).
    public let descriptorsStayReadable: Bool
    /// Less than a period is written when that is all the room there is (see `Pacing.partialWrites`).
    public let takesAnyRoom: Bool
    /// What a rewind leaves the device (`Pacing.rewindKeeps`); nil: it is not rewound.
    public let rewindKeeps: Int?
    /// The margin against stalls, grown after a miss and shrunk after a quiet while (kept across
    /// reopens: a new stream takes the last one's).
    public private(set) var tuner: MarginTuner
    /// The margin this stream keeps itself (a `.frames` one; nil otherwise): under `.lowWater` the
    /// frames kept queued beyond a period.
    public var marginFrames: Int? {
        if case .frames = tuner.margin { return tuner.frames }
        return nil
    }
    /// The cycle the device asks of its graph (a `.quantum` margin; nil otherwise): `Sink.setMargin`'s.
    public var cycleFrames: Int? {
        if case .quantum = tuner.margin { return tuner.frames }
        return nil
    }
    /// Under `.lowWater`: write when less than this is queued ahead of the device (a period and
    /// the margin, within the buffer less a period).
    public var lowWaterFrames: Int {
        let margin = marginFrames ?? max(format.rate / 500, format.periodFrames / 2)  // 2 ms, or half a period
        return max(1, min(format.periodFrames + margin, format.bufferFrames - format.periodFrames))
    }
    /// The most ever queued ahead of real time on a device without a clock (ALSA's
    /// `null`, a `file` over it): a buffer and a period.
    public let limitFrames: Int
    /// Frames of mix kept for a rewind: a buffer and a period.
    public let historyCapacity: Int
    /// The most rendered at once: a period, or half the buffer on a device that takes what it has
    /// room for (`takesAnyRoom`).
    public let maxRender: Int

    public private(set) var written = 0
    public private(set) var unwritten = 0
    public var rendered: Int { written + unwritten }
    public private(set) var history = 0
    /// The device took frames faster than real time (it has no clock): it is paced by
    /// `timeline`, and what is written has been heard.
    public private(set) var clockless = false
    private var timeline: FrameTimeline
    /// The device delay after the last write, and when that was.
    public private(set) var delay = 0
    private var delayAt: UInt64 = 0
    /// A voice started mid-stream: write it at once if the device has room.
    private var urgent = false
    /// The last write took nothing although the device said it had room: wait for its
    /// descriptors (or a deadline), never try again at once (that spins).
    private var starved = false
    /// Frames written since the stream (re)started.
    private var streamFrames = 0

    public init(format: SinkFormat, pacing: Pacing = Pacing(), tuner: MarginTuner = MarginTuner()) {
        self.format = format
        writeAhead = pacing.writeAhead
        descriptorsStayReadable = pacing.descriptorsStayReadable
        takesAnyRoom = pacing.partialWrites
        rewindKeeps = pacing.rewindKeeps
        self.tuner = tuner
        self.tuner.use(pacing.margin)
        limitFrames = format.bufferFrames + format.periodFrames
        historyCapacity = format.bufferFrames + format.periodFrames
        maxRender = pacing.partialWrites ? max(format.periodFrames, format.bufferFrames / 2) : format.periodFrames
        timeline = FrameTimeline(rate: format.rate)
    }


    public var period: Int { format.periodFrames }

    /// What to do next.
    public enum Next: Equatable, Sendable {
        /// Render `render` frames (0: none, write the unwritten ones) and write.
        case write(render: Int)
        /// Nothing to write before `until` (monotonic ns).
        case wait(until: UInt64)
        /// Wait until the device's descriptors say it has room.
        case waitForDevice
    }

    /// Frames queued ahead of the device's play position at `now`.
    public func ahead(now: UInt64) -> Int {
        if clockless { return timeline.queued(at: now) }
        return max(0, delay - frames(in: now &- delayAt))
    }

    /// Decides the next step at `now`: `room` is what the device can take
    /// (`Int.max`: unknown, a self-clocked device); `deviceWoke`: the device's
    /// descriptors just woke the thread.
    public func next(now: UInt64, room: Int, deviceWoke: Bool) -> Next {
        let chunk = unwritten > 0 ? unwritten : period
        let need = min(chunk, period)
        if starved && !deviceWoke { return .waitForDevice }
        if urgent && writeAhead == .lowWater && unwritten == 0 {
            // Write the new voice now, as much as the device and the limit allow (a quarter period at least).
            let n = min(period, room, limitFrames - timeline.queued(at: now))
            if n >= max(1, period / 4) { return .write(render: n) }
        }
        if room < need && !(takesAnyRoom && room > 0) {
            // Woken without room, by descriptors that say only what is new: poll them again.
            guard deviceWoke, descriptorsStayReadable else { return .waitForDevice }
            // Woken without room: a plugin may keep its descriptor readable until it has
            // room (PipeWire's eventfd), and polling it again would spin. A timer for the
            // frames missing (at least half a millisecond).
            return .wait(until: now &+ max(nanoseconds(need - max(0, room)), 500_000))
        }
        if timeline.queued(at: now) >= limitFrames {
            // A device without a clock always has room: real time is the limit.
            return .wait(until: timeline.time(ofFrame: timeline.written - limitFrames + 1))
        }
        if clockless && streamFrames < limitFrames && unwritten == 0 {
            // A device without a clock plays nothing in real time: what it takes is heard at
            // once (a file has it). A stream's start is given all it may hold ahead at once,
            // as a device with a clock would take a whole buffer (alsa-lib's `file` plugin
            // passes frames on only past one buffer); then it is paced like the rest.
            return .write(render: period)
        }
        if writeAhead == .lowWater && unwritten == 0 {
            let a = ahead(now: now)
            if a >= lowWaterFrames {
                return .wait(until: clockless ? timeline.time(ofFrame: timeline.written - lowWaterFrames + 1)
                                              : delayAt &+ nanoseconds(delay - lowWaterFrames + 1))
            }
        }
        // A device that takes what it has room for (the native stream: a buffer of the graph's
        // cycle) gets it rendered at once, not a period a turn: after a margin growth the first
        // buffer of the longer cycle must be made within one of the shorter.
        if takesAnyRoom && unwritten == 0 && room != .max && room > period { return .write(render: min(room, maxRender)) }
        return .write(render: unwritten > 0 ? 0 : period)
    }

    /// `frames` more were rendered (after the unwritten ones).
    public mutating func didRender(_ frames: Int) {
        unwritten += frames
        history = min(historyCapacity, history + frames)
    }

    /// The device took `frames` (`xruns` recovered on the way, `missedCycles` of its graph played
    /// without the stream) and now holds `delay` frames unheard. Returns whether the margin changed:
    /// grown after a miss that was `heard` (not in a lingering stream's silence: the margin answers
    /// what a user hears, not the stalls silence hid), or shrunk after a quiet while.
    @discardableResult
    public mutating func didWrite(frames: Int, xruns: Int, missedCycles: Int = 0, heard: Bool = true, delay: Int, now: UInt64) -> Bool {
        defer { self.delay = max(0, delay); delayAt = now }
        let changed = heard && (xruns > 0 || missedCycles > 0) ? tuner.missed(cycles: missedCycles, now: now) : tuner.tick(now: now)
        let n = max(0, min(frames, unwritten))
        written += n
        unwritten -= n
        starved = n == 0 && xruns == 0
        if n > 0 {
            timeline.restartIfDry(now: now)
            timeline.add(n)
            streamFrames += n
            urgent = false
            // A device with a clock holds what it was just given; one that holds
            // less than half of it took it faster than it can play.
            if delay < n / 2 { clockless = true }
        }
        if xruns > 0 {
            timeline.stop()
            history = min(history, unwritten)  // the device dropped what it held
        }
        return changed
    }

    /// Of `deviceCan` frames the device could give back, how many to take: it keeps what it may
    /// take meanwhile, and only frames whose mix is at hand are taken.
    public func rewindable(deviceCan: Int) -> Int {
        max(0, min(deviceCan - (rewindKeeps ?? 0), history - unwritten))
    }

    /// The device gave back `frames` of those last written: they are written again.
    public mutating func didRewind(_ frames: Int, now: UInt64) {
        let n = max(0, min(frames, written, history - unwritten))
        written -= n
        unwritten += n
        _ = timeline.takeBack(n, now: now)
        delay = max(0, delay - n)
    }

    /// A voice started while the stream runs: under `.lowWater` it is written at once.
    public mutating func voiceStartedMidStream() {
        urgent = true
    }

    /// Frames below this position have been heard at `now`.
    public func heard(now: UInt64) -> Int {
        if clockless { return written }
        return written - ahead(now: now)
    }

    /// When the frame at `position` will have been heard (now or in the past: `now`).
    public func timeHeard(_ position: Int, now: UInt64) -> UInt64 {
        if clockless || position < heard(now: now) { return now }
        let queuedBefore = position - (written - delay)  // frames queued at `delayAt` ahead of it, itself included
        return delayAt &+ nanoseconds(queuedBefore + 1)
    }

    /// The stream stopped once it drained: everything written has been heard.
    public mutating func stopped() {
        starved = false
        streamFrames = 0
        unwritten = 0
        history = 0
        delay = 0
        urgent = false
        timeline.stop()
    }

    /// The device was closed, or what it held thrown away: nothing is queued, nothing can be given back.
    public mutating func reset() {
        stopped()
        clockless = false
    }

    private func frames(in ns: UInt64) -> Int {
        Int(min(ns, 3_600_000_000_000) * UInt64(format.rate) / 1_000_000_000)
    }

    /// How long `frames` take to play, rounded up: by then they have (a timer set for
    /// less would wake the thread to find nothing changed, and again).
    private func nanoseconds(_ frames: Int) -> UInt64 {
        let rate = UInt64(max(1, format.rate))
        return (UInt64(max(0, frames)) * 1_000_000_000 + rate - 1) / rate
    }
}
