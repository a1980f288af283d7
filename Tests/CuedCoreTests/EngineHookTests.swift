import CuedCore
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The mixer's stop/restart/end reports, and the engine hooks the daemon uses
/// (stop by scope with a ticket, voiceEnded for waited-for voices, drops with owners).
@Suite struct MixerStopTests {
    func cue(_ name: String, frames: Int, value: Float = 0.25) -> Cue {
        Cue(name: name, stereo: [Float](repeating: value, count: frames * 2))
    }

    @Test func stopFadesOnlyTheMatchingVoicesAndCountsThem() {
        let m = Mixer(maxVoices: 4, maxFrames: 8)
        m.start(cue("x", frames: 100), gain: 1, owner: "a", waitID: 1)
        m.start(cue("y", frames: 100), gain: 1, owner: "a", waitID: 2)
        m.start(cue("x", frames: 100), gain: 1, owner: "b", waitID: 3)
        #expect(m.stop(fadeFrames: 4) { $0 == "x" && $1 == "a" } == 1)
        #expect(m.stop(fadeFrames: 4) { $0 == "x" && $1 == "a" } == 0)  // already stopping
        m.render(frames: 8)
        // Voice 1 faded out within 4 frames: it ended, as stopped; the others play on.
        #expect(m.endedCount == 1)
        #expect(m.endedWaitIDs[0] == 1 && m.endedHow[0] == .stopped)
        #expect(m.mix[2 * 5] == 0.5)  // frame 5: only y and b's x
        #expect(m.activeVoices == 2)
    }

    @Test func aVoiceThatPlaysToItsEndEndsAsPlayed() {
        let m = Mixer(maxVoices: 2, maxFrames: 8)
        m.start(cue("x", frames: 10), gain: 1, waitID: 9)
        m.render(frames: 8)
        #expect(m.endedCount == 0)
        m.render(frames: 8)
        #expect(m.endedCount == 1 && m.endedWaitIDs[0] == 9 && m.endedHow[0] == .played)
    }

    @Test func aStolenVoiceEndsAsStopped() {
        let m = Mixer(maxVoices: 1, maxFrames: 8, stealFadeFrames: 2)
        m.start(cue("x", frames: 100), gain: 1, waitID: 1)
        #expect(m.start(cue("y", frames: 100), gain: 1, waitID: 2))
        m.render(frames: 8)
        #expect(m.endedCount == 1 && m.endedWaitIDs[0] == 1 && m.endedHow[0] == .stopped)
    }

    @Test func aFadingVoicePushedOutBetweenRendersIsHandedOverAsStopped() {
        // One voice, one tail: each start steals the playing voice into the tail,
        // pushing out the one fading there before any render could report it.
        let m = Mixer(maxVoices: 1, maxFrames: 8, stealFadeFrames: 4)
        m.start(cue("a", frames: 100), gain: 1, waitID: 1)
        #expect(m.start(cue("b", frames: 100), gain: 1, waitID: 2))  // a → tail
        #expect(m.start(cue("c", frames: 100), gain: 1, waitID: 3))  // b → tail, a evicted
        #expect(m.start(cue("d", frames: 100), gain: 1))             // c → tail, b evicted
        var evicted: [UInt64] = []
        m.takeEvicted { evicted.append($0) }
        #expect(evicted == [1, 2])
        m.takeEvicted { _ in Issue.record("handed over twice") }
        m.render(frames: 8)  // c's fade ends here; d plays on
        #expect(m.endedCount == 1 && m.endedWaitIDs[0] == 3 && m.endedHow[0] == .stopped)
    }

    @Test func restartKeepsRecentVoicesFromTheirFirstFrameAndDropsOlderOnes() {
        let m = Mixer(maxVoices: 4, maxFrames: 4)
        let ramp = Cue(name: "ramp", stereo: (0..<8).flatMap { [Float($0), Float($0)] })
        m.start(ramp, gain: 1, requestTime: 1_000, owner: "new")
        m.start(cue("old", frames: 100), gain: 1, requestTime: 10, owner: "old")
        m.render(frames: 4)
        var dropped: [String] = []
        m.restart(requestedSince: 500) { dropped.append($0.owner) }
        #expect(dropped == ["old"])
        m.render(frames: 4)
        #expect(Array(UnsafeBufferPointer(start: m.mix, count: 8)) == [0, 0, 1, 1, 2, 2, 3, 3])
    }
}

