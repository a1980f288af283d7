@testable import CuedCore
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A device on a fake clock: it plays the frames it was given at the sample rate
/// from the time they were written (`now`, set by the test), through a buffer of
/// `bufferFrames`; or, `clockless`, takes every write at once as ALSA's `null`
/// does. It records every frame it kept (a rewind takes frames back) and when
/// each will be heard, and counts the times it ran dry while frames were due.
final class FakeDevice: Sink {
    let spec = "fake"
    var now: UInt64 = 0
    let format: SinkFormat
    let clockless: Bool
    /// Frames it keeps when giving back (nil: it cannot rewind).
    let rewindMargin: Int?
    let writeAhead: WriteAhead
    /// How long it lingers after its last cue (`Pacing.lingerNs`).
    var lingerNs: UInt64 = 0
    /// Its margin (nil: as for such a device: a ring's rewind margin, or a low water's).
    var margin: Margin?
    /// Margins it was asked for (`setMargin`).
    private(set) var marginsAsked: [Int] = []
    /// Xruns the next write that takes frames reports.
    var xrunsToReport = 0
    /// From this write on (counted from 1), it takes no frame (a stalled server).
    var stallFromWrite: Int?
    /// Every open fails while true.
    var failOpen = false
    /// Whether its descriptors can stay readable without room (PipeWire's plugin) or say only what is new.
    var descriptorsStayReadable = true
    /// Cycles a sound server's graph ran without the stream, reported by the next write that takes frames.
    var missedCyclesToReport = 0
    /// Its write waits for room as a blocking device (the null sink) does: it says it always
    /// has room, and a write moves `now` on until the frames fit.
    var waitsInWrite = false

    private(set) var timeline: FrameTimeline
    /// Samples kept, in stream order (16-bit stereo).
    private(set) var samples: [Int16] = []
    /// For each frame kept: when it is heard.
    private(set) var heardAt: [UInt64] = []
    private(set) var writes = 0
    private(set) var opens = 0
    /// Times the device ran dry with the stream running and frames still to come (a gap).
    private(set) var underruns = 0
    private(set) var roomChecks = 0
    private var running = false

    init(periodFrames: Int = 240, bufferFrames: Int = 480, clockless: Bool = false, rewindMargin: Int? = nil,
         writeAhead: WriteAhead = .lowWater) {
        format = SinkFormat(rate: 48_000, channels: 2, sampleFormat: .s16, periodFrames: periodFrames, bufferFrames: bufferFrames)
        self.clockless = clockless
        self.rewindMargin = rewindMargin
        self.writeAhead = writeAhead
        timeline = FrameTimeline(rate: 48_000)
    }

    var frames: Int { samples.count / 2 }
    func frame(_ i: Int) -> Int16 { samples[2 * i] }

    var pacing: Pacing {
        let m = margin ?? (writeAhead == .lowWater ? Pacing.lowWaterMargin(format) : .fixed)
        return Pacing(writeAhead: writeAhead, descriptorsStayReadable: descriptorsStayReadable, rewindKeeps: rewindMargin,
                      lingerNs: lingerNs, margin: m)
    }

    func open() throws(SinkError) -> OpenedDevice {
        opens += 1
        if failOpen { throw SinkError("fake: cannot open") }
        return OpenedDevice(kind: "fake", format: format, pacing: pacing)
    }

    /// Whether a longer cycle makes it give back what it holds (as the native stream does).
    var givesBackOnMargin = false
    func setMargin(frames: Int, canGiveBack: Int) -> Int {
        marginsAsked.append(frames)
        guard givesBackOnMargin, frames > (marginsAsked.dropLast().last ?? 0) else { return 0 }
        return rewind(frames: min(canGiveBack, rewindableFrames()))
    }
    /// Stalled: it says it has no room and takes nothing, until reopened.
    private(set) var stalled = false

    func availableFrames() -> Int {
        roomChecks += 1
        if stalled { return 0 }
        if waitsInWrite { return .max }
        return clockless ? format.bufferFrames : format.bufferFrames - timeline.queued(at: now)
    }
    func write(_ data: UnsafeRawPointer, frames n: Int) throws(SinkError) -> SinkWrite {
        writes += 1
        if let s = stallFromWrite, writes >= s, opens == 1 { stalled = true }
        if stalled { return SinkWrite(frames: 0) }
        if waitsInWrite, timeline.queued(at: now) + n > format.bufferFrames {
            now = timeline.time(ofFrame: timeline.written + n - format.bufferFrames)
        }
        let take = clockless ? n : min(n, max(0, format.bufferFrames - timeline.queued(at: now)))
        guard take > 0 else { return SinkWrite(frames: 0) }
        if running && !clockless && timeline.queued(at: now) == 0 { underruns += 1 }
        let queuedBefore = clockless ? 0 : timeline.queued(at: now)
        timeline.restartIfDry(now: now)
        if !clockless { timeline.add(take) }
        running = true
        let p = data.assumingMemoryBound(to: Int16.self)
        for i in 0..<take {
            samples.append(p[2 * i]); samples.append(p[2 * i + 1])
            heardAt.append(clockless ? now : now + UInt64(queuedBefore + i) * 1_000_000_000 / 48_000)
        }
        let missed = missedCyclesToReport, xruns = xrunsToReport
        missedCyclesToReport = 0
        xrunsToReport = 0
        return SinkWrite(frames: take, xruns: xruns, missedCycles: missed)
    }
    func delayFrames() -> Int { delayFrames(now: now) }
    /// Its own time (a write that waited moved it on), not the caller's.
    func delayFrames(now _: UInt64) -> Int { clockless ? 0 : timeline.queued(at: now) }
    func rewindableFrames() -> Int {
        guard rewindMargin != nil else { return 0 }
        return timeline.queued(at: now)
    }
    func rewind(frames n: Int) -> Int {
        guard rewindMargin != nil else { return 0 }
        let k = timeline.takeBack(n, now: now)
        samples.removeLast(2 * k)
        heardAt.removeLast(k)
        return k
    }
    private(set) var stops = 0
    func stop() { timeline.stop(); running = false; stops += 1 }
    func close() { timeline.stop(); running = false; stalled = false }
}

