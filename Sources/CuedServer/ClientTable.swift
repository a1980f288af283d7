import CuedCore
import CuedProtocol

/// What `status` shows of the clients (a snapshot of the table's figures).
struct ClientFigures: Equatable {
    var open = 0
    var capacity = 0
    var refused = 0
    var evictedIdle = 0
    var evictedShare = 0
    var closedUnread = 0
    var processes = 0
    var busiest: (pid: Int32, connections: Int)?
    var unsentBytes = 0
    var outputLimitBytes = 0

    static func == (a: Self, b: Self) -> Bool {
        a.open == b.open && a.capacity == b.capacity && a.refused == b.refused && a.evictedIdle == b.evictedIdle
            && a.evictedShare == b.evictedShare && a.closedUnread == b.closedUnread && a.processes == b.processes
            && a.busiest?.pid == b.busiest?.pid && a.busiest?.connections == b.busiest?.connections
            && a.unsentBytes == b.unsentBytes && a.outputLimitBytes == b.outputLimitBytes
    }

    func fill(_ s: inout Status) {
        s.clients = open
        s.maxClients = capacity
        s.refusedBusy = refused
        s.evictedIdle = evictedIdle
        s.evictedShare = evictedShare
        s.closedUnread = closedUnread
        s.clientProcesses = processes
        s.busiestPid = busiest.map { Int($0.pid) }
        s.busiestClients = busiest?.connections ?? 0
        s.clientOutputBytes = unsentBytes
        s.clientOutputLimitBytes = outputLimitBytes
    }
}

/// Every client of the daemon, socket connections and bus clients alike, in one table
/// under one cap (cued's own notification client is kept here too, outside the cap).
/// At the cap a newcomer gets a slot, in this order: the longest-idle client's (nothing
/// in flight, silent for at least `minIdle`); else, when the newcomer's peer holds at
/// least two fewer clients than the peer holding the most, one of that peer's (its least
/// recently active); else it is refused. A peer is a process (the socket's SO_PEERCRED
/// pid) or the bus (every bus client comes through the bus daemon), so neither a leaking
/// process nor a flood of bus names can keep the others out. A client let go is told why
/// (`LetGo`): a socket closes with a last line, a bus client is forgotten.
/// Event loop only.
final class ClientTable {
    /// Why a client was let go to make room.
    enum LetGo: Equatable {
        case idle(seconds: Double, capacity: Int)
        /// Its peer held `held` of the `capacity` slots, the most (`pid` nil: the bus).
        case share(pid: Int32?, held: Int, capacity: Int)
    }

    struct Entry {
        var client: Client
        var lastActive: UInt64
        /// A request or a feedback of its own in flight: not idle.
        var busy = false
        /// How to let it go at the cap (the entry is gone by then).
        let letGo: (LetGo) -> Void
        /// Where the ends of its voices with `events` go (a socket's `end` lines, the bus's FeedbackEnded).
        var ends: ((VoiceEnd) -> Void)?
        /// It started loops without `detach`: they end when it goes.
        var loops = false
    }

    private enum Peer: Hashable {
        case process(Int32)
        case bus
    }

    /// Set once at start (lowered to fit the descriptor limit once cued listens).
    var capacity: Int
    /// A client silent for less than this is never let go for being idle (it is in use).
    let minIdleNanoseconds: UInt64 = 500_000_000
    /// Each connection's output bound (`ConnectionMachine.OutputLimits`).
    let output: ConnectionMachine.OutputLimits
    private var entries: [ClientID: Entry] = [:]
    private var peers: [Peer: Int] = [:]
    private var bySender: [String: ClientID] = [:]
    /// Clients outside the cap (cued's own).
    private var uncapped = 0
    private var nextID: ClientID = 1

    // Counted for `status`.
    private(set) var refused = 0
    private(set) var evictedIdle = 0
    private(set) var evictedShare = 0
    private(set) var closedUnread = 0
    /// Replies and event lines queued for the connections' sockets and not yet taken (all connections).
    private(set) var unsentBytes = 0
    /// Told how many are open after each change (memory is given back after a burst leaves).
    var onChange: ((Int) -> Void)?
    /// Told of every client that leaves the table (closed, let go, or done leaving).
    var onRemove: ((Entry) -> Void)?

    init(capacity: Int, output: ConnectionMachine.OutputLimits = ConnectionMachine.OutputLimits()) {
        self.capacity = capacity
        self.output = output
    }

    /// Clients under the cap.
    var count: Int { entries.count - uncapped }

    /// Admits a new client of `kind` (from process `pid`, if known), making room at the cap
    /// if it can; its id, or nil if refused.
    func admit(_ kind: Client.Kind, pid: Int32? = nil, now: UInt64, limits: Daemon.Limits,
               letGo: @escaping (LetGo) -> Void, ends: ((VoiceEnd) -> Void)? = nil) -> ClientID? {
        let peer = Self.peer(kind, pid)
        if let peer, count >= capacity {
            if let (id, victim) = longestIdle(now: now) {
                evictedIdle += 1
                let seconds = Double((now &- victim.lastActive) / 1_000_000) / 1000
                remove(id)?.letGo(.idle(seconds: seconds, capacity: capacity))
            } else if let (id, held) = shareVictim(for: peer) {
                evictedShare += 1
                let victim = entries[id]!.client
                remove(id)?.letGo(.share(pid: victim.pid, held: held, capacity: capacity))
            } else {
                refused += 1
                return nil
            }
        }
        let id = nextID
        nextID += 1
        entries[id] = Entry(client: Client(kind, id: id, pid: pid, limits: limits, now: now), lastActive: now, letGo: letGo, ends: ends)
        if let peer { peers[peer, default: 0] += 1 } else { uncapped += 1 }
        if case .bus(let sender) = kind { bySender[sender] = id }
        onChange?(count)
        return id
    }

