/// The D-Bus face's life on the session bus, as one clocked state machine: no I/O, no clock
/// reads. The bus thread (`DesktopBus`) feeds it what happened, with the time, and carries
/// out the actions it returns; between events it sleeps until `deadline` (or until the bus
/// socket appears, or a message comes). Times are monotonic nanoseconds.
///
///     stopped ──start──▶ absent(retry now) ──connect ok──▶ connected
///                          ▲   │ connect failed: again at retryAt (0.5 s doubling to 60 s),
///                          │   │ or when the bus socket appears (watched: no timer at all)
///                          │   ▼
///                          └── absent ◀──lost (the bus went away: its clients' loops end)── connected
///     any ──stop──▶ finished (off the bus, the name back to the queue, the thread ends)
///
/// What the machine keeps in each state is what `status`'s `bus` shows: the last failure
/// while absent, the feedback name and the notification watch while connected.
struct BusMachine {
    struct Settings: Sendable, Equatable {
        var retryFirstNs: UInt64 = 500_000_000
        var retryMaxNs: UInt64 = 60_000_000_000
        /// `[notifications] enabled`: what status says while there is no bus to watch on.
        var notifications = false
        init() {}
    }

    /// Why there is no bus, and when to try again.
    struct Absent: Equatable {
        var error: String?
        /// The next attempt; nil: when the bus's socket appears (watched).
        var retryAt: UInt64?
        /// The wait after the next failure.
        var backoffNs: UInt64
    }

    /// On the bus: what was granted.
    struct Connected: Equatable {
        var feedback: BusStatus.Name
        var notifications: String
    }

    enum State: Equatable {
        /// Not started yet (`start`).
        case stopped
        case absent(Absent)
        case connected(Connected)
        /// Stopped for good: the thread ends.
        case finished
    }

    enum Event: Equatable {
        case start
        /// `deadline` has come.
        case timer
        /// The bus's socket was created (the watch saw it).
        case socketAppeared
        /// Connected, the name asked for (`feedback`) and the notification watch set up (`notifications`).
        case connected(feedback: BusStatus.Name, notifications: String)
        /// No bus, or it refused: why, whether its socket is there now, and whether its
        /// directory is watched (then a missing socket is waited for, not polled).
        case connectFailed(String, socketThere: Bool, watching: Bool)
        /// The connection broke (the bus went away, or closed it).
        case lost(String, socketThere: Bool, watching: Bool)
        /// org.sigxcpu.Feedback: acquired (owner) or taken by another process (queued).
        case name(BusStatus.Name)
        /// The notification monitor's news (`lost` when its connection broke).
        case notifications(String)
        case stop
    }

    enum Action: Equatable {
        /// Connect, and answer `connected` or `connectFailed`.
        case connect
        /// Close the connection (and its monitor); `lost`: why, to log.
        case disconnect(lost: String?)
        /// The bus's clients are gone (the bus went, or the name did): their loops end.
        case endClientFeedbacks
        /// Stop watching the bus socket's directory (connected, or stopped). The shell arms the
        /// watch itself before it reports a failure, and says whether it could (`watching`).
        case unwatchSocket
        /// `status`'s `bus` changed.
        case publish(BusStatus)
        /// The thread ends.
        case exit
    }

    let settings: Settings
    private(set) var state = State.stopped

    init(settings: Settings = Settings()) { self.settings = settings }

    /// When to send `timer`; nil: only on an event.
    var deadline: UInt64? {
        if case .absent(let a) = state { return a.retryAt }
        return nil
    }

    /// What `status` shows now.
    var status: BusStatus {
        var s = BusStatus()
        switch state {
        case .stopped, .finished:
            break
        case .absent(let a):
            s.connection = .absent
            s.error = a.error
            s.notifications = settings.notifications ? "off (no bus)" : "off"
        case .connected(let c):
            s.connection = .connected
            s.feedback = c.feedback
            s.notifications = c.notifications
        }
        return s
    }

    mutating func handle(_ event: Event, now: UInt64) -> [Action] {
        let before = status
        var actions = transition(event, now: now)
        // First: a `connect` carried out next feeds the machine again, and what it publishes must come last.
        if status != before, state != .finished { actions.insert(.publish(status), at: 0) }
        return actions
    }

    private mutating func transition(_ event: Event, now: UInt64) -> [Action] {
        switch (state, event) {
        case (_, .stop):
            let wasConnected = if case .connected = state { true } else { false }
            state = .finished
            return (wasConnected ? [.disconnect(lost: nil)] : []) + [.unwatchSocket, .publish(BusStatus()), .exit]
        case (.finished, _):
            return []
        case (.stopped, .start):
            state = .absent(Absent(error: nil, retryAt: now, backoffNs: settings.retryFirstNs))
            return [.connect]
        case (.stopped, _):
            return []

        case (.absent(let a), .timer):
            guard let at = a.retryAt, now >= at else { return [] }
            return [.connect]
        case (.absent(let a), .socketAppeared) where a.retryAt == nil:
            return [.connect]
        case (.absent(let a), .connectFailed(let error, let socketThere, let watching)):
            state = .absent(Self.retry(a.backoffNs, error: error, socketThere: socketThere, watching: watching, now: now, max: settings.retryMaxNs))
            return []
        case (.absent, .connected(let feedback, let notifications)):
            state = .connected(Connected(feedback: feedback, notifications: notifications))
            return [.unwatchSocket]
        case (.absent, _):
            return []

        case (.connected, .lost(let error, let socketThere, let watching)):
            state = .absent(Self.retry(settings.retryFirstNs, error: error, socketThere: socketThere, watching: watching, now: now,
                                       max: settings.retryMaxNs))
            return [.disconnect(lost: error), .endClientFeedbacks]
        case (.connected(var c), .name(let name)):
            c.feedback = name
            state = .connected(c)
            // Its clients' EndFeedback now goes to the new owner: loops here could never be ended.
            return name == .queued ? [.endClientFeedbacks] : []
        case (.connected(var c), .notifications(let n)):
            c.notifications = n
            state = .connected(c)
            return []
        case (.connected, _):
            return []
        }
    }

    /// The next attempt after a failure: when the socket appears if it is missing and
    /// watched (an idle cued without a bus never wakes), else after the back-off, which doubles.
    private static func retry(_ backoff: UInt64, error: String, socketThere: Bool, watching: Bool, now: UInt64,
                              max: UInt64) -> Absent {
        if watching && !socketThere { return Absent(error: error, retryAt: nil, backoffNs: backoff) }
        return Absent(error: error, retryAt: now + backoff, backoffNs: min(backoff * 2, max))
    }
}
