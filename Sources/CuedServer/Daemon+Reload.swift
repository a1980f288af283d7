import CuedAudio
import CuedCore
import CuedProtocol
import NIOCore
import NIOPosix

/// What a reload made of the config and cues.
enum ReloadOutcome: Equatable, Sendable {
    case reloaded
    /// Nothing changed: the old config and cues stay. Why, on one line.
    case failed(String)
}

/// Reloads: the config and every cue read again off the loop, swapped in whole.
extension Daemon {
    /// Re-reads the config and every cue off the loop and swaps them in only
    /// if all load; otherwise the old ones stay. Voices already playing are
    /// untouched. Reloads asked for while one runs share the next.
    func reload() -> EventLoopFuture<ReloadOutcome> { reloader.reload() }

    /// One reload, in the `reloads` lane; its outcome once it is applied.
    func reloadOnce() -> EventLoopFuture<ReloadOutcome> {
        notify(["RELOADING=1", "MONOTONIC_USEC=\(SystemdNotifier.monotonicMicroseconds())"])
        let load = loadRuntime
        let stopping = self.stopping
        let isCancelled: @Sendable () -> Bool = { stopping.load(ordering: .relaxed) }
        let done = loop.makePromise(of: ReloadOutcome.self)
        let reuse = current.sounds
        reloads.runIfActive(eventLoop: loop) { () throws -> (Runtime, [String]) in try load(reuse, isCancelled) }.assumeIsolated().whenComplete { result in
            let outcome: ReloadOutcome
            switch result {
            case .success(let (new, warnings)):
                self.apply(new, warnings: warnings)
                outcome = .reloaded
            case .failure(let error):
                let message = (error as? LoadFailure)?.oneLine ?? "\(error)"
                self.logger.error("reload failed; keeping the old configuration", metadata: ["error": "\(message)"])
                outcome = .failed(message)
            }
            self.notify(["READY=1", "STATUS=" + self.statusLine()])
            done.succeed(outcome)
        }
        return done.futureResult
    }

    private func apply(_ new: Runtime, warnings: [String]) {
        for w in warnings { logger.warning("\(w)") }
        var old = new
        swap(&old, &current)
        switches.reloaded(old: old.config, new: new.config)
        // Keys changed since the start that only a start applies: said at each reload until a
        // restart (or the old value) settles them, first among status's warnings.
        let waiting = startOnly.waiting(StartOnly(new))
        if !waiting.isEmpty {
            let line = StartOnly.warning(waiting)
            logger.warning("\(line)")
            current.warnings = Array(([line] + current.warnings).prefix(Status.maxWarnings))
        }
        fetch.sounds.reconfigure(theme: new.theme, cacheLimitBytes: new.settings.themeCacheBytes)
        picker.bankReplaced()
        broker.bankReplaced()
        logger.info("reloaded", metadata: ["cues": "\(new.bank.names.joined(separator: " "))", "config": "\(new.config.path ?? "none")"])
        // The old cues are freed in the reload lane, not here: unmapping a bank of
        // hundreds of MiB is not event-loop work. Then what malloc keeps of their small
        // parts (names, tables) goes back to the system.
        let retired = RetiredRuntime(consume old)
        reloads.submit { state in
            retired.free()
            if state == .active { MemoryTrim.now() }
        }
    }
}
