import CuedCore
@testable import CuedServer
import CuedProtocol
import Logging
import NIOCore
import NIOEmbedded
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A daemon stand-in: `ping` → `ok pong`, `echo X` → `ok X`, `later` → a reply
/// the test gives, `rendered` → a reply rendered in the connection's turn once the
/// the test gives, `bye` → a last line and close. Counts what it was asked.
final class FakeHost: ConnectionHost {
    let logger = Logger(label: "test")
    let loop: EmbeddedEventLoop
    var pending: [EventLoopPromise<Reply>] = []
    var ready: [EventLoopPromise<Void>] = []
    var renders = 0
    var asked: [String] = []
    let limits = Daemon.Limits()
    let clients: ClientTable
    init(loop: EmbeddedEventLoop, clients: ClientTable) { self.loop = loop; self.clients = clients }

    func respond(to line: [UInt8], client: inout Client, receivedAt: UInt64) -> Response {
        let text = String(decoding: line, as: UTF8.self)
        asked.append(text)
        if text == "later" {
            let p = loop.makePromise(of: Reply.self)
            pending.append(p)
            return .later(p.futureResult)
        }
        if text == "rendered" {
            let p = loop.makePromise(of: Void.self)
            ready.append(p)
            let render = NIOLoopBound({ self.renders += 1; return Reply.ok("rendered") }, eventLoop: loop)
            return .whenReady(p.futureResult, cost: VerbCost.of(verb: "status"), render: render)
        }
        if text == "bye" { return .close(.ok("bye")) }
        if text.hasPrefix("echo ") { return .now(.ok(String(text.dropFirst(5)))) }
        if text == "status" { return .now(.ok("{}")) }
        return .now(.ok("pong"))
    }
}

/// A socket whose client does not read: writes are held (their promises
/// pending) until `take()`, as NIO holds them when the kernel's buffer is full.
final class HeldWrites: ChannelOutboundHandler {
    typealias OutboundIn = ByteBuffer
    var held: [(ByteBuffer, EventLoopPromise<Void>?)] = []
    var context: ChannelHandlerContext?
    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        held.append((unwrapOutboundIn(data), promise))
    }
    func flush(context: ChannelHandlerContext) {}
    var heldBytes: Int { held.reduce(0) { $0 + $1.0.readableBytes } }
    /// The client reads everything: the writes go through and complete.
    func take() -> String {
        let out = held
        held = []
        var text = ""
        for (b, p) in out {
            text += String(buffer: b)
            p?.succeed()
        }
        return text
    }
}

/// Counts the reads the handler lets through to the socket.
final class ReadCounter: ChannelOutboundHandler {
    typealias OutboundIn = Any
    var reads = 0
    func read(context: ChannelHandlerContext) {
        reads += 1
        context.read()
    }
}

/// The connection handler on NIO's EmbeddedChannel, with a fake daemon and a
/// fake clock: order, deferred replies, light turns, slices, read grants,
/// half-close, eviction. No socket, no sleeping.
@Suite struct ConnectionHandlerTests {
    let loop = EmbeddedEventLoop()
    let host: FakeHost
    let table = ClientTable(capacity: 16)
    let scheduler: FairScheduler
    var now: UInt64 = 1_000_000_000

    init() {
        host = FakeHost(loop: loop, clients: table)
        var settings = FairScheduler.Settings()
        settings.sliceBudget = 64
        settings.quantum = 16
        settings.readsPerSlice = 1
        scheduler = FairScheduler(loop: loop, settings: settings)
    }

    final class Client {
        let channel: EmbeddedChannel
        let reads: ReadCounter
        init(channel: EmbeddedChannel, reads: ReadCounter) { self.channel = channel; self.reads = reads }

        func send(_ text: String) throws {
            var b = channel.allocator.buffer(capacity: text.utf8.count)
            b.writeString(text)
            try channel.writeInbound(b)
        }

        /// The lines written back so far.
        func replies() throws -> [String] {
            var out = ""
            while let b = try channel.readOutbound(as: ByteBuffer.self) { out += String(buffer: b) }
            return out.split(separator: "\n", omittingEmptySubsequences: true).map(String.init)
        }
    }

