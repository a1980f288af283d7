import CuedConfig
import CuedCore
import CuedProtocol
import Logging
import NIOCore

/// Where a feedback's end goes: the FeedbackEnded signal (the bus thread), or a test's list.
protocol FeedbackSignals: AnyObject, Sendable {
    func feedbackEnded(_ id: UInt32, reason: FeedbackEndReason)
    func profileChanged(_ name: String)
}

extension DesktopBus: FeedbackSignals {}

/// The loop's side of the D-Bus face: each TriggerFeedback becomes a voice
/// through the daemon's typed calls (`Daemon.play`, `Daemon.stop`: mute,
/// profiles, rate limits, the decoding lane and the voice ledger apply as to
/// any client; each bus client is a client of its own), and each
/// voice's one end becomes exactly one FeedbackEnded. Notify calls become a
/// notification sound (`NotificationPolicy`). Loop-confined.
///
/// An event's sound, as feedbackd finds it: at the effective level (the
/// profile, the app's, the event's `profile` hint lower still; an `important`
/// event from an app in `[profiles] important_apps` keeps its own level), a
/// `sound-file` hint at `full`; else the feedbackd theme's sound feedback for
/// the event at that level or below (a theme that knows the event but has no
/// sound there: nothing, as feedbackd); else, for events the theme does not
/// know, a cue of that name, else a sound of the sound theme.
final class FeedbackCenter {
    /// Client ids of the bus's clients count down from here (sockets count up from 1).
    static let firstClientID = UInt64.max - 1
    /// The app label of notification sounds (`mute app notifications`, `profile app notifications …`).
    static let notificationsApp = "notifications"
    /// D-Bus clients whose rate limits are kept (the least recent is forgotten).
    static let maxClients = 256

    private let daemon: Daemon
    private let signals: any FeedbackSignals
    private let logger: Logger
    private(set) var status = Status.Bus()

    private struct Live {
        var sender: String
        var timeout: Int32
        var important = false
        /// Set once the sound started.
        var voice: UInt64?
        /// EndFeedback came before the sound started (it was being decoded).
        var endAsked = false
    }
    private var live: [UInt32: Live] = [:]
    private var byVoice: [UInt64: UInt32] = [:]
    /// Each D-Bus client as a client of its own: its own id, rate limits and voices' ends.
    private var clients: [String: Daemon.ConnectionState] = [:]
    private var clientOrder: [String] = []
    private var nextClientID = FeedbackCenter.firstClientID - 1
    /// Clients forgotten while a feedback of theirs was live: their client id, until it ends.
    private var forgotten: [String: UInt64] = [:]
    private var notificationConnection: Daemon.ConnectionState
    private var notifications: NotificationPolicy

    init(daemon: Daemon, signals: any FeedbackSignals, logger: Logger, now: UInt64 = MonotonicClock.now()) {
        self.daemon = daemon
        self.signals = signals
        self.logger = logger
        notificationConnection = Daemon.ConnectionState(limits: daemon.limits, now: now)
        notificationConnection.id = Self.firstClientID
        notificationConnection.app = Self.notificationsApp
        notificationConnection.trustsImportant = true
        notifications = NotificationPolicy(now: now)
    }

    var liveCount: Int { live.count }

    func statusChanged(_ s: BusStatus) {
        status.connection = s.connection.rawValue
        status.feedback = s.feedback.rawValue
        status.notifications = s.notifications
        status.error = s.error
    }

    /// `status`'s view: with the number of live feedbacks.
    var busStatus: Status.Bus {
        var s = status
        s.live = live.count
        return s
    }

    // MARK: - org.sigxcpu.Feedback

    func trigger(_ t: FeedbackTrigger, now: UInt64 = MonotonicClock.now()) {
        live[t.id] = Live(sender: t.sender, timeout: t.timeout, important: t.important)
        guard let (sound, options) = resolve(t) else {
            finish(t.id, .notFound)
            return
        }
        var conn = connection(for: t.sender, app: t.appID, now: now)
        let play = daemon.play(sound, options, &conn, at: now)
        clients[t.sender] = conn
        play.whenDone { [self] result in started(t.id, result) }
    }

