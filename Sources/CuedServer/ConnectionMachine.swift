import CuedProtocol

/// One connection's request pipeline as a value: which line runs next, when
/// the socket may be read, how much output it holds, how it closes. No NIO and
/// no clock: `ConnectionHandler` feeds it what happened and carries out what it
/// says, so ordering, deferred replies, budgets, back-pressure and the close
/// sequence are unit-tested without a socket (the shape of NIO's
/// `HTTPServerPipelineHandler`: a lifecycle enum, a reading enum).
///
/// - Lines run strictly in request order. A line answered later (a `.later`
///   response: reload, `play … wait`, `stop`, a sound being decoded) holds the
///   lines after it until its reply is written; a reply rendered in the
///   connection's turn (`status wait`) is charged its cost there.
/// - Each line has a cost (`VerbCost`); a connection runs lines while it has
///   credit, which the handler grants per turn (deficit round robin: a costly
///   line may overdraw, and the debt is paid on later turns).
/// - Output is bounded in bytes (`OutputLimits`): lines run only while the
///   replies not yet taken by the client stay under `runBytes`, and an event
///   line (`end ID REASON`) that would take them past `limitBytes` closes the
///   connection instead (a client that does not read cannot hold more of cued's
///   memory than that).
/// - The socket is read only when everything read before is answered and the
///   client takes its replies: what one client sends is never buffered without
///   bound. Lines are cut from the bytes only when they run. A connection
///   whose last read held more than a light turn's worth of lines is
///   *heavy*: its next read waits for a grant from the scheduler, so a flood
///   is read a few connections at a time, not all at once.
struct ConnectionMachine {
    /// Where the connection is in its life.
    enum Lifecycle: Equatable {
        /// Reading and answering.
        case open
        /// The client half-closed (EOF): what it sent is answered, then the connection closes.
        case inputClosed
        /// A last line is going out (or went): nothing more runs; what arrives is
        /// read and discarded until the client's EOF or the drain deadline.
        case closing(Closing)
        /// The channel is gone.
        case closed
    }

    struct Closing: Equatable {
        /// A newcomer refused at the cap: closed as soon as its line is out and
        /// what it had sent is read (not drained for 2 s: descriptors are short then).
        var refused = false
        /// The client's EOF came (before or during closing): close both ways once the line is out.
        var inputEnded = false
        /// The last line was handed to the socket.
        var lineWritten = false
        /// Bytes arrived (and were discarded) after closing began.
        var readSince = false
    }

    /// NIO's read requests, as the machine holds them.
    enum Reading: Equatable {
        /// No read is held (the socket reads or waits for NIO to ask).
        case free
        /// NIO asked to read; held until what was read is answered.
        case held
        /// Held, and a grant was asked of the scheduler (a heavy connection).
        case awaitingGrant
    }

    /// The line that runs before the others: a deferred reply.
    enum Answer: Equatable {
        /// No line is waiting for its reply.
        case none
        /// A line's reply comes later; the lines after it wait.
        case awaiting
        /// The reply is ready to be rendered in the connection's turn, at this cost.
        case ready(cost: Int)
    }

    /// The bounds of one connection's output (replies and event lines not yet taken by its socket).
    struct OutputLimits: Equatable {
        /// Lines run only while less than this is unsent (a client that does not read stops being served).
        var runBytes = 16 * 1024
        /// Event lines may take the unsent output up to this (plus the largest reply
        /// held); one more closes the connection.
        var limitBytes = 64 * 1024
        init(runBytes: Int = 16 * 1024, limitBytes: Int = 64 * 1024) {
            self.runBytes = runBytes
            self.limitBytes = limitBytes
        }
    }

    private(set) var lifecycle: Lifecycle = .open
    private(set) var reading: Reading = .free
    private(set) var answer: Answer = .none
    /// Its last read held more than a light turn: its reads need grants.
    private(set) var heavy = false

    /// Bytes read and not yet run: at most one read (the socket is not read
    /// while lines wait) plus the start of a line. Lines are cut from it only
    /// when they run, so a read costs the loop a copy, not a decode per line.
    private var bytes: [UInt8] = []
    private var head = 0
    /// Lines waiting in `bytes` (LFs), plus one for a line over the limit or an
    /// unterminated last line at EOF.
    private(set) var queuedLines = 0
    /// A line went past the limit: the lines before it run, then `.tooLong`; what comes after is discarded.
    private var overflowed = false
    /// Bytes allowed before the LF: the protocol's limit plus an optional CR.
    let maxLineBytes: Int
    /// What this connection may still spend before it yields (may go below 0).
    private(set) var credit = 0

    let output: OutputLimits
    /// Replies and event lines queued for the socket and not yet taken by it.
    private(set) var unsentBytes = 0
    /// The largest reply queued since the unsent output was last under `runBytes`
    /// (a big `status` must not make the next event line look like a flood).
    private var largestReply = 0

    init(maxLineBytes: Int = ProtocolLimits.maxLineBytes + 1, output: OutputLimits = OutputLimits()) {
        self.maxLineBytes = maxLineBytes
        self.output = output
    }

