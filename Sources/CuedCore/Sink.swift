#if canImport(Glibc)
import Glibc
#endif

public enum SampleFormat: String, Sendable {
    case s16 = "S16_LE"
    case float = "FLOAT_LE"
    public var bytes: Int { self == .s16 ? 2 : 4 }
}

/// What a sink negotiated when it opened.
public struct SinkFormat: Sendable, Equatable {
    /// The format of the sinks that pace themselves with a `DeviceClock` (null,
    /// WAV, fault): 16-bit stereo, a buffer of `latencyMs`, a period of half of it.
    public static func clocked(rate: Int = 48_000, latencyMs: Int) -> SinkFormat {
        let buffer = max(64, rate * latencyMs / 1000)
        return SinkFormat(rate: rate, channels: 2, sampleFormat: .s16, periodFrames: buffer / 2, bufferFrames: buffer)
    }

    public var rate: Int
    public var channels: Int
    public var sampleFormat: SampleFormat
    public var periodFrames: Int
    public var bufferFrames: Int
    public init(rate: Int, channels: Int, sampleFormat: SampleFormat, periodFrames: Int, bufferFrames: Int) {
        self.rate = rate; self.channels = channels; self.sampleFormat = sampleFormat
        self.periodFrames = periodFrames; self.bufferFrames = bufferFrames
    }
}

