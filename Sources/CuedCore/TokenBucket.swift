/// A token bucket: `rate` tokens a second, holding at most `burst`. Time is
/// passed in (monotonic ns), so tests drive it with a fake clock.
public struct TokenBucket: Sendable {
    public let rate: Double
    public let burst: Double
    private var tokens: Double
    private var last: UInt64

    public init(rate: Double, burst: Double? = nil, now: UInt64) {
        self.rate = rate
        self.burst = burst ?? max(rate, 1)
        tokens = self.burst
        last = now
    }

    /// Whether `take` would find a token now (nothing taken).
    public func wouldTake(now: UInt64) -> Bool {
        guard now > last else { return tokens >= 1 }
        return min(burst, tokens + Double(now - last) / 1_000_000_000 * rate) >= 1
    }

    /// Takes a token if one is there.
    public mutating func take(now: UInt64) -> Bool {
        if now > last {
            tokens = min(burst, tokens + Double(now - last) / 1_000_000_000 * rate)
            last = now
        }
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}
