import CuedCore
import CuedProtocol
import Logging
import NIOCore
#if canImport(Glibc)
import Glibc
#endif

/// `struct ucred`, which Glibc does not export to Swift.
struct PeerCredentials: Sendable {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
}

/// A request line (without LF) as the connection machine cuts it from what
/// was read, or the news that a line went past the limit (the connection
/// then closes with a last line).
enum LineEvent: Equatable {
    case line([UInt8])
    case tooLong
}

/// What a connection asks of the daemon. Called on the event loop only.
protocol ConnectionHost: AnyObject {
    var logger: Logger { get }
    var limits: Daemon.Limits { get }
    /// The table the connection's client is kept in, with every other client.
    var clients: ClientTable { get }
    func respond(to line: [UInt8], client: inout Client, receivedAt: UInt64) -> Response
}


/// One client connection: its private refresh session, one reply per line,
/// in request order. The order, the deferred replies, the budgets, the output
/// bound, when to read and how to close are decided by its `ConnectionMachine`;
/// this handler only carries them out on the channel: a light turn inline when
/// a read arrives, the rest in the `FairScheduler`'s slices. Errors close this
/// connection only.
///
/// Output is coalesced: the lines of a turn go into one buffer, and one write
/// at a time is handed to NIO (the next when the socket has taken it), so a
/// client that does not read holds one buffer of bytes, not a ByteBuffer and a
/// pending-write node per reply.
final class ConnectionHandler: ChannelDuplexHandler, ScheduledConnection {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// How long a closing connection is drained (so its last line is not lost to a reset).
    static let drainNanoseconds: Int64 = 2_000_000_000
    /// The same for a refused newcomer that sends nothing: short, as descriptors are scarce then.
    static let refusedDrainNanoseconds: Int64 = 250_000_000

    private let host: any ConnectionHost
    private let table: ClientTable
    private let scheduler: FairScheduler
    private var machine: ConnectionMachine
    private var context: ChannelHandlerContext?
    /// Its client in the table (0: none, e.g. a refused newcomer).
    private var id: ClientID = 0
    /// In the scheduler's run queue (its lines run in a slice).
    private var inRunQueue = false
    /// Lines queued for the socket since the last write, and the bytes of the write NIO holds (0: none).
    private var pendingOutput: ByteBuffer?
    private var writing = 0
    /// Inside `flushOutput`: a write NIO completes at once must not start a turn from within a turn.
    private var flushing = false
    /// Monotonic nanoseconds (a fake clock in tests: idleness decides evictions).
    private let clock: () -> UInt64
    /// Who is on the other end (SO_PEERCRED; nil where the channel has no socket, as in tests).
    private let peer: (Channel) -> PeerCredentials?

    init(host: any ConnectionHost, scheduler: FairScheduler,
         clock: @escaping () -> UInt64 = { MonotonicClock.now() },
         peer: @escaping (Channel) -> PeerCredentials? = ConnectionHandler.peerCredentials) {
        self.host = host
        self.table = host.clients
        self.scheduler = scheduler
        self.clock = clock
        self.peer = peer
        machine = ConnectionMachine(output: table.output)
    }

