import CuedCore
import CuedProtocol
import Testing

/// Gesture input, table-driven from the original controller: each step is an
/// event and the cue it must produce (nil: silent).
@Suite struct RefreshSessionTests {
    enum Event { case drag(Double), drop, state(RefreshState), quiet(RefreshState) }

    static let scenarios: [(name: String, steps: [(Event, String?)], end: RefreshState)] = [
        ("slow pull past the threshold and back",
         [(.drag(10), nil), (.drag(40), nil), (.drag(64), nil), (.drag(65), "psst1"), (.drag(70), nil),
          (.drag(60), "pop"), (.drag(20), nil), (.drop, nil)], .idle),
        ("pull past and release, then finish",
         [(.drag(30), nil), (.drag(80), "psst1"), (.drop, "psst2"), (.state(.idle), "pop")], .idle),
        ("jitter around the threshold sounds psst1 once",
         [(.drag(64.9), nil), (.drag(65.1), "psst1"), (.drag(64.9), nil), (.drag(65.2), nil), (.drag(63.5), nil),
          (.drag(66), nil), (.drop, "psst2")], .loading),
        ("back below the hysteresis band pops, crossing again psst1s",
         [(.drag(66), "psst1"), (.drag(62.9), "pop"), (.drag(64), nil), (.drag(65), "psst1")], .release),
        ("drags and drops during loading are ignored",
         [(.drag(90), "psst1"), (.drop, "psst2"), (.drag(10), nil), (.drag(100), nil), (.drag(0), nil), (.drop, nil),
          (.state(.release), nil), (.state(.idle), "pop")], .idle),
        ("forced loading, then finish: pop only",
         [(.quiet(.loading), nil), (.drag(100), nil), (.drop, nil), (.state(.idle), "pop")], .idle),
        ("drop before the threshold is silent",
         [(.drag(50), nil), (.drop, nil), (.drag(0), nil)], .idle),
        ("a flick straight past the threshold",
         [(.drag(120), "psst1"), (.drop, "psst2")], .loading),
        ("state release twice: no double psst1",
         [(.state(.release), "psst1"), (.drag(80), nil), (.state(.release), nil)], .release),
    ]

    @Test(arguments: scenarios.indices)
    func scenario(index: Int) {
        let sc = Self.scenarios[index]
        var s = RefreshSession()
        for (i, (event, expected)) in sc.steps.enumerated() {
            let out: RefreshSession.Outcome
            switch event {
            case .drag(let p): out = s.drag(p)
            case .drop: out = s.drop()
            case .state(let st): out = s.set(st, quiet: false)
            case .quiet(let st): out = s.set(st, quiet: true)
            }
            #expect(out.action == (expected.map(RefreshMachine.Action.play) ?? .none), "\(sc.name), step \(i): \(event)")
        }
        #expect(s.state == sc.end, "\(sc.name)")
    }

    @Test func customThreshold() {
        var s = RefreshSession()
        s.threshold = 100
        #expect(s.drag(80).action == .none)
        #expect(s.drag(100).action == .play("psst1"))
    }

    @Test func ignoredWhileLoadingIsFlagged() {
        var s = RefreshSession()
        _ = s.set(.loading, quiet: true)
        #expect(s.drag(10).ignored)
        #expect(s.drop().ignored)
    }

    @Test func prewarmOnFirstPullOfAnIdleSession() {
        var s = RefreshSession()
        #expect(s.drag(0).prewarm == false)
        #expect(s.drag(5).prewarm == true)
        #expect(s.drag(10).prewarm == false)  // only the first
        var t = RefreshSession()
        #expect(t.set(.pull, quiet: false).prewarm == true)
        #expect(t.set(.pull, quiet: false).prewarm == false)
    }
}

/// Expiry and eviction with a fake clock: time is a number the test sets.
@Suite struct SessionRegistryTests {
    let second: UInt64 = 1_000_000_000

    @Test func sharedStateOutlivesAConnection() {
        var r = SessionRegistry(ttlSeconds: 300)
        #expect(r.withSession("a", now: 1) { $0.drag(80) }.action == .play("psst1"))
        #expect(r.withSession("a", now: 2) { $0.drop() }.action == .play("psst2"))
        #expect(r.peek("a", now: 3)?.state == .loading)
        #expect(r.withSession("b", now: 4) { $0.state } == .idle)  // independent
    }

    /// A ratchet you can hear: every detent the pull moves into below the threshold is a
    /// tick (either way, one per event), rising towards the threshold; none past it, none
    /// once released, none without detents.
    @Test func detentTicksLandAtTheRightDistances() {
        var s = RefreshSession()
        let pulls: [Double] = [3, 9, 10, 14, 31, 29, 20, 19, 64, 70, 40, 0]
        let ticks = pulls.map { s.drag($0, detentEvery: 10).tick }
        // 10, 31 and 64 move in; 29 and 19 back out (a ratchet clicks both ways); 70 is the
        // release (psst1), 40 the pop of pulling back, 0 idle: no tick there.
        #expect(ticks.map { $0 != nil } == [false, false, true, false, true, true, false, true, true, false, false, false])
        #expect(ticks[2] == 10 / 65 && ticks[4] == 31 / 65)
        var off = RefreshSession()
        #expect(pulls.allSatisfy { off.drag($0).tick == nil })
        var mine = RefreshSession()
        mine.detentOverride = 30
        #expect(pulls.map { mine.drag($0, detentEvery: 10).tick != nil }
                == [false, false, false, false, true, true, false, false, true, false, false, false])
    }

    @Test func idleSessionsExpire() {
        var r = SessionRegistry(ttlSeconds: 300)
        _ = r.withSession("a", now: 0) { $0.drag(80) }
        _ = r.withSession("b", now: 200 * second) { $0.drag(80) }
        #expect(r.count(now: 299 * second) == 2)
        #expect(r.count(now: 301 * second) == 1)  // a expired, b still live
        #expect(r.peek("a", now: 301 * second) == nil)
        #expect(r.withSession("a", now: 302 * second) { $0.state } == .idle)  // a new, fresh session
        #expect(r.expiredCount == 1)
    }

    @Test func useKeepsASessionAlive() {
        var r = SessionRegistry(ttlSeconds: 10)
        for t in stride(from: UInt64(0), through: 100, by: 5) { r.withSession("a", now: t * second) { $0.threshold = 70 } }
        #expect(r.peek("a", now: 105 * second)?.threshold == 70)
    }

    @Test func atMostCapacityLongestIdleEvicted() {
        var r = SessionRegistry(ttlSeconds: 300, capacity: 1024)
        for i in 0..<1024 { r.withSession("s\(i)", now: UInt64(i + 1)) { $0.threshold = Double(i + 1) } }
        r.withSession("s0", now: 2000) { _ in }  // s0 used again: s1 is now the longest idle
        r.withSession("new", now: 2001) { _ in }
        #expect(r.count(now: 2002) == 1024)
        #expect(r.peek("s1", now: 2002) == nil)
        #expect(r.peek("s0", now: 2002)?.threshold == 1)
        #expect(r.peek("new", now: 2002) != nil)
        #expect(r.evictedCount == 1)
    }
}
