import CuedCore
import CuedProtocol
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

/// What the line decoder hands on: a complete line (without LF), or the news
/// that a line went past the limit.
enum LineEvent {
    case line([UInt8])
    case tooLong
}

/// Splits the byte stream at LF. A line longer than the protocol allows is
/// reported once and everything after it discarded (the connection closes).
/// A last line without LF at end of input still counts as a request.
struct LineDecoder: ByteToMessageDecoder {
    typealias InboundOut = LineEvent
    private var overflowed = false
    /// Bytes allowed before the LF: the limit plus an optional CR.
    private let maxBytes = ProtocolLimits.maxLineBytes + 1

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        if overflowed { buffer.moveReaderIndex(to: buffer.writerIndex); return .needMoreData }
        if let lf = buffer.readableBytesView.firstIndex(of: UInt8(ascii: "\n")) {
            let length = lf - buffer.readerIndex
            if length > maxBytes { return overflow(context: context, buffer: &buffer) }
            let bytes = buffer.readBytes(length: length)!
            buffer.moveReaderIndex(forwardBy: 1)
            context.fireChannelRead(Self.wrapInboundOut(.line(bytes)))
            return .continue
        }
        if buffer.readableBytes > maxBytes { return overflow(context: context, buffer: &buffer) }
        return .needMoreData
    }

    private mutating func overflow(context: ChannelHandlerContext, buffer: inout ByteBuffer) -> DecodingState {
        overflowed = true
        buffer.moveReaderIndex(to: buffer.writerIndex)
        context.fireChannelRead(Self.wrapInboundOut(.tooLong))
        return .needMoreData
    }

    mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        while try decode(context: context, buffer: &buffer) == .continue {}
        if seenEOF, !overflowed, buffer.readableBytes > 0 {
            let bytes = buffer.readBytes(length: buffer.readableBytes)!
            context.fireChannelRead(Self.wrapInboundOut(.line(bytes)))
        }
        return .needMoreData
    }
}

/// The live connections, for the connection cap: at the cap the longest-idle
/// connection (no request in flight, silent for at least `minIdle`) is closed
/// with a last line to make room; if none is idle the newcomer is refused.
/// Event loop only (hence unchecked: it is shared by the loop's handlers).
final class ConnectionTable: @unchecked Sendable {
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

/// One client connection: its private refresh session, one reply per line,
/// in request order. A request answered later (reload, `play … wait`, a
/// sound being decoded) holds the connection's later lines until its reply
/// is written, so they run in order; reading pauses meanwhile. At most
/// `linesPerTurn` lines run before the loop turns to other connections.
/// Errors close this connection only.
final class ConnectionHandler: ChannelDuplexHandler {
    typealias InboundIn = LineEvent
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    static let linesPerTurn = 64
    static let maxQueuedLines = 1024
    /// How long a closing connection is drained (so its last line is not lost to a reset).
    static let drainNanoseconds: Int64 = 2_000_000_000
    /// The same for a refused newcomer that sends nothing: short, as descriptors are scarce then.
    static let refusedDrainNanoseconds: Int64 = 250_000_000

    private let daemon: Daemon
    private let table: ConnectionTable
    private var id: UInt64 = 0
    private var state: Daemon.ConnectionState
    private var queue: [LineEvent] = []
    private var queueHead = 0
    private var busy = false
    private var scheduled = false
    /// Lines this connection may still run in the current loop turn.
    private var budget = ConnectionHandler.linesPerTurn
    private var readPending = false
    private var closing = false
    private var active = false
    /// The client half-closed: close once every line it sent is answered.
    private var inputClosed = false
    /// A refused newcomer: closed as soon as its last line is written and what
    /// it had sent is read (nothing unread, so the client reads the line, not
    /// a reset), instead of draining it for 2 s: at the cap, descriptors are short.
    private var closeOnceRead = false
    private var lastLineWritten = false
    private var readWhileClosing = false

    init(daemon: Daemon, table: ConnectionTable) {
        self.daemon = daemon
        self.table = table
        state = Daemon.ConnectionState(limits: daemon.limits)
    }

    func channelActive(context: ChannelHandlerContext) {
        active = true
        switch table.admit(now: MonotonicClock.now(), evict: { reply in self.closeGracefully(context, with: reply) }) {
        case .refused:
            daemon.refusedBusy += 1
            closeOnceRead = true
            closeGracefully(context, with: .err(.busy, "too many connections (\(table.capacity)), none of them idle; try again later"))
            context.fireChannelActive()
            return
        case .evicted(let id):
            daemon.evictedIdle += 1
            self.id = id
        case .admitted(let id):
            self.id = id
        }
        daemon.clients = table.count
        state.id = id
        daemon.registerEvents(connection: id) { line in
            guard self.active, !self.closing else { return }
            self.send(.event(line), context: context)
            context.flush()
        }
        // SO_PEERCRED while the socket is surely open: who is on the other end.
        if let provider = context.channel as? SocketOptionProvider {
            let future: EventLoopFuture<PeerCredentials> = provider.unsafeGetSocketOption(
                level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERCRED))
            future.assumeIsolated().whenSuccess { cred in
                self.daemon.logger.debug("client connected", metadata: ["peer.uid": "\(cred.uid)", "peer.pid": "\(cred.pid)"])
                if cred.uid != getuid() {
                    self.daemon.logger.warning("refused a client of another user", metadata: ["peer.uid": "\(cred.uid)", "peer.pid": "\(cred.pid)"])
                    self.closeGracefully(context, with: .err(.forbidden, "only uid \(getuid()) may use this cued"))
                }
            }
        }
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        if active && id != 0 {
            daemon.unregisterEvents(connection: id)
            table.remove(id)
            daemon.clients = table.count
        }
        active = false
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !closing else { readWhileClosing = true; return }
        queue.append(Self.unwrapInboundIn(data))
        if !busy && !scheduled { process(context) }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        // A new read is a new turn, unless lines of this one still wait for theirs.
        if !scheduled { budget = Self.linesPerTurn }
        if closing && closeOnceRead && lastLineWritten && readWhileClosing { context.close(promise: nil) }
        context.fireChannelReadComplete()
    }