    /// SO_PEERCRED, read on the channel's loop while the socket is surely open (NIO
    /// answers at once there).
    static func peerCredentials(_ channel: Channel) -> PeerCredentials? {
        guard let provider = channel as? SocketOptionProvider else { return nil }
        let future: EventLoopFuture<PeerCredentials> = provider.unsafeGetSocketOption(
            level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERCRED))
        var out: PeerCredentials?
        future.assumeIsolated().whenSuccess { out = $0 }
        return out
    }

    private var active: Bool { machine.lifecycle != .closed }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    func channelActive(context: ChannelHandlerContext) {
        defer { context.fireChannelActive() }
        let cred = peer(context.channel)
        if let cred {
            host.logger.debug("client connected", metadata: ["peer.uid": "\(cred.uid)", "peer.pid": "\(cred.pid)"])
            if cred.uid != getuid() {
                host.logger.warning("refused a client of another user", metadata: ["peer.uid": "\(cred.uid)", "peer.pid": "\(cred.pid)"])
                closeGracefully(context, with: .err(.forbidden, "only uid \(getuid()) may use this cued"), refused: true)
                return
            }
        }
        let admitted = table.admit(.socket, pid: cred?.pid ?? 0, now: clock(), limits: host.limits,
                                   letGo: { why in self.closeGracefully(context, with: Replies.reply(why)) },
                                   ends: { end in self.sendEvent(Replies.endLine(end), context) })
        guard let id = admitted else {
            closeGracefully(context, with: Replies.refusedAtCap(capacity: table.capacity), refused: true)
            return
        }
        self.id = id
    }

    func channelInactive(context: ChannelHandlerContext) {
        if id != 0 { table.remove(id) }
        // Gone: its lines need no answers, its output no socket.
        table.outputChanged(by: -machine.unsentBytes)
        machine.closed()
        pendingOutput = nil
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        _ = machine.received(Self.unwrapInboundIn(data).readableBytesView)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        machine.readFinished(lightLines: scheduler.settings.lightTurn)
        lightTurn(context)
        if machine.closesAfterRead { context.close(promise: nil) }
        context.fireChannelReadComplete()
    }

    // MARK: Running lines

    /// What just arrived (a read, a reply, taken output) runs at once up to a
    /// light turn, unless the connection already waits for a slice or the loop
    /// tick ran its share of light turns already.
    private func lightTurn(_ context: ChannelHandlerContext) {
        guard !inRunQueue else { return }
        // Heavy, or this loop tick ran its share inline already: wait for a slice.
        if machine.heavy || !scheduler.mayRunInline() {
            if machine.runnable { queueForSlice() }
            afterRunning(context)
            return
        }
        machine.grantTurn(scheduler.settings.lightTurn)
        scheduler.ranInline(serve(context))
    }

    func serveTurn(quantum: Int) -> (spent: Int, more: Bool) {
        inRunQueue = false
        guard let context, active else { return (0, false) }
        machine.grantTurn(quantum)
        let spent = serve(context, requeue: false)
        let more = machine.runnable
        inRunQueue = more
        return (spent, more)
    }

    /// Runs lines while the machine says so; what is left goes to the scheduler.
    /// Returns the cost run.
    @discardableResult
    private func serve(_ context: ChannelHandlerContext, requeue: Bool = true) -> Int {
        var spent = 0
        loop: while active {
            let before = machine.credit
            switch machine.next() {
            case .run(let event):
                spent += before - machine.credit
                run(event, context)
            case .render:
                spent += before - machine.credit
                renderReady(context)
            case .yield:
                if requeue { queueForSlice() }
                break loop
            case .idle:
                // Its output reached the mark: hand it to the socket; if the socket took it, go on.
                guard !machine.takesReplies, writing == 0, pendingOutput != nil else { break loop }
                flushOutput(context)
                if !machine.runnable { break loop }
            }
        }
        flushOutput(context)
        // The socket took a turn's output at once: what it held back may run (in a slice, not nested here).
        if requeue, machine.runnable { queueForSlice() }
        afterRunning(context)
        return spent
    }

    private func queueForSlice() {
        guard !inRunQueue else { return }
        inRunQueue = true
        scheduler.enqueue(self)
    }

    private func afterRunning(_ context: ChannelHandlerContext) {
        guard active else { return }
        table.touch(id, now: clock(), busy: machine.busy)
        if machine.finishIfDone() { finish(context) }
        release(machine.releaseHeldRead(), context)
    }

    /// The deferred reply rendered in this turn (`status wait`), and what it renders.
    private var render: (() -> Reply)?

    private func renderReady(_ context: ChannelHandlerContext) {
        guard let r = render else { return }
        render = nil
        queue(r().line, context)
    }

    private func run(_ event: LineEvent, _ context: ChannelHandlerContext) {
        let receivedAt = clock()
        switch event {
        case .tooLong:
            closeGracefully(context, with: .err(.lineTooLong, "line exceeds \(ProtocolLimits.maxLineBytes) bytes; closing"))
        case .line(let bytes):
            // The client is copied out of the table and back (`update`): the daemon may read the table meanwhile.
            let response = table.update(id) { client in host.respond(to: bytes, client: &client, receivedAt: receivedAt) }
                ?? .close(.err(.internal, "this connection has no client; closing"))
            switch response {
            case .now(let reply):
                queue(reply.line, context)
            case .close(let reply):
                closeGracefully(context, with: reply)
            case .later(let future):
                machine.deferred()
                future.assumeIsolated().whenComplete { result in
                    self.machine.answered()
                    guard !self.machine.isClosing, self.active else { return }
                    let reply: Reply
                    switch result {
                    case .success(let r): reply = r
                    case .failure(let e): reply = .err(.internal, "\(e)")
                    }
                    self.queue(reply.line, context)
                    self.flushOutput(context)
                    self.lightTurn(context)
                }
            case .whenReady(let ready, let cost, let render):
                // Rendered in the connection's turn and charged there: many `status wait`
                // replies ready at once are built a slice at a time, not all in one loop tick.
                machine.deferred()
                self.render = render.value
                ready.assumeIsolated().whenComplete { _ in
                    self.machine.replyReady(cost: cost)
                    guard !self.machine.isClosing, self.active else { return }
                    self.lightTurn(context)
                }
            }
        }
    }

    /// After a half-close, everything answered: once what is queued is out, close.
    private func finish(_ context: ChannelHandlerContext) {
        let out = takeOutput(context)
        context.writeAndFlush(Self.wrapOutboundOut(out)).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
    }

    // MARK: Output

    /// A reply line, queued for the socket.
    private func queue(_ line: String, _ context: ChannelHandlerContext) {
        let n = append(line, context)
        machine.replyQueued(n)
        table.outputChanged(by: n)
    }

    /// An event line (`end ID REASON`): queued and sent at once, unless the client
    /// has left that much unread; then the connection is closed (it does not read).
    private func sendEvent(_ line: String, _ context: ChannelHandlerContext) {
        guard active, !machine.isClosing else { return }
        let n = line.utf8.count + 1
        guard machine.eventQueued(n) else {
            table.closedForNotReading()
            host.logger.info("closed a client that does not read its output", metadata: [
                "unsent_bytes": "\(machine.unsentBytes)", "limit_bytes": "\(machine.output.limitBytes)"])
            _ = machine.close()
            context.close(promise: nil)
            return
        }
        table.outputChanged(by: n)
        _ = append(line, context)
        flushOutput(context)
    }

    @discardableResult
    private func append(_ line: String, _ context: ChannelHandlerContext) -> Int {
        let n = line.utf8.count + 1
        if pendingOutput == nil { pendingOutput = context.channel.allocator.buffer(capacity: max(n, 256)) }
        pendingOutput!.writeString(line)
        pendingOutput!.writeInteger(UInt8(ascii: "\n"))
        return n
    }

    private func takeOutput(_ context: ChannelHandlerContext) -> ByteBuffer {
        defer { pendingOutput = nil }
        return pendingOutput ?? context.channel.allocator.buffer(capacity: 0)
    }

    /// Hands what is queued to NIO, one write at a time: the next goes when the socket took this one.
    private func flushOutput(_ context: ChannelHandlerContext) {
        guard writing == 0, let out = pendingOutput, out.readableBytes > 0, active, !machine.isClosing else { return }
        pendingOutput = nil
        let n = out.readableBytes
        writing = n
        flushing = true
        defer { flushing = false }
        context.writeAndFlush(Self.wrapOutboundOut(out)).assumeIsolated().whenComplete { _ in
            self.writing = 0
            guard self.active else { return }  // gone: channelInactive let all its output go
            let resumed = self.machine.sent(n)
            self.table.outputChanged(by: -n)
            guard !self.machine.isClosing else { return }
            self.flushOutput(context)
            // The client took what held it back: serve it (unless this is a write completing inside a turn).
            if resumed && !self.flushing { self.lightTurn(context) }
        }
    }

    // MARK: Reading

    /// Reads only when what was read before is answered and the replies are
    /// taken; a heavy connection waits for the scheduler's grant.
    func read(context: ChannelHandlerContext) {
        release(machine.readRequested(), context)
    }

    func readGranted() {
        guard let context, active else { return }
        if machine.readGranted() { context.read() }
    }

    private func release(_ decision: ConnectionMachine.ReadDecision, _ context: ChannelHandlerContext) {
        switch decision {
        case .read: context.read()
        case .hold: break
        case .askGrant: scheduler.askRead(self)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let e = event as? ChannelEvent, e == .inputClosed {
            // The client half-closed (socat, `nc -N`): answer what was read, then close.
            switch machine.inputEnded() {
            case .closeNow: context.close(promise: nil)
            case .finish: finish(context)
            case .answerFirst: lightTurn(context)
            }
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        host.logger.debug("connection error", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }

    /// Writes a last line (after what is queued), shuts the write side and
    /// drains whatever the client still sends (so it reads that line instead
    /// of a reset), then closes: at the client's EOF, or after the drain
    /// deadline. `refused`: a newcomer refused at the cap, closed as soon as
    /// its line is out and what it sent is read.
    func closeGracefully(_ context: ChannelHandlerContext, with reply: Reply, refused: Bool = false) {
        guard machine.close(refused: refused) else { return }
        _ = append(reply.line, context)
        let channel = context.channel
        context.writeAndFlush(Self.wrapOutboundOut(takeOutput(context))).assumeIsolated().whenComplete { _ in
            switch self.machine.lastLineWritten() {
            case .all: channel.close(mode: .all, promise: nil)
            case .output: channel.close(mode: .output, promise: nil)
            case .none: break
            }
        }
        context.read()  // keep reading, to discard
        let drain = machine.drainNanoseconds(normal: Self.drainNanoseconds, refused: Self.refusedDrainNanoseconds)
        context.eventLoop.assumeIsolated().scheduleTask(in: .nanoseconds(drain)) { channel.close(promise: nil) }
    }
}
