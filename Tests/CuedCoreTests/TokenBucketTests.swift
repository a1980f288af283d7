import CuedCore
import Testing

@Suite struct TokenBucketTests {
    let ms: UInt64 = 1_000_000

    @Test func burstThenRate() {
        var b = TokenBucket(rate: 200, now: 0)
        let first = (0..<250).filter { _ in b.take(now: 0) }.count
        #expect(first == 200)                                  // a one-second burst
        let tooSoon = b.take(now: 1 * ms)                      // 0.2 of a token later: none
        let oneMore = b.take(now: 5 * ms)                      // 1 token after 5 ms at 200/s
        let thenNone = b.take(now: 5 * ms)
        #expect(!tooSoon && oneMore && !thenNone)
        let later = (0..<300).filter { _ in b.take(now: 2_000 * ms) }.count
        #expect(later == 200)                                  // refills to the burst, no more
    }

    @Test func clockGoingBackwardsGrantsNothing() {
        var b = TokenBucket(rate: 10, burst: 1, now: 100 * ms)
        let first = b.take(now: 100 * ms)
        let back = b.take(now: 50 * ms)
        #expect(first && !back)
    }
}
