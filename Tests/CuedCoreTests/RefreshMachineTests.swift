import CuedCore
import CuedProtocol
import Testing

/// The whole transition table of the original design: every state × every input.
@Suite struct RefreshMachineTests {
    typealias S = RefreshState
    static let table: [(from: S, to: S, cue: String?, end: S)] = [
        (.idle, .idle, nil, .idle),
        (.idle, .pull, nil, .pull),
        (.idle, .release, "psst1", .release),
        (.idle, .loading, "psst2", .loading),
        (.pull, .idle, nil, .idle),
        (.pull, .pull, nil, .pull),
        (.pull, .release, "psst1", .release),
        (.pull, .loading, "psst2", .loading),
        (.release, .idle, nil, .idle),
        (.release, .pull, "pop", .pull),
        (.release, .release, nil, .release),
        (.release, .loading, "psst2", .loading),
        (.loading, .idle, "pop", .idle),
        (.loading, .pull, nil, .loading),      // scrolling while loading: ignored
        (.loading, .release, nil, .loading),   // ignored
        (.loading, .loading, nil, .loading),
    ]

    @Test func tableIsComplete() {
        #expect(Self.table.count == S.allCases.count * S.allCases.count)
    }

    @Test(arguments: table.indices)
    func transition(index: Int) {
        let row = Self.table[index]
        var m = RefreshMachine(state: row.from)
        let action = m.handle(row.to)
        #expect(action == (row.cue.map(RefreshMachine.Action.play) ?? .none), "\(row.from) → \(row.to)")
        #expect(m.state == row.end, "\(row.from) → \(row.to)")
    }

    @Test func fullRefreshPlaysPsst1Psst2Pop() {
        var m = RefreshMachine()
        let cues = [S.pull, .release, .loading, .idle].map { m.handle($0) }
        #expect(cues == [.none, .play("psst1"), .play("psst2"), .play("pop")])
    }

    @Test func noDoublePsst1() {
        var m = RefreshMachine()
        #expect(m.handle(.release) == .play("psst1"))
        #expect(m.handle(.release) == .none)
    }

    @Test func forcedStateIsSilent() {
        var m = RefreshMachine()
        m.force(.loading)
        #expect(m.state == .loading)
        #expect(m.handle(.release) == .none)
        #expect(m.handle(.idle) == .play("pop"))
    }
}
