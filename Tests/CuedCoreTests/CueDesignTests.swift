import CuedCore
import Testing

/// A seeded generator: the same picks on every run.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

@Suite struct CueDesignTests {
    /// Shuffle: never the same variant twice in a row, and every variant once in each deck.
    @Test(arguments: [2, 3, 5])
    func shuffleNeverRepeatsBackToBackAndCoversEveryVariant(count: Int) {
        var rng = SplitMix(state: 42)
        var p = VariantPicker(order: .shuffle, count: count)
        let picks = (0..<(count * 400)).map { _ in p.next(using: &rng) }
        for (a, b) in zip(picks, picks.dropFirst()) { #expect(a != b) }
        for deck in stride(from: 0, to: picks.count, by: count) {
            #expect(Set(picks[deck..<(deck + count)]) == Set(0..<count))
        }
    }

    @Test func sequenceGoesInTurnAndRandomRepeats() {
        var rng = SplitMix(state: 7)
        var s = VariantPicker(order: .sequence, count: 3)
        #expect((0..<7).map { _ in s.next(using: &rng) } == [0, 1, 2, 0, 1, 2, 0])
        var r = VariantPicker(order: .random, count: 3)
        let picks = (0..<3_000).map { _ in r.next(using: &rng) }
        #expect(Set(picks) == [0, 1, 2])
        #expect(zip(picks, picks.dropFirst()).contains { $0 == $1 })  // repeats happen
        var one = VariantPicker(order: .shuffle, count: 1)
        #expect((0..<3).map { _ in one.next(using: &rng) } == [0, 0, 0])
    }

    /// Jitter stays within its bounds, and uses them (not stuck at the middle).
    @Test func jitterStaysWithinItsBounds() {
        var d = CueDesign()
        d.pitchJitterCents = 50
        d.gainJitterDB = 3
        var rng = SplitMix(state: 1)
        let draws = (0..<10_000).map { _ in d.jitter(using: &rng) }
        let lo = CueDesign.rate(cents: -50), hi = CueDesign.rate(cents: 50)
        #expect(draws.allSatisfy { $0.rate >= lo && $0.rate <= hi && abs($0.gainDB) <= 3 })
        #expect(draws.map(\.rate).min()! < CueDesign.rate(cents: -45) && draws.map(\.rate).max()! > CueDesign.rate(cents: 45))
        #expect(draws.map(\.gainDB).min()! < -2.7 && draws.map(\.gainDB).max()! > 2.7)
        #expect(CueDesign().jitter(using: &rng) == (1, 0))
        #expect(abs(CueDesign.rate(cents: 1_200) - 2) < 1e-12 && abs(CueDesign.rate(cents: -1_200) - 0.5) < 1e-12)
    }
}