    var hasQueued: Bool { queuedLines > 0 }
    var isClosing: Bool { if case .closing = lifecycle { return true } else { return false } }
    /// Lines (or a ready reply) may run: open or half-closed.
    private var answering: Bool { lifecycle == .open || lifecycle == .inputClosed }
    /// The client takes its replies: little of its output is unsent.
    var takesReplies: Bool { unsentBytes < output.runBytes }

    /// Work it can do now (given credit): a ready reply, or the next line.
    var runnable: Bool {
        guard answering, takesReplies else { return false }
        switch answer {
        case .ready: return true
        case .awaiting: return false
        case .none: return hasQueued
        }
    }

    /// In use, for the connection table: a reply in the works, or lines it would
    /// run now. A connection whose lines wait only because its client does not
    /// read counts as idle (it may be evicted at the cap).
    var busy: Bool { answer != .none || (hasQueued && takesReplies) }

    // MARK: Input

    /// Bytes were read. Returns false when they are discarded (the connection is closing).
    mutating func received<Bytes: Collection>(_ chunk: Bytes) -> Bool where Bytes.Element == UInt8 {
        if case .closing(var c) = lifecycle {
            c.readSince = true
            lifecycle = .closing(c)
            return false
        }
        guard lifecycle == .open, !overflowed else { return lifecycle != .closed }
        if head == bytes.count {
            bytes.removeAll(keepingCapacity: bytes.capacity <= 16 * 1024)
            head = 0
        } else if head >= 4096 {
            bytes.removeFirst(head)
            head = 0
        }
        let start = bytes.count
        bytes.append(contentsOf: chunk)
        var lastLF = -1
        for i in start..<bytes.count where bytes[i] == 0x0A {
            queuedLines += 1
            lastLF = i
        }
        // The unterminated rest: over the limit already, it can only be too long.
        let partialStart = lastLF >= 0 ? lastLF + 1 : head
        if bytes.count - partialStart > maxLineBytes {
            bytes.removeSubrange(partialStart...)
            overflowed = true
            queuedLines += 1
        }
        return true
    }

    /// A read finished: the connection is heavy if it brought more than `lightLines` lines.
    mutating func readFinished(lightLines: Int) {
        heavy = queuedLines > lightLines
    }

    enum InputEnd: Equatable {
        /// Lines or a reply are still to come: go on answering.
        case answerFirst
        /// Everything is answered: flush what is written, then close (`finished()` was applied).
        case finish
        /// Closing already: close both ways now.
        case closeNow
    }

    /// The client half-closed.
    mutating func inputEnded() -> InputEnd {
        switch lifecycle {
        case .closing(var c):
            c.inputEnded = true
            lifecycle = .closing(c)
            return .closeNow
        case .closed:
            return .closeNow
        case .inputClosed:
            break
        case .open:
            lifecycle = .inputClosed
            // A last line without LF still counts as a request.
            if !overflowed, bytes.count > head, bytes.last != 0x0A {
                bytes.append(0x0A)
                queuedLines += 1
            }
        }
        return finishIfDone() ? .finish : .answerFirst
    }

    /// After EOF, once everything is answered: closing (nothing more to write but
    /// what is queued). True when it just started.
    mutating func finishIfDone() -> Bool {
        guard lifecycle == .inputClosed, answer == .none, !hasQueued else { return false }
        startClosing(Closing(inputEnded: true))
        return true
    }

    // MARK: Running

    enum Next: Equatable {
        /// Run this line now.
        case run(LineEvent)
        /// Render the deferred reply now (its cost is charged).
        case render
        /// Work waits but the credit is spent: yield to other connections.
        case yield
        /// Nothing to run now (empty, waiting for a reply, output not taken, closing).
        case idle
    }

    /// Gives the connection a turn's credit. Credit is not hoarded: an idle
    /// connection starts each turn from at most one quantum.
    mutating func grantTurn(_ quantum: Int) {
        credit = min(credit + quantum, quantum)
    }

    mutating func next() -> Next {
        guard runnable else {
            if !hasQueued && answer == .none { credit = min(credit, 0) }
            return .idle
        }
        guard credit > 0 else { return .yield }
        if case .ready(let cost) = answer {
            answer = .none
            credit -= cost
            return .render
        }
        queuedLines -= 1
        let event: LineEvent
        if let lf = bytes[head...].firstIndex(of: 0x0A) {
            event = lf - head > maxLineBytes ? .tooLong : .line(Array(bytes[head..<lf]))
            head = lf + 1
        } else {  // only the overflow is left
            event = .tooLong
            head = bytes.count
        }
        credit -= VerbCost.of(event)
        return .run(event)
    }

    /// The line just run answers later.
    mutating func deferred() { answer = .awaiting }

    /// The deferred reply is written; the next lines may run.
    mutating func answered() { if answer == .awaiting { answer = .none } }

    /// The deferred reply is ready, to be rendered in the connection's turn at `cost`.
    mutating func replyReady(cost: Int) { if answer == .awaiting { answer = .ready(cost: cost) } }

    // MARK: Output

