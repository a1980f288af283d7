@testable import CuedCore
import Testing

/// `status`'s latency figures by selection give what a sort gives.
@Suite struct LatencyPercentilesTests {
    func sorted(_ v: [UInt32]) -> (p50: UInt32, p99: UInt32, max: UInt32) {
        let s = v.sorted()
        func pct(_ p: Double) -> UInt32 { s[min(s.count - 1, Int(Double(s.count) * p))] }
        return (pct(0.5), pct(0.99), s.last!)
    }

    @Test(arguments: [1, 2, 3, 99, 100, 101, 4096])
    func selectionMatchesASort(count: Int) {
        var seed: UInt64 = 0x9E37_79B9 &* UInt64(count)
        for spread in [UInt32(3), 1_000, UInt32.max] {  // many equal values, some, few
            var v = (0..<count).map { _ -> UInt32 in
                seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                return UInt32(truncatingIfNeeded: seed >> 33) % spread
            }
            let want = sorted(v)
            let got = EngineStats.percentiles(&v)
            #expect(got == want, "count \(count), spread \(spread)")
        }
        var ascending = (0..<UInt32(count)).map { $0 }
        #expect(EngineStats.percentiles(&ascending) == sorted(ascending))
        var descending = (0..<UInt32(count)).reversed().map { $0 }
        #expect(EngineStats.percentiles(&descending) == sorted(descending))
    }
}
