@testable import CuedCore
import Synchronization
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The one memory budget for decoded sound: charged where sample memory is mapped,
/// given back where it is freed.
@Suite struct SoundBudgetTests {
    let page = SampleMemory.pageSize

    func memory(_ bytes: Int, _ budget: SoundBudget?) -> SampleMemory? {
        guard case .success(let m) = SampleMemory.allocate(bytes, budget: budget) else { return nil }
        return m
    }

    /// Memory of `bytes` held by a buffer (of no samples), or nil if refused.
    func buffer(_ bytes: Int, _ budget: SoundBudget?) -> SoundBuffer? {
        guard case .success(let m) = SampleMemory.allocate(bytes, budget: budget) else { return nil }
        return SoundBuffer(adopting: m, count: 0)
    }

    /// Whether `bytes` can be had now (given back at once).
    func fits(_ bytes: Int, _ budget: SoundBudget) -> Bool {
        if case .success = SampleMemory.allocate(bytes, budget: budget) { return true }
        return false
    }

    @Test func chargesWholePagesAndRefusesPastTheLimit() {
        let budget = SoundBudget(limitBytes: 3 * page)
        #expect(budget.charge(page) && budget.used == page)
        #expect(!budget.charge(2 * page + 1))
        #expect(budget.refused == 1 && budget.used == page)
        #expect(budget.charge(2 * page) && budget.used == 3 * page)
        budget.release(3 * page)
        #expect(budget.used == 0)

        // 1 byte takes a page; a refused allocation maps nothing and says why, with how to raise it.
        var one = memory(1, budget)
        let oneBytes = one?.bytes
        #expect(oneBytes == page && budget.used == page && budget.decoding == page)
        guard case .failure(let e) = SampleMemory.allocate(3 * page, budget: budget) else {
            Issue.record("over the budget, yet allocated"); return
        }
        #expect(e.reason.contains("over the memory budget for decoded sound") && e.reason.contains("sound_budget_mb"),
                "\(e.reason)")
        #expect(budget.used == page)
        one = nil
        #expect(budget.used == 0 && budget.decoding == 0)
    }

    @Test func aBufferHoldsItsPagesUntilItsLastHolderGoes() {
        let budget = SoundBudget(limitBytes: 64 * page)
        guard var m = memory(10 * page, budget) else { Issue.record("refused under the limit"); return }
        m.base!.assumingMemoryBound(to: Float.self).update(repeating: 0.25, count: 8)
        m.shrink(to: 8 * MemoryLayout<Float>.stride)  // the pages past the samples go back at once
        #expect(budget.used == page && budget.decoding == page)
        var sound: SoundBuffer? = SoundBuffer(adopting: m, count: 8)
        #expect(budget.used == page && budget.decoding == 0)  // decoded: no longer in flight
        var a: Cue? = Cue(name: "a", sound: sound!)
        let b = a!.named("b")
        sound = nil
        a = nil
        #expect(budget.used == page && b.samples.allSatisfy { $0 == 0.25 })  // shared: held by `b`
        withExtendedLifetime(b) {}
        _ = consume b
        #expect(budget.used == 0)
    }

    @Test func theReliefIsAskedBeforeARefusal() {
        let budget = SoundBudget(limitBytes: 4 * page)
        let held = Mutex<[SoundBuffer]>([])
        for _ in 0..<4 {
            guard let b = buffer(page, budget) else { Issue.record("refused under the limit"); return }
            held.withLock { $0.append(b) }
        }
        let asked = Atomic<Int>(0)
        let p = page
        budget.setRelief { needed in
            asked.add(1, ordering: .relaxed)
            #expect(needed == 2 * p)
            held.withLock { $0.removeFirst(2) }  // a cache dropping its two oldest
        }
        #expect(fits(2 * page, budget))
        #expect(asked.load(ordering: .relaxed) == 1 && budget.refused == 0)
        // Nothing more to give up: refused.
        budget.setRelief { _ in asked.add(1, ordering: .relaxed) }
        #expect(!fits(4 * page, budget))
        #expect(asked.load(ordering: .relaxed) == 2 && budget.refused == 1)
    }

    /// On the audio thread the unmapping is handed to the reclaimer thread; the budget
    /// gets its bytes back there.
    @Test func memoryFreedOnTheAudioThreadIsUnmappedElsewhere() {
        SampleReclaimer.start()
        let budget = SoundBudget(limitBytes: 16 * page)
        let sound = Mutex<SoundBuffer?>(buffer(4 * page, budget))
        #expect(budget.used == 4 * page)
        let handedBefore = SampleReclaimer.handedOver.load(ordering: .relaxed)
        var thread = pthread_t()
        let box = Unmanaged.passRetained(Box {
            SampleReclaimer.markAudioThread()
            sound.withLock { $0 = nil }  // the last reference, dropped on the "audio thread"
        })
        #expect(pthread_create(&thread, nil, { arg in
            Unmanaged<Box>.fromOpaque(arg!).takeRetainedValue().body()
            return nil
        }, box.toOpaque()) == 0)
        pthread_join(thread, nil)
        // Not unmapped by the audio thread itself, but handed over…
        #expect(SampleReclaimer.handedOver.load(ordering: .relaxed) >= handedBefore + 1)
        // …and unmapped soon after by the reclaimer.
        #expect(eventually(timeout: 2, interval: 0.001) { budget.used == 0 })
    }

    final class Box: @unchecked Sendable {
        let body: () -> Void
        init(_ body: @escaping () -> Void) { self.body = body }
    }

    @Test func aBankCountsASharedBufferOnce() {
        let sound = SoundBuffer(copying: [Float](repeating: 0.1, count: 2 * 1000))
        let cues = (0..<300).map { Cue(name: "c\($0)", sound: sound) }
        let other = Cue(name: "other", stereo: [0, 0])
        #expect(CueBank(cues + [other]).bytes == sound.bytes + other.sound.bytes)
    }
}
