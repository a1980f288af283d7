import CuedCore
import Testing

/// How a stream ends, on the same fake clock: the linger, stalls and lost devices, a stop of
/// held cues, shutdown, and no deadline while idle (the driver is `DeviceMachineTests.Driver`).
extension DeviceMachineTests {
    // MARK: - Lingering (the native PipeWire stream)

    /// A device that lingers: once everything has sounded the stream goes on in silence for the
    /// linger (the voices have ended: `linger`), then it is stopped; `status` shows it idle
    /// meanwhile. The linger is the machine's deadline: no sink keeps a clock of its own.
    @Test func aLingeringDeviceRunsSilenceThenStops() {
        var d = Driver()
        d.cue("a")
        d.send(.opened(.init(bufferNs: 10_000_000, lingerNs: 2_000_000_000)))
        d.wrote(sounding: false, delayMs: 10)
        #expect(d.advance(by: 10) == ["linger"])
        #expect(d.m.phase == .lingering && d.m.stateTime == d.ns + 2_000_000_000)
        #expect(d.m.wantsToWrite)                          // silence, so the graph keeps running
        for _ in 0..<39 { d.advance(by: 50); d.wrote(sounding: false) }  // the stall watch (100 ms) runs on meanwhile
        #expect(d.deadlineMs == 1_010 + 2_000)
        #expect(d.advance(to: 3_010) == ["stop"])
        #expect(d.m.phase == .idle && d.m.stateTime == d.ns)
    }

    /// A device that lingers 2 s, its one cue sounded: lingering.
    func lingering() -> Driver {
        var d = Driver()
        d.cue("a")
        d.send(.opened(.init(bufferNs: 10_000_000, lingerNs: 2_000_000_000)))
        d.wrote(sounding: false, delayMs: 0)
        d.advance(by: 0)
        #expect(d.m.phase == .lingering)
        return d
    }

    /// A cue while the stream lingers joins it at once (the stream is running: no wake-up).
    @Test func aCueWhileLingeringJoinsTheRunningStream() {
        var d = lingering()
        for _ in 0..<10 { d.advance(by: 50); d.wrote(sounding: false) }
        #expect(d.cue("b") == ["start b"])
        #expect(d.m.phase == .streaming)
        d.wrote(sounding: false, delayMs: 0)
        #expect(d.advance(by: 0) == ["linger"])            // a full linger again after this cue
        #expect(d.m.stateTime == d.ns + 2_000_000_000)
    }

    /// The sound server went away while the stream lingered: nothing sounds, so the device is
    /// closed (not reopened under voices), and the next cue opens it afresh; a shutdown ends it.
    @Test func aFailureOrAShutdownWhileLingeringClosesIt() {
        var d = lingering()
        #expect(d.send(.writeFailed) == ["close"])
        #expect(d.m.phase == .closed)
        #expect(d.cue("b") == ["open"])
        d.send(.opened(.init(bufferNs: 10_000_000, lingerNs: 2_000_000_000)))
        d.wrote(sounding: false, delayMs: 0)
        d.advance(by: 0)
        #expect(d.send(.shutdown(deadline: d.ns + 500_000_000)) == ["cut voices", "stop", "close", "exit"])
    }

    // MARK: - Stalls and lost devices

    @Test func aRunningDeviceThatTakesNoFramesStallsAndIsReopenedUnderItsVoices() {
        var d = streaming()                                 // buffer 10 ms: stall after max(100, 40) ms
        d.wrote()
        #expect(d.deadlineMs == d.now + 100)
        d.advance(by: 50)
        d.wrote(0)                                          // no progress: the deadline stays
        #expect(d.deadlineMs == 1_100)
        #expect(d.advance(to: 1_100) == ["stall", "close", "open"])
        #expect(d.opened() == ["restart since 850"])        // voices requested in the last 250 ms restart
        #expect(d.m.phase == .streaming)
        #expect(d.deadlineMs == 1_200)
    }

    @Test func byDefaultAStartingStreamHasASecondThenAQuarterSecondWithoutAFrame() {
        var m = M()
        _ = m.handle(.cue("a", requestTime: 0), now: 0)
        _ = m.handle(.opened(bufferNs: 10_000_000, bufferFrames: 480), now: 0)
        #expect(m.deadline == 1_000_000_000)                 // the server may still be starting the stream
        _ = m.handle(.wrote(frames: 480, xruns: 0, sounding: true, delayNs: 0), now: 1_000_000)  // the first buffer
        #expect(m.deadline == 1_001_000_000)
        _ = m.handle(.wrote(frames: 240, xruns: 0, sounding: true, delayNs: 0), now: 6_000_000)  // it takes frames: started
        #expect(m.deadline == 256_000_000)
        #expect(m.handle(.timer, now: 255_999_999).isEmpty)
        #expect(m.handle(.timer, now: 256_000_000).count == 3)  // stall, close, open
        _ = m.handle(.opened(bufferNs: 10_000_000, bufferFrames: 480), now: 256_000_000)
        #expect(m.deadline == 1_256_000_000)                 // a reopened stream starts again
    }

    @Test func aStreamRestartedAfterIdleGetsTheStartAllowanceAgain() {
        var m = M()
        _ = m.handle(.prewarm, now: 0)
        _ = m.handle(.opened(bufferNs: 10_000_000, bufferFrames: 480), now: 0)
        _ = m.handle(.cue("a", requestTime: 0), now: 0)
        _ = m.handle(.wrote(frames: 480, xruns: 0, sounding: true, delayNs: 0), now: 0)
        _ = m.handle(.wrote(frames: 240, xruns: 0, sounding: false, delayNs: 0), now: 5_000_000)
        _ = m.handle(.timer, now: 25_000_000)             // drained: stopped, idle
        #expect(m.phase == .idle && m.stateTime == 25_000_000)
        _ = m.handle(.cue("b", requestTime: 0), now: 30_000_000)
        #expect(m.deadline == 1_030_000_000)
    }

