import CuedProtocol
@testable import CuedServer
import NIOCore
import NIOEmbedded
import Testing

/// Reloads run one at a time; those asked for during one share the next. Driven on an
/// EmbeddedEventLoop: each reload's end is a promise the test completes.
@Suite struct ReloaderTests {
    final class Runs {
        var promises: [EventLoopPromise<Reply>] = []
    }

    func make(_ loop: EmbeddedEventLoop) -> (Reloader, Runs) {
        let runs = Runs()
        let reloader = Reloader(loop: loop) {
            let p = loop.makePromise(of: Reply.self)
            runs.promises.append(p)
            return p.futureResult
        }
        return (reloader, runs)
    }

    func replies(_ futures: [EventLoopFuture<Reply>]) -> [Reply?] {
        futures.map { f in
            var r: Reply?
            f.assumeIsolated().whenSuccess { r = $0 }
            return r
        }
    }

    @Test func requestsDuringAReloadShareTheNextOne() throws {
        let loop = EmbeddedEventLoop()
        let (reloader, runs) = make(loop)
        let first = reloader.reload()
        #expect(runs.promises.count == 1 && reloader.isRunning)
        let waiting = (0..<3).map { _ in reloader.reload() }
        #expect(runs.promises.count == 1)  // none starts while one runs
        runs.promises[0].succeed(.ok("first"))
        #expect(replies([first]) == [.ok("first")])
        #expect(replies(waiting) == [nil, nil, nil])  // theirs is the next one, started now
        #expect(runs.promises.count == 2 && reloader.isRunning)
        let late = reloader.reload()  // asked during the second: shares a third
        runs.promises[1].succeed(.ok("second"))
        #expect(replies(waiting) == [.ok("second"), .ok("second"), .ok("second")])
        #expect(runs.promises.count == 3)
        runs.promises[2].succeed(.ok("third"))
        #expect(replies([late]) == [.ok("third")])
        #expect(!reloader.isRunning)
        _ = try loop.syncShutdownGracefully()
    }

    @Test func aReloadAfterTheLastEndedStartsAtOnce() throws {
        let loop = EmbeddedEventLoop()
        let (reloader, runs) = make(loop)
        let a = reloader.reload()
        runs.promises[0].succeed(.err(.reloadFailed, "x"))
        #expect(replies([a]) == [.err(.reloadFailed, "x")])
        #expect(!reloader.isRunning)
        let b = reloader.reload()
        #expect(runs.promises.count == 2)
        runs.promises[1].succeed(.ok("reloaded"))
        #expect(replies([b]) == [.ok("reloaded")])
        _ = try loop.syncShutdownGracefully()
    }

    struct Broken: Error {}

    /// A reload whose future fails passes the failure on to its askers, and the next still runs.
    @Test func aFailedRunIsPassedOnAndTheNextStillRuns() throws {
        let loop = EmbeddedEventLoop()
        let (reloader, runs) = make(loop)
        let a = reloader.reload()
        let b = reloader.reload()
        var failed = false
        a.assumeIsolated().whenFailure { _ in failed = true }
        runs.promises[0].fail(Broken())
        #expect(failed)
        #expect(runs.promises.count == 2)
        runs.promises[1].succeed(.ok("reloaded"))
        #expect(replies([b]) == [.ok("reloaded")])
        _ = try loop.syncShutdownGracefully()
    }
}
