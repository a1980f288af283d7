import CuedProtocol

/// The refresh state machine of the original pull-to-refresh design, as a
/// value type: it takes an event and returns what to play. No I/O.
public struct RefreshMachine: Sendable, Equatable {
    public enum Action: Equatable, Sendable {
        /// Play this cue for the transition.
        case play(String)
        /// The transition happened (or was ignored) and has no cue.
        case none
    }

    public private(set) var state: RefreshState

    public init(state: RefreshState = .idle) { self.state = state }

    /// Moves to `target` and returns the cue for the transition.
    /// While loading, pull and release are ignored: the state stays loading.
    public mutating func handle(_ target: RefreshState) -> Action {
        let from = state
        switch (from, target) {
        case (.loading, .pull), (.loading, .release):
            return .none  // scrolling while loading changes nothing
        default:
            state = target
        }
        return Self.cue(from: from, to: target).map(Action.play) ?? .none
    }

    /// Forces a state without any cue (a view that appears while a load is under way).
    public mutating func force(_ target: RefreshState) { state = target }

    /// The cue of a transition, or nil for a silent one.
    public static func cue(from: RefreshState, to: RefreshState) -> String? {
        switch (from, to) {
        case (.idle, .release), (.pull, .release): return "psst1"
        case (.release, .pull): return "pop"
        case (.idle, .loading), (.pull, .loading), (.release, .loading): return "psst2"
        case (.loading, .idle): return "pop"
        case (.idle, .idle), (.pull, .pull), (.release, .release), (.loading, .loading): return nil
        case (.loading, .pull), (.loading, .release): return nil
        case (.idle, .pull), (.pull, .idle), (.release, .idle): return nil
        }
    }
}
