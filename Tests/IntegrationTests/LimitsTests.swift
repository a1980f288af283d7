import CuedClient
import CuedProtocol
import Foundation
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
