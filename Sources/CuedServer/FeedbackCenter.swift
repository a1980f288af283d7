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
/// through the daemon's own verbs (so mute, profiles, rate limits, the
/// decoding lane and the voice ledger apply as to any client), and each
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
    /// The connection id of every voice the bus starts (no socket has it).
    static let connectionID = UInt64.max - 1
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
    /// Each D-Bus client as a connection of its own: its own rate limits.
    private var clients: [String: Daemon.ConnectionState] = [:]
    private var clientOrder: [String] = []
    private var notificationConnection: Daemon.ConnectionState
    private var notifications: NotificationPolicy

    init(daemon: Daemon, signals: any FeedbackSignals, logger: Logger, now: UInt64 = MonotonicClock.now()) {
        self.daemon = daemon
        self.signals = signals
        self.logger = logger
        notificationConnection = Daemon.ConnectionState(limits: daemon.limits, now: now)
        notificationConnection.id = Self.connectionID
        notificationConnection.app = Self.notificationsApp
        notificationConnection.trustsImportant = true
        notifications = NotificationPolicy(now: now)
        daemon.observeEnds(connection: Self.connectionID) { [unowned self] end in self.voiceEnded(end) }
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
        guard let request = resolve(t) else {
            finish(t.id, .notFound)
            return
        }
        var conn = connection(for: t.sender, app: t.appID, now: now)
        let response = daemon.respond(to: request, connection: &conn, receivedAt: now)
        clients[t.sender] = conn
        switch response {
        case .now(let reply), .close(let reply): started(t.id, reply)
        case .later(let future): future.assumeIsolated().whenComplete { [self] result in
            switch result {
            case .success(let reply): started(t.id, reply)
            case .failure: finish(t.id, .notFound)
            }
        }
        case .whenReady(let ready, _, let render): ready.assumeIsolated().whenComplete { [self] _ in started(t.id, render.value()) }
        }
    }

    /// The request that plays the event's sound, or nil when there is none at its level.
    func resolve(_ t: FeedbackTrigger) -> Request? {
        let hint = t.profile.flatMap(Profile.init(rawValue:)) ?? .full
        let level = daemon.feedbackLevel(app: t.appID, hint: hint, important: t.important)
        var options = PlayOptions(wantsID: true)
        options.loop = t.timeout == 0 ? .forever : t.timeout > 0 ? .seconds(Double(t.timeout)) : .once
        options.important = t.important
        if let file = t.soundFile, level == .full {
            return file.hasPrefix("/") ? .playFile(path: file, options: options) : nil
        }
        switch daemon.current.feedbackTheme.lookup(t.event, at: level) {
        case .sound(.effect(let name)): return Label.isValid(name) ? .play(cue: name, options: options) : nil
        case .sound(.file(let path)): return path.hasPrefix("/") ? .playFile(path: path, options: options) : nil
        case .noSound: return nil
        case .unknown:
            guard level > .silent, Label.isValid(t.event) else { return nil }
            return .play(cue: t.event, options: options)
        }
    }

    private func started(_ id: UInt32, _ reply: Reply) {
        guard live[id] != nil else { return }
        guard case .ok(let text?) = reply, let voice = UInt64(text) else {
            // Muted, silent, disabled, refused, not found: nothing sounds.
            if case .err(let code, let message) = reply {
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
        if sender != "*" { clients.removeValue(forKey: sender); clientOrder.removeAll { $0 == sender } }
        for (id, f) in live where (sender == "*" || f.sender == sender) && f.timeout >= 0 {
            if let voice = f.voice { stopVoice(voice, sender: f.sender) } else { live[id]!.endAsked = true }
        }
    }

    private func stopVoice(_ voice: UInt64, sender: String) {
        var conn = clients[sender] ?? Daemon.ConnectionState(limits: Daemon.Limits())
        _ = daemon.respond(to: .stop(.id(voice)), connection: &conn, receivedAt: MonotonicClock.now())
    }

    private func voiceEnded(_ end: VoiceEnd) {
        guard let id = byVoice.removeValue(forKey: end.id), let f = live[id] else { return }
        finish(id, Self.reason(end.reason, timeout: f.timeout))
    }

    /// The one FeedbackEnded of a feedback.
    private func finish(_ id: UInt32, _ reason: FeedbackEndReason) {
        guard live.removeValue(forKey: id) != nil else { return }
        signals.feedbackEnded(id, reason: reason)
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

    /// The sender's connection state (its rate limits), its app label set.
    private func connection(for sender: String, app: String, now: UInt64) -> Daemon.ConnectionState {
        var conn: Daemon.ConnectionState
        if let c = clients[sender] { conn = c } else {
            conn = Daemon.ConnectionState(limits: daemon.limits, now: now)
            if clientOrder.count >= Self.maxClients { clients.removeValue(forKey: clientOrder.removeFirst()) }
            clientOrder.append(sender)
        }
        conn.id = Self.connectionID
        conn.events = true
        conn.app = Label.isValid(app) ? app : nil
        return conn
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
            let request: Request
            if sound.hasPrefix("/") { request = .playFile(path: sound, options: options) } else if Label.isValid(sound) {
                request = .play(cue: sound, options: options)
            } else {
                logger.debug("notification: not a sound name", metadata: ["app": "\(n.appName)"])
                return
            }
            let response = daemon.respond(to: request, connection: &notificationConnection, receivedAt: now)
            if case .later(let f) = response {
                f.whenSuccess { [logger] reply in
                    if case .err(let code, let message) = reply {
                        logger.info("notification sound not played", metadata: ["app": "\(n.appName)", "error": "\(code.rawValue) \(message)"])
                    }
                }
            } else if case .now(.err(let code, let message)) = response {
                logger.info("notification sound not played", metadata: ["app": "\(n.appName)", "error": "\(code.rawValue) \(message)"])
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

    /// The `Profile` property set by `sender`: the `profile` verb on that client's own
    /// connection state, so the limit on state changes (20 a second) holds as on the socket.
    func setProfile(_ name: String, sender: String, now: UInt64 = MonotonicClock.now()) {
        guard let p = Profile(rawValue: name) else { return }
        var conn = connection(for: sender, app: "", now: now)
        if case .now(.err(let code, let message)) = daemon.respond(to: .profile(p), connection: &conn, receivedAt: now) {
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