    @Test func theStallTimeoutIsFourBuffersWhenThatIsLonger() {
        var d = Driver()
        d.cue("a")
        _ = d.opened(bufferMs: 40)
        #expect(d.deadlineMs == d.now + 160)
    }

    @Test func progressPostponesTheStall() {
        var d = streaming()
        for _ in 0..<50 { d.advance(by: 5); d.wrote() }     // 250 ms of steady writes
        #expect(d.m.phase == .streaming)
        #expect(d.deadlineMs == d.now + 100)
    }

    @Test func aStallWhosReopenFailsDropsTheVoices() {
        var d = streaming()
        d.advance(by: 100)
        #expect(d.send(.openFailed) == ["drop voices"])
        guard case .failed = d.m.state else { Issue.record("\(d.m.state)"); return }
    }

    @Test func aStallWhileOnlySilenceIsLeftClosesWithoutReopening() {
        var d = streaming()
        d.wrote(sounding: false, delayMs: 500)              // a long tail to play out
        #expect(d.advance(by: 100) == ["stall", "drop voices", "close"])
        #expect(d.m.phase == .closed)
    }

    @Test func xrunsRecoveredThreeTimesWithoutProgressAreALostDevice() {
        var d = streaming()
        d.wrote(0, xruns: 1)
        d.wrote(0, xruns: 1)
        #expect(d.wrote(0, xruns: 1) == ["lost", "close", "open"])
        #expect(d.opened() == ["restart since 750"])
    }

    @Test func xrunsWithProgressInBetweenAreOrdinary() {
        var d = streaming()
        for _ in 0..<10 {
            #expect(d.wrote(0, xruns: 1) == [])
            #expect(d.wrote(240, xruns: 1) == [])
        }
        #expect(d.m.phase == .streaming)
    }

    // MARK: - Stop of held cues

    @Test func heldCuesCanBeRemovedByAStop() {
        var d = Driver()
        d.cue("a"); d.cue("b"); d.cue("a")
        var removed: [String] = []
        #expect(d.m.removePending(where: { $0 == "a" }, removed: { removed.append($0) }) == 2)
        #expect(removed == ["a", "a"])
        #expect(d.opened() == ["start b"])
    }

    // MARK: - Shutdown

    @Test func shutdownWhenClosedExitsAtOnce() {
        var d = Driver()
        #expect(d.send(.shutdown(deadline: d.ns + 500_000_000)) == ["exit"])
        #expect(d.m.phase == .finished)
        #expect(d.cue("a") == ["drop a 0"])
    }

    @Test func shutdownWhenIdleClosesAndExits() {
        var d = Driver()
        d.send(.prewarm); d.opened()
        #expect(d.send(.shutdown(deadline: d.ns + 500_000_000)) == ["close", "exit"])
    }

    @Test func shutdownDropsHeldCues() {
        var d = Driver()
        d.cue("a")
        d.send(.openFailed)
        #expect(d.send(.shutdown(deadline: d.ns)) == ["drop a 0", "exit"])
    }

    @Test func shutdownLetsVoicesFinishThenExits() {
        var d = streaming()
        #expect(d.send(.shutdown(deadline: d.ns + 500_000_000)) == [])
        #expect(d.cue("late") == ["drop late 0"])           // no new cues
        d.advance(by: 20); d.wrote(sounding: false, delayMs: 10)
        #expect(d.advance(by: 10) == ["cut voices", "stop", "close", "exit"])
    }

    @Test func shutdownCutsVoicesAtTheDeadline() {
        var d = streaming()
        d.send(.shutdown(deadline: d.ns + 500_000_000))
        for _ in 0..<40 { d.advance(by: 10); d.wrote() }   // a long cue, 400 ms
        #expect(d.advance(to: 1_500) == ["cut voices", "stop", "close", "exit"])
    }

    @Test func shutdownWithAStalledDeviceEndsAtTheStallOrTheDeadline() {
        var d = streaming()
        d.send(.shutdown(deadline: d.ns + 500_000_000))
        // No progress: the stall comes first (100 ms) and, shutting down, ends it instead of reopening.
        #expect(d.advance(by: 100) == ["stall", "cut voices", "stop", "close", "exit"])
    }

    @Test func aWriteFailureDuringShutdownExits() {
        var d = streaming()
        d.send(.shutdown(deadline: d.ns + 500_000_000))
        #expect(d.send(.writeFailed) == ["drop voices", "close", "exit"])
    }

    // MARK: - Idle means no deadline

    @Test func deadlinesOnlyWhileSomethingIsDue() {
        var d = Driver(idleCloseMs: nil)
        #expect(d.m.deadline == nil)                        // closed
        d.cue("a")
        #expect(d.m.deadline == nil)                        // opening: the shell answers at once
        d.opened()
        #expect(d.m.deadline != nil)                        // streaming: the stall watch
        d.wrote(sounding: false, delayMs: 0)
        d.advance(by: 0)
        #expect(d.m.phase == .idle && d.m.stateTime == d.ns)
        #expect(d.m.deadline == nil)                        // idle, no idle-close: sleeps until a cue
    }
}
