import CuedAudio
import CuedCore
import CuedProtocol
import CuedSystem
import NIOConcurrencyHelpers
#if canImport(Glibc)
import Glibc
#endif

/// What looking up a sound found.
public enum SoundLookup: Sendable {
    case cue(Cue)
    /// The theme says this event makes no sound (`NAME.disabled`).
    case disabled
    case notFound
    /// It exists but cannot be played, and why.
    case failed(SoundFailure)
}

/// Sounds that are not in the cue bank: the desktop's sound theme and files
/// played by path, decoded once (off the event loop) and kept in one cache
/// bounded in bytes and entries, least recently used first out. The cache is
/// keyed by what a file is (device, inode, size, mtime): there is no other
/// table of identities beside it. `cachedThemeSound` only
/// reads memory (the event loop may call it); everything else touches files
/// and runs on the job pool. Thread-safe.
public final class SoundLibrary: Sendable {
    private struct State {
        var theme: SoundTheme
        var cache: SoundCache<SoundKey>
        /// Part of every theme sound's key; a reload that changes the theme
        /// moves it on, so the old theme's sounds are never found again.
        var generation = 0
        /// Names the theme was searched for and does not have, oldest first:
        /// a search can stat thousands of paths (a legal theme of 16 themes ×
        /// 64 directories × locales × truncations took 3.4 s), so a miss is
        /// not searched again until the next reload. Bounded: the oldest go.
        var misses: [String] = []
        var missSet: Set<String> = []
        /// Themes requests named (`theme=NAME[:PROFILE]`) other than the config's, built
        /// (their index files read) in the decoding lane when first named; the least
        /// recently named goes first beyond `maxNamedThemes`.
        var named: [(choice: ThemeChoice, theme: SoundTheme)] = []

        /// The config's theme if `choice` names it (or nothing), with the name its sounds
        /// are cached and missed under; else the named theme if built, under `NAME:PROFILE`.
        func resolve(_ choice: ThemeChoice?) -> (theme: SoundTheme?, key: String) {
            guard let choice, choice.name != theme.name || (choice.profile ?? "stereo") != theme.profile else {
                return (theme, theme.name)
            }
            let key = choice.name + ":" + (choice.profile ?? "stereo")
            return (named.first { $0.choice == choice }?.theme, key)
        }

        mutating func noteMiss(_ name: String) {
            guard missSet.insert(name).inserted else { return }
            misses.append(name)
            if misses.count > SoundLibrary.maxMisses { missSet.remove(misses.removeFirst()) }
        }
    }
    /// Theme misses remembered at most.
    public static let maxMisses = 1024
    /// Themes named by requests kept at most (each a few directory names).
    public static let maxNamedThemes = 8
    private let state: NIOLockedValueBox<State>
    private let loader: CueLoader

    /// Decodes are charged to `budget`; when it has no room, the cache gives up its
    /// least recently used sounds first.
    public init(theme: SoundTheme, cacheLimitBytes: Int, budget: SoundBudget? = nil) {
        state = NIOLockedValueBox(State(theme: theme, cache: SoundCache(limitBytes: cacheLimitBytes)))
        loader = CueLoader(budget: budget)
        guard let budget else { return }
        budget.setRelief { [weak self] needed in self?.giveUp(needed, of: budget) }
    }

    /// Drops cached sounds, least recently used first, until `needed` bytes went back
    /// to `budget` or none is left (a sound a voice still plays gives nothing back
    /// until it ends).
    func giveUp(_ needed: Int, of budget: SoundBudget) {
        let before = budget.used
        state.withLockedValue { s in
            while before - budget.used < needed, s.cache.removeOldest() {}
        }
    }

    private var theme: SoundTheme { state.withLockedValue { $0.theme } }

    /// A theme sound decoded before, if it is still cached (memory only): of the config's
    /// theme, or of the one a request names.
    public func cachedThemeSound(_ name: String, theme choice: ThemeChoice? = nil) -> Cue? {
        state.withLockedValue { s in s.cache.get(.theme(theme: s.resolve(choice).key, sound: name, generation: s.generation)) }
    }

