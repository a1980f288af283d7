import CuedCore
import Testing

/// The device lifecycle on a fake clock (milliseconds): every transition,
/// backoff, idle-close, the 250 ms start rule, stalls, lost devices, shutdown.
@Suite struct DeviceMachineTests {
    typealias M = DeviceMachine<String>

    /// A machine driven by a fake clock; actions rendered as short strings.
    struct Driver {
        var m: M
        var now: UInt64 = 1_000  // ms
        init(idleCloseMs: UInt64? = 30_000) {
            var s = M.Settings()
            s.idleCloseNs = idleCloseMs.map { $0 * 1_000_000 }
            s.drainMarginNs = 0  // the margin has its own test
            s.minStallNs = 100_000_000  // the defaults (250 ms, 1 s at start) have their own test
            s.startStallNs = 100_000_000
            m = M(settings: s)
        }
        var ns: UInt64 { now * 1_000_000 }

        @discardableResult
        mutating func send(_ e: M.Event) -> [String] { m.handle(e, now: ns).map(Self.name) }
        @discardableResult
        mutating func cue(_ job: String, requestedAt ms: UInt64? = nil) -> [String] {
            send(.cue(job, requestTime: (ms ?? now) * 1_000_000))
        }
        /// Advances to `ms` and fires the timer if the deadline has come.
        @discardableResult
        mutating func advance(to ms: UInt64) -> [String] {
            now = ms
            guard let d = m.deadline, d <= ns else { return [] }
            return send(.timer)
        }
        @discardableResult
        mutating func advance(by ms: UInt64) -> [String] { advance(to: now + ms) }
        /// A period written: frames taken, whether voices still sound, `delayMs` queued.
        @discardableResult
        mutating func wrote(_ frames: Int = 240, xruns: Int = 0, sounding: Bool = true, delayMs: UInt64 = 10) -> [String] {
            send(.wrote(frames: frames, xruns: xruns, sounding: sounding, delayNs: delayMs * 1_000_000))
        }
        @discardableResult
    mutating func opened(bufferMs: UInt64 = 10) -> [String] { send(.opened(bufferNs: bufferMs * 1_000_000)) }
        var deadlineMs: UInt64? { m.deadline.map { $0 / 1_000_000 } }

        static func name(_ a: M.Action) -> String {
            switch a {
            case .open: return "open"
            case .close: return "close"
            case .stopStream: return "stop"
            case .linger: return "linger"
            case .start(let j): return "start \(j)"
            case .drop(let j, let late): return "drop \(j) \(late / 1_000_000)"
            case .restartVoices(let since): return "restart since \(since / 1_000_000)"
            case .dropVoices: return "drop voices"
            case .cutVoices: return "cut voices"
            case .reportStall: return "stall"
            case .reportLost: return "lost"
            case .exit: return "exit"
            }
        }
    }

    /// Closed → open → playing, on a fresh driver.
    func streaming() -> Driver {
        var d = Driver()
        #expect(d.cue("a") == ["open"])
        #expect(d.opened() == ["start a"])
        #expect(d.m.phase == .streaming)
        return d
    }

    // MARK: - Opening and starting

    @Test func firstCueOpensTheDeviceAndStartsOnceOpen() {
        var d = Driver()
        #expect(d.m.phase == .closed)
        #expect(d.m.deadline == nil)  // closed: nothing to wake for
        #expect(d.cue("a") == ["open"])
        #expect(d.m.phase == .opening)
        #expect(d.m.pending.count == 1)
        #expect(d.opened() == ["start a"])
        #expect(d.m.phase == .streaming && d.m.wantsToWrite && d.m.pending.isEmpty)
    }

    @Test func prewarmOpensToIdleAndACueThenStartsAtOnce() {
        var d = Driver()
        #expect(d.send(.prewarm) == ["open"])
        #expect(d.opened() == [])
        #expect(d.m.phase == .idle && d.m.stateTime == d.ns)
        #expect(!d.m.wantsToWrite)
        d.advance(by: 5)
        #expect(d.cue("a") == ["start a"])
        #expect(d.m.phase == .streaming)
    }

    @Test func prewarmWhileIdleRestartsTheIdleCountdown() {
        var d = Driver(idleCloseMs: 1_000)
        d.send(.prewarm); _ = d.opened()
        d.advance(by: 900)
        #expect(d.send(.prewarm) == [])
        #expect(d.advance(by: 900) == [])       // 1,800 ms after open, 900 after the prewarm
        #expect(d.advance(by: 100) == ["close"])
        #expect(d.m.phase == .closed)
    }