/// Drives a `Playback` on a fake clock the way the audio thread does: commands,
/// then steps until it sleeps; then time moves to whatever it sleeps until (the
/// device's room, a deadline, the end of the run).
struct FakeRun {
    let device: FakeDevice
    let playback: Playback
    private(set) var now: UInt64
    private(set) var events: [EngineEvent] = []
    /// When each event came (fake ns), beside `events`.
    private(set) var eventTimes: [UInt64] = []
    private let box: Box
    /// Steps taken (each one a loop turn of the audio thread).
    private(set) var steps = 0

    final class Box {
        var now: UInt64 = 0
        var events: [(UInt64, EngineEvent)] = []
        /// What `status` said of the sink as each event was reported.
        var sinkStates: [SinkState] = []
    }

    init(_ device: FakeDevice, voices: Int = 16, idleCloseSeconds: Double = 30, marginQuietSeconds: Double? = nil,
         start: UInt64 = 1_000_000_000) {
        var config = AudioEngine.Configuration()
        config.voices = voices
        config.idleCloseSeconds = idleCloseSeconds
        if let q = marginQuietSeconds { config.marginQuietSeconds = q }
        let box = Box()
        self.box = box
        self.device = device
        let stats = EngineStats()
        playback = Playback(sink: device, configuration: config, stats: stats) {
            box.events.append((box.now, $0))
            box.sinkStates.append(stats.sinkState)
        }
        now = start
        device.now = start
    }

    var stats: EngineStats { playback.stats }
    /// What `status` said of the sink as each event so far was reported.
    var sinkStates: [SinkState] { box.sinkStates }

    mutating func submit(_ command: AudioEngine.Command) {
        device.now = now
        box.now = now
        playback.take(command, now: now)
        collect()
        settle(deviceWoke: false)
    }

    mutating func play(_ cue: Cue, id: UInt64, priority: Int = 0, loop: VoiceLoop = .once,
                       notify: VoiceNotify = [.wait], owner: String = "o") {
        submit(.play(VoiceRequest(id: id, cue: cue, requestTime: now, owner: owner, priority: priority, loop: loop, notify: notify)))
    }

    /// Steps until the playback sleeps; returns how it sleeps.
    @discardableResult
    private mutating func settle(deviceWoke: Bool, until limit: UInt64? = nil) -> Playback.Wait {
        var woke = deviceWoke
        let limit = limit ?? now
        for _ in 0..<100_000 {
            // A device whose write waits moves time on: stop where the caller's time ends.
            if now > limit { collect(); return .sleep(until: now, watch: .none) }
            device.now = now
            box.now = now
            steps += 1
            let w = playback.step(now: now, deviceWoke: woke)
            now = max(now, device.now)  // a write that waited took time
            woke = false
            if w != .again { collect(); return w }
        }
        Issue.record("the playback never sleeps at \(now)")
        return .sleep(until: nil, watch: .none)
    }

    private mutating func collect() {
        events += box.events.map(\.1)
        eventTimes += box.events.map(\.0)
        box.events.removeAll()
    }

    /// Runs until `until` (fake ns), waking as the audio thread would.
    mutating func run(until end: UInt64) {
        var idleTurns = 0
        while true {
            let before = now
            let w = settle(deviceWoke: false, until: end)
            guard case .sleep(let until, let watch) = w, !playback.exited else { return }
            var next = until ?? end
            var roomWake = false
            if watch == .room && !device.stalled {
                // The device's descriptor: readable once a period has room.
                let room = device.timeline.time(ofFrame: device.timeline.written - device.format.bufferFrames + device.format.periodFrames)
                if room < next { next = max(room, now + 1); roomWake = true }
            }
            if next >= end { now = max(now, end); device.now = now; return }
            now = max(next, now)
            device.now = now
            if roomWake { settle(deviceWoke: true, until: end) }
            // A sleep that ends where it started, over and over, is the thread spinning.
            idleTurns = now == before ? idleTurns + 1 : 0
            if idleTurns > 1_000 { Issue.record("the playback spins at \(now) ns"); return }
        }
    }

    mutating func run(for ns: UInt64) { run(until: now + ns) }

    /// The ends seen so far, by voice id.
    var ends: [UInt64: VoiceEnd] {
        var out: [UInt64: VoiceEnd] = [:]
        for case .voiceEnded(let e) in events { out[e.id] = e }
        return out
    }
    /// When voice `id` ended (fake ns).
    func endTime(_ id: UInt64) -> UInt64? {
        for (i, e) in events.enumerated() { if case .voiceEnded(let v) = e, v.id == id { return eventTimes[i] } }
        return nil
    }
    var endCount: Int { events.reduce(0) { n, e in if case .voiceEnded = e { return n + 1 }; return n } }
}

extension UInt64 {
    static let ms: UInt64 = 1_000_000
}
