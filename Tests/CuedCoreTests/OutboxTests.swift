@testable import CuedCore
import Glibc
import Synchronization
import Testing
import TestSupport

/// The audio thread's way out: its events and what it lets go of reach the relay thread,
/// in order, and are released there.
@Suite struct OutboxTests {
    @Test func stagedEntriesAreSeenOnlyOncePublishedAndInOrder() {
        let ring = EventRing<Int>(capacity: 4)
        #expect(ring.stage(1) && ring.stage(2))
        #expect(ring.pop() == nil)  // staged, not published
        #expect(ring.publish())
        #expect(ring.stage(3) && ring.stage(4))
        #expect(!ring.stage(5))  // full: refused, never waited for
        #expect(ring.room == 0)
        #expect(ring.pop() == 1 && ring.pop() == 2 && ring.pop() == nil)
        ring.publish()
        #expect(ring.stage(5))
        ring.publish()
        #expect(ring.pop() == 3 && ring.pop() == 4 && ring.pop() == 5 && ring.pop() == nil)
        #expect(!ring.publish())  // nothing staged
    }

    @Test func theLedgerHandsOverTheRequestsOfEndedVoices() {
        var ledger = VoiceLedger(capacity: 8)
        let cue = Cue(name: "pop", stereo: [0.1, 0.1])
        ledger.admit(VoiceRequest(id: 1, cue: cue, owner: "a"))
        ledger.admit(VoiceRequest(id: 2, cue: cue, owner: "b"))
        ledger.admit(VoiceRequest(id: 2, cue: cue, owner: "dup"))  // busy: ends at once
        ledger.finish(1, .stoppedByID, started: false)
        var retired: [String] = []
        ledger.takeRetired { retired.append($0.owner) }
        #expect(retired == ["dup", "a"])
        ledger.takeRetired { retired.append($0.owner) }
        #expect(retired.count == 2)  // handed over once
    }

    final class Delivered: Sendable {
        let events = Mutex<[EngineEvent]>([])
        let threads = Mutex<Set<Int32>>([])
        func add(_ e: EngineEvent) {
            let tid = SystemCall.gettid()
            threads.withLock { _ = $0.insert(tid) }
            events.withLock { $0.append(e) }
        }
    }

    @Test func eventsReachTheRelayThreadInTheOrderTheyWereSent() {
        let got = Delivered()
        let engine = AudioEngine(sink: NullSink(latencyMs: 10)) { got.add($0) }
        engine.start()
        for t in 1...500 { #expect(engine.submit(.sync(ticket: UInt64(t)))) }
        #expect(eventually(timeout: 10) { got.events.withLock { $0.count { if case .synced = $0 { true } else { false } } } == 500 })
        #expect(engine.shutdown(graceMs: 0))
        let tickets = got.events.withLock { $0.compactMap { if case .synced(let t) = $0 { t } else { nil } } }
        #expect(tickets == (1...500).map(UInt64.init))
        let audio = engine.stats.audioThreadID.load(ordering: .relaxed)
        #expect(audio != 0 && got.threads.withLock { !$0.contains(audio) && $0.count == 1 })
    }

    /// The last reference to a cue that was played is dropped by the relay thread, not the
    /// audio thread (which would hand its memory to the reclaimer: `droppedByAudioThread`).
    @Test func theAudioThreadLetsGoOfNoCueItPlayed() throws {
        let got = Delivered()
        let engine = AudioEngine(sink: NullSink(latencyMs: 10)) { got.add($0) }
        engine.start()
        defer { engine.shutdown(graceMs: 0) }
        let budget = SoundBudget(limitBytes: 1 << 20)
        let ids: [UInt64] = Array(1...12)  // fewer than the 16 voices: none stolen
        // Each voice its own cue and samples, the engine's the only reference once submitted.
        for id in ids {
            guard case .success(let m) = SampleMemory.allocate(480 * 2 * 4, budget: budget) else { Issue.record("no memory"); return }
            let sound = SoundBuffer(adopting: m, count: 480 * 2)
            #expect(engine.submit(.play(VoiceRequest(id: id, cue: Cue(name: "c\(id)", sound: sound), owner: "owner \(id)",
                                                     notify: [.wait]))))
        }
        #expect(budget.used > 0)
        #expect(eventually(timeout: 10) {
            got.events.withLock { $0.count { if case .voiceEnded(let e) = $0 { e.reason == .played } else { false } } } == ids.count
        })
        #expect(eventually(timeout: 5) { budget.used == 0 })  // every reference gone…
        #expect(budget.droppedByAudioThread.load(ordering: .relaxed) == 0)  // …none on the audio thread
        #expect(engine.stats.releasedByAudioThread.load(ordering: .relaxed) == 0)
        #expect(engine.stats.eventsLost.load(ordering: .relaxed) == 0)
    }

    /// A full command queue refuses at once (the server then answers `queue full`).
    @Test func aFullQueueRefusesTheCommandAtOnce() {
        var config = AudioEngine.Configuration()
        config.queueCapacity = 8
        let engine = AudioEngine(sink: NullSink(latencyMs: 10), configuration: config)  // not started: nothing drains
        var accepted = 0
        for t in 0..<20 where engine.submit(.sync(ticket: UInt64(t))) { accepted += 1 }
        #expect(accepted == 8)
    }
}
