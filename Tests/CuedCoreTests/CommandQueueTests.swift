@testable import CuedCore
import Testing

/// The audio thread's command queue: bounded, in order, and small until used.
@Suite struct CommandQueueTests {
    @Test func growsOnDemandUpToItsCapacityAndKeepsOrder() {
        let q = CommandQueue(capacity: 1000)
        var accepted = 0
        for i in 0..<1500 where q.push(.shutdown(deadline: UInt64(i))) { accepted += 1 }
        #expect(accepted == 1000)  // the rest refused: the queue is bounded
        var next: UInt64 = 0
        while let c = q.pop() {
            guard case .shutdown(let d) = c else { Issue.record("\(c)"); return }
            #expect(d == next)
            next += 1
        }
        #expect(next == 1000)
        #expect(q.isEmpty)
    }

    @Test func wrapsAroundWhileGrowing() {
        let q = CommandQueue(capacity: 300)
        var pushed: UInt64 = 0, popped: UInt64 = 0
        // Interleave pushes and pops so the ring wraps before and after each growth.
        for round in 0..<50 {
            for _ in 0..<(round % 7 + 3) { if q.push(.shutdown(deadline: pushed)) { pushed += 1 } }
            for _ in 0..<(round % 5) {
                guard let c = q.pop(), case .shutdown(let d) = c else { break }
                #expect(d == popped)
                popped += 1
            }
        }
        while let c = q.pop() {
            guard case .shutdown(let d) = c else { return }
            #expect(d == popped)
            popped += 1
        }
        #expect(popped == pushed)
    }
}