@Suite(.timeLimit(.minutes(1))) struct EngineHookTests {
    final class Events: Sendable {
        let list = Mutex<[EngineEvent]>([])
        func add(_ e: EngineEvent) { list.withLock { $0.append(e) } }
        func wait(_ condition: ([EngineEvent]) -> Bool) -> Bool {
            for _ in 0..<500 {  // 5 s at most
                if list.withLock({ condition($0) }) { return true }
                usleep(10_000)
            }
            return false
        }
    }

    func ended(_ events: [EngineEvent]) -> [UInt64: VoiceOutcome] {
        var out: [UInt64: VoiceOutcome] = [:]
        for case .voiceEnded(let id, let outcome) in events { out[id] = outcome }
        return out
    }

    @Test func stopByOwnerAnswersWithItsTicketAndWaitersHearHowTheirVoicesEnded() {
        let events = Events()
        let engine = AudioEngine(sink: NullSink(latencyMs: 10)) { events.add($0) }
        engine.start()
        defer { engine.shutdown(graceMs: 0) }
        let long = Cue(name: "long", stereo: [Float](repeating: 0.1, count: 48_000 * 2))
        let short = Cue(name: "short", stereo: [Float](repeating: 0.1, count: 480 * 2))
        engine.submit(.play(long, gain: 1, requestTime: 0, owner: "a", waitID: 1))
        engine.submit(.play(long, gain: 1, requestTime: 0, owner: "a", waitID: 2))
        engine.submit(.play(short, gain: 1, requestTime: 0, owner: "b", waitID: 3))
        engine.submit(.play(short, gain: 1, requestTime: 0, owner: "b", waitID: 0))  // nobody waits
        #expect(events.wait { ended($0)[3] == .played })
        engine.submit(.stop(.owner("a"), ticket: 77))
        #expect(events.wait { $0.contains { if case .stopped(77, 2) = $0 { return true }; return false } })
        #expect(events.wait { ended($0)[1] == .stopped && ended($0)[2] == .stopped })
        engine.submit(.stop(.cue(name: "long", owner: "b"), ticket: 78))
        #expect(events.wait { $0.contains { if case .stopped(78, 0) = $0 { return true }; return false } })
        #expect(events.list.withLock { ended($0).count } == 3)  // waitID 0 never reported
    }

    @Test func aStopWithTheDeviceClosedAnswersZeroAtOnce() {
        let events = Events()
        let engine = AudioEngine(sink: NullSink(latencyMs: 10)) { events.add($0) }
        engine.start()
        defer { engine.shutdown(graceMs: 0) }
        engine.submit(.stop(.all, ticket: 5))
        #expect(events.wait { $0.contains { if case .stopped(5, 0) = $0 { return true }; return false } })
    }

    @Test func aLateCueIsDroppedWithItsNameAndOwner() {
        let events = Events()
        let engine = AudioEngine(sink: NullSink(latencyMs: 10)) { events.add($0) }
        engine.start()
        defer { engine.shutdown(graceMs: 0) }
        let pop = Cue(name: "pop", stereo: [Float](repeating: 0.1, count: 480 * 2))
        let longAgo = MonotonicClock.now() - 1_000_000_000
        engine.submit(.play(pop, gain: 1, requestTime: longAgo, owner: "mail", waitID: 4))
        #expect(events.wait { $0.contains { if case .dropped("pop", "mail", let late, false) = $0 { return late >= 1000 }; return false } })
        #expect(events.wait { ended($0)[4] == .dropped })
        #expect(engine.stats.dropped.load(ordering: .relaxed) == 1)
    }

    @Test func shutdownReturnsWithinGracePlusTheAbandonLimitWhenTheThreadHangs() {
        var config = AudioEngine.Configuration()
        config.hangOnPlayForTesting = true
        let engine = AudioEngine(sink: NullSink(latencyMs: 10), configuration: config)
        engine.start()
        engine.submit(.play(Cue(name: "x", stereo: [0, 0]), gain: 1, requestTime: 0, owner: "", waitID: 0))
        usleep(50_000)
        let start = MonotonicClock.now()
        #expect(engine.shutdown(graceMs: 100, abandonAfterMs: 200) == false)
        #expect(MonotonicClock.now() - start < 1_000_000_000)
    }

    @Test func anIdleEngineShutsDownCleanly() {
        let engine = AudioEngine(sink: NullSink(latencyMs: 10))
        engine.start()
        #expect(engine.shutdown(graceMs: 500))
    }
}

