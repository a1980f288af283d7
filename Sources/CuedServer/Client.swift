import CuedCore

/// A client's number in the client table: socket connections and bus clients count up
/// together from 1 (0: none).
typealias ClientID = UInt64

/// One client of the daemon, whoever it is: a socket connection, a D-Bus sender of the
/// feedback face, or cued's own notification sounds. Every request of any of them goes
/// through the same typed calls (`Daemon.play`, `stop`, `setProfile`) with its `Client`:
/// its app label, its rate limits, its refresh session, whether its voices' ends are
/// reported. A value: the `ClientTable` keeps it between requests (MPD's `Client`).
struct Client: Sendable {
    /// Who it is on the other end.
    enum Kind: Sendable, Equatable {
        /// A connection to cued's socket.
        case socket
        /// A sender of the D-Bus face (its unique bus name).
        case bus(sender: String)
        /// cued itself: notification sounds (its `important` plays are its own decision).
        case cued
    }

    /// Where it is in its life: a bus client that left while a feedback of its own still
    /// sounds stays in the table, `leaving`, until that feedback's end is told.
    enum State: Sendable, Equatable { case active, leaving }

    private(set) var id: ClientID = 0
    private(set) var kind: Kind = .socket
    var state: State = .active
    /// Its process (a socket's SO_PEERCRED pid; nil where it is not known, as on the bus).
    private(set) var pid: Int32?
    var app: String?
    /// The bridge the app's cues come through (`app NAME via=KIND`).
    var via: String?
    /// Cues it may still start (nil: no limit).
    var plays: TokenBucket?
    /// State changes it may still make (nil: no limit).
    var changes: TokenBucket?
    /// `events on`: the voices it starts report their end (a socket's `end ID REASON`).
    var events = false
    /// Its refresh session when it names none (`session NAME` picks a shared one).
    var privateSession = RefreshSession()
    var sessionName: String?
    /// Plays it was granted and refused (by any reason), for the log when it leaves.
    var granted = 0
    var refused = 0

    init(limits: Daemon.Limits = Daemon.Limits(), now: UInt64 = MonotonicClock.now()) {
        if limits.playsPerSecond > 0 { plays = TokenBucket(rate: limits.playsPerSecond, now: now) }
        if limits.changesPerSecond > 0 { changes = TokenBucket(rate: limits.changesPerSecond, now: now) }
    }

    init(_ kind: Kind, id: ClientID, pid: Int32? = nil, limits: Daemon.Limits, now: UInt64) {
        self.init(limits: limits, now: now)
        self.kind = kind
        self.id = id
        self.pid = pid
    }

    /// Whose voices its `stop` silences: the app's, else its own.
    var owner: String { app ?? "#\(id)" }

    /// Its `important` plays pass the profile whatever the app (cued's own decision).
    var trustsImportant: Bool { kind == .cued }
}
