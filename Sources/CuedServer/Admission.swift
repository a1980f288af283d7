import CuedCore
import CuedProtocol

/// A reason a play does not sound, named: what the voice broker's admission found.
/// `play` stops at the first; `why` lists every one that holds, in `Admission.rules` order.
enum Hold: Equatable, Sendable {
    /// The global mute.
    case muted
    /// The app's own mute (`mute app NAME`, `[apps.NAME] muted`).
    case appMuted(String)
    /// The global profile is `silent`.
    case silent
    /// The app's own profile is `silent`.
    case appSilent(String)
    /// The client's rate limit of cues, this many a second.
    case rateLimited(perSecond: Double)
    /// The cue's cooldown (`drop`): this long (ns) until it may start again.
    case cooldown(cue: String, leftNs: UInt64)
    /// The desktop's event sounds are off (`DesktopRules`): a libcanberra client's sound, or
    /// the desktop's own sources (feedbackd's events, notification sounds) as in `silent`.
    case eventSoundsOff(from: String)
    /// The desktop's input-feedback sounds are off: a libcanberra client's input-feedback sound.
    case inputFeedbackOff(sound: String, from: String)
    /// The desktop's Do Not Disturb: its own sources as in `silent`.
    case doNotDisturb(from: String)
    /// SIGTERM: cued is stopping, and a new cue would be cut off.
    case stopping

    /// The rule's name: a machine word for `why` and the log.
    var name: String {
        switch self {
        case .muted: "muted"
        case .appMuted: "app-muted"
        case .silent: "profile"
        case .appSilent: "app-profile"
        case .rateLimited: "rate-limit"
        case .cooldown: "cooldown"
        case .eventSoundsOff: "event-sounds"
        case .inputFeedbackOff: "input-feedback"
        case .doNotDisturb: "do-not-disturb"
        case .stopping: "stopping"
        }
    }
}

/// A play as admission weighs it.
struct PlayAsk: Sendable {
    var app: String?
    var important = false
    /// cued itself decided the play is important (a critical notification in silent).
    var trusted = false
    /// A bank cue's name and design (its cooldown); nil for theme sounds and files.
    var cue: String?
    var design = CueDesign()
    /// The sound's name (a bank cue's or a theme sound's; nil for a file): the desktop's input feedback.
    var sound: String?

    init(_ options: PlayOptions, client: Client, cue: String? = nil, design: CueDesign = CueDesign(), sound: String? = nil) {
        app = client.app
        important = options.important
        trusted = client.trustsImportant
        self.cue = cue
        self.design = design
        self.sound = sound ?? cue
    }
}

/// What admission looks at, as it is at one moment: the switches, the cue picker's
/// cooldowns, the stop flag. Passed in whole, so admission is a pure function of it.
struct AdmissionView {
    var mutes: MuteState
    var profiles: ProfileState
    var picker: CuePicker.Cooldowns
    var stopping: Bool
    var now: UInt64
    /// The desktop's sound settings in force (nothing said: they hold nothing back).
    var desktop = DesktopRules.none
}

/// The voice broker's admission: an ordered list of named rules, each a pure check of a
/// play, its client and the moment. `first` is what `play` asks (the first reason to hold
/// a play back, or nil); `all` is what `why` asks (every reason, in order). A new reason
/// (the desktop's event sounds switch, Do Not Disturb…) is one more rule and `Hold` case,
/// in the place of the list where it should win over the ones after it.
enum Admission {
    struct Rule: Sendable {
        let name: String
        let check: @Sendable (_ ask: PlayAsk, _ client: Client, _ view: AdmissionView) -> Hold?
    }

    /// Mute is the stronger switch (a muted app plays nothing, `important` or not); then
    /// the profiles (an `important` play of an allow-listed app, or cued's own, passes
    /// them); then the client's rate limit; then the cue's cooldown; then the desktop's
    /// switches (event sounds, input feedback, Do Not Disturb); last, SIGTERM.
    static let rules: [Rule] = [
        Rule(name: "muted") { _, _, v in v.mutes.muted ? .muted : nil },
        Rule(name: "app-muted") { a, _, v in a.app.flatMap { v.mutes.appMuted($0) ? .appMuted($0) : nil } },
        Rule(name: "profile") { a, _, v in passesProfiles(a, v) || v.profiles.global != .silent ? nil : .silent },
        Rule(name: "app-profile") { a, _, v in
            guard !passesProfiles(a, v), let app = a.app, v.profiles.appProfile(app) == .silent else { return nil }
            return .appSilent(app)
        },
        Rule(name: "rate-limit") { _, c, v in
            guard let bucket = c.plays, !bucket.wouldTake(now: v.now) else { return nil }
            return .rateLimited(perSecond: bucket.rate)
        },
        Rule(name: "cooldown") { a, _, v in
            guard let cue = a.cue, a.design.cooldown == .drop, let left = v.picker.left(cue, a.design, now: v.now) else { return nil }
            return .cooldown(cue: cue, leftNs: left)
        },
        // The desktop's switches, for the sources they govern (DesktopRules: socket cues are not).
        Rule(name: "event-sounds") { a, c, v in v.desktop.eventSoundsHold(DesktopRules.source(c), passes: passesProfiles(a, v)) },
        Rule(name: "input-feedback") { a, c, v in v.desktop.inputFeedbackHold(DesktopRules.source(c), sound: a.sound) },
        Rule(name: "do-not-disturb") { a, c, v in v.desktop.doNotDisturbHold(DesktopRules.source(c), passes: passesProfiles(a, v)) },
        Rule(name: "stopping") { _, _, v in v.stopping ? .stopping : nil },
    ]

    /// The first reason to hold the play back, or nil if it may start.
    static func first(_ ask: PlayAsk, _ client: Client, _ view: AdmissionView) -> Hold? {
        for rule in rules { if let hold = rule.check(ask, client, view) { return hold } }
        return nil
    }

    /// Every reason that holds the play back, in order (`why`).
    static func all(_ ask: PlayAsk, _ client: Client, _ view: AdmissionView) -> [Hold] {
        rules.compactMap { $0.check(ask, client, view) }
    }

    /// An `important` play of an app the config allows (or cued's own) passes every profile,
    /// as feedbackd's allow-important does.
    static func passesProfiles(_ ask: PlayAsk, _ view: AdmissionView) -> Bool {
        ask.important && (ask.trusted || view.profiles.passes(app: ask.app, important: true))
    }

    /// The gain (dB) the profile adds to an admitted play: the `quiet` profile's cut, or 0.
    static func gainDB(_ ask: PlayAsk, _ view: AdmissionView) -> Double {
        if passesProfiles(ask, view) { return 0 }
        return view.profiles.effective(app: ask.app) == .quiet ? view.profiles.settings.quietGainDB : 0
    }
}