    /// The sound that plays the event, and how, or nil when there is none at its level.
    func resolve(_ t: FeedbackTrigger) -> (Daemon.Sound, PlayOptions)? {
        let hint = t.profile.flatMap(Profile.init(rawValue:)) ?? .full
        let level = daemon.feedbackLevel(app: t.appID, hint: hint, important: t.important)
        var options = PlayOptions(wantsID: true)
        options.loop = t.timeout == 0 ? .forever : t.timeout > 0 ? .seconds(Double(t.timeout)) : .once
        options.important = t.important
        if let file = t.soundFile, level == .full {
            return file.hasPrefix("/") ? (.file(file), options) : nil
        }
        switch daemon.current.feedbackTheme.lookup(t.event, at: level) {
        case .sound(.effect(let name)): return Label.isValid(name) ? (.named(name), options) : nil
        case .sound(.file(let path)): return path.hasPrefix("/") ? (.file(path), options) : nil
        case .noSound: return nil
        case .unknown:
            guard level > .silent, Label.isValid(t.event) else { return nil }
            return (.named(t.event), options)
        }
    }

    private func started(_ id: UInt32, _ result: PlayResult) {
        guard live[id] != nil else { return }
        guard let voice = result.voice else {
            // Muted, silent, disabled, refused, not found: nothing sounds.
            if case .refused(let code, let message) = result {
                logger.debug("feedback not played", metadata: ["feedback.id": "\(id)", "error": "\(code.rawValue) \(message)"])
            }
            finish(id, .notFound)
            return
        }
        live[id]!.voice = voice
        byVoice[voice] = id
        if live[id]!.endAsked { stopVoice(voice, sender: live[id]!.sender) }
    }

    func end(_ id: UInt32) {
        guard let f = live[id] else { return }
        if let voice = f.voice { stopVoice(voice, sender: f.sender) } else { live[id]!.endAsked = true }
    }

    /// A client left the bus ("*": the bus itself went away): its loops end (a
    /// crashed phone app must not ring on); a sound played once plays out, so a
    /// script may trigger one and exit (feedbackd would cut it off).
    func left(_ sender: String) {
        if sender != "*" { forget(sender); clientOrder.removeAll { $0 == sender } }
        for (id, f) in live where (sender == "*" || f.sender == sender) && f.timeout >= 0 {
            if let voice = f.voice { stopVoice(voice, sender: f.sender) } else { live[id]!.endAsked = true }
        }
    }

    private func stopVoice(_ voice: UInt64, sender: String) {
        var conn = clients[sender] ?? Daemon.ConnectionState(limits: Daemon.Limits())
        _ = daemon.stop(.id(voice), &conn)
    }

    private func voiceEnded(_ end: VoiceEnd) {
        guard let id = byVoice.removeValue(forKey: end.id), let f = live[id] else { return }
        finish(id, Self.reason(end.reason, timeout: f.timeout))
    }

    /// The one FeedbackEnded of a feedback.
    private func finish(_ id: UInt32, _ reason: FeedbackEndReason) {
        guard let f = live.removeValue(forKey: id) else { return }
        signals.feedbackEnded(id, reason: reason)
        if let client = forgotten[f.sender], !live.values.contains(where: { $0.sender == f.sender }) {
            forgotten[f.sender] = nil
            daemon.stopObservingEnds(connection: client)
        }
    }

    static func reason(_ r: VoiceEndReason, timeout: Int32) -> FeedbackEndReason {
        switch r {
        case .played: return timeout > 0 ? .expired : .natural
        case .stoppedByID, .stoppedByOwner, .stoppedAll, .muted: return .explicit
        case .busy, .late: return .notFound
        case .stolen: return .explicit  // cued ended it (a newer cue took its voice)
        case .cut, .shutdown, .disconnected: return .natural
        }
    }

