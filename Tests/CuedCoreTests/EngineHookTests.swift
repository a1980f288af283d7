import CuedCore
import Synchronization
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The mixer's stop/restart/end reports, by voice id.
@Suite struct MixerStopTests {
    func cue(_ name: String, frames: Int, value: Float = 0.25) -> Cue {
        Cue(name: name, stereo: [Float](repeating: value, count: frames * 2))
    }

    @Test func stopFadesOnlyTheMatchingVoicesAndCountsThem() {
        let m = Mixer(maxVoices: 4, maxFrames: 8)
        m.start(cue("x", frames: 100), id: 1, gain: 1)
        m.start(cue("y", frames: 100), id: 2, gain: 1)
        m.start(cue("x", frames: 100), id: 3, gain: 1)
        #expect(m.stop(fadeFrames: 4, reason: .stoppedByID) { $0 == 1 } == 1)
        #expect(m.stop(fadeFrames: 4, reason: .stoppedByID) { $0 == 1 } == 0)  // already stopping
        m.render(frames: 8)
        // Voice 1 faded out within 4 frames: it ended, as stopped; the others play on.
        #expect(m.endedCount == 1)
        #expect(m.ended[0] == Mixer.Ended(id: 1, reason: .stoppedByID, lastFrame: 3))
        #expect(m.mix[2 * 5] == 0.5)  // frame 5: only 2 and 3
        #expect(m.activeVoices == 2)
    }

    @Test func aVoiceThatPlaysToItsEndEndsAsPlayedAtItsLastFrame() {
        let m = Mixer(maxVoices: 2, maxFrames: 8)
        m.start(cue("x", frames: 10), id: 9, gain: 1)
        m.render(frames: 8)
        #expect(m.endedCount == 0)
        m.render(frames: 8)
        #expect(m.endedCount == 1 && m.ended[0] == Mixer.Ended(id: 9, reason: .played, lastFrame: 1))
    }

    @Test func aStolenVoiceEndsAsStolen() {
        let m = Mixer(maxVoices: 1, maxFrames: 8, stealFadeFrames: 2)
        m.start(cue("x", frames: 100), id: 1, gain: 1)
        #expect(m.start(cue("y", frames: 100), id: 2, gain: 1) == .stole(id: 1))
        m.render(frames: 8)
        #expect(m.endedCount == 1 && m.ended[0].id == 1 && m.ended[0].reason == .stolen)
    }

