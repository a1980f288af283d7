import CuedAudio
import CuedCore
import CuedProtocol
import NIOConcurrencyHelpers

/// What looking up a sound found.
public enum SoundLookup: Sendable {
    case cue(Cue)
    /// The theme says this event makes no sound (`NAME.disabled`).
    case disabled
    case notFound
    /// It exists but cannot be played: the reply says why (`err bad-file PATH: …`).
    case failed(Reply)
}

/// Sounds that are not in the cue bank: the desktop's sound theme and files
/// played by path, decoded once and kept in a bounded cache. Lookups and
/// decodes block (file I/O): call them off the event loop; `cachedThemeSound`
/// only reads memory.
public final class SoundLibrary: Sendable {
    private struct State {
        var theme: String
        var cacheLimitBytes: Int
    }
    private let state: NIOLockedValueBox<State>
    private let environment: [String: String]

    public init(theme: String, cacheLimitBytes: Int, environment: [String: String]) {
        state = NIOLockedValueBox(State(theme: theme, cacheLimitBytes: cacheLimitBytes))
        self.environment = environment
    }

    /// A theme sound decoded before, if it is still cached.
    public func cachedThemeSound(_ name: String) -> Cue? { nil }

    public func themeSound(_ name: String) -> SoundLookup { .notFound }

    public func file(_ path: String) -> SoundLookup {
        .failed(.err(.badFile, "\(path): playing files is not available yet"))
    }

    public func themeNames() -> [String] { [] }

    /// After a reload: a new theme or cache size.
    public func reconfigure(theme: String, cacheLimitBytes: Int) {
        state.withLockedValue { $0 = State(theme: theme, cacheLimitBytes: cacheLimitBytes) }
    }

    public func status() -> Status.Theme {
        let s = state.withLockedValue { $0 }
        var t = Status.Theme()
        t.name = s.theme
        t.cacheLimitBytes = s.cacheLimitBytes
        return t
    }
}
