@testable import CuedServer
import Testing

/// The D-Bus face's lifecycle on a fake clock (milliseconds): the first attempt, the
/// back-off, waiting on the socket instead of a timer, a loss, the name, the monitor, stop.
@Suite struct BusMachineTests {
    /// A machine driven by a fake clock; actions rendered as short strings.
    struct Driver {
        var m: BusMachine
        var now: UInt64 = 1_000  // ms
        init(notifications: Bool = false) {
            var s = BusMachine.Settings()
            s.notifications = notifications
            m = BusMachine(settings: s)
        }
        var ns: UInt64 { now * 1_000_000 }
        var deadlineMs: UInt64? { m.deadline.map { $0 / 1_000_000 } }

        @discardableResult
        mutating func send(_ e: BusMachine.Event) -> [String] { m.handle(e, now: ns).map(Self.name) }
        /// Advances to `ms`, firing the timer if the deadline has come.
        @discardableResult
        mutating func advance(to ms: UInt64) -> [String] {
            now = ms
            guard let d = m.deadline, d <= ns else { return [] }
            return send(.timer)
        }
        @discardableResult
        mutating func fail(_ why: String = "refused", socketThere: Bool = true, watching: Bool = true) -> [String] {
            send(.connectFailed(why, socketThere: socketThere, watching: watching))
        }

        static func name(_ a: BusMachine.Action) -> String {
            switch a {
            case .connect: return "connect"
            case .disconnect(let lost): return lost.map { "disconnect (\($0))" } ?? "disconnect"
            case .endClientFeedbacks: return "end feedbacks"
            case .unwatchSocket: return "unwatch"
            case .publish(let s):
                return "publish \(s.connection.rawValue) \(s.feedback.rawValue) \(s.notifications)" + (s.error.map { " (\($0))" } ?? "")
            case .exit: return "exit"
            }
        }
    }

    @Test func theFirstAttemptIsAtStartAndSuccessPublishesWhatWasGranted() {
        var d = Driver(notifications: true)
        #expect(d.m.status.connection == .off)
        #expect(d.send(.start) == ["publish absent none off (no bus)", "connect"])
        #expect(d.send(.connected(feedback: .owner, notifications: "watching")) == ["publish connected owner watching", "unwatch"])
        #expect(d.deadlineMs == nil)
    }

    @Test func failuresBackOffFromHalfASecondDoublingToAMinute() {
        var d = Driver()
        d.send(.start)
        #expect(d.fail("bus not answering") == ["publish absent none off (bus not answering)"])
        var waits: [UInt64] = []
        for _ in 0..<10 {
            let at = d.deadlineMs!
            waits.append(at - d.now)
            #expect(d.advance(to: at - 1) == [])
            #expect(d.advance(to: at) == ["connect"])
            // The same failure again: nothing new to publish (status says it already).
            #expect(d.fail("bus not answering") == [])
        }
        #expect(waits == [500, 1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000, 60_000])
    }

    @Test func aMissingSocketThatIsWatchedIsWaitedForWithoutATimer() {
        var d = Driver()
        d.send(.start)
        d.fail("no session bus at /run/user/1000/bus", socketThere: false, watching: true)
        #expect(d.deadlineMs == nil)
        #expect(d.advance(to: 10_000_000) == [])  // hours: no wake-up at all
        #expect(d.send(.socketAppeared) == ["connect"])
        // Appeared, but not answering yet: now on the timer.
        d.fail("connection refused", socketThere: true, watching: true)
        #expect(d.deadlineMs == d.now + 500)
    }

    @Test func aMissingSocketThatCannotBeWatchedIsPolled() {
        var d = Driver()
        d.send(.start)
        d.fail("no session bus", socketThere: false, watching: false)
        #expect(d.deadlineMs == d.now + 500)
        // A socket event while timed is not a reason to try early.
        #expect(d.send(.socketAppeared) == [])
    }

    @Test func aLostBusEndsItsClientsLoopsAndIsRetriedFromTheFirstStep() {
        var d = Driver(notifications: true)
        d.send(.start)
        for _ in 0..<3 { d.advance(to: d.deadlineMs ?? d.now); d.fail() }  // backed off to 4 s
        d.advance(to: d.deadlineMs!)
        d.send(.connected(feedback: .owner, notifications: "watching"))
        #expect(d.send(.lost("Connection reset by peer", socketThere: true, watching: true))
                == ["publish absent none off (no bus) (Connection reset by peer)", "disconnect (Connection reset by peer)", "end feedbacks"])
        #expect(d.deadlineMs == d.now + 500)
        d.advance(to: d.now + 500)
        d.fail()
        #expect(d.deadlineMs == d.now + 1_000)
    }

    @Test func losingTheNameToAnotherOwnerEndsTheClientsLoops() {
        var d = Driver()
        d.send(.start)
        d.send(.connected(feedback: .owner, notifications: "off"))
        #expect(d.send(.name(.queued)) == ["publish connected queued off", "end feedbacks"])
        #expect(d.send(.name(.owner)) == ["publish connected owner off"])
        #expect(d.send(.name(.owner)) == [])
    }

    @Test func theMonitorsLossIsStatusOnly() {
        var d = Driver(notifications: true)
        d.send(.start)
        d.send(.connected(feedback: .owner, notifications: "watching"))
        #expect(d.send(.notifications("lost")) == ["publish connected owner lost"])
    }

    @Test func stopLeavesTheBusFromAnyStateAndIgnoresWhatFollows() {
        var connected = Driver()
        connected.send(.start)
        connected.send(.connected(feedback: .owner, notifications: "off"))
        #expect(connected.send(.stop) == ["disconnect", "unwatch", "publish off none off", "exit"])
        #expect(connected.send(.lost("late", socketThere: true, watching: true)) == [])
        #expect(connected.m.status == BusStatus())

        var absent = Driver()
        absent.send(.start)
        absent.fail()
        #expect(absent.send(.stop) == ["unwatch", "publish off none off", "exit"])
        #expect(absent.advance(to: 100_000) == [])
        #expect(absent.send(.start) == [])
    }

    @Test func eventsOfAnotherStateAreIgnored() {
        var d = Driver()
        #expect(d.send(.timer) == [] && d.send(.socketAppeared) == [] && d.send(.name(.owner)) == [])
        d.send(.start)
        #expect(d.send(.name(.owner)) == [])
        #expect(d.send(.lost("x", socketThere: true, watching: true)) == [])
        d.send(.connected(feedback: .none, notifications: "off"))
        #expect(d.send(.timer) == [] && d.send(.socketAppeared) == [] && d.send(.start) == [])
    }
}
