#if canImport(Glibc)
import Glibc
#endif

// The device contract: what an output is to the engine. A sink's `open` says what the
// opened device is and how it wants to be fed (`OpenedDevice`: its format and one `Pacing`
// value); the protocol keeps only the calls. Timing a device needs (PipeWire's linger, an
// idle close, a drain's margin) is in the pacing and run by `DeviceMachine` on its one
// clock; how far ahead to write by `OutputStream` and `MarginTuner`. Tested through a fake
// device on a fake clock (Tests/CuedCoreTests/FakeDevice.swift): no sound server needed.

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

/// How a stream keeps its device fed.
public enum WriteAhead: Sendable, Equatable {
    /// Keep the device's buffer full: a sound server's plugin, whose ring is not the
    /// device (the server takes from it on its own cycle); a sink whose write waits as a
    /// device would (null, wav: nothing heard, nothing to win). A cue that arrives
    /// mid-stream is mixed into what the device gives back (`rewind`) if it can.
    case fill
    /// Keep about a period and a margin written ahead (hardware, dmix, a file), and
    /// write a cue that arrives mid-stream at once: it waits behind that much at most,
    /// not behind a whole buffer.
    case lowWater
}

/// The margin a device is given against the machine's stalls, and how it grows
/// (`MarginTuner` grows it after a miss and shrinks it after a quiet while).
public enum Margin: Sendable, Equatable {
    /// Nothing cued writes changes it (the device paces itself, or takes all it is given at once).
    case fixed
    /// Frames kept queued beyond a period under `.lowWater`: from `start`, by `step`, up to `limit`.
    case frames(start: Int, step: Int, limit: Int)
    /// The cycle the device asks of its graph (PipeWire's `node.latency`), which is how long
    /// cued's thread may be late for one: from `start`, doubling (the graph runs powers of two)
    /// up to `limit`; the sink applies it (`Sink.setMargin`).
    case quantum(start: Int, limit: Int)
}

/// How a device wants to be fed, fixed for as long as it is open.
public struct Pacing: Sendable, Equatable {
    /// How far ahead to write (a sound server's plugin and the self-clocked sinks: `.fill`).
    public var writeAhead: WriteAhead
    /// Whether its poll descriptors can stay readable while it has no room (PipeWire's ALSA
    /// plugin keeps its eventfd readable until it has): then a wake-up without room is followed
    /// by a timer, not another poll, which would return at once and spin. False for a device
    /// whose every wake-up is consumed by `hasRoom` (the native PipeWire stream): it is polled
    /// again, so that the wake-up that brings room is not slept through.
    public var descriptorsStayReadable: Bool
    /// Whether its room, however small, is all it takes before its next cycle (the native
    /// PipeWire stream: the buffer the graph asks for, which can be smaller than cued's period):
    /// then less than a period is written. False: a device whose room grows (a ring) is written
    /// a period at a time (it stalled at a forced quantum of 64 before this).
    public var partialWrites: Bool
    /// Whether it can give back frames written and not yet taken (`rewind`), and how many of those
    /// a rewind leaves it (what it may take before the frames are written again); nil: it cannot.
    /// A cue that arrives mid-stream is mixed into what it gives back instead of queued behind it.
    public var rewindKeeps: Int?
    /// Whether its poll descriptors, while the stream is stopped, become readable if the device or
    /// its sound server fails (PipeWire's plugin signals its own eventfd; the native stream's loops).
    public var watchesWhileIdle: Bool
    /// The longest it should stay open with its stream stopped (it costs the desktop something
    /// even then); nil: as configured.
    public var idleCloseLimitNs: UInt64?
    /// How long past its own delay figure to let it play before stopping it (a sound server's figure
    /// can miss some); nil: the engine's default.
    public var drainMarginNs: UInt64?
    /// How long it stays active after its last cue has sounded, written silence, before it is stopped
    /// (0: stopped at once). The native PipeWire stream: waking a stopped one costs the server a round
    /// trip and the graph a quantum switch, and the cues of one gesture come within a second or two.
    public var lingerNs: UInt64
    /// The margin it is given against stalls, and how it grows.
    public var margin: Margin

    public init(writeAhead: WriteAhead = .lowWater, descriptorsStayReadable: Bool = true, partialWrites: Bool = false,
                rewindKeeps: Int? = nil, watchesWhileIdle: Bool = false, idleCloseLimitNs: UInt64? = nil,
                drainMarginNs: UInt64? = nil, lingerNs: UInt64 = 0, margin: Margin = .fixed) {
        self.writeAhead = writeAhead; self.descriptorsStayReadable = descriptorsStayReadable
        self.partialWrites = partialWrites; self.rewindKeeps = rewindKeeps; self.watchesWhileIdle = watchesWhileIdle
        self.idleCloseLimitNs = idleCloseLimitNs; self.drainMarginNs = drainMarginNs
        self.lingerNs = lingerNs; self.margin = margin
    }

    /// A sink whose write waits as a device would (null, wav, fault): kept full, it sleeps once a
    /// period inside that write, which costs the audio thread half what a timed poll before each
    /// write does (9 against 20 ms of CPU a second with a cue playing, measured); nothing there is
    /// heard, so there is no latency to win.
    public static let selfClocked = Pacing(writeAhead: .fill)

