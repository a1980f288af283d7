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

/// The live connections, for the connection cap: at the cap the longest-idle
/// connection (no request in flight, silent for at least `minIdle`) is closed
/// with a last line to make room; if none is idle the newcomer is refused.
/// Event loop only: handed to the handlers through `NIOLoopBound`.
final class ConnectionTable {
    struct Entry {
        var lastActive: UInt64
        var busy: Bool
        let evict: (Reply) -> Void
    }

    /// Set once at start (lowered to fit the descriptor limit once cued listens).
    var capacity: Int
    /// A connection silent for less than this is never evicted (it is in use).
    let minIdleNanoseconds: UInt64 = 500_000_000
    private var entries: [UInt64: Entry] = [:]
    private var nextID: UInt64 = 1

    init(capacity: Int) { self.capacity = capacity }

    var count: Int { entries.count }

    enum Admission { case admitted(UInt64), evicted(UInt64), refused }

    /// Makes room for a new connection if it can.
    func admit(now: UInt64, evict: @escaping (Reply) -> Void) -> Admission {
        var evicted = false
        if entries.count >= capacity {
            let idle = entries.filter { !$0.value.busy && now &- $0.value.lastActive >= minIdleNanoseconds }
            guard let victim = idle.min(by: { $0.value.lastActive < $1.value.lastActive }) else { return .refused }
            let seconds = Double((now &- victim.value.lastActive) / 1_000_000) / 1000
            entries.removeValue(forKey: victim.key)
            victim.value.evict(.err(.busy, "closing this connection, idle for \(Request.number(seconds)) s, to make room for a new one (\(capacity) at most)"))
            evicted = true
        }
        let id = nextID
        nextID += 1
        entries[id] = Entry(lastActive: now, busy: false, evict: evict)
        return evicted ? .evicted(id) : .admitted(id)
    }

    func touch(_ id: UInt64, now: UInt64, busy: Bool) {
        entries[id]?.lastActive = now
        entries[id]?.busy = busy
    }

    func remove(_ id: UInt64) { entries.removeValue(forKey: id) }
}

/// What a connection asks of the daemon. Called on the event loop only.
protocol ConnectionHost: AnyObject {
    var logger: Logger { get }
    /// A new connection's state (its session, rate limits) under its id.
    func newConnection(id: UInt64) -> Daemon.ConnectionState
    func respond(to line: [UInt8], connection: inout Daemon.ConnectionState, receivedAt: UInt64) -> Response
    /// The connection table changed: connections open, one refused, one evicted.
    func connectionsChanged(open: Int, refused: Int, evicted: Int)
    func registerEvents(connection: UInt64, send: @escaping (String) -> Void)
    func unregisterEvents(connection: UInt64)
}

extension Daemon: ConnectionHost {
    func newConnection(id: UInt64) -> ConnectionState {
        var s = ConnectionState(limits: limits)
        s.id = id
        return s
    }

    func connectionsChanged(open: Int, refused: Int, evicted: Int) {
        clients = open
        refusedBusy += refused
        evictedIdle += evicted
    }
}

/// One client connection: its private refresh session, one reply per line,
/// in request order. The order, the deferred replies, the budgets and when to
/// read are decided by its `ConnectionMachine`; this handler only carries
/// them out on the channel: a light turn inline when a read arrives, the rest
/// in the `FairScheduler`'s slices. Errors close this connection only.
final class ConnectionHandler: ChannelDuplexHandler, ScheduledConnection {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// How long a closing connection is drained (so its last line is not lost to a reset).
    static let drainNanoseconds: Int64 = 2_000_000_000
    /// The same for a refused newcomer that sends nothing: short, as descriptors are scarce then.
    static let refusedDrainNanoseconds: Int64 = 250_000_000

    private let host: any ConnectionHost
    private let table: ConnectionTable
    private let scheduler: FairScheduler
    private var machine = ConnectionMachine()
    private var state = Daemon.ConnectionState(limits: Daemon.Limits(), now: 0)
    private var context: ChannelHandlerContext?
    private var id: UInt64 = 0
    private var active = false
    /// In the scheduler's run queue (its lines run in a slice).
    private var inRunQueue = false
    /// A refused newcomer: closed as soon as its last line is written and what
    /// it had sent is read (nothing unread, so the client reads the line, not
    /// a reset), instead of draining it for 2 s: at the cap, descriptors are short.
    private var closeOnceRead = false
    private var lastLineWritten = false
    private var readWhileClosing = false
    /// Monotonic nanoseconds (a fake clock in tests: idleness decides evictions).
    private let clock: () -> UInt64

