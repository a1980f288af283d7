import NIOCore
import Synchronization

/// Reloads one at a time, and at most one per `minInterval`: one asked for while
/// another runs, or sooner than that after the last began, waits; all those asked
/// for meanwhile share the next one and its reply. So a storm of SIGHUPs (6,258
/// reloads and 488 KB of log in 10 s, about a core) costs a few reloads a second.
/// Loop-confined (not Sendable): created and called on `loop` only. `Outcome`: what a
/// reload answers (the daemon's `ReloadOutcome`).
final class Reloader<Outcome: Sendable> {
    /// Five a second at most: a user's `cuectl reload` after an edit waits for no one.
    static var defaultMinInterval: TimeAmount { .milliseconds(200) }

    private let loop: any EventLoop
    private let minInterval: TimeAmount
    private let now: () -> NIODeadline
    /// Runs one reload; its future completes on `loop`.
    private let run: () -> EventLoopFuture<Outcome>
    private var running = false
    /// The next reload, shared by everyone who asked since the last one began.
    private var next: EventLoopPromise<Outcome>?
    private var lastStart: NIODeadline?

    init(loop: any EventLoop, minInterval: TimeAmount = .milliseconds(200), now: @escaping () -> NIODeadline = { .now() },
         run: @escaping () -> EventLoopFuture<Outcome>) {
        self.loop = loop
        self.minInterval = minInterval
        self.now = now
        self.run = run
    }

    var isRunning: Bool { running }

    func reload() -> EventLoopFuture<Outcome> {
        if let next { return next.futureResult }
        let promise = loop.makePromise(of: Outcome.self)
        next = promise
        if !running { startWhenDue() }
        return promise.futureResult
    }

    private func startWhenDue() {
        let wait = lastStart.map { $0 + minInterval - now() } ?? .zero
        if wait <= .zero { return startNext() }
        loop.assumeIsolated().scheduleTask(in: wait) { self.startNext() }
    }

    private func startNext() {
        guard let promise = next, !running else { return }
        next = nil
        running = true
        lastStart = now()
        run().assumeIsolated().whenComplete { result in
            promise.completeWith(result)
            self.running = false
            if self.next != nil { self.startWhenDue() }
        }
    }
}

/// A replaced runtime on its way to the reload lane, which frees it (`free`): whichever
/// of the loop and the lane lets go of this box last, the runtime is freed there.
final class RetiredRuntime: @unchecked Sendable {  // `runtime` is touched by `free` only, once handed over
    private var runtime: Runtime?
    init(_ runtime: consuming Runtime) { self.runtime = runtime }
    func free() { runtime = nil }
}

/// Set once, at SIGTERM, from the main thread; read anywhere: a reload in
/// progress gives up between files, and no new cue starts. Shaped like an
/// `Atomic<Bool>` (which is not shareable as it is); an atomic's ordering must
/// be a literal, so every access is sequentially consistent, as strong as any asked.
public final class StopFlag: Sendable {
    private let flag = Atomic<Bool>(false)
    public init() {}
    public func load(ordering _: AtomicLoadOrdering) -> Bool { flag.load(ordering: .sequentiallyConsistent) }
    public func store(_ value: Bool, ordering _: AtomicStoreOrdering) { flag.store(value, ordering: .sequentiallyConsistent) }
}