    /// The margin a device kept `.lowWater` starts with: 2 ms or half a period, up to what leaves a
    /// period of room in its buffer, growing by a period.
    public static func lowWaterMargin(_ f: SinkFormat) -> Margin {
        let start = max(f.rate / 500, f.periodFrames / 2)
        return .frames(start: start, step: max(1, f.periodFrames), limit: max(start, f.bufferFrames - 2 * f.periodFrames))
    }
}

/// What `Sink.open` says of the device it opened.
public struct OpenedDevice: Sendable, Equatable {
    /// What the output is, for `status`: `hw`, `pipewire`, `pulse`, `dmix`, `ioplug`, `null`, `wav`, …
    public var kind: String
    public var format: SinkFormat
    public var pacing: Pacing
    public init(kind: String, format: SinkFormat, pacing: Pacing = Pacing()) {
        self.kind = kind; self.format = format; self.pacing = pacing
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

/// One audio output. Every method is called on the audio thread only, in the order
/// open → (write* → stop)* → close, except `spec` and `why` (any thread) and `preflight`
/// (once, before the thread starts); none is thread-safe. No call waits on the device
/// (but a self-clocked sink's `write`, which sleeps as a device would consume).
public protocol Sink: AnyObject {
    /// The user-facing spec, e.g. `alsa:default`, `null`, `wav:/tmp/x.wav`.
    var spec: String { get }
    /// Why this output: `--sink auto`'s reason for the one it picked; nil for a named one.
    var why: String? { get }
    /// Checks, before the daemon starts, what can never work (a WAV file in a
    /// missing directory, an ALSA PCM name nothing defines). A device that is
    /// merely busy or absent now is not an error: the engine retries.
    func preflight() throws(SinkError)
    /// Opens and prepares the device, and says what it is and how to feed it. The stream
    /// does not run until written.
    func open() throws(SinkError) -> OpenedDevice
    /// While open: the descriptors to poll, for room while the stream runs (the engine fills in
    /// `revents` before calling `hasRoom`) and, if `Pacing.watchesWhileIdle`, for a failure while
    /// it is stopped. Empty: `write` paces itself.
    var pollDescriptors: UnsafeMutableBufferPointer<pollfd> { get }
    /// Frames the device has room for now, without waiting (`snd_pcm_avail_update`);
    /// `Int.max` when unknown, so that the next `write` finds out (an xrun to recover).
    func availableFrames() -> Int
    /// After a poll woke on `pollDescriptors` while the stream runs: decodes their `revents` (a
    /// plugin resets its own wake-up there) and says whether the device has room. Throws if they
    /// report that the device failed.
    func hasRoom() throws(SinkError) -> Bool
    /// Writes up to `frames` interleaved frames without waiting on a device
    /// (a self-clocked sink sleeps as a device would consume); restarts a
    /// stopped stream. Recoverable xruns are recovered and counted, not thrown.
    func write(_ data: UnsafeRawPointer, frames: Int) throws(SinkError) -> SinkWrite
    /// After a poll woke on `pollDescriptors` while the stream is stopped: true if the device has
    /// failed (else the wake-up is cleared and the watch goes on).
    func idleDeviceFailed() -> Bool
    /// Frames written that have not sounded yet at `now` (the device delay).
    func delayFrames(now: UInt64) -> Int
    /// While the stream runs, on a device that rewinds: how many of the frames last written it
    /// could give back now (what it has not taken yet); 0 if none.
    func rewindableFrames() -> Int
    /// Gives back up to `frames` of the frames last written (the next write replaces
    /// them); returns how many it gave back.
    func rewind(frames: Int) -> Int
    /// A `.quantum` margin changed: ask the graph for cycles of `frames`. A graph that switches to
    /// a longer cycle takes it at once, before a buffer made for the shorter one could be: the sink
    /// first gives back up to `canGiveBack` frames it holds that are too few for the new cycle (as
    /// `rewind` would), and returns how many, to be written again.
    func setMargin(frames: Int, canGiveBack: Int) -> Int
    /// Stops the stream at once, discarding what is queued (the engine only
    /// stops once what it wrote has played out, and any linger has passed).
    func stop()
    /// Closes the device. `open` may be called again later.
    func close()
    /// How the output did (a cue heard whole, one lost, a failure): for a sink that picks among
    /// outputs (`FollowingSink`), which benches one that keeps failing. Most ignore it.
    func note(_ outcome: OutputHealth.Outcome, now: UInt64)
}

extension Sink {
    public var why: String? { nil }
    public func preflight() throws(SinkError) {}
    public var pollDescriptors: UnsafeMutableBufferPointer<pollfd> { UnsafeMutableBufferPointer(start: nil, count: 0) }
    public func hasRoom() throws(SinkError) -> Bool { true }
    public func availableFrames() -> Int { .max }
    public func idleDeviceFailed() -> Bool { false }
    public func rewindableFrames() -> Int { 0 }
    public func rewind(frames: Int) -> Int { 0 }
    public func setMargin(frames: Int, canGiveBack: Int) -> Int { 0 }
    public func note(_ outcome: OutputHealth.Outcome, now: UInt64) {}
}