    /// cued's own clients are outside the cap.
    private static func peer(_ kind: Client.Kind, _ pid: Int32?) -> Peer? {
        switch kind {
        case .socket: .process(pid ?? 0)
        case .bus: .bus
        case .cued: nil
        }
    }

    private func longestIdle(now: UInt64) -> (ClientID, Entry)? {
        var best: (ClientID, Entry)?
        for (id, e) in entries where e.client.kind != .cued && !e.busy && now &- e.lastActive >= minIdleNanoseconds {
            if best == nil || e.lastActive < best!.1.lastActive { best = (id, e) }
        }
        return best
    }

    /// The busiest peer's least recently active client (one not in use first), when
    /// `peer` holds at least two fewer than it; with how many it holds.
    private func shareVictim(for peer: Peer) -> (ClientID, Int)? {
        guard let (busiest, held) = busiestPeer, busiest != peer, (peers[peer] ?? 0) + 1 < held else { return nil }
        var best: (ClientID, Entry)?
        for (id, e) in entries where Self.peer(e.client.kind, e.client.pid) == busiest {
            guard let b = best?.1 else { best = (id, e); continue }
            if (e.busy ? 1 : 0, e.lastActive) < (b.busy ? 1 : 0, b.lastActive) { best = (id, e) }
        }
        return best.map { ($0.0, held) }
    }

    /// The peer holding the most clients (a process before the bus, then the lowest pid of a tie).
    private var busiestPeer: (Peer, Int)? {
        var best: (peer: Peer, n: Int, rank: Int64)?
        for (peer, n) in peers {
            let rank: Int64 = if case .process(let pid) = peer { Int64(pid) } else { Int64.max }
            if best == nil || n > best!.n || (n == best!.n && rank < best!.rank) { best = (peer, n, rank) }
        }
        return best.map { ($0.peer, $0.n) }
    }

    /// The process holding the most connections (the lowest pid of a tie), and how many.
    var busiestProcess: (pid: Int32, connections: Int)? {
        var best: (pid: Int32, connections: Int)?
        for case (.process(let pid), let n) in peers
        where best == nil || n > best!.connections || (n == best!.connections && pid < best!.pid) {
            best = (pid, n)
        }
        return best
    }

    // MARK: - The clients

    subscript(id: ClientID) -> Client? { entries[id]?.client }

    /// The bus client of `sender`, if the table has it.
    func bus(_ sender: String) -> ClientID? { bySender[sender] }

    /// The senders of the bus clients in the table.
    var busSenders: [String] { Array(bySender.keys) }

    /// Runs `body` on a copy of the client, then keeps what it changed (if the client is
    /// still there): the body may read the table, and may even remove the client.
    @discardableResult
    func update<R>(_ id: ClientID, _ body: (inout Client) -> R) -> R? {
        guard var client = entries[id]?.client else { return nil }
        let result = body(&client)
        entries[id]?.client = client
        return result
    }

    func touch(_ id: ClientID, now: UInt64, busy: Bool) {
        entries[id]?.lastActive = now
        entries[id]?.busy = busy
    }

    /// It started a loop without `detach`: its loops end when it goes.
    func startedLoop(_ id: ClientID) { entries[id]?.loops = true }

    /// Tells the ends of voices with `events` to their client, if it is still there.
    func deliver(_ end: VoiceEnd) { entries[end.connection]?.ends?(end) }

    /// Takes the client out of the table; what it was, if it was there.
    @discardableResult
    func remove(_ id: ClientID) -> Entry? {
        guard let e = entries.removeValue(forKey: id) else { return nil }
        if let peer = Self.peer(e.client.kind, e.client.pid) {
            let left = (peers[peer] ?? 1) - 1
            peers[peer] = left > 0 ? left : nil
        } else {
            uncapped -= 1
        }
        if case .bus(let sender) = e.client.kind, bySender[sender] == id { bySender[sender] = nil }
        onRemove?(e)
        onChange?(count)
        return e
    }

    // MARK: - The connections' output

    /// A connection's unsent output changed by `delta` bytes.
    func outputChanged(by delta: Int) { unsentBytes += delta }

    /// A connection was closed because its client does not read.
    func closedForNotReading() { closedUnread += 1 }

    var figures: ClientFigures {
        ClientFigures(open: count, capacity: capacity, refused: refused, evictedIdle: evictedIdle, evictedShare: evictedShare,
                      closedUnread: closedUnread, processes: peers.keys.count(where: { if case .process = $0 { true } else { false } }),
                      busiest: busiestProcess, unsentBytes: unsentBytes, outputLimitBytes: output.limitBytes)
    }
}