public struct SinkError: Error, Sendable, CustomStringConvertible {
    /// Every SinkError loses the device (the engine closes it and retries);
    /// recoverable hiccups (xruns) are handled inside the sink.
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// What one `write` did: frames the device took (0: no room), xruns recovered on the way,
/// and cycles a sound server's graph was found to have run without the stream's audio
/// since the last write (`missedCycles`: it played silence instead; the native PipeWire
/// stream's count, where no xrun is ever reported).
public struct SinkWrite: Sendable, Equatable {
    public var frames: Int
    public var xruns: Int
    public var missedCycles: Int
    public init(frames: Int, xruns: Int = 0, missedCycles: Int = 0) {
        self.frames = frames; self.xruns = xruns; self.missedCycles = missedCycles
    }
}

/// One audio output. Every method is called on the audio thread only (except
/// `preflight`, called once before it starts), in the order
/// open → (write* → stop)* → close; none is thread-safe.
public protocol Sink: AnyObject {
    /// The user-facing spec, e.g. `alsa:default`, `null`, `wav:/tmp/x.wav`.
    var spec: String { get }
    /// What the output is, for `status`: `hw`, `pipewire`, `pulse`, `dmix`, `ioplug`, `null`, `wav`, …
    /// (for ALSA known once opened).
    var kind: String { get }
    /// Why this output: `--sink auto`'s reason for the one it picked; nil for a named one.
    /// `spec` and `why` may be read from any thread.
    var why: String? { get }
    /// Checks, before the daemon starts, what can never work (a WAV file in a
    /// missing directory, an ALSA PCM name nothing defines). A device that is
    /// merely busy or absent now is not an error: the engine retries.
    func preflight() throws(SinkError)
    /// Opens and prepares the device. The stream does not run until written.
    func open() throws(SinkError) -> SinkFormat
    /// While open: the descriptors to poll for room to write (the engine fills
    /// in `revents` before calling `hasRoom`). Empty: `write` paces itself.
    var pollDescriptors: UnsafeMutableBufferPointer<pollfd> { get }
    /// Frames the device has room for now, without waiting (`snd_pcm_avail_update`);
    /// `Int.max` when unknown, so that the next `write` finds out (an xrun to recover).
    func availableFrames() -> Int
    /// After a poll woke on `pollDescriptors`: decodes their `revents` (a plugin
    /// resets its own wake-up there) and says whether the device has room.
    /// Throws if they report that the device failed.
    func hasRoom() throws(SinkError) -> Bool
    /// Writes up to `frames` interleaved frames without waiting on a device
    /// (a self-clocked sink sleeps as a device would consume); restarts a
    /// stopped stream. Recoverable xruns are recovered and counted, not thrown.
    func write(_ data: UnsafeRawPointer, frames: Int) throws(SinkError) -> SinkWrite
    /// While the stream is stopped: descriptors that become readable if the device
    /// or its sound server fails (PipeWire's plugin signals its own eventfd). Empty: none.
    var idleWatchDescriptors: UnsafeMutableBufferPointer<pollfd> { get }
    /// After a poll woke on `idleWatchDescriptors`: true if the device has failed
    /// (else the wake-up is cleared and the watch goes on).
    func idleDeviceFailed() -> Bool
    /// Once open: the longest the device should stay open with its stream stopped
    /// (it costs the desktop something even then), nil: as configured.
    var idleCloseLimitSeconds: Double? { get }
    /// Once open: how long past its own delay figure to let the device play before
    /// stopping it (a sound server's figure can miss some); nil: the engine's default.
    var drainMarginSeconds: Double? { get }
    /// Frames written that have not sounded yet (the device delay).
    func delayFrames() -> Int
    /// While the stream runs: how many of the frames last written the device can
    /// give back to be written again, safely (what it will not take before they are
    /// written again); 0 if it cannot rewind. A cue that arrives mid-stream is mixed
    /// into those frames instead of being queued behind them.
    func rewindableFrames() -> Int
    /// Once open: how far ahead to write (`.fill` for a sound server's plugin, whose
    /// ring is not the device; `.lowWater`, the default, for the rest).
    var writeAhead: WriteAhead { get }
    /// Whether `pollDescriptors` can stay readable while the device has no room (PipeWire's
    /// ALSA plugin keeps its eventfd readable until it has): then a wake-up without room is
    /// followed by a timer, not another poll, which would return at once and spin. False
    /// for a sink whose `hasRoom` consumes every wake-up (the native PipeWire stream): it
    /// is polled again, so that the wake-up that brings room is not slept through.
    var descriptorsStayReadable: Bool { get }
    /// Whether its room, however small, is all it takes before its next cycle (the native
    /// PipeWire stream: the buffer the graph asks for, a quantum that can be smaller than
    /// cued's period when another app or the user forces one): then less than a period is
    /// written, else the stream would wait for room that never grows (it stalled at a forced
    /// quantum of 64). False: a device whose room grows (a ring) is written a period at a time.
    var takesAnyRoom: Bool { get }
    /// Gives back up to `frames` of the frames last written (the next write replaces
    /// them); returns how many it gave back.
    func rewind(frames: Int) -> Int
    /// Stops the stream at once, discarding what is queued (the engine only
    /// stops once what it wrote has played out).
    func stop()
    /// Closes the device. `open` may be called again later.
    func close()
}

extension Sink {
    public var kind: String { String(spec.prefix { $0 != ":" }) }
    public var why: String? { nil }
    public func preflight() throws(SinkError) {}
    public var pollDescriptors: UnsafeMutableBufferPointer<pollfd> { UnsafeMutableBufferPointer(start: nil, count: 0) }
    public func hasRoom() throws(SinkError) -> Bool { true }
    public func availableFrames() -> Int { .max }
    public var idleWatchDescriptors: UnsafeMutableBufferPointer<pollfd> { UnsafeMutableBufferPointer(start: nil, count: 0) }
    public func idleDeviceFailed() -> Bool { false }
    public var idleCloseLimitSeconds: Double? { nil }
    public var drainMarginSeconds: Double? { nil }
    public func rewindableFrames() -> Int { 0 }
    public var writeAhead: WriteAhead { .lowWater }
    public var descriptorsStayReadable: Bool { true }
    public var takesAnyRoom: Bool { false }
    public func rewind(frames: Int) -> Int { 0 }
}

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

/// Discards frames at the real sample rate (`--sink null`).
public final class NullSink: Sink {
    /// Its write waits as a device would (a `DeviceClock`): kept full, as before the
    /// low water, it sleeps once a period inside that write, which costs the audio thread
    /// half what a timed poll before each write does (measured: 9 vs 20 ms of CPU a second
    /// with a cue playing); nothing here is heard, so there is no latency to win.
    public var writeAhead: WriteAhead { .fill }
    public let spec: String
    private let format: SinkFormat
    private var clock: DeviceClock

    public init(spec: String = "null", latencyMs: Int = 10, rate: Int = 48_000) {
        self.spec = spec
        format = .clocked(rate: rate, latencyMs: latencyMs)
        clock = DeviceClock(rate: rate, bufferFrames: format.bufferFrames)
    }

    public func open() throws(SinkError) -> SinkFormat { format }
    public func write(_ data: UnsafeRawPointer, frames: Int) throws(SinkError) -> SinkWrite {
        clock.write(frames: frames)
        return SinkWrite(frames: frames)
    }
    public func delayFrames() -> Int { clock.delay() }
    public func stop() { clock.drop() }
    public func close() { clock.drop() }
}
