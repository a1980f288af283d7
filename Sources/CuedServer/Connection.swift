import CuedCore
import CuedProtocol
import Glibc
import NIOCore

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

/// One client connection: its private refresh session, one reply per line,
/// in order. Errors close this connection only.
final class ConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = LineEvent
    typealias OutboundOut = ByteBuffer

    private let daemon: Daemon
    private var state: Daemon.ConnectionState
    private var closing = false

    init(daemon: Daemon) {
        self.daemon = daemon
        state = Daemon.ConnectionState(playsPerSecond: daemon.limits.playsPerSecond)
    }

    func channelActive(context: ChannelHandlerContext) {
        let count = daemon.clients.add(1, ordering: .relaxed).newValue
        if count > daemon.limits.maxClients {
            daemon.refusedBusy.add(1, ordering: .relaxed)
            send(.err(.busy, "too many connections (\(daemon.limits.maxClients)); try again later"), context: context)
            closeAfterWrites(context: context)
            context.fireChannelActive()
            return
        }
        // SO_PEERCRED while the socket is surely open: who is on the other end.
        if let provider = context.channel as? SocketOptionProvider {
            let future: EventLoopFuture<PeerCredentials> = provider.unsafeGetSocketOption(
                level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERCRED))
            future.assumeIsolated().whenSuccess { cred in
                self.daemon.logger.debug("client connected", metadata: ["peer.uid": "\(cred.uid)", "peer.pid": "\(cred.pid)"])
                if cred.uid != getuid() {
                    self.daemon.logger.warning("refused a client of another user", metadata: ["peer.uid": "\(cred.uid)", "peer.pid": "\(cred.pid)"])
                    self.closing = true
                    self.send(.err(.forbidden, "only uid \(getuid()) may use this cued"), context: context)
                    let channel = context.channel
                    context.writeAndFlush(Self.wrapOutboundOut(context.channel.allocator.buffer(capacity: 0))).whenComplete { _ in
                        channel.close(promise: nil)
                    }
                }
            }
        }
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        daemon.clients.subtract(1, ordering: .relaxed)
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let receivedAt = MonotonicClock.now()
        guard !closing else { return }
        switch Self.unwrapInboundIn(data) {
        case .line(let bytes):
            let reply = daemon.respond(to: bytes, connection: &state, receivedAt: receivedAt)
            send(reply, context: context)
        case .tooLong:
            send(.err(.lineTooLong, "line exceeds \(ProtocolLimits.maxLineBytes) bytes; closing"), context: context)
            closeAfterWrites(context: context)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        context.flush()
        // Backpressure: a client that pipelines without reading its replies
        // must not make cued buffer them without bound. Stop reading until
        // the kernel has taken the replies (the write buffer's low-water mark).
        if !context.channel.isWritable {
            context.channel.setOption(ChannelOptions.autoRead, value: false).whenFailure { _ in }
        }
        context.fireChannelReadComplete()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            context.channel.setOption(ChannelOptions.autoRead, value: true).whenFailure { _ in }
            context.read()
        }
        context.fireChannelWritabilityChanged()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let e = event as? ChannelEvent, e == .inputClosed {
            // The client half-closed (socat, `nc -N`): answer what was read, then close.
            closeAfterWrites(context: context)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        daemon.logger.debug("connection error", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }

    private func send(_ reply: Reply, context: ChannelHandlerContext) {
        var buffer = context.channel.allocator.buffer(capacity: 64)
        buffer.writeString(reply.line)
        buffer.writeInteger(UInt8(ascii: "\n"))
        context.write(Self.wrapOutboundOut(buffer), promise: nil)
    }

    /// Flushes every reply written so far, then closes.
    private func closeAfterWrites(context: ChannelHandlerContext) {
        guard !closing else { return }
        closing = true
        let done = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(Self.wrapOutboundOut(context.channel.allocator.buffer(capacity: 0)), promise: done)
        let channel = context.channel
        done.futureResult.whenComplete { _ in channel.close(promise: nil) }
    }
}