    @Test func aFadingVoicePushedOutBetweenRendersIsHandedOver() {
        // One voice, one tail: each start steals the playing voice into the tail,
        // pushing out the one fading there before any render could report it.
        let m = Mixer(maxVoices: 1, maxFrames: 8, stealFadeFrames: 4)
        m.start(cue("a", frames: 100), id: 1, gain: 1)
        #expect(m.start(cue("b", frames: 100), id: 2, gain: 1) == .stole(id: 1))  // a → tail
        #expect(m.start(cue("c", frames: 100), id: 3, gain: 1) == .stole(id: 2))  // b → tail, a evicted
        #expect(m.start(cue("d", frames: 100), id: 4, gain: 1) == .stole(id: 3))  // c → tail, b evicted
        var evicted: [UInt64] = []
        m.takeEvicted { id, reason in evicted.append(id); #expect(reason == .stolen) }
        #expect(evicted == [1, 2])
        m.takeEvicted { _, _ in Issue.record("handed over twice") }
        m.render(frames: 8)  // c's fade ends here; d plays on
        #expect(m.endedCount == 1 && m.ended[0].id == 3 && m.ended[0].reason == .stolen)
    }

    @Test func restartKeepsRecentVoicesFromTheirFirstFrameAndDropsOlderOnes() {
        let m = Mixer(maxVoices: 4, maxFrames: 4, limiting: false)
        let ramp = Cue(name: "ramp", stereo: (0..<8).flatMap { [Float($0), Float($0)] })
        m.start(ramp, id: 1, gain: 1, requestTime: 1_000)
        m.start(cue("old", frames: 100), id: 2, gain: 1, requestTime: 10)
        m.render(frames: 4)
        var dropped: [UInt64] = []
        m.restart(requestedSince: 500) { dropped.append($0.id) }
        #expect(dropped == [2])
        m.render(frames: 4)
        #expect(Array(UnsafeBufferPointer(start: m.mix, count: 8)) == [0, 0, 1, 1, 2, 2, 3, 3])
    }

    @Test func aLoopedVoiceRepeatsItsCueBackToBack() {
        let m = Mixer(maxVoices: 1, maxFrames: 8, limiting: false)
        let ramp = Cue(name: "ramp", stereo: (1...3).flatMap { [Float($0), Float($0)] })
        m.start(ramp, id: 1, gain: 1, loop: .times(3))
        m.render(frames: 8)
        #expect((0..<8).map { m.mix[2 * $0] } == [1, 2, 3, 1, 2, 3, 1, 2])
        #expect(m.endedCount == 0)
        m.render(frames: 8)
        #expect((0..<2).map { m.mix[2 * $0] } == [3, 0])
        #expect(m.ended[0] == Mixer.Ended(id: 1, reason: .played, lastFrame: 0))
    }

    @Test func anEmptyCueNeverLoopsForever() {
        let m = Mixer(maxVoices: 1, maxFrames: 8, limiting: false)
        m.start(Cue(name: "empty", stereo: []), id: 1, gain: 1, loop: .forever)
        m.render(frames: 8)
        #expect(m.endedCount == 1 && m.ended[0] == Mixer.Ended(id: 1, reason: .played, lastFrame: -1))
        #expect(!m.isSounding)
    }
}

@Suite(.timeLimit(.minutes(1))) struct EngineHookTests {
    final class Events: Sendable {
        let list = Mutex<[EngineEvent]>([])
        func add(_ e: EngineEvent) { list.withLock { $0.append(e) } }
        func wait(_ condition: ([EngineEvent]) -> Bool) -> Bool {
            eventually(timeout: 5) { list.withLock { condition($0) } }
        }
    }

    func ended(_ events: [EngineEvent]) -> [UInt64: VoiceEndReason] {
        var out: [UInt64: VoiceEndReason] = [:]
        for case .voiceEnded(let e) in events { out[e.id] = e.reason }
        return out
    }

    func play(_ cue: Cue, _ id: UInt64, owner: String, wait: Bool, requestTime: UInt64 = 0) -> AudioEngine.Command {
        .play(VoiceRequest(id: id, cue: cue, requestTime: requestTime, owner: owner, notify: wait ? [.wait] : []))
    }

    @Test func stopByOwnerAnswersWithItsTicketAndWaitersHearHowTheirVoicesEnded() {
        let events = Events()
        let engine = AudioEngine(sink: NullSink(latencyMs: 10)) { events.add($0) }
        engine.start()
        defer { engine.shutdown(graceMs: 0) }
        let long = Cue(name: "long", stereo: [Float](repeating: 0.1, count: 48_000 * 2))
        let short = Cue(name: "short", stereo: [Float](repeating: 0.1, count: 480 * 2))
        engine.submit(play(long, 1, owner: "a", wait: true))
        engine.submit(play(long, 2, owner: "a", wait: true))
        engine.submit(play(short, 3, owner: "b", wait: true))
        engine.submit(play(short, 4, owner: "b", wait: false))  // nobody waits
        #expect(events.wait { ended($0)[3] == .played })
        engine.submit(.stop(.owner("a"), ticket: 77))
        #expect(events.wait { $0.contains { if case .stopped(77, 2) = $0 { return true }; return false } })
        #expect(events.wait { ended($0)[1] == .stoppedByOwner && ended($0)[2] == .stoppedByOwner })
        engine.submit(.stop(.cue(name: "long", owner: "b"), ticket: 78))
        #expect(events.wait { $0.contains { if case .stopped(78, 0) = $0 { return true }; return false } })
        #expect(events.list.withLock { ended($0).count } == 3)  // voice 4, unwatched and played, never reported
    }

    /// `sync` is answered once what came before it was taken: a cue's failed open is
    /// already reported (what `status wait` relies on).
    @Test func syncIsAnsweredAfterTheCueBeforeItTriedTheDevice() throws {
        let events = Events()
        let sink = try FaultSink.parse("open-fail=1000").get()
        let engine = AudioEngine(sink: sink) { events.add($0) }
        engine.start()
        defer { engine.shutdown(graceMs: 0) }
        let short = Cue(name: "short", stereo: [Float](repeating: 0.1, count: 480 * 2))
        engine.submit(play(short, 1, owner: "a", wait: false))
        engine.submit(.sync(ticket: 9))
        #expect(events.wait { $0.contains { if case .synced(9) = $0 { return true }; return false } })
        let list = events.list.withLock { $0 }
        let failed = list.firstIndex { if case .openFailed = $0 { return true }; return false }
        let synced = list.firstIndex { if case .synced(9) = $0 { return true }; return false }
        #expect(failed != nil && failed! < synced!, "\(list)")
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
        engine.submit(play(pop, 4, owner: "mail", wait: true, requestTime: longAgo))
        #expect(events.wait { $0.contains { if case .voiceEnded(let e) = $0 { return e.cue == "pop" && e.owner == "mail" && e.lateNs >= 1_000_000_000 && e.reason == .late }; return false } })
        #expect(engine.stats.dropped.load(ordering: .relaxed) == 1)
    }

    @Test func shutdownReturnsWithinGracePlusTheAbandonLimitWhenTheThreadHangs() {
        var config = AudioEngine.Configuration()
        config.hangOnPlayForTesting = true
        let engine = AudioEngine(sink: NullSink(latencyMs: 10), configuration: config)
        engine.start()
        engine.submit(play(Cue(name: "x", stereo: [0, 0]), 1, owner: "", wait: false))
        // The thread took the cue and hangs: neither waiting nor turning its loop.
        #expect(eventually { !engine.stats.audioThreadIsHealthy(maxStallNanoseconds: 20_000_000) })
        // It returns (the suite's time limit catches a hang), saying it gave up on the thread.
        #expect(engine.shutdown(graceMs: 100, abandonAfterMs: 200) == false)
    }

    @Test func anIdleEngineShutsDownCleanly() {
        let engine = AudioEngine(sink: NullSink(latencyMs: 10))
        engine.start()
        #expect(engine.shutdown(graceMs: 500))
    }
}