/// A writer held to real time on a device without a clock.
@Suite struct WritePacerTests {
    let ms: UInt64 = 1_000_000

    @Test func aWriterMayRunAheadByTheLimitThenWaitsForRealTime() {
        var p = WritePacer(rate: 48_000, limitFrames: 720)  // 15 ms
        #expect(p.blockedUntil(now: 0) == nil)  // nothing written yet
        let t0: UInt64 = 1_000 * ms
        p.wrote(frames: 480, now: t0)
        #expect(p.blockedUntil(now: t0) == nil)  // 10 ms ahead
        p.wrote(frames: 240, now: t0)
        let until = p.blockedUntil(now: t0)      // 15 ms ahead: held
        #expect(until == t0 + 20_834)            // one frame's worth of real time (ceil 1e9/48000)
        #expect(p.blockedUntil(now: t0 + 5 * ms) == nil)
        p.wrote(frames: 240, now: t0 + 5 * ms)   // 20 ms written after 5 ms
        #expect(p.blockedUntil(now: t0 + 5 * ms)! > t0 + 5 * ms)
    }

    @Test func aWriterThatFellBehindRealTimeStartsAfresh() {
        var p = WritePacer(rate: 1_000, limitFrames: 10)
        p.wrote(frames: 10, now: 0)
        #expect(p.blockedUntil(now: 0) != nil)
        p.wrote(frames: 5, now: 100 * ms)       // 100 frames' time passed, 10 were written: ran dry
        #expect(p.blockedUntil(now: 100 * ms) == nil)
        p.wrote(frames: 5, now: 100 * ms)       // 10 ahead of the new start
        #expect(p.blockedUntil(now: 100 * ms) == 100 * ms + 1 * ms)
    }

    @Test func resetForgetsTheStream() {
        var p = WritePacer(rate: 1_000, limitFrames: 10)
        p.wrote(frames: 50, now: 0)
        #expect(p.blockedUntil(now: 0) != nil)
        p.reset()
        #expect(p.blockedUntil(now: 0) == nil)
    }
}

/// A device without a clock (as ALSA's `null`, or a `file` plugin over it): it
/// always has room and takes every write at once.
final class ClocklessSink: Sink, @unchecked Sendable {
    let spec = "clockless"
    let frames = Atomic<Int>(0)
    let writes = Atomic<Int>(0)
    func open() throws(SinkError) -> SinkFormat {
        SinkFormat(rate: 48_000, channels: 2, sampleFormat: .s16, periodFrames: 240, bufferFrames: 480)
    }
    func write(_ data: UnsafeRawPointer, frames n: Int) throws(SinkError) -> SinkWrite {
        frames.add(n, ordering: .relaxed)
        writes.add(1, ordering: .relaxed)
        return SinkWrite(frames: n)
    }
    func delayFrames() -> Int { 0 }
    func stop() {}
    func close() {}
}

