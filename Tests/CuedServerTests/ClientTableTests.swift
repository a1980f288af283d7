import CuedCore
@testable import CuedServer
import Testing

/// One table for every client, socket and bus alike, under one cap rule; on a fake clock.
@Suite struct ClientTableTests {
    static let second: UInt64 = 1_000_000_000
    let table = ClientTable(capacity: 3)
    /// Who was let go, and why, in order.
    final class Told { var lines: [String] = [] }
    let told = Told()

    @discardableResult
    func admit(_ kind: Client.Kind, pid: Int32? = nil, at now: UInt64, busy: Bool = false) -> ClientID? {
        let name: String = switch kind {
        case .socket: "socket \(pid ?? 0)"
        case .bus(let sender): sender
        case .cued: "cued"
        }
        let id = table.admit(kind, pid: pid, now: now, limits: Daemon.Limits(), letGo: { [told] why in told.lines.append("\(name): \(why)") })
        if let id { table.touch(id, now: now, busy: busy) }
        return id
    }

    /// Bus clients take slots of the same cap as sockets: the longest-idle client of either
    /// kind makes room, and one in use (a feedback live) never does for being idle.
    @Test func busAndSocketClientsShareOneCap() throws {
        let s = try #require(admit(.socket, pid: 10, at: Self.second))
        let a = try #require(admit(.bus(sender: ":1.5"), at: 2 * Self.second, busy: true))
        admit(.bus(sender: ":1.6"), at: 3 * Self.second)
        #expect(table.count == 3)
        // The oldest idle client is the socket: it goes, with why.
        let b = try #require(admit(.bus(sender: ":1.7"), at: 4 * Self.second))
        #expect(told.lines == ["socket 10: idle(seconds: 3.0, capacity: 3)"])
        #expect(table[s] == nil && table.bus(":1.5") == a && table.bus(":1.7") == b)
        // Next the idle bus client (:1.5 is busy, and older).
        admit(.socket, pid: 11, at: 5 * Self.second)
        #expect(told.lines.last == ":1.6: idle(seconds: 2.0, capacity: 3)")
        #expect(table.bus(":1.6") == nil && table.bus(":1.5") == a)
        #expect(table.figures.open == 3 && table.figures.evictedIdle == 2 && table.figures.processes == 1)
    }

    /// The bus is one peer to the share rule (every bus client comes through the bus daemon):
    /// a flood of bus names holding the most slots gives one up to a process, and a newcomer
    /// of the bus is refused when nothing is idle and the bus holds the most.
    @Test func theBusIsOnePeerToTheShareRule() throws {
        for i in 0..<3 { try #require(admit(.bus(sender: ":1.\(i)"), at: Self.second + UInt64(i), busy: true) != nil) }
        #expect(admit(.bus(sender: ":1.9"), at: Self.second + 3, busy: true) == nil)
        #expect(table.refused == 1)
        let s = try #require(admit(.socket, pid: 10, at: Self.second + 3))
        #expect(told.lines == [":1.0: share(pid: nil, held: 3, capacity: 3)"])
        #expect(table[s]?.kind == .socket && table.bus(":1.0") == nil)
        #expect(Replies.reply(.share(pid: nil, held: 3, capacity: 3)).line.contains("the bus holds 3 of the 3"))
    }

    /// cued's own client (notification sounds) is kept in the table outside the cap: it
    /// takes no one's slot and is never let go.
    @Test func cuedsOwnClientIsOutsideTheCap() throws {
        let own = try #require(admit(.cued, at: 0))
        for i in 0..<3 { try #require(admit(.socket, pid: Int32(i), at: Self.second) != nil) }
        #expect(table.count == 3 && table.figures.open == 3)
        admit(.socket, pid: 9, at: 9 * Self.second)
        #expect(told.lines.count == 1 && !told.lines[0].hasPrefix("cued"))
        #expect(table[own]?.kind == .cued)
    }

    /// A client is copied out and back around a request: what the request changed is kept,
    /// and the table may be read meanwhile.
    @Test func anUpdateKeepsWhatChangedAndMayReadTheTable() throws {
        let id = try #require(admit(.socket, pid: 10, at: Self.second))
        let seen = table.update(id) { c -> Int in
            c.app = "mail"
            return table.figures.open + (table[id]?.app == nil ? 1 : 0)
        }
        #expect(seen == 2)
        #expect(table[id]?.app == "mail")
        #expect(table.update(99) { _ in 1 } == nil)
    }

    /// Every client leaving is told to `onRemove` (the daemon ends the loops it started),
    /// closed or let go.
    @Test func everyRemovalIsTold() throws {
        var removed: [ClientID] = []
        table.onRemove = { removed.append($0.client.id) }
        let a = try #require(admit(.socket, pid: 1, at: Self.second))
        table.startedLoop(a)
        let b = try #require(admit(.socket, pid: 2, at: Self.second))
        table.remove(b)
        admit(.socket, pid: 3, at: 2 * Self.second)
        admit(.socket, pid: 4, at: 3 * Self.second)
        admit(.socket, pid: 5, at: 5 * Self.second)
        #expect(removed == [b, a])
        #expect(told.lines == ["socket 1: idle(seconds: 4.0, capacity: 3)"])
    }
}