    func connect(clock: @escaping () -> UInt64 = { 1_000_000_000 }, pid: Int32? = nil, held: HeldWrites? = nil,
                 scheduler: FairScheduler? = nil) throws -> Client {
        let reads = ReadCounter()
        let channel = EmbeddedChannel(loop: loop)
        let peer: (Channel) -> PeerCredentials? = { _ in pid.map { PeerCredentials(pid: $0, uid: getuid(), gid: 0) } }
        try channel.pipeline.syncOperations.addHandlers([reads] + (held.map { [$0] } ?? []) + [
            ConnectionHandler(host: host, scheduler: scheduler ?? self.scheduler, clock: clock, peer: peer),
        ])
        try channel.connect(to: SocketAddress(unixDomainSocketPath: "/x")).wait()
        return Client(channel: channel, reads: reads)
    }

    /// Runs the scheduler's slices that are due.
    func slice() { loop.advanceTime(by: scheduler.settings.gap) }

    @Test func aLightLineIsAnsweredAtOnce() throws {
        let c = try connect()
        try c.send("ping\n")
        #expect(try c.replies() == ["ok pong"])
        #expect(scheduler.slices == 0)
    }

    @Test func repliesKeepRequestOrderAcrossADeferredReply() throws {
        let c = try connect()
        try c.send("echo 1\nlater\necho 3\n")
        #expect(try c.replies() == ["ok 1"])
        #expect(host.asked == ["echo 1", "later"])  // line 3 waits for line 2's reply
        host.pending.removeFirst().succeed(.ok("2"))
        slice()
        #expect(try c.replies() == ["ok 2", "ok 3"])
    }

    /// A flood from one connection runs in slices; another connection's line
    /// arriving meanwhile is answered at once, ahead of the flood.
    @Test func anotherClientIsAnsweredAheadOfAFlood() throws {
        let flood = try connect()
        let other = try connect()
        try flood.send(String(repeating: "ping\n", count: 500))
        #expect(try flood.replies().isEmpty)  // heavy: all of it waits for a slice
        slice()
        #expect(try flood.replies().count == 64)  // one slice's budget
        try other.send("echo me\n")
        #expect(try other.replies() == ["ok me"])
        var answered = 64
        for _ in 0..<100 where answered < 500 {
            slice()
            let n = try flood.replies().count
            #expect(n > 0 && n <= 64)
            answered += n
        }
        #expect(answered == 500)
    }

    /// Two flooders share each slice in turns of a quantum.
    @Test func floodersShareSlicesInQuanta() throws {
        let a = try connect()
        let b = try connect()
        try a.send(String(repeating: "ping\n", count: 200))
        try b.send(String(repeating: "ping\n", count: 200))
        slice()
        #expect(try a.replies().count == 32)
        #expect(try b.replies().count == 32)
    }

    /// `status` costs its share: a slice of budget 64 runs only a few.
    @Test func aCostlyVerbCostsItsShare() throws {
        let c = try connect()
        try c.send(String(repeating: "status\n", count: 20))
        slice()
        let n = try c.replies().count
        #expect(n >= 2 && n <= 64 / VerbCost.of(verb: "status") + 1)
    }

    /// The socket is not read while lines wait; a heavy connection's next read
    /// comes with a grant from a slice.
    @Test func readsWaitForAnswersAndGrants() throws {
        let c = try connect()
        let start = c.reads.reads
        try c.send(String(repeating: "ping\n", count: 100))
        c.channel.pipeline.read()
        #expect(c.reads.reads == start)  // lines wait: held
        var answered = 0
        for _ in 0..<100 where answered < 100 {
            slice()
            answered += try c.replies().count
        }
        #expect(answered == 100)
        slice()  // the grant
        #expect(c.reads.reads == start + 1)
    }

    @Test func aLightConnectionReadsAgainAtOnce() throws {
        let c = try connect()
        let start = c.reads.reads
        try c.send("ping\n")
        c.channel.pipeline.read()
        #expect(c.reads.reads == start + 1)
    }

    /// Half-closed by the client: the rest is answered, then the connection closes.
    @Test func halfCloseAnswersEverythingThenCloses() throws {
        let c = try connect()
        try c.send("echo a\nlater\n")
        c.channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        #expect(c.channel.isActive)
        host.pending.removeFirst().succeed(.ok("b"))
        #expect(try c.replies() == ["ok a", "ok b"])
        loop.run()
        #expect(!c.channel.isActive)
    }