    init(host: any ConnectionHost, table: ConnectionTable, scheduler: FairScheduler,
         clock: @escaping () -> UInt64 = { MonotonicClock.now() }) {
        self.host = host
        self.table = table
        self.scheduler = scheduler
        self.clock = clock
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    func channelActive(context: ChannelHandlerContext) {
        active = true
        switch table.admit(now: clock(), evict: { reply in self.closeGracefully(context, with: reply) }) {
        case .refused:
            host.connectionsChanged(open: table.count, refused: 1, evicted: 0)
            closeOnceRead = true
            closeGracefully(context, with: .err(.busy, "too many connections (\(table.capacity)), none of them idle; try again later"))
            context.fireChannelActive()
            return
        case .evicted(let id):
            self.id = id
            host.connectionsChanged(open: table.count, refused: 0, evicted: 1)
        case .admitted(let id):
            self.id = id
            host.connectionsChanged(open: table.count, refused: 0, evicted: 0)
        }
        state = host.newConnection(id: id)
        host.registerEvents(connection: id) { line in
            guard self.active, !self.machine.closing else { return }
            self.write(line, context: context)
            context.flush()
        }
        // SO_PEERCRED while the socket is surely open: who is on the other end.
        if let provider = context.channel as? SocketOptionProvider {
            let future: EventLoopFuture<PeerCredentials> = provider.unsafeGetSocketOption(
                level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERCRED))
            future.assumeIsolated().whenSuccess { cred in
                self.host.logger.debug("client connected", metadata: ["peer.uid": "\(cred.uid)", "peer.pid": "\(cred.pid)"])
                if cred.uid != getuid() {
                    self.host.logger.warning("refused a client of another user", metadata: ["peer.uid": "\(cred.uid)", "peer.pid": "\(cred.pid)"])
                    self.closeGracefully(context, with: .err(.forbidden, "only uid \(getuid()) may use this cued"))
                }
            }
        }
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        if active && id != 0 {
            host.unregisterEvents(connection: id)
            table.remove(id)
            host.connectionsChanged(open: table.count, refused: 0, evicted: 0)
        }
        active = false
        machine.close()  // gone: its lines need no answers
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = Self.unwrapInboundIn(data)
        if !machine.received(buffer.readableBytesView) { readWhileClosing = true }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        machine.readFinished(lightLines: scheduler.settings.lightTurn)
        lightTurn(context)
        if machine.closing && closeOnceRead && lastLineWritten && readWhileClosing { context.close(promise: nil) }
        context.fireChannelReadComplete()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        machine.writabilityChanged(context.channel.isWritable)
        if context.channel.isWritable { lightTurn(context) }
        context.fireChannelWritabilityChanged()
    }

    // MARK: Running lines

    /// What just arrived (a read, a reply, writability) runs at once up to a
    /// light turn, unless the connection already waits for a slice.
    private func lightTurn(_ context: ChannelHandlerContext) {
        guard !inRunQueue else { return }
        if machine.heavy {
            if machine.runnable { queueForSlice() }
            afterRunning(context)
            return
        }
        machine.grantTurn(scheduler.settings.lightTurn)
        _ = serve(context)
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
            case .yield:
                if requeue { queueForSlice() }
                break loop
            case .idle:
                break loop
            }
        }
        context.flush()
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
        table.touch(id, now: clock(), busy: machine.waiting || machine.hasQueued)
        if machine.done { finish(context) }
        release(machine.releaseHeldRead(), context)
    }

    private func run(_ event: LineEvent, _ context: ChannelHandlerContext) {
        let receivedAt = clock()
        switch event {
        case .tooLong:
            closeGracefully(context, with: .err(.lineTooLong, "line exceeds \(ProtocolLimits.maxLineBytes) bytes; closing"))
        case .line(let bytes):
            switch host.respond(to: bytes, connection: &state, receivedAt: receivedAt) {
            case .now(let reply):
                write(reply.line, context: context)
            case .close(let reply):
                closeGracefully(context, with: reply)
            case .later(let future):
                machine.deferred()
                future.assumeIsolated().whenComplete { result in
                    self.machine.answered()
                    guard !self.machine.closing, self.active else { return }
                    let reply: Reply
                    switch result {
                    case .success(let r): reply = r
                    case .failure(let e): reply = .err(.internal, "\(e)")
                    }
                    self.write(reply.line, context: context)
                    context.flush()
                    self.lightTurn(context)
                }
            }
        }
    }

    /// After a half-close: once the last reply is out, close.
    private func finish(_ context: ChannelHandlerContext) {
        machine.close()
        context.writeAndFlush(Self.wrapOutboundOut(context.channel.allocator.buffer(capacity: 0))).assumeIsolated()
            .whenComplete { _ in context.close(promise: nil) }
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
            if machine.closing {
                context.close(promise: nil)
            } else if machine.inputEnded() {
                finish(context)
            } else {
                lightTurn(context)
            }
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        host.logger.debug("connection error", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }

    private func write(_ line: String, context: ChannelHandlerContext) {
        var buffer = context.channel.allocator.buffer(capacity: line.utf8.count + 1)
        buffer.writeString(line)
        buffer.writeInteger(UInt8(ascii: "\n"))
        context.write(Self.wrapOutboundOut(buffer), promise: nil)
    }

    /// Writes a last line, shuts the write side and drains whatever the
    /// client still sends (so it reads that line instead of a reset), then
    /// closes: at the client's EOF, or after `drainNanoseconds`.
    func closeGracefully(_ context: ChannelHandlerContext, with reply: Reply) {
        guard !machine.closing else { return }
        machine.close()
        write(reply.line, context: context)
        let channel = context.channel
        let inputDone = machine.inputClosed
        context.writeAndFlush(Self.wrapOutboundOut(channel.allocator.buffer(capacity: 0))).assumeIsolated().whenComplete { _ in
            self.lastLineWritten = true
            channel.close(mode: inputDone || (self.closeOnceRead && self.readWhileClosing) ? .all : .output, promise: nil)
        }
        context.read()  // keep reading, to discard
        context.eventLoop.assumeIsolated().scheduleTask(in: .nanoseconds(closeOnceRead ? Self.refusedDrainNanoseconds : Self.drainNanoseconds)) {
            channel.close(promise: nil)
        }
    }
}