    /// A reply of `count` bytes was queued for the socket.
    mutating func replyQueued(_ count: Int) {
        unsentBytes += count
        largestReply = max(largestReply, count)
    }

    /// An event line of `count` bytes may be queued: false when it would take the
    /// unsent output past the bound (then the connection is to be closed: its
    /// client does not read).
    mutating func eventQueued(_ count: Int) -> Bool {
        guard unsentBytes + count <= output.limitBytes + largestReply else { return false }
        unsentBytes += count
        return true
    }

    /// The socket took `count` bytes. True when that lets held work run again
    /// (the client was not taking its replies and now does).
    mutating func sent(_ count: Int) -> Bool {
        let before = takesReplies
        unsentBytes = max(0, unsentBytes - count)
        if takesReplies { largestReply = 0 }
        return !before && takesReplies
    }

    // MARK: Closing

    /// A last line is going out (a refusal, an error, a `close` reply): nothing
    /// queued will run. False when it is closing already (say nothing more).
    @discardableResult
    mutating func close(refused: Bool = false) -> Bool {
        switch lifecycle {
        case .closing, .closed: return false
        case .open: startClosing(Closing(refused: refused))
        case .inputClosed: startClosing(Closing(refused: refused, inputEnded: true))
        }
        return true
    }

    private mutating func startClosing(_ c: Closing) {
        lifecycle = .closing(c)
        dropWork()
    }

    /// Nothing read is run any more, and no deferred reply is awaited.
    private mutating func dropWork() {
        bytes = []
        head = 0
        queuedLines = 0
        answer = .none
    }

    enum Shutdown: Equatable {
        /// Close both ways now.
        case all
        /// Shut the write side (the client reads the last line, then EOF) and drain.
        case output
        /// Nothing (not closing, or closed).
        case none
    }

    /// The last line was handed to the socket: how to shut the connection.
    mutating func lastLineWritten() -> Shutdown {
        guard case .closing(var c) = lifecycle else { return .none }
        c.lineWritten = true
        lifecycle = .closing(c)
        return c.inputEnded || (c.refused && c.readSince) ? .all : .output
    }

    /// A read finished while closing: true when the connection can close now (a
    /// refused newcomer whose line is out and whose bytes were read).
    var closesAfterRead: Bool {
        guard case .closing(let c) = lifecycle else { return false }
        return c.refused && c.lineWritten && c.readSince
    }

    /// How long a closing connection may drain before it is closed anyway.
    func drainNanoseconds(normal: Int64, refused: Int64) -> Int64 {
        if case .closing(let c) = lifecycle, c.refused { return refused }
        return normal
    }

    /// The channel is gone: nothing more happens.
    mutating func closed() {
        lifecycle = .closed
        dropWork()
        reading = .free
    }

    // MARK: Reading

    enum ReadDecision: Equatable {
        case read
        /// Not now: read when what was read is answered.
        case hold
        /// Read when the scheduler grants it (a heavy connection).
        case askGrant
    }

    /// NIO asks to read (after a read, or when the handler lets a held read go).
    mutating func readRequested() -> ReadDecision {
        if reading == .free { reading = .held }
        return releaseHeldRead()
    }

    /// Nothing read is left to answer, and the client takes its replies: a read may go.
    private var readable: Bool {
        switch lifecycle {
        case .closing: return true  // read to discard
        case .closed: return false
        case .open, .inputClosed: return answer == .none && !hasQueued && takesReplies
        }
    }

    /// After lines ran or a reply was written: release a held read if it is due now.
    mutating func releaseHeldRead() -> ReadDecision {
        switch reading {
        case .free, .awaitingGrant: return .hold
        case .held:
            guard readable else { return .hold }
            if heavy && !isClosing {
                reading = .awaitingGrant
                return .askGrant
            }
            reading = .free
            return .read
        }
    }

    /// The scheduler grants a read. True when the socket should be read now.
    mutating func readGranted() -> Bool {
        guard reading == .awaitingGrant else { return false }
        guard readable else {
            reading = .held  // asked again once what was read is answered
            return false
        }
        reading = .free
        return true
    }
}

/// What a line costs to run, in units of a `ping` (about 2 µs of cued's CPU), by
/// its verb, read from the verb table (`VerbSpec.cost`: no verb is named here): `status`
/// builds a few KiB of JSON, about 100 µs (so does rendering `status wait`'s reply, charged then);
/// `stop`, `reload` and the plays go through other threads or the sound cache (a
/// play about 7 µs). Measured by pipelining each verb on one connection (release
/// build, 2026-11), checked with the reliability fairness rows (RELIABILITY.md).
enum VerbCost {
    static let other = 1
    static let tooLong = 1

    static func of(_ event: LineEvent) -> Int {
        guard case .line(let bytes) = event else { return tooLong }
        return VerbSpec.cost(ofLine: bytes)
    }

    /// A verb's line alone (what a reply rendered later is charged: `status wait`'s, as `status`).
    static func of(verb: String) -> Int { VerbSpec.named(Substring(verb))?.cost.alone ?? other }
}
