import CuedClient
import CuedProtocol
import Foundation
import Synchronization
import Testing
import TestSupport

/// One client must not be able to drown the others.
@Suite(.timeLimit(.minutes(2))) struct LimitsTests {
    @Test func perConnectionRateLimit() throws {
        let d = try DaemonHarness(args: ["--sink", "null", "--rate-limit", "10"])
        let c = try d.client()
        try c.send(Array(String(repeating: "play pop\n", count: 30).utf8))
        let replies = try (0..<30).map { _ in try c.readLine() }
        #expect(replies.prefix(10).allSatisfy { $0 == "ok" })
        #expect(replies.dropFirst(10).filter { $0.hasPrefix("err rate-limited ") }.count >= 19)
        // Transitions are limited too; the state still moves on.
        #expect(try c.request("state release").hasPrefix("err rate-limited"))
        #expect(try c.request("session") == "ok - release 65")
        // Another connection has its own allowance; pings are never limited.
        #expect(try d.client().request("play pop") == "ok")
        #expect(try c.request("ping") == "ok pong")
        #expect(try d.status().rateLimited != 0)
    }

    /// While 20 connections flood pipelined pings, another client's requests are
    /// answered between their turns, not after them: it gets 100 round trips done
    /// before any flooder has all its replies. (Without the fair scheduler each
    /// of its requests waited for every flooder's whole read, about 16,000 lines,
    /// and a few dozen round trips took longer than the flood.) Timing-free:
    /// what is compared is the order of two things happening.
    @Test func anotherClientIsAnsweredWhileOthersFlood() throws {
        let d = try DaemonHarness(args: ["--sink", "null", "--rate-limit", "0"])
        let flooders = 20, lines = 20_000
        let replies = Atomic<Int>(0), finished = Atomic<Int>(0)
        var threads: [Thread] = []
        for _ in 0..<flooders {
            // One thread writes, one reads: the same socket, each its own direction.
            nonisolated(unsafe) let c = try d.client()
            let payload = Array(String(repeating: "ping\n", count: lines).utf8)
            threads.append(Thread { try? c.send(payload) })
            threads.append(Thread {
                var n = 0
                while n < lines, (try? c.readLine()) == "ok pong" {
                    n += 1
                    replies.add(1, ordering: .relaxed)
                }
                finished.add(1, ordering: .relaxed)
            })
        }
        let other = try d.client()
        threads.forEach { $0.start() }
        #expect(eventually { replies.load(ordering: .relaxed) >= 1_000 })  // the flood is on
        var roundTrips = 0
        while roundTrips < 100, finished.load(ordering: .relaxed) == 0 {
            #expect(try other.request("ping") == "ok pong")
            roundTrips += 1
        }
        let during = replies.load(ordering: .relaxed)
        #expect(roundTrips == 100, "only \(roundTrips) round trips before a flooder was done (\(during) of \(flooders * lines) flood replies by then)")
        #expect(eventually(timeout: 60) { finished.load(ordering: .relaxed) == flooders })
        #expect(replies.load(ordering: .relaxed) == flooders * lines)
    }

    @Test func connectionCapMakesRoomWhenOneLeaves() throws {
        // (Refusal when none is idle, and eviction of idle ones: RobustnessTests.)
        let d = try DaemonHarness(args: ["--sink", "null", "--max-clients", "3"])
        #expect(eventually { (try? d.status())?.clients == 1 })
        var held = try (0..<3).map { _ in try d.client() }
        for c in held { #expect(try c.request("ping") == "ok pong") }
        held.removeLast()  // one leaves: room for a new one, with nobody evicted
        #expect(eventually { (try? d.client().request("ping")) == "ok pong" })
        for c in held { #expect(try c.request("ping") == "ok pong") }
        #expect(try held[0].request("status").contains("\"evicted_idle\":0"))
    }
}