    @Test func aLastLineClosesAndLaterLinesAreDropped() throws {
        let c = try connect()
        try c.send("bye\nping\n")
        #expect(try c.replies() == ["ok bye"])
        #expect(host.asked == ["bye"])
    }

    @Test func aLineTooLongClosesWithAReason() throws {
        let c = try connect()
        try c.send(String(repeating: "a", count: ProtocolLimits.maxLineBytes + 10))
        let r = try c.replies()
        #expect(r.count == 1 && r[0].hasPrefix("err line-too-long"))
    }

    /// At the cap the longest-idle connection makes room (idle by the fake clock).
    @Test func atTheCapTheIdleOneIsEvicted() throws {
        table.capacity = 1
        let first = try connect(clock: { 1_000_000_000 })
        try first.send("ping\n")
        _ = try first.replies()
        let second = try connect(clock: { 3_000_000_000 })
        #expect(try first.replies().first?.hasPrefix("err busy closing this connection, idle for 2") == true)
        try second.send("ping\n")
        #expect(try second.replies() == ["ok pong"])
        #expect(table.evictedIdle == 1 && table.count == 1)
    }

    /// At the cap with nobody idle, the newcomer is refused with a reason.
    @Test func atTheCapWithNoneIdleTheNewcomerIsRefused() throws {
        table.capacity = 1
        let first = try connect(clock: { 1_000_000_000 })
        try first.send("ping\n")
        let second = try connect(clock: { 1_100_000_000 })
        #expect(try second.replies().first?.hasPrefix("err busy too many connections") == true)
        #expect(table.refused == 1)
        try first.send("ping\n")
        #expect(try first.replies() == ["ok pong", "ok pong"])
    }

    /// At most one slice works per loop tick: one due again before the loop
    /// has polled its sockets (its timer came due among other tasks) waits.
    @Test func aSliceWaitsForTheLoopToPollFirst() throws {
        let ticks = LoopTicks()
        var settings = FairScheduler.Settings()
        settings.sliceBudget = 8
        settings.quantum = 8
        let scheduler = FairScheduler(loop: loop, settings: settings, ticks: ticks)
        let channel = EmbeddedChannel(loop: loop)
        try channel.pipeline.syncOperations.addHandler(ConnectionHandler(host: host, scheduler: scheduler))
        try channel.connect(to: SocketAddress(unixDomainSocketPath: "/x")).wait()
        var b = channel.allocator.buffer(capacity: 100)
        b.writeString(String(repeating: "ping\n", count: 20))
        try channel.writeInbound(b)
        let client = Client(channel: channel, reads: ReadCounter())
        slice()
        #expect(try client.replies().count == 8)
        slice()  // the same tick: put off
        slice()
        #expect(try client.replies().isEmpty)
        #expect(scheduler.deferredSlices == 2)
        ticks.advance()
        slice()
        #expect(try client.replies().count == 8)
        ticks.advance()
        slice()
        #expect(try client.replies().count == 4)
        #expect(scheduler.slices == 3)
    }

    /// An event line (`end ID REASON`) reaches its connection while it is open.
    @Test func eventLinesReachTheirConnection() throws {
        let c = try connect()
        #expect(table.count == 1)
        end(7)
        #expect(try c.replies() == ["end 7 played"])
        try c.channel.close().wait()
        #expect(table.count == 0 && table[1] == nil)
    }

    /// The end of voice `voice` of client `client` (the first connection is 1), told as the broker tells it.
    func end(_ voice: UInt64, client: ClientID = 1) {
        table.deliver(VoiceEnd(id: voice, cue: "pop", connection: client, notify: [.events], reason: .played, started: true))
    }

    /// A client that does not read: lines stop running once its unsent replies
    /// reach the mark, NIO holds one write (the lines of a turn coalesced), not a
    /// write per reply, and when it reads again the rest is answered.
    @Test func aClientThatDoesNotReadHoldsOneBoundedWrite() throws {
        let held = HeldWrites()
        let c = try connect(held: held)
        let n = 20_000
        try c.send(String(repeating: "ping\n", count: n))
        for _ in 0..<200 { slice() }
        let marks = table.output
        // "ok pong\n" is 8 bytes: lines ran up to the mark and stopped.
        #expect(host.asked.count <= marks.runBytes / 8 + 64)
        #expect(host.asked.count >= 16)
        #expect(held.held.count == 1)
        #expect(table.unsentBytes == host.asked.count * 8)
        #expect(table.unsentBytes <= marks.runBytes + 64 * 8)
        // It reads: the rest runs.
        var replies = 0
        for _ in 0..<5_000 where replies < n {
            replies += held.take().split(separator: "\n").count
            slice()
        }
        #expect(replies == n)
        #expect(table.unsentBytes == 0)
    }

