import CuedProtocol

/// One connection's request pipeline as a value: which line runs next, when
/// the socket may be read, when the connection is done. No NIO and no clock:
/// `ConnectionHandler` feeds it what happened and carries out what it says,
/// so ordering, deferred replies, budgets and back-pressure are unit-tested
/// without a socket (the shape of NIO's `HTTPServerPipelineHandler`).
///
/// - Lines run strictly in request order. A line answered later (a `.later`
///   response: reload, `play … wait`, `stop`, a sound being decoded) holds the
///   lines after it until its reply is written.
/// - Each line has a cost (`VerbCost`); a connection runs lines while it has
///   credit, which the handler grants per turn (deficit round robin: a costly
///   line may overdraw, and the debt is paid on later turns).
/// - The socket is read only when everything read before is answered and the
///   client takes its replies: what one client sends is never buffered without
///   bound. Lines are cut from the bytes only when they run. A connection
///   whose last read held more than a light turn's worth of lines is
///   *heavy*: its next read waits for a grant from the scheduler, so a flood
///   is read a few connections at a time, not all at once.
struct ConnectionMachine {
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
    /// A line's reply comes later; the lines after it wait for it.
    private(set) var waiting = false
    /// The client takes its replies (NIO's writability).
    private(set) var writable = true
    /// Its last read held more than a light turn: its reads need grants.
    private(set) var heavy = false
    /// NIO asked to read and the machine held it.
    private(set) var readHeld = false
    /// A read grant was asked for and not yet given.
    private(set) var awaitingGrant = false
    /// The client sent EOF: close once everything is answered.
    private(set) var inputClosed = false
    /// A last line went out (or is going): nothing more runs.
    private(set) var closing = false

    init(maxLineBytes: Int = ProtocolLimits.maxLineBytes + 1) {
        self.maxLineBytes = maxLineBytes
    }

    var hasQueued: Bool { queuedLines > 0 }

    /// Lines it can run now (given credit).
    var runnable: Bool { !closing && !waiting && writable && hasQueued }

    // MARK: Input

    /// Bytes were read. Returns false when they are discarded (the connection is closing).
    mutating func received<Bytes: Collection>(_ chunk: Bytes) -> Bool where Bytes.Element == UInt8 {
        guard !closing else { return false }
        guard !overflowed, !inputClosed else { return true }
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

    /// The client half-closed. True when the connection can close now (nothing left to answer).
    mutating func inputEnded() -> Bool {
        guard !inputClosed else { return done }
        inputClosed = true
        // A last line without LF still counts as a request.
        if !overflowed, !closing, bytes.count > head, bytes.last != 0x0A {
            bytes.append(0x0A)
            queuedLines += 1
        }
        return done
    }

    /// Everything the client sent is answered after EOF: close.
    var done: Bool { inputClosed && !closing && !waiting && !hasQueued }

    // MARK: Running

    enum Next: Equatable {
        /// Run this line now.
        case run(LineEvent)
        /// Lines wait but the credit is spent: yield to other connections.
        case yield
        /// Nothing to run now (empty, waiting for a reply, not writable, closing).
        case idle
    }

    /// Gives the connection a turn's credit. Credit is not hoarded: an idle
    /// connection starts each turn from at most one quantum.
    mutating func grantTurn(_ quantum: Int) {
        credit = min(credit + quantum, quantum)
    }

    mutating func next() -> Next {
        guard runnable else {
            if !hasQueued { credit = min(credit, 0) }
            return .idle
        }
        guard credit > 0 else { return .yield }
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
    mutating func deferred() { waiting = true }

    /// The deferred reply is written; the next lines may run.
    mutating func answered() { waiting = false }

    mutating func writabilityChanged(_ value: Bool) { writable = value }

    /// A last line is going out: nothing queued will run.
    mutating func close() {
        closing = true
        bytes = []
        head = 0
        queuedLines = 0
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
        readHeld = true
        return releaseHeldRead()
    }

    /// After lines ran or a reply was written: release a held read if it is due now.
    mutating func releaseHeldRead() -> ReadDecision {
        guard readHeld else { return .hold }
        if closing { readHeld = false; return .read }
        if waiting || hasQueued || !writable { return .hold }
        if heavy {
            if awaitingGrant { return .hold }
            awaitingGrant = true
            return .askGrant
        }
        readHeld = false
        return .read
    }

    /// The scheduler grants a read. True when the socket should be read now.
    mutating func readGranted() -> Bool {
        awaitingGrant = false
        guard readHeld, !waiting, !hasQueued, writable || closing else { return false }
        readHeld = false
        return true
    }
}

/// What a line costs to run, in units of a `ping` (about 1–2 µs on the
/// event loop), by its verb: `status` builds a few KiB of JSON; `stop`,
/// `reload` and the plays go through other threads or the sound cache.
/// Measured with bench/reliability.py's fairness rows (see RELIABILITY.md).
enum VerbCost {
    static let status = 24
    static let stop = 4
    static let reload = 4
    static let play = 2
    static let cues = 4
    static let other = 1
    static let tooLong = 1

    static func of(_ event: LineEvent) -> Int {
        guard case .line(let bytes) = event else { return tooLong }
        // The verb: up to the first space or CR, case as sent (the parser rejects other cases).
        var end = 0
        while end < bytes.count, end < 10, bytes[end] != 0x20, bytes[end] != 0x0D, bytes[end] != 0x09 { end += 1 }
        switch bytes[0..<end].count {
        case 4:
            if bytes[0..<4].elementsEqual("play".utf8) { return play }
            if bytes[0..<4].elementsEqual("stop".utf8) { return stop }
            if bytes[0..<4].elementsEqual("cues".utf8) { return cues }
        case 6:
            if bytes[0..<6].elementsEqual("status".utf8) { return status }
            if bytes[0..<6].elementsEqual("reload".utf8) { return reload }
        case 9:
            if bytes[0..<9].elementsEqual("play-file".utf8) { return play }
        default: break
        }
        return other
    }
}
