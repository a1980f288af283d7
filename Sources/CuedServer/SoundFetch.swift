import CuedCore
import CuedProtocol
import NIOCore

/// Sounds that are not in the bank, fetched for a client: a theme sound or a file by
/// path, found and decoded in the decoding lane (a share per client, a deadline), its
/// express step first (cached or small), else handed on to the slow pool; and the theme's
/// names, listed there (it reads directories). Answers on the loop, typed.
/// Loop-confined (not Sendable): the daemon owns it and calls it on `loop`.
final class SoundFetch {
    /// What a fetch found.
    enum Fetched {
        case cue(Cue)
        /// The theme says this event makes no sound.
        case disabled
        case failed(PlayFailure)
    }

    let loop: any EventLoop
    let sounds: SoundLibrary
    private let decoding: DecodeLane

    init(loop: any EventLoop, sounds: SoundLibrary, decoding: DecodeLane) {
        self.loop = loop
        self.sounds = sounds
        self.decoding = decoding
    }

    /// Decoders written off, asleep on a file system that does not answer (`status`).
    var decodersStuck: Int { decoding.counts.stuck }

    /// A theme sound decoded before, if it is still cached (memory only: the loop may ask).
    func cached(_ name: String, theme: ThemeChoice?) -> Cue? { sounds.cachedThemeSound(name, theme: theme) }

    /// A theme sound for `owner`; a name the theme does not have is unknown (with the bank's names).
    func themeSound(_ name: String, theme: ThemeChoice?, owner: String, bankNames: [String]) -> EventLoopFuture<Fetched> {
        let sounds = self.sounds
        return decode(owner: owner, what: "theme sound '\(name)'", notFound: .unknownSound(name, bank: bankNames)) { c in
            switch sounds.themeSoundExpress(name, theme: theme, cancelled: { c.isCancelled }) {
            case .done(let lookup): return .done(lookup)
            case .slow: return .slow { c in sounds.themeSound(name, theme: theme, cancelled: { c.isCancelled }) }
            }
        }
    }

    /// Whether a name the bank does not have is the theme's, for `owner` (looked up in the
    /// decoding lane's express step, not decoded; a cached sound at once): nil if it is (a
    /// sound, or one the theme disables), else what a play of it would fail with (unknown, or
    /// the lane's refusal). What `why` and `stop` ask before they answer for a name.
    func known(_ name: String, theme: ThemeChoice?, owner: String, bankNames: [String]) -> EventLoopFuture<PlayFailure?> {
        if sounds.cachedThemeSound(name, theme: theme) != nil { return loop.makeSucceededFuture(nil) }
        let sounds = self.sounds
        return decoding.submit(owner: owner, on: loop, express: { _ in .done(sounds.presence(name, theme: theme)) }).map { result in
            switch result {
            case .success(.found), .success(.disabled): return nil
            case .success(.notFound): return .unknownSound(name, bank: bankNames)
            case .failure(let refusal): return .decoding(what: "theme sound '\(name)'", refusal)
            }
        }
    }

    /// A sound file by absolute path, for `owner`.
    func file(_ path: String, owner: String) -> EventLoopFuture<Fetched> {
        let sounds = self.sounds
        return decode(owner: owner, what: path, notFound: .noSuchSound(path)) { c in
            switch sounds.fileExpress(path, cancelled: { c.isCancelled }) {
            case .done(let lookup): return .done(lookup)
            case .slow: return .slow { c in sounds.file(path, cancelled: { c.isCancelled }) }
            }
        }
    }

    /// `cues theme`: the theme's names, or why the lane gave up.
    func themeNames(owner: String) -> EventLoopFuture<Result<[String], DecodeLane.Refusal>> {
        let sounds = self.sounds
        return decoding.submit(owner: owner, on: loop) { sounds.themeNames() }
    }

    private func decode(owner: String, what: String, notFound: PlayFailure,
                        _ express: @escaping @Sendable (DecodeLane.Cancellation) -> DecodeLane.Step<SoundLookup>) -> EventLoopFuture<Fetched> {
        decoding.submit(owner: owner, on: loop, express: express).map { result in
            switch result {
            case .success(.cue(let cue)): return .cue(cue)
            case .success(.disabled): return .disabled
            case .success(.notFound): return .failed(notFound)
            case .success(.failed(let failure)): return .failed(.badSound(failure))
            case .failure(let refusal): return .failed(.decoding(what: what, refusal))
            }
        }
    }
}
