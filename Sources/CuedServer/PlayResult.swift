import CuedCore
import CuedProtocol
import NIOCore

/// What became of a play, typed: every client of the daemon (the socket, the D-Bus
/// face, notifications, refresh transitions) asks through `Daemon.play` and gets one of
/// these; only the socket turns it into a reply line (`reply(options:)`).
enum PlayResult: Equatable, Sendable {
    /// Queued to the audio thread as voice `voice`.
    case started(voice: UInt64)
    /// With `wait`: how the voice ended, and what was true then.
    case ended(VoiceEnd, PlayPolicy.EndContext)
    /// Nothing sounds, by design: muted, the silent profile, the theme's `.disabled`, a cooldown.
    case notPlayed(NotPlayed)
    /// Refused: a rate limit, an unknown sound, a bad file, cued stopping, a full queue.
    case refused(ErrorCode, String)

    /// The wire's words for it (`ok muted`).
    typealias NotPlayed = NotSounded

    init(_ reply: Reply) {
        switch reply {
        case .err(let code, let message): self = .refused(code, message)
        case .ok(let word): self = word.flatMap(NotPlayed.init(rawValue:)).map(PlayResult.notPlayed) ?? .refused(.internal, "\(reply)")
        }
    }

    /// The voice, if one was queued.
    var voice: UInt64? { if case .started(let v) = self { return v } else { return nil } }
}

/// A play's answer: now, or once a sound was looked up and decoded (or, with `wait`, once it ended).
enum Play {
    case now(PlayResult)
    case later(EventLoopFuture<PlayResult>)

    /// Runs `body` with the result on the loop, whichever it is.
    func whenDone(_ body: @escaping (PlayResult) -> Void) {
        switch self {
        case .now(let r): body(r)
        case .later(let f): f.assumeIsolated().whenComplete { body((try? $0.get()) ?? .refused(.internal, "lost")) }
        }
    }
}