    @Test func cuesWhileOpeningAreHeldAndStartInOrder() {
        var d = Driver()
        d.cue("a")
        #expect(d.cue("b") == [])
        #expect(d.opened() == ["start a", "start b"])
    }

    @Test func aCueTooLateWhenTheDeviceOpensIsDroppedNotPlayedLate() {
        var d = Driver()
        d.cue("a")
        d.now += 260  // the open took 260 ms
        #expect(d.opened() == ["drop a 260"])
        #expect(d.m.phase == .idle && d.m.stateTime == d.ns)
    }

    @Test func aCueAlreadyLateOnArrivalIsDropped() {
        var d = streaming()
        #expect(d.cue("late", requestedAt: d.now - 251) == ["drop late 251"])
        #expect(d.cue("ok", requestedAt: d.now - 250) == ["start ok"])
    }

    @Test func heldCuesAreBounded() {
        var d = Driver()
        for i in 0..<64 { d.cue("c\(i)") }
        #expect(d.cue("c64") == ["drop c0 0"])
        #expect(d.m.pending.count == 64)
    }

    // MARK: - Failing devices: backoff, the 250 ms rule

    @Test func failedOpensBackOff50msDoublingTo2sWhileCuesWait() {
        var d = Driver()
        d.send(.cue("a", requestTime: 0))                  // no request time: never too late, so it keeps waiting
        var delays: [UInt64] = []
        for _ in 0..<8 {
            #expect(d.m.phase == .opening)
            d.send(.openFailed)
            guard let next = d.deadlineMs else { Issue.record("no retry scheduled"); return }
            delays.append(next - d.now)
            #expect(d.advance(to: next) == ["open"])
        }
        #expect(delays == [50, 100, 200, 400, 800, 1_600, 2_000, 2_000])
        #expect(d.opened() == ["start a"])
        #expect(d.send(.writeFailed) == ["close", "open"])
        d.send(.openFailed)
        #expect(d.deadlineMs == nil)                       // the voice was dropped; nothing waits
        #expect(d.send(.cue("b", requestTime: 0)) == [])  // the reopen was 0 ms ago: held
        #expect(d.deadlineMs == d.now + 50)                // an open that worked reset the backoff
        #expect(d.advance(by: 50) == ["open"])
        d.send(.openFailed)
        #expect(d.deadlineMs == d.now + 100)
    }

    @Test func aFailedDeviceRetriesOnTimerOnlyWhileCuesWaitAndDropsThemAfter250ms() {
        var d = Driver()
        d.cue("a")
        d.send(.openFailed)                                // t+0: retry at +50
        #expect(d.deadlineMs == d.now + 50)
        #expect(d.advance(by: 50) == ["open"])
        d.send(.openFailed)                                // retry at +150
        #expect(d.advance(to: d.now + 100) == ["open"])
        d.send(.openFailed)                                // next retry at +350: after a's deadline (+250)
        #expect(d.deadlineMs == 1_000 + 250)
        #expect(d.advance(to: 1_251) == ["drop a 251"])
        #expect(d.m.deadline == nil)                      // nothing waits: no timer, no wakeups
        #expect(d.m.phase == .failed && d.m.stateTime == (1_150 + 200) * 1_000_000)
    }

    @Test func aCueRetriesAFailedDeviceAtOnceButNotTwiceWithin50ms() {
        var d = Driver()
        d.cue("a")
        d.send(.openFailed)
        d.advance(by: 20)
        #expect(d.cue("b") == [])                          // 20 ms after the last attempt
        d.advance(by: 30)                                  // the retry timer (50 ms)
        #expect(d.m.phase == .opening)
        d.send(.openFailed)
        d.now += 1_000                                     // both dropped meanwhile? no timer ran:
        #expect(d.send(.timer) == ["drop a 1050", "drop b 1030"])
        #expect(d.cue("c") == ["open"])                    // a cue tries again at once
        #expect(d.opened() == ["start c"])
    }

    @Test func aWriteFailureReopensOnceUnderTheVoices() {
        var d = streaming()
        d.advance(by: 5)
        // A PCM left open across a sound-server restart fails its first write: a fresh one plays.
        #expect(d.send(.writeFailed) == ["close", "open"])
        #expect(d.opened() == ["restart since 755"])
        #expect(d.wrote() == [])
        #expect(d.send(.writeFailed) == ["close", "open"])  // it took frames since: once more
    }

