import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// `--sink auto`, the default: where a desktop user's sound goes, picked again
/// each time the device opens (the first cue after an idle close, after a
/// sound server restart, after a failure), so cued follows the desktop as it
/// changes without ever polling for it: started before the sound server, it
/// plays there from the first cue after the server is up. `pick` tries the
/// outputs in order and says why it took the one it took (`AutoSink.choose`);
/// its `open` argument opens a candidate for real and keeps it open when it
/// works (nil), else says why not. While it plays to nothing (no output
/// opened), the device closes as soon as it is idle, so the next cue picks again.
///
/// Called on the audio thread, as any sink (and `preflight` before it starts);
/// `spec` and `why` may be read from any thread (status).
public final class FollowingSink: Sink {
    public typealias Pick = (_ open: (_ spec: String) -> String?) -> (spec: String, why: String)

    private let pick: Pick
    private let make: (String) -> any Sink
    private var sinks: [String: any Sink] = [:]
    private var current: (any Sink)?
    /// How each candidate did since a cue was last heard through it: one that failed twice with
    /// none heard is benched for a while (the pick takes the next), then tried again.
    private var health: [String: OutputHealth] = [:]
    private var currentSpec: String?
    /// The clock `open` reads the benches with (the engine's; a fake one in tests).
    private let clock: @Sendable () -> UInt64
    private let shown = Mutex<(spec: String, why: String)>(("auto", "auto: not opened yet"))

    /// `make`: the sink of a spec the pick tries or returns (`pipewire`, `alsa:PCM`, `null`).
    public init(pick: @escaping Pick, make: @escaping (String) -> any Sink,
                clock: @escaping @Sendable () -> UInt64 = { MonotonicClock.now() }) {
        self.pick = pick
        self.make = make
        self.clock = clock
    }

    public var spec: String { shown.withLock { $0.spec } }
    public var why: String? { shown.withLock { $0.why } }

    private func sink(_ spec: String) -> any Sink {
        if let s = sinks[spec] { return s }
        let s = make(spec)
        sinks[spec] = s
        health[spec] = OutputHealth()  // here, not on the audio thread's `note`: made once, with the sink
        return s
    }

    /// What the pick takes now (each candidate opened and closed again), so that
    /// `status` says where sound goes before the first cue.
    public func preflight() throws(SinkError) {
        let choice = pick { spec in
            let s = sink(spec)
            do throws(SinkError) { _ = try s.open(); s.close(); return nil } catch { return error.message }
        }
        shown.withLock { $0 = choice }
    }

    public func open() throws(SinkError) -> OpenedDevice {
        var opened: (sink: any Sink, device: OpenedDevice)?
        let now = clock()
        let choice = pick { spec in
            let s = sink(spec)
            if let opened { opened.sink.close() }  // a candidate that opened is not the pick (another was asked after it)
            opened = nil
            if health[spec]?.benched(now: now) == true, let h = health[spec], let until = h.retryAt {
                return "it opened but played nothing: \(h.summary ?? "it failed"); tried again in \((until - now + 999_999_999) / 1_000_000_000) s"
            }
            do throws(SinkError) { opened = (s, try s.open()); return nil } catch { return error.message }
        }
        shown.withLock { $0 = choice }
        if let opened, choice.spec != "null" {
            current = opened.sink
            currentSpec = choice.spec
            return opened.device
        }
        // Playing to nothing: closed as soon as it is idle, so that the next cue picks again.
        let null = sink("null")
        current = null
        currentSpec = nil
        var device = try null.open()
        device.pacing.idleCloseLimitNs = 0
        return device
    }

    public var pollDescriptors: UnsafeMutableBufferPointer<pollfd> { current!.pollDescriptors }
    public func availableFrames() -> Int { current!.availableFrames() }
    public func hasRoom() throws(SinkError) -> Bool { try current!.hasRoom() }
    public func write(_ data: UnsafeRawPointer, frames: Int) throws(SinkError) -> SinkWrite { try current!.write(data, frames: frames) }
    public func idleDeviceFailed() -> Bool { current!.idleDeviceFailed() }
    public func delayFrames(now: UInt64) -> Int { current!.delayFrames(now: now) }
    public func rewindableFrames() -> Int { current!.rewindableFrames() }
    public func rewind(frames: Int) -> Int { current!.rewind(frames: frames) }
    public func setMargin(frames: Int, canGiveBack: Int) -> Int { current?.setMargin(frames: frames, canGiveBack: canGiveBack) ?? 0 }
    public func stop() { current?.stop() }
    public func note(_ outcome: OutputHealth.Outcome, now: UInt64) {
        guard let spec = currentSpec else { return }
        health[spec]?.note(outcome, now: now)
    }
    public func close() {
        current?.close()
        current = nil
    }
}
