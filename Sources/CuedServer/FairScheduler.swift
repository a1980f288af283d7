import NIOCore
import NIOPosix
import Synchronization

/// A connection the scheduler can give turns and read grants to.
protocol ScheduledConnection: AnyObject {
    /// Runs lines with `quantum` more credit. Returns what they cost and
    /// whether lines are still runnable (then it goes back in the queue).
    func serveTurn(quantum: Int) -> (spent: Int, more: Bool)
    /// Its held read may go now.
    func readGranted()
}

/// Fairness on the one event loop. A connection runs a light turn inline
/// when its read arrives (a `ping` or a `play` from a tool is answered at
/// once); whatever is left goes here and runs in *slices*: connections in
/// turn, a quantum of cost each (deficit round robin), until the slice's
/// budget is spent. Between slices the loop polls its sockets, so a light
/// client's line waits for at most one slice, however many connections flood.
///
/// Why slices are scheduled a little ahead and counted by loop tick: NIO runs
/// tasks until none is left before it polls again, so work that re-queues
/// itself with `execute` would keep the loop from its sockets for the whole
/// flood; and so would a timer, once it comes due while other tasks still
/// run (a `stop` flood: the audio thread's replies arrive as tasks while the
/// next slice submits more stops). So at most one slice works per loop tick
/// (`LoopTicks`, from NIO's tick callback): a slice that finds the tick of the
/// one before defers itself, and the loop polls its sockets first.
///
/// Reads are rationed the same way: a heavy connection (its last read held
/// more than a light turn) reads again only when granted, a few per slice,
/// so a thousand flooders do not all decode 4 KiB in one poll.
///
/// Light turns are bounded too: what runs inline in one loop tick (light turns
/// after reads, replies that became ready) is at most a slice's budget; past
/// it, the connections queue for slices. So many replies ready at once (250
/// `status wait`s whose sync came back together) are built a slice at a time,
/// while a lone client's reply is still built at once.
final class FairScheduler {
    struct Settings: Sendable {
        /// A light turn: what a connection may run inline when its read arrives
        /// (in cost), and the lines a read may bring without making it heavy.
        var lightTurn = 4
        /// Credit a connection gets per turn in a slice.
        var quantum = 16
        /// Cost run per slice before the loop polls its sockets again: about 0.5 ms
        /// (another client's line waits at most that long for a slice to end; 512 gave
        /// others' ping p99 twice as high under the 1,000-client flood).
        var sliceBudget = 256
        /// Heavy connections allowed to read per slice.
        var readsPerSlice = 8
        /// The pause before the next slice.
        var gap: TimeAmount = .microseconds(20)
        init() {}
    }

    let settings: Settings
    private let loop: any EventLoop
    /// The loop's tick count (nil: no tick information, every slice works).
    private let ticks: LoopTicks?
    private var lastTick: UInt64 = .max
    /// The loop tick whose inline work `inlineSpent` counts.
    private var inlineTick: UInt64 = .max
    private var inlineSpent = 0
    private var runQueue = CircularBuffer<any ScheduledConnection>()
    private var readers = CircularBuffer<any ScheduledConnection>()
    private var sliceScheduled = false

    /// Slices run, and slices put off to the next tick (for tests).
    private(set) var slices = 0
    private(set) var deferredSlices = 0

    init(loop: any EventLoop, settings: Settings = Settings(), ticks: LoopTicks? = nil) {
        self.loop = loop
        self.settings = settings
        self.ticks = ticks
    }

    /// Whether a light turn may run inline now: the loop tick's inline work is
    /// under a slice's budget (without tick information: always).
    func mayRunInline() -> Bool {
        guard let ticks else { return true }
        let now = ticks.count
        if now != inlineTick {
            inlineTick = now
            inlineSpent = 0
        }
        return inlineSpent < settings.sliceBudget
    }

    /// Cost run inline in this tick.
    func ranInline(_ cost: Int) { inlineSpent += cost }

    /// A connection with lines it could not run in its light turn.
    func enqueue(_ c: any ScheduledConnection) {
        runQueue.append(c)
        scheduleSlice()
    }

    /// A heavy connection wants to read.
    func askRead(_ c: any ScheduledConnection) {
        readers.append(c)
        scheduleSlice()
    }

    private func scheduleSlice() {
        guard !sliceScheduled else { return }
        sliceScheduled = true
        loop.assumeIsolated().scheduleTask(in: settings.gap) { self.slice() }
    }

    /// One slice: turns until the budget is spent, then a few read grants.
    func slice() {
        sliceScheduled = false
        if let ticks {
            let now = ticks.count
            guard now != lastTick else {
                deferredSlices += 1
                scheduleSlice()
                return
            }
            lastTick = now
        }
        slices += 1
        var budget = settings.sliceBudget
        while budget > 0, let c = runQueue.popFirst() {
            let (spent, more) = c.serveTurn(quantum: settings.quantum)
            budget -= max(spent, 1)
            if more { runQueue.append(c) }
        }
        var grants = settings.readsPerSlice
        while grants > 0, let c = readers.popFirst() {
            grants -= 1
            c.readGranted()
        }
        if !runQueue.isEmpty || !readers.isEmpty { scheduleSlice() }
    }
}

/// Counts the event loop's ticks (each a poll for I/O, then the tasks due),
/// from NIO's tick callback, so the scheduler can tell whether the loop has
/// polled its sockets since its last slice.
final class LoopTicks: NIOEventLoopMetricsDelegate {
    private let ticks = Atomic<UInt64>(0)
    var count: UInt64 { ticks.load(ordering: .relaxed) }
    func processedTick(info: NIOEventLoopTickInfo) { advance() }
    func advance() { ticks.add(1, ordering: .relaxed) }
}
