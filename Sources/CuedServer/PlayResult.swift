import CuedCore
import CuedProtocol
import NIOCore

/// What became of a play, typed: every client of the daemon (the socket, the D-Bus
/// face, notifications, refresh transitions) asks through `Daemon.play` and gets one of
/// these; only the socket's edge words it as a reply line (`Replies`).
enum PlayResult: Equatable, Sendable {
    /// Queued to the audio thread as voice `voice`.
    case started(voice: UInt64)
    /// With `wait`: how the voice ended, and what was true then.
    case ended(VoiceEnd, EndContext)
    /// Held back by admission (`Admission.rules`): mute, a profile, a rate limit, a cooldown, SIGTERM.
    case held(Hold)
    /// The sound theme says this event makes no sound (`NAME.disabled`).
    case disabled
    /// It could not be played: an unknown sound, a bad file, a full queue.
    case failed(PlayFailure)

    /// The voice, if one was queued.
    var voice: UInt64? { if case .started(let v) = self { return v } else { return nil } }
}

/// What was true when a voice ended, that `play … wait`'s reply says.
struct EndContext: Equatable, Sendable {
    var deviceError: String?
    var stopping = false
}

/// Why a play admission let through did not start.
enum PlayFailure: Equatable, Sendable {
    /// Neither a cue of the bank nor a sound of the theme (the bank's names, for the reply).
    case unknownSound(String, bank: [String])
    /// The decoding lane found nothing by that name.
    case noSuchSound(String)
    /// The sound exists and cannot be played.
    case badSound(SoundFailure)
    /// The decoding lane refused or gave up on `what` for this client.
    case decoding(what: String, DecodeLane.Refusal)
    /// The audio thread's queue is full.
    case queueFull
    /// A bank cue without a sound, or a transition's cue not in the bank (the config is inconsistent).
    case noSound(cue: String)
    case transitionCueMissing(String)
    /// Its answer never came (a future that failed: not expected).
    case lost
}

/// Why a sound that exists cannot be played: the wire's word for it, what was asked for,
/// and the file's own error ("PATH: reason").
public struct SoundFailure: Error, Equatable, Sendable, CustomStringConvertible {
    public var problem: FileProblem
    /// What was asked for where it is not the file itself ("theme sound 'bell'").
    public var asked: String?
    public var error: String

    public init(asked: String? = nil, _ problem: FileProblem, _ error: String) {
        self.asked = asked; self.problem = problem; self.error = error
    }

    public var description: String { (asked.map { $0 + ": " } ?? "") + error }
}

/// A play's answer: now, or once a sound was looked up and decoded (or, with `wait`, once it ended).
enum Play {
    case now(PlayResult)
    case later(EventLoopFuture<PlayResult>)

    /// Runs `body` with the result on the loop, whichever it is.
    func whenDone(_ body: @escaping (PlayResult) -> Void) {
        switch self {
        case .now(let r): body(r)
        case .later(let f): f.assumeIsolated().whenComplete { body((try? $0.get()) ?? .failed(.lost)) }
        }
    }
}