    /// The theme a request names, built from its index files if it is new (blocking: the decoding lane).
    private func theme(for choice: ThemeChoice?) -> (theme: SoundTheme, key: String, generation: Int) {
        let (found, key, base, generation) = state.withLockedValue { s in
            let r = s.resolve(choice)
            return (r.theme, r.key, s.theme, s.generation)
        }
        if let found, choice == nil || key == base.name { return (found, key, generation) }
        if let found {
            state.withLockedValue { s in
                if let i = s.named.firstIndex(where: { $0.choice == choice }) { s.named.append(s.named.remove(at: i)) }
            }
            return (found, key, generation)
        }
        let built = SoundTheme(name: choice!.name, like: base, profile: choice!.profile ?? "stereo")
        state.withLockedValue { s in
            guard s.generation == generation, !s.named.contains(where: { $0.choice == choice }) else { return }
            s.named.append((choice!, built))
            if s.named.count > Self.maxNamedThemes { s.named.removeFirst() }
        }
        return (built, key, generation)
    }

    /// What an express look-up found: the answer, or that the sound is too long
    /// to decode there (it goes to the slow pool: `themeSound`, `file`).
    public enum Express: Sendable {
        case done(SoundLookup)
        case slow
    }

    /// The most samples (frames × channels, as the header says) decoded in the
    /// express step: 2^19, 5.4 s of 48 kHz stereo, about 10–60 ms of one core
    /// (resampled at best quality); a sound whose header says more, or does not say,
    /// goes to the slow pool. Bounded by what a file decodes to, not its size on disk.
    public static let expressSamples = 1 << 19

    /// Finds `name` in the theme (the config's, or the one a request names) and decodes it (blocking).
    public func themeSound(_ name: String, theme choice: ThemeChoice? = nil, cancelled: () -> Bool = { false }) -> SoundLookup {
        switch themeSound(name, choice: choice, maxSamples: nil, cancelled: cancelled) {
        case .done(let lookup): return lookup
        case .slow: return .notFound  // not reached: without a bound every sound is decoded
        }
    }

    /// The express step for a theme sound: from the cache, or the theme's
    /// misses, or decoded if the header says it is small; else `.slow`.
    public func themeSoundExpress(_ name: String, theme choice: ThemeChoice? = nil, cancelled: () -> Bool = { false }) -> Express {
        themeSound(name, choice: choice, maxSamples: Self.expressSamples, cancelled: cancelled)
    }

    /// What the theme has of a name, without decoding it (`why`, `stop`).
    public enum Presence: Sendable, Equatable {
        /// A sound (decoded already, or a file found).
        case found
        /// The theme says this event makes no sound.
        case disabled
        case notFound
    }

    /// Whether the theme (the config's, or the one a request names) has `name`, as a play
    /// would find it but without decoding it (blocking: it may search the theme's
    /// directories). A miss is remembered as a play's is.
    public func presence(_ name: String, theme choice: ThemeChoice? = nil) -> Presence {
        let (theme, themeKey, generation) = self.theme(for: choice)
        let key = SoundKey.theme(theme: themeKey, sound: name, generation: generation)
        let missKey = Self.missKey(name, theme: theme, key: themeKey)
        let known = state.withLockedValue { s -> Presence? in
            if s.cache.get(key) != nil { return .found }
            return s.generation == generation && s.missSet.contains(missKey) ? .notFound : nil
        }
        if let known { return known }
        switch theme.lookup(name) {
        case .notFound:
            state.withLockedValue { s in if s.generation == generation { s.noteMiss(missKey) } }
            return .notFound
        case .disabled: return .disabled
        case .file: return .found
        }
    }

    /// A named theme's misses apart from the config theme's ("/" is in no sound name).
    private static func missKey(_ name: String, theme: SoundTheme, key: String) -> String {
        key == theme.name ? name : key + "/" + name
    }

    private func themeSound(_ name: String, choice: ThemeChoice?, maxSamples: Int?, cancelled: () -> Bool) -> Express {
        let (theme, themeKey, generation) = self.theme(for: choice)
        let key = SoundKey.theme(theme: themeKey, sound: name, generation: generation)
        let missKey = Self.missKey(name, theme: theme, key: themeKey)
        let known = state.withLockedValue { s -> SoundLookup? in
            if let cue = s.cache.get(key) { return .cue(cue) }
            return s.generation == generation && s.missSet.contains(missKey) ? .notFound : nil
        }
        if let known { return .done(known) }
        switch theme.lookup(name) {
        case .notFound:
            state.withLockedValue { s in if s.generation == generation { s.noteMiss(missKey) } }
            return .done(.notFound)
        case .disabled: return .done(.disabled)
        case .file(let path):
            let file: OpenedFile
            do { file = try UntrustedFile.openIdentified(path) } catch { return .done(.failed(SoundFailure(asked: "theme sound '\(name)'", error.problem, error.description))) }
            defer { close(file.fd) }
            do {
                guard let cue = try decode(file, path: path, name: name, maxSamples: maxSamples, cancelled: cancelled) else { return .slow }
                state.withLockedValue { s in if s.generation == generation { s.cache.insert(cue, for: key) } }
                return .done(.cue(cue))
            } catch {
                return .done(.failed(SoundFailure(asked: "theme sound '\(name)'", error.problem, error.description)))
            }
        }
    }

