import CuedProtocol
import NIOCore
import Synchronization

/// Reloads one at a time: one asked for while another runs waits for it to
/// end, then all those asked for meanwhile share the next one and its reply.
/// Loop-confined (not Sendable): created and called on `loop` only.
final class Reloader {
    private let loop: any EventLoop
    /// Runs one reload; its future completes on `loop`.
    private let run: () -> EventLoopFuture<Reply>
    private var running = false
    private var next: EventLoopPromise<Reply>?

    init(loop: any EventLoop, run: @escaping () -> EventLoopFuture<Reply>) {
        self.loop = loop
        self.run = run
    }

    var isRunning: Bool { running }

    func reload() -> EventLoopFuture<Reply> {
        if running {
            if next == nil { next = loop.makePromise() }
            return next!.futureResult
        }
        let promise = loop.makePromise(of: Reply.self)
        start(promise)
        return promise.futureResult
    }

    private func start(_ promise: EventLoopPromise<Reply>) {
        running = true
        run().assumeIsolated().whenComplete { result in
            promise.completeWith(result)
            self.running = false
            if let next = self.next {
                self.next = nil
                self.start(next)
            }
        }
    }
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