@Suite(.timeLimit(.minutes(1))) struct ClocklessDeviceTests {
    @Test func theEngineWritesAClocklessDeviceAtTheSampleRateNotAsFastAsItTakes() {
        let sink = ClocklessSink()
        let engine = AudioEngine(sink: sink)
        engine.start()
        defer { engine.shutdown(graceMs: 0) }
        let start = MonotonicClock.now()
        // 0.3 s of sound, then the silence tail: about 0.3 s of frames in all, not seconds.
        engine.submit(.play(Cue(name: "x", stereo: [Float](repeating: 0.1, count: 14_400 * 2)), gain: 1,
                            requestTime: start, owner: "", waitID: 0))
        usleep(150_000)
        let written = sink.frames.load(ordering: .relaxed)  // first: then the time read after bounds it
        let elapsed = Int((MonotonicClock.now() - start) * 48_000 / 1_000_000_000)
        // Never more than real time plus the limit (buffer + period) and the period being written.
        #expect(written > 0)
        #expect(written <= elapsed + 480 + 240 + 240, "wrote \(written) frames in \(elapsed) frames' time")
        usleep(600_000)
        let total = sink.frames.load(ordering: .relaxed)
        #expect(total >= 14_400, "the whole cue was written")
        #expect(total < 48_000 * 2 / 3, "wrote \(total) frames for a 14,400-frame cue and its tail")
    }
}

/// A clocked device whose poll descriptor stays readable whether or not it has room,
/// as the PipeWire plugin's eventfd does until its poll_descriptors is called again.
/// It takes frames at the sample rate through a buffer of two periods.
final class LevelTriggeredSink: Sink, @unchecked Sendable {
    let spec = "level-triggered"
    let format = SinkFormat(rate: 48_000, channels: 2, sampleFormat: .s16, periodFrames: 480, bufferFrames: 960)
    private var clock = DeviceClock(rate: 48_000, bufferFrames: 960)
    private var fds: UnsafeMutableBufferPointer<pollfd>
    private var pipeFDs: [Int32] = [-1, -1]
    let roomChecks = Atomic<Int>(0)
    let frames = Atomic<Int>(0)
    init() {
        _ = pipe(&pipeFDs)
        var byte: UInt8 = 1
        _ = Glibc.write(pipeFDs[1], &byte, 1)  // readable from the start, and never read
        fds = .allocate(capacity: 1)
        fds[0] = pollfd(fd: pipeFDs[0], events: Int16(POLLIN), revents: 0)
    }
    deinit {
        for fd in pipeFDs { Glibc.close(fd) }
        fds.deallocate()
    }
    func open() throws(SinkError) -> SinkFormat { format }
    var pollDescriptors: UnsafeMutableBufferPointer<pollfd> { fds }
    func availableFrames() -> Int {
        roomChecks.add(1, ordering: .relaxed)
        return 960 - clock.delay()
    }
    func hasRoom() throws(SinkError) -> Bool { availableFrames() >= 480 }
    func write(_ data: UnsafeRawPointer, frames n: Int) throws(SinkError) -> SinkWrite {
        let n = min(n, max(0, 960 - clock.delay()))
        clock.write(frames: n)
        frames.add(n, ordering: .relaxed)
        return SinkWrite(frames: n)
    }
    func delayFrames() -> Int { clock.delay() }
    func stop() { clock.drop() }
    func close() { clock.drop() }
}

@Suite(.timeLimit(.minutes(1))) struct LevelTriggeredDeviceTests {
    /// The audio thread sleeps until the device has room even when the device's
    /// descriptor says "readable" all along: it asked the device for room ≈ 37,000
    /// times a second on PipeWire (a core at 100 %, SCHED_FIFO) before.
    @Test func aDescriptorThatStaysReadableDoesNotMakeTheThreadSpin() {
        let sink = LevelTriggeredSink()
        let engine = AudioEngine(sink: sink)
        engine.start()
        defer { engine.shutdown(graceMs: 0) }
        engine.submit(.play(Cue(name: "x", stereo: [Float](repeating: 0.1, count: 48_000 * 2)), gain: 1,
                            requestTime: MonotonicClock.now(), owner: "", waitID: 0))
        usleep(100_000)
        let checks0 = sink.roomChecks.load(ordering: .relaxed), frames0 = sink.frames.load(ordering: .relaxed)
        usleep(500_000)
        let checks = sink.roomChecks.load(ordering: .relaxed) - checks0
        let frames = sink.frames.load(ordering: .relaxed) - frames0
        // Half a second is 50 periods: the writer kept up with the device…
        #expect(frames >= 24_000 - 2 * 960, "wrote \(frames) frames in 0.5 s")
        // …and looked for room a few times a period, not thousands.
        #expect(checks < 1_000, "asked for room \(checks) times in 0.5 s (50 periods)")
    }
}