    /// Runs queued lines until one is answered later, the queue is empty, or
    /// this turn's budget is spent; then the rest runs on a later loop turn,
    /// after the other connections' events. The budget counts every line run
    /// in a turn, also those run one by one as the decoder hands them over.
    private func process(_ context: ChannelHandlerContext) {
        guard active else { queue.removeAll(); queueHead = 0; return }  // gone: its lines need no answers
        while !busy, !closing, active, queueHead < queue.count {
            if budget == 0 {
                if !scheduled {
                    scheduled = true
                    context.eventLoop.assumeIsolated().execute {
                        self.scheduled = false
                        self.budget = Self.linesPerTurn
                        self.process(context)
                    }
                }
                break
            }
            budget -= 1
            let event = queue[queueHead]
            queueHead += 1
            run(event, context)
        }
        if queueHead == queue.count {
            queue.removeAll(keepingCapacity: queue.capacity <= 64)
            queueHead = 0
        }
        context.flush()
        if active { table.touch(id, now: MonotonicClock.now(), busy: busy || queueHead < queue.count) }
        finishIfDrained(context)
        resumeReadingIfDue(context)
    }

    /// After a half-close: once the last reply is out, close.
    private func finishIfDrained(_ context: ChannelHandlerContext) {
        guard inputClosed, !closing, !busy, queueHead == queue.count else { return }
        closing = true
        context.writeAndFlush(Self.wrapOutboundOut(context.channel.allocator.buffer(capacity: 0))).assumeIsolated()
            .whenComplete { _ in context.close(promise: nil) }
    }

    private func run(_ event: LineEvent, _ context: ChannelHandlerContext) {
        let receivedAt = MonotonicClock.now()
        switch event {
        case .tooLong:
            closeGracefully(context, with: .err(.lineTooLong, "line exceeds \(ProtocolLimits.maxLineBytes) bytes; closing"))
        case .line(let bytes):
            switch daemon.respond(to: bytes, connection: &state, receivedAt: receivedAt) {
            case .now(let reply):
                send(reply, context: context)
            case .close(let reply):
                closeGracefully(context, with: reply)
            case .later(let future):
                busy = true
                future.assumeIsolated().whenComplete { result in
                    self.busy = false
                    let reply: Reply
                    switch result {
                    case .success(let r): reply = r
                    case .failure(let e): reply = .err(.internal, "\(e)")
                    }
                    guard !self.closing, self.active else { return }
                    self.send(reply, context: context)
                    if !self.scheduled { self.process(context) }
                }
            }
        }
    }

    // MARK: Reading

    /// Reads only when nothing is waiting to run: a client's pipeline is
    /// taken in as fast as it is answered, never buffered without bound.
    func read(context: ChannelHandlerContext) {
        if closing {
            context.read()  // draining: what comes in is discarded
        } else if busy || queueHead < queue.count || queue.count >= Self.maxQueuedLines {
            readPending = true
        } else {
            context.read()
        }
    }

    private func resumeReadingIfDue(_ context: ChannelHandlerContext) {
        if readPending && !busy && !closing && queueHead == queue.count {
            readPending = false
            context.read()
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let e = event as? ChannelEvent, e == .inputClosed {
            // The client half-closed (socat, `nc -N`): answer what was read, then close.
            inputClosed = true
            if closing { context.close(promise: nil) } else { finishIfDrained(context) }
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        daemon.logger.debug("connection error", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }

    private enum Line { case reply(Reply), event(String) }

    private func send(_ reply: Reply, context: ChannelHandlerContext) { send(.reply(reply), context: context) }

    private func send(_ line: Line, context: ChannelHandlerContext) {
        var buffer = context.channel.allocator.buffer(capacity: 64)
        switch line {
        case .reply(let reply): buffer.writeString(reply.line)
        case .event(let text): buffer.writeString(text)
        }
        buffer.writeInteger(UInt8(ascii: "\n"))
        context.write(Self.wrapOutboundOut(buffer), promise: nil)
    }

    /// Writes a last line, shuts the write side and drains whatever the
    /// client still sends (so it reads that line instead of a reset), then
    /// closes: at the client's EOF, or after `drainNanoseconds`.
    func closeGracefully(_ context: ChannelHandlerContext, with reply: Reply) {
        guard !closing else { return }
        closing = true
        send(reply, context: context)
        let channel = context.channel
        let inputDone = inputClosed
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