    /// Event lines go out at once, and one that would take a non-reading
    /// client's unsent output past the bound closes the connection (counted).
    @Test func eventsPastTheOutputBoundCloseTheConnection() throws {
        let held = HeldWrites()
        let c = try connect(held: held)
        end(1)
        #expect(held.take() == "end 1 played\n")
        let line = "end 123456 played"
        let fit = table.output.limitBytes / (line.utf8.count + 1)
        for _ in 0..<fit { end(123_456) }
        #expect(c.channel.isActive)
        #expect(held.held.count == 1)  // one write in flight; the rest coalesced behind it
        end(123_456)
        #expect(!c.channel.isActive)
        #expect(table.closedUnread == 1)
        #expect(table.unsentBytes == 0)  // its output was let go
    }

    /// A reply rendered in the connection's turn (`status wait`): many ready at
    /// once are built a slice at a time, each charged its cost.
    @Test func repliesReadyAtOnceAreRenderedInSlices() throws {
        let ticks = LoopTicks()
        let scheduler = FairScheduler(loop: loop, settings: self.scheduler.settings, ticks: ticks)
        table.capacity = 64
        let clients = try (0..<40).map { _ in try connect(scheduler: scheduler) }
        for c in clients { try c.send("rendered\n") }
        #expect(host.renders == 0)
        ticks.advance()
        for p in host.ready { p.succeed() }  // all in one loop tick
        // Inline, a tick's share (64) and the one that crossed it: each costs the status verb's (24).
        #expect(host.renders == 64 / VerbCost.of(verb: "status") + 1)
        var slices = 0
        while host.renders < 40 && slices < 100 {
            let before = host.renders
            ticks.advance()
            slice()
            slices += 1
            #expect(host.renders - before <= 64 / VerbCost.of(verb: "status") + 1)
        }
        #expect(host.renders == 40)
        for c in clients { #expect(try c.replies() == ["ok rendered"]) }
        // A lone one in a later tick is answered at once.
        let lone = try connect(scheduler: scheduler)
        ticks.advance()
        try lone.send("rendered\n")
        host.ready.last?.succeed()
        #expect(try lone.replies() == ["ok rendered"])
    }

    /// At the cap with nobody idle, a newcomer from a process holding fewer
    /// connections takes one from the process holding the most; one from that
    /// process itself is refused.
    @Test func atTheCapANewcomerTakesASlotFromTheBusiestProcess() throws {
        table.capacity = 3
        let hog = try (0..<3).map { _ in try connect(clock: { 1_000_000_000 }, pid: 100) }
        for h in hog { try h.send("ping\n"); _ = try h.replies() }
        let again = try connect(clock: { 1_100_000_000 }, pid: 100)
        #expect(try again.replies().first?.hasPrefix("err busy too many connections") == true)
        #expect(table.refused == 1)
        let other = try connect(clock: { 1_100_000_000 }, pid: 200)
        try other.send("ping\n")
        #expect(try other.replies() == ["ok pong"])
        let told = try hog.compactMap { try $0.replies().first }
        #expect(told.count == 1)
        #expect(told.first?.hasPrefix("err busy closing this connection: process 100 holds 3 of the 3 connections") == true)
        #expect(table.evictedShare == 1)
        #expect(table.figures.busiest?.pid == 100 && table.figures.busiest?.connections == 2 && table.figures.processes == 2)
        // Now 2 against 1: a third process still gets in; the second one's next newcomer does not.
        let third = try connect(clock: { 1_100_000_000 }, pid: 300)
        try third.send("ping\n")
        #expect(try third.replies() == ["ok pong"])
        let more = try connect(clock: { 1_100_000_000 }, pid: 200)
        #expect(try more.replies().first?.hasPrefix("err busy too many connections") == true)
    }
}