    /// The sender's client state (its id, its rate limits; its voices' ends come here),
    /// its app label set.
    private func connection(for sender: String, app: String, now: UInt64) -> Daemon.ConnectionState {
        var conn: Daemon.ConnectionState
        if let c = clients[sender] { conn = c } else {
            conn = Daemon.ConnectionState(limits: daemon.limits, now: now)
            conn.id = nextClientID
            nextClientID -= 1
            if clientOrder.count >= Self.maxClients { forget(clientOrder.removeFirst()) }
            clientOrder.append(sender)
            daemon.observeEnds(connection: conn.id) { [unowned self] end in self.voiceEnded(end) }
        }
        conn.events = true
        conn.app = Label.isValid(app) ? app : nil
        return conn
    }

    /// A client the face no longer keeps: its ends are no longer observed once none of
    /// its feedbacks is live (those end as they would have).
    private func forget(_ sender: String) {
        guard let c = clients.removeValue(forKey: sender) else { return }
        if live.values.contains(where: { $0.sender == sender }) { forgotten[sender] = c.id } else { daemon.stopObservingEnds(connection: c.id) }
    }

    // MARK: - Notifications

    func notified(_ n: NotificationSeen, now: UInt64 = MonotonicClock.now()) {
        status.notificationsSeen += 1
        let setting = daemon.current.config.notifications
        let silent = daemon.feedbackLevel(app: Self.notificationsApp, hint: .full, important: false) == .silent
        switch notifications.decide(n, setting: setting, silent: silent, now: now) {
        case .none(let why):
            logger.debug("notification: no sound", metadata: ["app": "\(n.appName)", "why": "\(why)"])
        case .play(let sound, let critical):
            var options = PlayOptions()
            // A critical one in silent (critical_in_silent): the policy let it through, the profile must too.
            options.important = critical
            let what: Daemon.Sound
            if sound.hasPrefix("/") { what = .file(sound) } else if Label.isValid(sound) { what = .named(sound) } else {
                logger.debug("notification: not a sound name", metadata: ["app": "\(n.appName)"])
                return
            }
            daemon.play(what, options, &notificationConnection, at: now).whenDone { [logger] result in
                if case .refused(let code, let message) = result {
                    logger.info("notification sound not played", metadata: ["app": "\(n.appName)", "error": "\(code.rawValue) \(message)"])
                }
            }
        }
    }

    // MARK: - Profile

    /// The profile became silent: feedbacks still sounding end (a ring tone stops),
    /// as feedbackd ends those the new profile does not allow; important ones go on.
    func profileChanged(_ p: Profile) {
        guard p == .silent else { return }
        for (id, f) in live where !f.important {
            if let voice = f.voice { stopVoice(voice, sender: f.sender) } else { live[id]!.endAsked = true }
        }
    }

    /// The `Profile` property set by `sender`, on that client's own state, so the limit on
    /// state changes (20 a second) holds as on the socket.
    func setProfile(_ name: String, sender: String, now: UInt64 = MonotonicClock.now()) {
        guard let p = Profile(rawValue: name) else { return }
        var conn = connection(for: sender, app: "", now: now)
        if case .refused(let code, let message)? = daemon.setProfile(p, &conn, at: now) {
            logger.info("D-Bus: Profile not set", metadata: ["sender": "\(sender)", "error": "\(code.rawValue) \(message)"])
        }
        clients[sender] = conn
    }
}

/// The bus thread's way into the loop: every call hops there and returns at once.
/// The center is made on the loop once the bus exists (each needs the other); until then calls find none.
final class BusBridge: DesktopBusHost {
    let center: NIOLoopBoundBox<FeedbackCenter?>
    private let loop: any EventLoop
    init(loop: any EventLoop) {
        self.loop = loop
        center = NIOLoopBoundBox.makeEmptyBox(valueType: FeedbackCenter.self, eventLoop: loop)
    }

    func trigger(_ t: FeedbackTrigger) { loop.execute { [center] in center.value?.trigger(t) } }
    func end(_ id: UInt32) { loop.execute { [center] in center.value?.end(id) } }
    func setProfile(_ name: String, sender: String) { loop.execute { [center] in center.value?.setProfile(name, sender: sender) } }
    func notified(_ n: NotificationSeen) { loop.execute { [center] in center.value?.notified(n) } }
    func left(_ sender: String) { loop.execute { [center] in center.value?.left(sender) } }
    func statusChanged(_ s: BusStatus) { loop.execute { [center] in center.value?.statusChanged(s) } }
}
