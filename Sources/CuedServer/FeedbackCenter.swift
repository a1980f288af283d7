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
    /// The app label of notification sounds (`mute app notifications`, `profile app notifications …`).
    static let notificationsApp = "notifications"

    private let daemon: Daemon
    private let clients: ClientTable
    private let signals: any FeedbackSignals
    private let logger: Logger
    private(set) var status = Status.Bus()

    /// A feedback's sound, from the trigger to its one FeedbackEnded.
    enum Stage: Equatable {
        /// Being looked up or decoded; `endAsked`: EndFeedback (or the client's leaving) came meanwhile.
        case starting(endAsked: Bool)
        case sounding(voice: UInt64)

        /// Its end is asked: the voice to stop now, if it sounds (else it stops once it starts).
        mutating func askEnd() -> UInt64? {
            switch self {
            case .starting: self = .starting(endAsked: true); return nil
            case .sounding(let voice): return voice
            }
        }
    }

    private struct Live {
        var sender: String
        var timeout: Int32
        var important = false
        var stage = Stage.starting(endAsked: false)
    }
    private var live: [UInt32: Live] = [:]
    private var byVoice: [UInt64: UInt32] = [:]
    /// cued's own client, for notification sounds (in the client table, outside its cap).
    private let notificationClient: ClientID
    private var notifications: NotificationPolicy

    init(daemon: Daemon, signals: any FeedbackSignals, logger: Logger, now: UInt64 = MonotonicClock.now()) {
        self.daemon = daemon
        clients = daemon.clients
        self.signals = signals
        self.logger = logger
        notificationClient = clients.admit(.cued, now: now, limits: daemon.limits, letGo: { _ in })!
        clients.update(notificationClient) { $0.app = Self.notificationsApp }
        notifications = NotificationPolicy(now: now)
    }

    var liveCount: Int { live.count }

    func statusChanged(_ s: BusStatus) {
        status.connection = s.connection.rawValue
        status.feedback = s.feedback.rawValue
        status.notifications = s.notifications
        status.error = s.error
    }

    /// What the desktop says about sound (the Settings portal), as the bus last told; the daemon follows it.
    private(set) var desktopSaid = DesktopSound()
    func desktopChanged(_ d: DesktopSound) {
        let old = desktopSaid
        desktopSaid = d
        daemon.desktopChanged(from: old, to: d)
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
        guard let client = client(for: t.sender, now: now) else {
            logger.info("feedback not played: no room for another client", metadata: ["feedback.id": "\(t.id)", "sender": "\(t.sender)"])
            finish(t.id, .notFound)
            return
        }
        clients.touch(client, now: now, busy: true)
        let play = clients.update(client) { c in
            c.events = true
            c.app = Label.isValid(t.appID) ? t.appID : nil
            return daemon.play(sound, options, &c, at: now)
        }
        play?.whenDone { [self] result in started(t.id, result) }
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
        guard let f = live[id] else { return }
        guard let voice = result.voice else {
            // Muted, silent, disabled, refused, not found: nothing sounds.
            logger.debug("feedback not played", metadata: ["feedback.id": "\(id)", "reply": "\(Replies.reply(result, PlayOptions()).line)"])
            finish(id, .notFound)
            return
        }
        live[id]!.stage = .sounding(voice: voice)
        byVoice[voice] = id
        if f.stage == .starting(endAsked: true) { daemon.stopVoice(voice) }
    }

    /// EndFeedback, a client's leaving, the silent profile: the voice stops (once it started).
    private func askEnd(_ id: UInt32) {
        if let voice = live[id]?.stage.askEnd() { daemon.stopVoice(voice) }
    }

    func end(_ id: UInt32) { askEnd(id) }

    /// A client left the bus ("*": the bus itself went away): its loops end (a
    /// crashed phone app must not ring on); a sound played once plays out, so a
    /// script may trigger one and exit (feedbackd would cut it off). Its client stays
    /// in the table, leaving, until its last feedback's end is told.
    func left(_ sender: String) {
        for (id, f) in live where (sender == "*" || f.sender == sender) && f.timeout >= 0 { askEnd(id) }
        for s in sender == "*" ? clients.busSenders : [sender] {
            guard let client = clients.bus(s) else { continue }
            if live.values.contains(where: { $0.sender == s }) { clients.update(client) { $0.state = .leaving } } else { clients.remove(client) }
        }
    }

    /// The table let `sender`'s client go to make room: its feedbacks end now (their ends
    /// would have nowhere to go).
    private func letGo(_ sender: String) {
        for (id, f) in live where f.sender == sender {
            if case .sounding(let voice) = f.stage { daemon.stopVoice(voice) }
            finish(id, .explicit)
        }
    }

    private func voiceEnded(_ end: VoiceEnd) {
        guard let id = byVoice.removeValue(forKey: end.id), let f = live[id] else { return }
        finish(id, Self.reason(end.reason, timeout: f.timeout))
    }

    /// The one FeedbackEnded of a feedback; a client with none left is idle, or, leaving, gone.
    private func finish(_ id: UInt32, _ reason: FeedbackEndReason) {
        guard let f = live.removeValue(forKey: id) else { return }
        if case .sounding(let voice) = f.stage { byVoice[voice] = nil }
        signals.feedbackEnded(id, reason: reason)
        guard let client = clients.bus(f.sender), !live.values.contains(where: { $0.sender == f.sender }) else { return }
        if clients[client]?.state == .leaving { clients.remove(client) } else { clients.touch(client, now: MonotonicClock.now(), busy: false) }
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

    /// The sender's client (its own id and rate limits; its voices' ends come here),
    /// admitted into the client table if it is new; nil if the table has no room.
    private func client(for sender: String, now: UInt64) -> ClientID? {
        if let id = clients.bus(sender) {
            clients.update(id) { $0.state = .active }
            return id
        }
        return clients.admit(.bus(sender: sender), now: now, limits: daemon.limits,
                             letGo: { [unowned self] _ in letGo(sender) },
                             ends: { [unowned self] end in voiceEnded(end) })
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
            let play = clients.update(notificationClient) { c in daemon.play(what, options, &c, at: now) }
            play?.whenDone { [logger] result in
                if case .failed = result {
                    logger.info("notification sound not played", metadata: ["app": "\(n.appName)", "error": "\(Replies.reply(result, options).line)"])
                }
            }
        }
    }

    // MARK: - Profile

    /// The profile became silent: feedbacks still sounding end (a ring tone stops),
    /// as feedbackd ends those the new profile does not allow; important ones go on.
    func profileChanged(_ p: Profile) {
        guard p == .silent else { return }
        for (id, f) in live where !f.important { askEnd(id) }
    }

    /// The `Profile` property set by `sender`, on that client's own state, so the limit on
    /// state changes (20 a second) holds as on the socket.
    func setProfile(_ name: String, sender: String, now: UInt64 = MonotonicClock.now()) {
        guard let p = Profile(rawValue: name), let client = client(for: sender, now: now) else { return }
        if let limit = clients.update(client, { c in daemon.setProfile(p, &c, at: now) }) ?? nil {
            logger.info("D-Bus: Profile not set", metadata: ["sender": "\(sender)", "error": "\(Replies.changeRefused(perSecond: limit).line)"])
        }
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
    func desktopChanged(_ d: DesktopSound) { loop.execute { [center] in center.value?.desktopChanged(d) } }
}
