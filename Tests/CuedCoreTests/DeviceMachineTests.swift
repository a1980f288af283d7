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
}