    @Test func aWriteFailureRightAfterAReopenDropsVoicesAndWaitsForTheNextCue() {
        var d = streaming()
        d.send(.writeFailed)
        d.opened()
        #expect(d.send(.writeFailed) == ["drop voices", "close"])
        guard case .failed = d.m.state else { Issue.record("\(d.m.state)"); return }
        #expect(d.m.deadline == nil)                        // nothing waits: no retry timer
        d.advance(by: 10)
        #expect(d.cue("b") == [])                          // within 50 ms of the last open: held
        #expect(d.advance(by: 50) == ["open"])
        #expect(d.opened() == ["start b"])
        d.send(.writeFailed)                                // a fresh device: reopened once again
        #expect(d.m.phase == .opening)
    }

    @Test func aReopenThatFailsDropsTheVoices() {
        var d = streaming()
        #expect(d.send(.writeFailed) == ["close", "open"])
        #expect(d.send(.openFailed) == ["drop voices"])
        d.advance(by: 60)
        #expect(d.cue("c") == ["open"])                    // later: a cue retries at once
    }

    // MARK: - Streaming, draining, stopping, idle-close

    @Test func afterTheLastVoiceSilenceIsWrittenUntilItHasSoundedThenTheStreamStops() {
        var d = streaming()
        d.wrote()
        #expect(d.wrote(sounding: false, delayMs: 12) == [])
        #expect(d.m.phase == .draining && d.m.stateTime == d.ns + 12_000_000)
        #expect(d.m.wantsToWrite)                          // silence, so the device never underruns
        d.advance(by: 5); d.wrote(sounding: false, delayMs: 10)
        #expect(d.advance(to: 1_012) == ["stop"])
        #expect(d.m.phase == .idle && d.m.stateTime == d.ns)
        #expect(!d.m.wantsToWrite)
        #expect(d.deadlineMs == 1_012 + 30_000)            // only the idle-close timer
    }

    @Test func theTailRunsAMarginPastTheDeviceDelay() {
        var m = M()  // default settings: a 20 ms margin
        _ = m.handle(.cue("a", requestTime: 0), now: 0)
        _ = m.handle(.opened(bufferNs: 10_000_000), now: 0)
        _ = m.handle(.wrote(frames: 240, xruns: 0, sounding: false, delayNs: 12_000_000), now: 5_000_000)
        #expect(m.phase == .draining && m.stateTime == 5_000_000 + 12_000_000 + 20_000_000)
    }

    @Test func aCueWhileDrainingJoinsTheRunningStream() {
        var d = streaming()
        d.wrote(sounding: false)
        #expect(d.cue("b") == ["start b"])
        #expect(d.m.phase == .streaming)
        d.wrote(sounding: true)
        #expect(d.m.phase == .streaming)
    }

    @Test func idleDeviceClosesAfterIdleCloseAndReopensForTheNextCue() {
        var d = Driver(idleCloseMs: 300)
        d.cue("a"); d.opened()
        d.wrote(sounding: false, delayMs: 0)
        #expect(d.advance(by: 0) == ["stop"])
        #expect(d.advance(by: 299) == [])
        #expect(d.advance(by: 1) == ["close"])
        #expect(d.m.phase == .closed && d.m.deadline == nil)
        #expect(d.cue("b") == ["open"])
    }

    @Test func idleCloseZeroClosesAsSoonAsTheStreamStops() {
        var d = Driver(idleCloseMs: 0)
        d.cue("a"); d.opened()
        d.wrote(sounding: false, delayMs: 5)
        #expect(d.advance(by: 5) == ["stop", "close"])
        #expect(d.m.phase == .closed)
    }

    @Test func noIdleCloseMeansNoDeadlineAtAllWhileIdle() {
        var d = Driver(idleCloseMs: nil)
        d.send(.prewarm); d.opened()
        #expect(d.m.deadline == nil)
    }

    @Test func anErrorOnAnIdleDeviceClosesItAndTheNextCueReopens() {
        var d = Driver()
        d.send(.prewarm); d.opened()
        #expect(d.send(.deviceError) == ["close"])
        #expect(d.m.phase == .closed)
        #expect(d.cue("a") == ["open"])
        #expect(d.send(.deviceError) == [])                // only an idle device is watched
    }

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
