import CuedCore
import Testing

/// How the audio thread's scheduling is asked for and said, on a fake clock (seconds): the
/// order (its own attempt, RTKit, the portal in a sandbox), each answer, the backoff, a grant
/// taken away, a thread that overran its budget.
@Suite struct RealtimeGrantTests {
    typealias G = RealtimeGrant
    static func s(_ seconds: UInt64) -> UInt64 { seconds * 1_000_000_000 }

    @Test func ownRealTimeAsksNobody() {
        var g = G()
        #expect(g.chance(now: 0) == nil, "nothing is asked before the thread has started")
        g.ownAttempt(.realtime(priority: 20, via: .own))
        #expect(g.chance(now: 0) == nil)
        #expect(g.status == "realtime (self)")
    }

    /// cued's chance once up came before its audio thread had run (a busy machine): the thread's
    /// own attempt says to give it again, so RTKit is asked then, not at the next device open.
    /// (Before: no ask at all, and status kept the thread's own refusal.)
    @Test func aChanceBeforeTheThreadStartedIsGivenAgainOnceItHas() {
        var g = G()
        #expect(g.chance(now: 0) == nil)
        let again = g.ownAttempt(.normal, refused: "not allowed to raise itself (Operation not permitted)")
        #expect(again)
        #expect(g.chance(now: 0) == G.Ask(via: .rtkit, priority: 20, nice: -11))
        var first = G()
        let none = first.ownAttempt(.normal)
        #expect(!none, "no chance came before: none to give again")
        var own = G()
        _ = own.chance(now: 0)
        let ownAgain = own.ownAttempt(.realtime(priority: 20, via: .own))
        #expect(!ownAgain, "real time of its own: nothing to ask")
    }

    @Test func aUserAsksRTKitOnceCuedIsUpAndSaysWhoGrantedIt() {
        var g = G()
        g.ownAttempt(.normal, refused: "not allowed to raise itself (Operation not permitted)")
        #expect(g.status == "normal: not allowed to raise itself (Operation not permitted)")
        let ask = g.chance(now: 0)
        #expect(ask == G.Ask(via: .rtkit, priority: 20, nice: -11))
        #expect(g.status == "normal: asking rtkit")
        #expect(g.chance(now: 0) == nil, "one ask at a time")
        #expect(g.answered(.realtime(priority: 20), now: Self.s(1)) == nil)
        #expect(g.status == "realtime (rtkit)")
        #expect(g.chance(now: Self.s(1_000)) == nil, "granted: never asked again")
    }

    @Test func realTimeRefusedWithANiceLevelGrantedSaysBoth() {
        var g = G()
        g.ownAttempt(.normal)
        _ = g.chance(now: 0)
        #expect(g.answered(.nice(-11, realtimeRefused: "Operation not permitted"), now: 0) == nil)
        #expect(g.status == "nice -11 (rtkit); rtkit refused real time: Operation not permitted")
        // Its own nice level already: only real time is asked of RTKit next time.
        #expect(g.chance(now: G.firstBackoffNs)?.nice == nil)
    }

    @Test func aRefusalIsAskedAgainAfterABackoffThatDoubles() {
        var g = G()
        g.ownAttempt(.nice(-11, via: .own))
        var now: UInt64 = 0
        var waits: [UInt64] = []
        #expect(g.chance(now: now) == G.Ask(via: .rtkit, priority: 20, nice: nil), "its own nice level already: real time only")
        for _ in 0..<7 {
            _ = g.answered(.refused("Operation not permitted (org.freedesktop.DBus.Error.AccessDenied)"), now: now)
            #expect(g.status == "nice -11 (self); rtkit refused: Operation not permitted (org.freedesktop.DBus.Error.AccessDenied)")
            var wait: UInt64 = Self.s(1)
            while g.chance(now: now + wait) == nil && wait < Self.s(3_600) { wait += Self.s(1) }
            waits.append(wait / Self.s(1))
            now += wait
        }
        // Asked at the first chance after each wait: 30 s, 60, 120, ... up to 10 min.
        #expect(waits == [30, 60, 120, 240, 480, 600, 600], "\(waits)")
    }

    @Test func aMissingBusIsNormalAndAskedAgainLater() {
        var g = G()
        g.ownAttempt(.normal)
        _ = g.chance(now: 0)
        #expect(g.answered(.unreachable("no system bus at /run/dbus/system_bus_socket"), now: 0) == nil)
        #expect(g.status == "normal: no rtkit: no system bus at /run/dbus/system_bus_socket")
        #expect(g.chance(now: G.firstBackoffNs - 1) == nil)
        #expect(g.chance(now: G.firstBackoffNs)?.via == .rtkit)
        #expect(g.answered(.realtime(priority: 20), now: G.firstBackoffNs) == nil)
        #expect(g.status == "realtime (rtkit)")
    }

    @Test func sandboxedTheRealtimePortalIsAskedFirstThenRTKit() {
        var g = G(sandboxed: true)
        g.ownAttempt(.normal)
        #expect(g.chance(now: 0)?.via == .portal)
        let next = g.answered(.unreachable("The name org.freedesktop.portal.Desktop was not provided by any .service files"), now: 0)
        #expect(next?.via == .rtkit, "RTKit after a missing portal, at once")
        #expect(g.answered(.unreachable("no system bus at /run/dbus/system_bus_socket"), now: 0) == nil)
        #expect(g.status == "normal: no rtkit: no system bus at /run/dbus/system_bus_socket")
        #expect(g.chance(now: G.firstBackoffNs)?.via == .portal, "the next round starts with the portal again")
        #expect(g.answered(.realtime(priority: 20), now: G.firstBackoffNs) == nil)
        #expect(g.status == "realtime (portal)")
    }

    @Test func realTimeTakenAwayIsAskedForAgainAtTheNextChance() {
        var g = G()
        g.ownAttempt(.normal)
        _ = g.chance(now: 0)
        _ = g.answered(.realtime(priority: 20), now: 0)
        g.observed(.realtime(priority: 20, via: .own), now: Self.s(5))
        #expect(g.status == "realtime (rtkit)", "the kernel's word keeps who granted it")
        g.observed(.normal, now: Self.s(60))
        #expect(g.status == "normal: real time (rtkit) taken away")
        #expect(g.chance(now: Self.s(60))?.via == .rtkit)
    }

    @Test func aGrantSeenBeforeItsAnswerIsTheAskedServicesOwn() {
        var g = G()
        g.ownAttempt(.normal)
        _ = g.chance(now: 0)
        g.observed(.realtime(priority: 20, via: .own), now: 0)
        #expect(g.status == "realtime (rtkit)")
    }

    @Test func aThreadThatOverranItsBudgetIsNeverAskedForAgain() {
        var g = G()
        g.ownAttempt(.realtime(priority: 20, via: .own))
        g.overran()
        #expect(g.status.hasPrefix("normal: it ran past its real-time budget"))
        g.observed(.normal, now: Self.s(1))
        #expect(g.chance(now: Self.s(10_000)) == nil)
    }
}