    /// Decodes a file by path (blocking), or takes it from the cache if the
    /// same file (device, inode, size, mtime) was decoded before. The file is
    /// opened once: its identity and its bytes come from that one open.
    public func file(_ path: String, cancelled: () -> Bool = { false }) -> SoundLookup {
        switch file(path, maxSamples: nil, cancelled: cancelled) {
        case .done(let lookup): return lookup
        case .slow: return .notFound  // not reached: without a bound every file is decoded
        }
    }

    /// The express step for a file: from the cache if the same file is cached,
    /// decoded if its header says it is small; else `.slow` (then `file` opens it
    /// again, and keys what it decodes by that open's identity).
    public func fileExpress(_ path: String, cancelled: () -> Bool = { false }) -> Express {
        file(path, maxSamples: Self.expressSamples, cancelled: cancelled)
    }

    private func file(_ path: String, maxSamples: Int?, cancelled: () -> Bool) -> Express {
        let file: OpenedFile
        do { file = try UntrustedFile.openIdentified(path) } catch { return .done(.failed(SoundFailure(error.problem, error.description))) }
        defer { close(file.fd) }
        let key = SoundKey.file(file.identity)
        if let cue = state.withLockedValue({ $0.cache.get(key) }) { return .done(.cue(cue)) }
        do {
            guard let cue = try decode(file, path: path, name: Path.lastComponent(path), maxSamples: maxSamples,
                                       cancelled: cancelled) else { return .slow }
            state.withLockedValue { _ = $0.cache.insert(cue, for: key) }
            return .done(.cue(cue))
        } catch {
            return .done(.failed(SoundFailure(error.problem, error.description)))
        }
    }

    private func decode(_ file: OpenedFile, path: String, name: String, maxSamples: Int?,
                        cancelled: () -> Bool) throws(SndFileError) -> Cue? {
        guard let maxSamples else { return try loader.load(file, path: path, name: name, cancelled: cancelled) }
        return try loader.loadIfSmall(file, path: path, name: name, maxSamples: maxSamples, cancelled: cancelled)
    }

    /// Every name the theme offers (blocking: lists directories).
    public func themeNames() -> [String] { theme.names() }

    /// After a reload: the new theme and cache size. Runs on the event loop,
    /// so its cost does not depend on what is cached: sounds of another theme
    /// (or chain) are not searched for and dropped, the generation moves on and
    /// they age out, least recently used first; files stay cached (their identity still
    /// says what they are); only a smaller limit evicts, as far as it must.
    /// Misses are forgotten (at most `maxMisses`): a sound added to the theme
    /// is found from the reload on.
    public func reconfigure(theme: SoundTheme, cacheLimitBytes: Int) {
        state.withLockedValue { s in
            if s.theme.name != theme.name || s.theme.chain != theme.chain { s.generation &+= 1 }
            s.theme = theme
            s.cache.setLimits(bytes: cacheLimitBytes)
            s.misses = []
            s.missSet = []
            s.named = []  // rebuilt from their index files when next named
        }
    }

    /// Bytes of the sounds cached now.
    public var cachedBytes: Int { state.withLockedValue { $0.cache.bytes } }

    public func status() -> Status.Theme {
        state.withLockedValue { s in
            var t = Status.Theme()
            t.name = s.theme.name
            t.chain = s.theme.chain
            t.cached = s.cache.count
            t.cacheBytes = s.cache.bytes
            t.cacheLimitBytes = s.cache.limitBytes
            return t
        }
    }
}

/// The wire's word for why a file did not open.
extension FileError {
    var problem: FileProblem {
        switch code {
        case ENOENT, ENOTDIR: return .notFound
        case EACCES, EPERM: return .denied
        case EINVAL: return .notRegular  // what UntrustedFile says of anything but a regular file
        default: return .unreadable
        }
    }
}

/// The wire's word for why a file that opened did not decode.
extension SndFileError {
    var problem: FileProblem { overBudget ? .overBudget : .unreadable }
}

/// The wire's word for a decode the lane refused.
extension DecodeLane.Refusal {
    var problem: FileProblem {
        switch self {
        case .timedOut: return .timedOut
        case .stuck, .queueFull: return .notTried
        }
    }
}
