import CMallocCount
@testable import CuedCore
import Glibc
import Synchronization
import Testing
import TestSupport

/// The audio thread allocates nothing and frees nothing once warm: the test binary's
/// allocator (CMallocCount) counts that thread's calls while cues play, stop and end.
@Suite(.serialized) struct AudioThreadAllocationTests {
    final class Ends: Sendable {
        let played = Atomic<Int>(0)
        let all = Atomic<Int>(0)
        let synced = Atomic<UInt64>(0)
        func add(_ e: EngineEvent) {
            switch e {
            case .voiceEnded(let end):
                all.add(1, ordering: .relaxed)
                if end.reason == .played { played.add(1, ordering: .relaxed) }
            case .synced(let t): synced.store(t, ordering: .relaxed)
            default: break
            }
        }
    }

    @Test func theCounterSeesTheAllocationsOfTheThreadItCounts() {
        cued_count_allocations_of(SystemCall.gettid())
        var a: [Int] = []
        for i in 0..<100 { a.append(i) }
        let counted = cued_allocations()
        cued_count_allocations_of(0)
        #expect(a.count == 100)
        #expect(counted > 0)
    }

    /// A round: plays (waited for; a loop stopped by id), a stop by an owner, and a sync; back
    /// once every voice ended and the sync was answered. Each voice its own cue object and
    /// owner string (on the heap, made here), whose last reference the engine holds: the
    /// thread that drops it frees it.
    func round(_ engine: AudioEngine, _ ends: Ends, sound: SoundBuffer, firstID: UInt64, ticket: UInt64) -> Bool {
        let before = ends.all.load(ordering: .relaxed)
        for i in 0..<8 {
            let id = firstID + UInt64(i)
            let cue = Cue(name: "tick of voice number \(id)", sound: sound)
            var r = VoiceRequest(id: id, cue: cue, owner: "an application with a long name, \(i % 2)", notify: [.wait])
            if i == 7 { r.loop = .forever }
            _ = engine.submit(.play(r))
        }
        _ = engine.submit(.stop(.id(firstID + 7), ticket: ticket))
        _ = engine.submit(.stop(.owner("an owner nobody is, \(ticket)"), ticket: ticket + 1))
        _ = engine.submit(.sync(ticket: ticket + 2))
        return eventually(timeout: 10, interval: 0.005) {
            ends.all.load(ordering: .relaxed) == before + 8 && ends.synced.load(ordering: .relaxed) == ticket + 2
        }
    }

    @Test func theAudioThreadAllocatesAndFreesNothingOnceWarm() throws {
        let ends = Ends()
        let engine = AudioEngine(sink: NullSink(latencyMs: 10)) { ends.add($0) }
        engine.start()
        defer { engine.shutdown(graceMs: 0) }
        let sound = SoundBuffer(copying: [Float](repeating: 0.1, count: 960 * 2))
        // Warm: the device opened, the mixer and the stream made, every table at its size.
        #expect(round(engine, ends, sound: sound, firstID: 1, ticket: 100))
        #expect(round(engine, ends, sound: sound, firstID: 101, ticket: 200))
        let audio = engine.stats.audioThreadID.load(ordering: .relaxed)
        try #require(audio != 0)
        cued_count_allocations_of(audio)
        var rounds = 0
        for r in 0..<5 where round(engine, ends, sound: sound, firstID: 1_001 + UInt64(r) * 100, ticket: 1_000 + UInt64(r) * 10) { rounds += 1 }
        let (allocations, frees) = (cued_allocations(), cued_frees())
        cued_count_allocations_of(0)
        #expect(rounds == 5)
        #expect(ends.played.load(ordering: .relaxed) > 0)
        #expect(allocations == 0, "the audio thread allocated \(allocations) times")
        #expect(frees == 0, "the audio thread freed \(frees) times")
        #expect(engine.stats.releasedByAudioThread.load(ordering: .relaxed) == 0)
    }
}
