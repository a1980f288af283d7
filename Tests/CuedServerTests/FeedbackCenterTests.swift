import CuedCore
import CuedProtocol
@testable import CuedServer
import Synchronization
import Testing

/// The D-Bus face's loop side on a real Daemon whose audio thread the test plays: each bus
/// name is a client of the daemon's one client table, and each feedback gets one FeedbackEnded.
@Suite(.timeLimit(.minutes(1))) struct FeedbackCenterTests {
    final class Signals: FeedbackSignals {
        let ended = Mutex<[String]>([])
        func feedbackEnded(_ id: UInt32, reason: FeedbackEndReason) { ended.withLock { $0.append("\(id) \(reason)") } }
        func profileChanged(_ name: String) {}
    }

    final class Setup: Sendable {
        let h: DaemonHarness
        let signals = Signals()
        let center: NIOLoopBoundCenter
        init(limits: Daemon.Limits = Daemon.Limits()) throws {
            h = try DaemonHarness(limits: limits)
            let signals = self.signals
            center = try h.onLoop { d in NIOLoopBoundCenter(FeedbackCenter(daemon: d, signals: signals, logger: DaemonHarness.quiet)) }
        }
        func on<T: Sendable>(_ body: @escaping @Sendable (FeedbackCenter, Daemon) -> T) throws -> T {
            let center = self.center
            return try h.onLoop { d in body(center.value, d) }
        }
        /// The table's client of `sender`: id and state.
        func client(_ sender: String) throws -> (ClientID, Client.State)? {
            try on { _, d in d.clients.bus(sender).flatMap { id in d.clients[id].map { (id, $0.state) } } }
        }
    }

    /// The center lives on the loop; the test reaches it there.
    final class NIOLoopBoundCenter: @unchecked Sendable {  // touched on the loop only (`Setup.on`)
        let value: FeedbackCenter
        init(_ value: FeedbackCenter) { self.value = value }
    }

    static func trigger(_ id: UInt32, _ sender: String, timeout: Int32) -> FeedbackTrigger {
        FeedbackTrigger(id: id, sender: sender, appID: "phone", event: "pop", timeout: timeout)
    }

    /// A bus name is a client of the table (beside cued's own notification client); when it
    /// leaves, its loop stops and its client stays, leaving, until that feedback's end is told.
    @Test func aSenderThatLeavesStaysUntilItsLastFeedbackEnds() throws {
        let s = try Setup()
        defer { s.h.shutdown() }
        try s.on { c, _ in c.trigger(Self.trigger(1, ":1.5", timeout: 0)) }
        let (id, state) = try #require(try s.client(":1.5"))
        #expect(state == .active)
        #expect(try s.on { _, d in d.clients.figures.open } == 1)  // cued's own client is outside the cap
        try s.on { c, _ in c.left(":1.5") }
        #expect(try s.client(":1.5")?.1 == .leaving)
        #expect(s.signals.ended.withLock { $0 }.isEmpty)
        try s.h.handle(.voiceEnded(VoiceEnd(id: 1, cue: "pop", owner: "phone", connection: id, notify: [.events], reason: .stoppedByID, started: true)))
        #expect(s.signals.ended.withLock { $0 } == ["1 explicit"])
        #expect(try s.client(":1.5") == nil)
        #expect(try s.on { c, _ in c.liveCount } == 0)
    }

    /// A bus client let go at the cap (here: the bus holds the most and a process needs a
    /// slot) has its feedbacks ended at once, its loop stopped: their ends would have
    /// nowhere to go. A bus name refused at the cap gets its feedback ended at once.
    @Test func aBusClientLetGoAtTheCapEndsItsFeedbacks() throws {
        var limits = Daemon.Limits()
        limits.maxClients = 2
        let s = try Setup(limits: limits)
        defer { s.h.shutdown() }
        try s.on { c, _ in
            c.trigger(Self.trigger(1, ":1.5", timeout: 0))
            c.trigger(Self.trigger(2, ":1.6", timeout: 0))
            c.trigger(Self.trigger(3, ":1.7", timeout: -1))
        }
        #expect(s.signals.ended.withLock { $0 } == ["3 notFound"])
        #expect(try s.on { _, d in d.clients.figures.refused } == 1)
        let admitted = try s.on { _, d in
            d.clients.admit(.socket, pid: 42, now: MonotonicClock.now(), limits: d.limits, letGo: { _ in }) != nil
        }
        #expect(admitted)
        #expect(s.signals.ended.withLock { $0 } == ["3 notFound", "1 explicit"])
        #expect(try s.client(":1.5") == nil && s.client(":1.6") != nil)
        #expect(try s.on { c, d in (c.liveCount, d.clients.figures.evictedShare) } == (1, 1))
    }
}
