import CuedCore
import CuedProtocol
import Logging
import NIOCore
import NIOPosix

/// What `status` shows of the connections (a snapshot of the table's figures).
struct ConnectionFigures: Equatable {
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

/// The live connections, for the connection cap. At the cap a newcomer gets a
/// slot, in this order: the longest-idle connection's (none in flight, silent
/// for at least `minIdle`), closed with a last line; else, when the newcomer's
/// process holds at least two fewer connections than the process holding the
/// most, one of that process's (its least recently active), so a leaking or
/// looping client cannot keep every other process out; else it is refused.
/// Processes are told apart by the peer's pid (SO_PEERCRED).
/// Event loop only: handed to the handlers through `NIOLoopBound`.
final class ConnectionTable {
    struct Entry {
        var lastActive: UInt64
        var busy: Bool
        let pid: Int32
        let evict: (Reply) -> Void
    }

    /// Set once at start (lowered to fit the descriptor limit once cued listens).
    var capacity: Int
    /// A connection silent for less than this is never evicted for being idle (it is in use).
    let minIdleNanoseconds: UInt64 = 500_000_000
    /// Each connection's output bound (`ConnectionMachine.OutputLimits`).
    let output: ConnectionMachine.OutputLimits
    private var entries: [UInt64: Entry] = [:]
    private var perProcess: [Int32: Int] = [:]
    private var nextID: UInt64 = 1

    // Counted for `status`.
    private(set) var refused = 0
    private(set) var evictedIdle = 0
    private(set) var evictedShare = 0
    private(set) var closedUnread = 0
    /// Replies and event lines queued for the connections' sockets and not yet taken (all connections).
    private(set) var unsentBytes = 0
    /// Told how many are open after each change (memory is given back after a burst leaves).
    var onChange: ((Int) -> Void)?

    init(capacity: Int, output: ConnectionMachine.OutputLimits = ConnectionMachine.OutputLimits()) {
        self.capacity = capacity
        self.output = output
    }

    var count: Int { entries.count }

    enum Admission: Equatable { case admitted(UInt64), refused }

    /// Makes room for a new connection from process `pid` if it can.
    func admit(now: UInt64, pid: Int32, evict: @escaping (Reply) -> Void) -> Admission {
        if entries.count >= capacity {
            if let (id, victim) = longestIdle(now: now) {
                let seconds = Double((now &- victim.lastActive) / 1_000_000) / 1000
                remove(id)
                evictedIdle += 1
                victim.evict(.err(.busy, "closing this connection, idle for \(Request.number(seconds)) s, to make room for a new one (\(capacity) at most)"))
            } else if let (id, victim, held) = shareVictim(for: pid) {
                remove(id)
                evictedShare += 1
                victim.evict(.err(.busy, "closing this connection: process \(victim.pid) holds \(held) of the \(capacity) connections, "
                                  + "the most; making room for another process"))
            } else {
                refused += 1
                return .refused
            }
        }
        let id = nextID
        nextID += 1
        entries[id] = Entry(lastActive: now, busy: false, pid: pid, evict: evict)
        perProcess[pid, default: 0] += 1
        onChange?(entries.count)
        return .admitted(id)
    }

    private func longestIdle(now: UInt64) -> (UInt64, Entry)? {
        var best: (UInt64, Entry)?
        for (id, e) in entries where !e.busy && now &- e.lastActive >= minIdleNanoseconds {
            if best == nil || e.lastActive < best!.1.lastActive { best = (id, e) }
        }
        return best
    }

    /// The busiest process's least recently active connection (one not in use first),
    /// when `pid` holds at least two fewer than it; with how many it holds.
    private func shareVictim(for pid: Int32) -> (UInt64, Entry, Int)? {
        guard let (busiest, held) = busiestProcess, busiest != pid, (perProcess[pid] ?? 0) + 1 < held else { return nil }
        var best: (UInt64, Entry)?
        for (id, e) in entries where e.pid == busiest {
            guard let b = best?.1 else { best = (id, e); continue }
            if (e.busy ? 1 : 0, e.lastActive) < (b.busy ? 1 : 0, b.lastActive) { best = (id, e) }
        }
        return best.map { ($0.0, $0.1, held) }
    }

    /// The process holding the most connections (the lowest pid of a tie), and how many.
    var busiestProcess: (pid: Int32, connections: Int)? {
        var best: (pid: Int32, connections: Int)?
        for (pid, n) in perProcess where best == nil || n > best!.connections || (n == best!.connections && pid < best!.pid) {
            best = (pid, n)
        }
        return best
    }

    func touch(_ id: UInt64, now: UInt64, busy: Bool) {
        entries[id]?.lastActive = now
        entries[id]?.busy = busy
    }

    func remove(_ id: UInt64) {
        guard let e = entries.removeValue(forKey: id) else { return }
        let left = (perProcess[e.pid] ?? 1) - 1
        perProcess[e.pid] = left > 0 ? left : nil
        onChange?(entries.count)
    }

    /// A connection's unsent output changed by `delta` bytes.
    func outputChanged(by delta: Int) { unsentBytes += delta }

    /// A connection was closed because its client does not read.
    func closedForNotReading() { closedUnread += 1 }

    var figures: ConnectionFigures {
        ConnectionFigures(open: count, capacity: capacity, refused: refused, evictedIdle: evictedIdle, evictedShare: evictedShare,
                          closedUnread: closedUnread, processes: perProcess.count, busiest: busiestProcess,
                          unsentBytes: unsentBytes, outputLimitBytes: output.limitBytes)
    }
}

/// Gives memory back after a burst of connections leaves: what their buffers
/// and channels used stays inside malloc's heaps (small allocations spread over
/// the arenas), so RSS would stay at the burst's height (+40 MiB after 1,000
/// clients that never read). Once at least `burst` fewer connections are open
/// than at the peak and a second passed without another change, glibc's
/// `malloc_trim` runs once, on a lane of its own (it walks every arena under its
/// lock: not on the event loop). Loop only.
final class ConnectionMemory {
    static let burst = 32
    static let quiet = TimeAmount.seconds(1)
    private let loop: any EventLoop
    private let lane: NIOThreadPool
    private let logger: Logger
    private var peak = 0
    private var pending: Scheduled<Void>?
    /// Trims so far (for tests and the log).
    private(set) var trims = 0

    init(loop: any EventLoop, lane: NIOThreadPool, logger: Logger) {
        self.loop = loop
        self.lane = lane
        self.logger = logger
    }

    func changed(open: Int) {
        peak = max(peak, open)
        guard peak - open >= Self.burst || pending != nil else { return }
        pending?.cancel()
        pending = loop.assumeIsolated().scheduleTask(in: Self.quiet) { [self, logger] in
            pending = nil
            let from = peak
            peak = open
            trims += 1
            lane.submit { state in
                guard case .active = state else { return }
                let t = MonotonicClock.now()
                MemoryTrim.now()
                logger.debug("gave memory back after connections left", metadata: [
                    "connections.from": "\(from)", "connections.to": "\(open)", "trim_us": "\((MonotonicClock.now() - t) / 1000)"])
            }
        }
    }
}

