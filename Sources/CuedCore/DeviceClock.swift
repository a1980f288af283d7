#if canImport(Glibc)
import Glibc
#endif

/// Monotonic time in nanoseconds.
public enum MonotonicClock {
    public static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    /// Sleeps until the monotonic time `deadline` (ns).
    public static func sleep(until deadline: UInt64) {
        var ts = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
        while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nil) == EINTR {}
    }
}

/// Frames counted against real time from the moment a stream started: what a
/// device with a clock has played of what it was given. A stream that ran dry
/// starts again (as a device restarts after an underrun). The one piece of
/// real-time accounting shared by `DeviceClock` (a clocked test device) and
/// `OutputStream` (the engine's hold on a clockless one).
public struct FrameTimeline: Sendable {
    public let rate: Int
    private var startTime: UInt64 = 0
    public private(set) var written = 0
    private var running = false

    public init(rate: Int) { self.rate = max(1, rate) }

    private func played(at now: UInt64) -> Int {
        now > startTime ? Int((now - startTime) * UInt64(rate) / 1_000_000_000) : 0
    }

    /// Frames given and not yet played at `now`.
    public func queued(at now: UInt64) -> Int {
        running ? max(0, written - played(at: now)) : 0
    }

    /// When frame `frame` (counted from the start) has played.
    public func time(ofFrame frame: Int) -> UInt64 {
        startTime + (UInt64(max(0, frame)) * 1_000_000_000 + UInt64(rate) - 1) / UInt64(rate)
    }

    /// Starts counting afresh at `now` if nothing is queued (or nothing ran yet).
    public mutating func restartIfDry(now: UInt64) {
        if !running || played(at: now) >= written { startTime = now; written = 0; running = true }
    }

    /// Counts `frames` more given (after `restartIfDry`).
    public mutating func add(_ frames: Int) { written += frames }

    /// Takes back up to `frames` of those given and not yet played at `now`; returns how many.
    public mutating func takeBack(_ frames: Int, now: UInt64) -> Int {
        let n = min(max(0, frames), queued(at: now))
        written -= n
        return n
    }

    /// The stream stopped: the next frames start it again.
    public mutating func stop() { running = false }
}

/// A device clock: consumes frames at the real sample rate with a buffer of
/// `bufferFrames`, so a writer blocks exactly as it would on hardware.
public struct DeviceClock: Sendable {
    public let bufferFrames: Int
    private var timeline: FrameTimeline

    public init(rate: Int, bufferFrames: Int) {
        self.bufferFrames = bufferFrames
        timeline = FrameTimeline(rate: rate)
    }

    public var rate: Int { timeline.rate }

    /// Accounts for `frames` more frames, first sleeping until the buffer has
    /// room. A buffer that ran dry restarts the clock, as a device restarts
    /// after an underrun.
    public mutating func write(frames: Int) {
        timeline.restartIfDry(now: MonotonicClock.now())
        let needed = timeline.written + frames - bufferFrames
        if needed > 0 { MonotonicClock.sleep(until: timeline.time(ofFrame: needed)) }
        timeline.add(frames)
    }

    /// Frames written and not yet "played".
    public func delay(now: UInt64 = MonotonicClock.now()) -> Int { timeline.queued(at: now) }

    /// Discards what is queued: the next write starts the clock again.
    public mutating func drop() { timeline.stop() }

    /// Takes back up to `frames` of the last frames written, if not yet "played"; returns how many.
    public mutating func takeBack(_ frames: Int) -> Int { timeline.takeBack(frames, now: MonotonicClock.now()) }
}

/// Discards frames at the real sample rate (`--sink null`). Its write waits as a device
/// would (`Pacing.selfClocked`).
public final class NullSink: Sink {
    public let spec: String
    private let format: SinkFormat
    private var clock: DeviceClock

    public init(spec: String = "null", latencyMs: Int = 10, rate: Int = 48_000) {
        self.spec = spec
        format = .clocked(rate: rate, latencyMs: latencyMs)
        clock = DeviceClock(rate: rate, bufferFrames: format.bufferFrames)
    }

    public func open() throws(SinkError) -> OpenedDevice { OpenedDevice(kind: "null", format: format, pacing: .selfClocked) }
    public func write(_ data: UnsafeRawPointer, frames: Int) throws(SinkError) -> SinkWrite {
        clock.write(frames: frames)
        return SinkWrite(frames: frames)
    }
    public func delayFrames(now: UInt64) -> Int { clock.delay(now: now) }
    public func stop() { clock.drop() }
    public func close() { clock.drop() }
}
