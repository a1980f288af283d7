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

    func make(_ loop: EmbeddedEventLoop, minInterval: TimeAmount = .zero) -> (Reloader<Reply>, Runs) {
        let runs = Runs()
        let reloader = Reloader(loop: loop, minInterval: minInterval, now: { loop.now }) {
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

    /// A storm (SIGHUP in a loop) costs one reload per interval: everyone asking within
    /// it shares the next, which starts once the interval since the last start is over.
    @Test func reloadsAreSpacedByTheMinimumInterval() throws {
        let loop = EmbeddedEventLoop()
        let (reloader, runs) = make(loop, minInterval: .milliseconds(200))
        let first = reloader.reload()
        runs.promises[0].succeed(.ok("first"))  // done at once: the next still waits its turn
        #expect(replies([first]) == [.ok("first")])
        let storm = (0..<1000).map { _ in reloader.reload() }
        loop.advanceTime(by: .milliseconds(199))
        #expect(runs.promises.count == 1)
        loop.advanceTime(by: .milliseconds(1))
        #expect(runs.promises.count == 2)
        runs.promises[1].succeed(.ok("second"))
        #expect(replies(storm).allSatisfy { $0 == .ok("second") })
        // A quiet while later, a reload starts at once.
        loop.advanceTime(by: .seconds(1))
        _ = reloader.reload()
        #expect(runs.promises.count == 3)
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
