import NIOCore

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
/// Why slices are scheduled with a small delay and not `execute`: NIO runs
/// tasks until none is left before it polls again, so work that re-queues
/// itself with `execute` (or that ping-pongs with the audio thread, whose
/// replies arrive as tasks) would keep the loop from its sockets for the
/// whole flood. A timer a few microseconds away makes the loop poll first.
///
/// Reads are rationed the same way: a heavy connection (its last read held
/// more than a light turn) reads again only when granted, a few per slice,
/// so a thousand flooders do not all decode 4 KiB in one poll.
final class FairScheduler {
    struct Settings: Sendable {
        /// Cost a connection may run inline when its read arrives; a read that
        /// brings more makes the connection heavy.
        var lightCost = 4
        /// Credit a connection gets per turn in a slice.
        var quantum = 16
        /// Cost run per slice before the loop polls its sockets again.
        var sliceBudget = 512
        /// Heavy connections allowed to read per slice.
        var readsPerSlice = 8
        /// The pause before the next slice: long enough that the loop polls first.
        var gap: TimeAmount = .microseconds(20)
        init() {}
    }

    let settings: Settings
    private let loop: any EventLoop
    private var runQueue = CircularBuffer<any ScheduledConnection>()
    private var readers = CircularBuffer<any ScheduledConnection>()
    private var sliceScheduled = false

    /// Slices run, and slices that ended with their budget spent (for tests and status).
    private(set) var slices = 0
    private(set) var fullSlices = 0

    init(loop: any EventLoop, settings: Settings = Settings()) {
        self.loop = loop
        self.settings = settings
    }

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

    var pending: Int { runQueue.count + readers.count }

    private func scheduleSlice() {
        guard !sliceScheduled else { return }
        sliceScheduled = true
        loop.assumeIsolated().scheduleTask(in: settings.gap) { self.slice() }
    }

    /// One slice: turns until the budget is spent, then a few read grants.
    func slice() {
        sliceScheduled = false
        slices += 1
        var budget = settings.sliceBudget
        while budget > 0, let c = runQueue.popFirst() {
            let (spent, more) = c.serveTurn(quantum: settings.quantum)
            budget -= max(spent, 1)
            if more { runQueue.append(c) }
        }
        if budget <= 0 { fullSlices += 1 }
        var grants = settings.readsPerSlice
        while grants > 0, let c = readers.popFirst() {
            grants -= 1
            c.readGranted()
        }
        if !runQueue.isEmpty || !readers.isEmpty { scheduleSlice() }
    }
}
