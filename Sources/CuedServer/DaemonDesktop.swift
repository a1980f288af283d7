import CuedCore
import CuedProtocol

/// What the D-Bus face needs of the daemon's profiles.
extension Daemon {
    /// The bus's `Profile` property follows the daemon's profile, whoever changes it.
    func connectProfile(to bus: DesktopBus) {
        bus.setInitialProfile(switches.profile.rawValue)
        let previous = switches.onProfileChange
        switches.onProfileChange = { [unowned self] p in
            previous?(p)
            desktop?.profileChanged(p)
            bus.profileChanged(p.rawValue)
        }
    }
}

/// Following the desktop's sound settings (`DesktopRules`: what the desktop says, the config's
/// pins). Admission holds back what they govern (`Admission.rules`); here: the theme of a play
/// naming none, the level of feedbackd's events, the changes, and `status`.
extension Daemon {
    /// The settings in force now.
    var desktopRules: DesktopRules { DesktopRules(said: desktop?.desktopSaid ?? DesktopSound(), config: current.config) }

    /// The theme a play that names none is looked up in, when the desktop's is followed.
    var desktopTheme: ThemeChoice? { desktopRules.theme.map { ThemeChoice(name: $0.value) } }

    /// The level a feedbackd event (or a notification) plays at: the switches' (feedbackd's rule),
    /// `silent` while the desktop's Do Not Disturb is on or its event sounds are off, but for an
    /// important event of an app the config allows.
    func feedbackLevel(app: String?, hint: Profile, important: Bool) -> Profile {
        let level = switches.feedbackLevel(app: app, hint: hint, important: important)
        if switches.profiles.passes(app: app, important: important) { return level }
        return desktopRules.quietsDesktopSources != nil ? .silent : level
    }

    /// What the desktop says changed (the bus thread's news, on the loop): it applies to the plays
    /// that follow. Feedbacks still sounding end when the desktop goes quiet, as in `silent`.
    func desktopChanged(from old: DesktopSound, to d: DesktopSound) {
        let before = DesktopRules(said: old, config: current.config)
        let after = DesktopRules(said: d, config: current.config)
        let values = { (r: DesktopRules) in [r.themeInForce.value, "\(r.eventSounds.value)", "\(r.inputFeedbackSounds.value)", "\(r.doNotDisturb.value)"] }
        guard values(after) != values(before) else { return }
        logger.info("desktop settings", metadata: [
            "theme": "\(after.themeInForce.value)", "event_sounds": "\(after.eventSounds.value)",
            "input_feedback_sounds": "\(after.inputFeedbackSounds.value)", "do_not_disturb": "\(after.doNotDisturb.value)",
            "portal": "\(d.portal)"])
        if before.quietsDesktopSources == nil && after.quietsDesktopSources != nil { desktop?.profileChanged(.silent) }
    }

    /// `status`'s `desktop`.
    var desktopStatus: Status.Desktop {
        let r = desktopRules
        var s = Status.Desktop()
        s.portal = current.config.desktop.follow ? (desktop.map(\.desktopSaid.portal) ?? "off (the bus is off: [dbus] enabled = false)")
            : "off ([desktop] follow = false)"
        s.theme = .init(r.themeInForce.value, from: r.themeInForce.from)
        s.eventSounds = .init(r.eventSounds.value, from: r.eventSounds.from)
        s.inputFeedbackSounds = .init(r.inputFeedbackSounds.value, from: r.inputFeedbackSounds.from)
        s.doNotDisturb = .init(r.doNotDisturb.value, from: r.doNotDisturb.from)
        if let role = wirePlumber?.notificationRole {
            s.systemSounds = Self.kept(role, from: "WirePlumber's \(wirePlumber!.notificationFile) key \(WirePlumberState.notificationKey) (\(wirePlumber!.directory))")
        }
        return s
    }

    /// What WirePlumber keeps, as the bus thread last read it.
    var wirePlumber: WirePlumberState? { desktop?.desktopSaid.wirePlumber }

    static func kept(_ k: KeptVolume, from: String) -> Status.StreamVolume {
        var v = Status.StreamVolume()
        (v.volume, v.mute, v.channelVolumes, v.from) = (k.volume, k.mute, k.channelVolumes, from)
        return v
    }

    /// `status`'s `sink.stream`: cued's stream as the graph set it, and where that comes from.
    var streamStatus: Status.StreamVolume {
        let p = streamProps.snapshot
        var s = Status.StreamVolume()
        (s.open, s.nodeID, s.volume, s.mute, s.channelVolumes) = (p.open, p.nodeID, p.volume, p.mute, p.channelVolumes)
        s.from = StreamOrigin.describe(spec: engine.sinkSpec, props: p, kept: wirePlumber?.notificationRole)
        return s
    }

    /// `status`'s `sink.output_volume`: the volume WirePlumber keeps for the sink cued plays to, if any.
    var outputVolumeStatus: Status.StreamVolume? {
        guard let (name, v) = outputSink, let wp = wirePlumber else { return nil }
        return Self.kept(v, from: "WirePlumber's saved volume of the sink \(name) (\(wp.directory))")
    }

    /// The sink cued plays to and the volume WirePlumber keeps for it, where cued can tell (a
    /// sound server's output; WirePlumber keeps null and virtual sinks' volumes, not a card's).
    var outputSink: (name: String, volume: KeptVolume)? {
        let spec = engine.sinkSpec
        guard spec.hasPrefix("pipewire") || spec.hasPrefix("alsa:pipewire") || spec.hasPrefix("alsa:pulse") || spec == "alsa:default" else { return nil }
        return wirePlumber?.sink(target: spec.hasPrefix("pipewire:") ? String(spec.dropFirst(9)) : nil)
    }
}

/// Where cued's stream's volume comes from, in words, when cued can tell.
enum StreamOrigin {
    static let restored = "WirePlumber's kept volume for the role (\(WirePlumberState.notificationKey)): the desktop's System Sounds volume"
    static let graph = "the graph: set on cued's stream (wpctl, a mixer)"
    static let unset = "the graph's default: nothing set for cued's stream or its role"

    static func describe(spec: String, props p: StreamProps.Snapshot, kept: KeptVolume?) -> String? {
        if spec.hasPrefix("pipewire") {
            guard p.changes > 0 else { return p.open ? "not said by the graph yet" : "not known until cued's stream first opens" }
            if matches(p, kept) { return restored }
            return kept == nil && p.mute != true && (p.volume ?? 1) == 1 && p.channelVolumes.allSatisfy({ $0 == 1 }) ? unset : graph
        }
        if spec.hasPrefix("alsa:") {
            return "not readable through an ALSA plugin; desktop.system_sounds is what the sound server keeps for the role"
        }
        return nil
    }

    /// Whether the Props are what the role's entry says (the session manager restored them).
    static func matches(_ p: StreamProps.Snapshot, _ k: KeptVolume?) -> Bool {
        guard let k else { return false }
        func near(_ a: Double, _ b: Double) -> Bool { abs(a - b) < 0.001 }
        if let m = k.mute, let pm = p.mute, m != pm { return false }
        if !k.channelVolumes.isEmpty {
            return k.channelVolumes.count == p.channelVolumes.count && zip(k.channelVolumes, p.channelVolumes).allSatisfy(near)
        }
        if let v = k.volume, let pv = p.volume { return near(v, pv) }
        return k.mute != nil && p.mute != nil
    }
}
