import CuedCore
import Logging
import NIOCore
import NIOPosix

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

