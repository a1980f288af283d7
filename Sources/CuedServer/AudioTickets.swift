import CuedCore
import NIOCore

/// Answers waiting on the audio thread, each under its ticket: `play … wait` (by voice
/// id) until its voice ends, `stop` until the voices it names are stopped, `status wait`
/// until the thread has taken what was queued before it. The audio thread's events
/// complete them, on the loop. Loop-confined (not Sendable).
final class AudioTickets {
    private let loop: any EventLoop
    private let engine: AudioEngine
    private var next: UInt64 = 1
    private var voices: [UInt64: EventLoopPromise<PlayResult>] = [:]
    private var stops: [UInt64: EventLoopPromise<Int>] = [:]
    private var syncs: [UInt64: EventLoopPromise<Void>] = [:]

    struct QueueFull: Error, CustomStringConvertible { var description: String { Replies.queueFull } }

    init(loop: any EventLoop, engine: AudioEngine) {
        self.loop = loop
        self.engine = engine
    }

    /// A ticket for a command nobody waits on.
    func ticket() -> UInt64 {
        defer { next &+= 1 }
        return next
    }

    /// The result of voice `id`, once it ends.
    func waitForVoice(_ id: UInt64) -> EventLoopFuture<PlayResult> {
        let promise = loop.makePromise(of: PlayResult.self)
        voices[id] = promise
        return promise.futureResult
    }

    func voiceEnded(_ id: UInt64, _ result: PlayResult) { voices.removeValue(forKey: id)?.succeed(result) }

    /// Stops what `scope` names; the future has how many voices stopped, or fails if the
    /// audio queue is full.
    func stop(_ scope: StopScope) -> EventLoopFuture<Int> {
        let id = ticket()
        guard engine.submit(.stop(scope, ticket: id)) else { return loop.makeFailedFuture(QueueFull()) }
        let promise = loop.makePromise(of: Int.self)
        stops[id] = promise
        return promise.futureResult
    }

    /// Completes once the audio thread has taken every command queued before this one (a
    /// cue just queued has started, or the open of its device was tried), so that what is
    /// read then follows from them; at most `limit` later (a stuck audio thread, or an
    /// open slower than the native stream's 2 s); nil if the queue is full (read it now).
    func afterQueued(limit: TimeAmount = .seconds(3)) -> EventLoopFuture<Void>? {
        let id = ticket()
        guard engine.submit(.sync(ticket: id)) else { return nil }
        let promise = loop.makePromise(of: Void.self)
        syncs[id] = promise
        loop.assumeIsolated().scheduleTask(in: limit) { self.synced(id) }
        return promise.futureResult
    }

    /// The audio thread's answers (hopped onto the loop).
    func handle(_ event: EngineEvent) {
        switch event {
        case .stopped(let id, let n): stops.removeValue(forKey: id)?.succeed(n)
        case .synced(let id): synced(id)
        default: break
        }
    }

    private func synced(_ id: UInt64) { syncs.removeValue(forKey: id)?.succeed(()) }
}
