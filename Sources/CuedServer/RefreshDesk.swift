import CuedConfig
import CuedCore
import CuedProtocol

/// Pull-to-refresh on the daemon: each client's refresh session (its own, or a named one
/// shared by several connections, `SessionRegistry`) and what a move of it means to
/// play: the transition's cue as the config maps it, or a detent's tick. A value on the
/// loop; the daemon plays what it says.
struct RefreshDesk {
    private(set) var sessions: SessionRegistry

    init(sessions: SessionRegistry) { self.sessions = sessions }

    /// What a move of the session asks for.
    enum Sound: Equatable {
        case none
        /// Nothing to play, but the user showed intent to pull: open the device now.
        case prewarm
        case cue(String, PlayOptions)
    }

    /// Runs `body` on the client's current session (private or named).
    mutating func withSession<R>(_ client: inout Client, now: UInt64, _ body: (inout RefreshSession) -> R) -> R {
        guard let name = client.sessionName else { return body(&client.privateSession) }
        return sessions.withSession(name, now: now, body)
    }

    /// Moves the client's session; what it asks to play, by the runtime's config (its
    /// transition remaps and its pull's detent tick).
    mutating func move(_ client: inout Client, now: UInt64, runtime: Runtime,
                       _ event: (inout RefreshSession) -> RefreshSession.Outcome) -> Sound {
        let outcome = withSession(&client, now: now, event)
        let config = runtime.config
        var cueName: String?
        if case .play(let name) = outcome.action { cueName = name }
        if let from = outcome.from, let to = outcome.to { cueName = runtime.cue(from: from, to: to, default: cueName) }
        var options = PlayOptions()
        if cueName == nil, let toward = outcome.tick {
            // A detent of the pull: its tick, rising towards the threshold as [pull] says.
            cueName = config.pull.detentCue
            options.gainDB = config.pull.detentGainDB
            options.pitchCents = toward * config.pull.detentPitchCents
        }
        guard let name = cueName else { return outcome.prewarm ? .prewarm : .none }
        return .cue(name, options)
    }

    /// `detent [N|off|config]`: the session's detent ticks; the points between ticks in force (0: off).
    mutating func detent(_ choice: DetentChoice?, _ client: inout Client, now: UInt64, configured: Double) -> Double {
        withSession(&client, now: now) { s -> Double in
            switch choice {
            case .every(let n)?: s.detentOverride = n
            case .config?: s.detentOverride = nil
            case nil: break
            }
            return s.detentOverride ?? configured
        }
    }

    /// Named sessions alive now, for `status`.
    mutating func count(now: UInt64) -> Int { sessions.count(now: now) }
}
