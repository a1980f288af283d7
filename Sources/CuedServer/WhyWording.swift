import CuedCore
import CuedProtocol

/// `why`'s words: each reason a sound would not be heard, and its one-line fix (the socket's
/// edge, as `Replies` is for the other verbs).
enum WhyWording {
    /// Room in the memory budget under which a theme sound not decoded yet may be refused
    /// (about 2.7 s of 48 kHz stereo).
    static let roomForASound = 512 * 1024

    typealias Reason = WhyReport.Reason

    static func reason(_ hold: Hold) -> Reason {
        switch hold {
        case .muted: return Reason(hold.name, says: "cued is muted", fix: "cuectl unmute")
        case .appMuted(let app): return Reason(hold.name, says: "app \(app) is muted", fix: "cuectl unmute app \(app)")
        case .silent: return Reason(hold.name, says: "the profile is silent", fix: "cuectl profile full")
        case .appSilent(let app):
            return Reason(hold.name, says: "app \(app)'s profile is silent", fix: "cuectl profile app \(app) default (or full)")
        case .rateLimited(let n):
            return Reason(hold.name, says: "this client played more than \(Request.number(n)) cues in the last second",
                          fix: "play fewer a second (cued's --rate-limit sets the limit)")
        case .cooldown(let cue, let left):
            return Reason(hold.name, says: "\(cue) sounded a moment ago: its cooldown holds it back for \(left / 1_000_000) ms more",
                          fix: "play it later, or lower [cues.\(cue)] cooldown_ms in cued.toml (cooldown = \"restart\" plays it anyway)")
        case .eventSoundsOff(let from):
            return Reason(hold.name, says: "the desktop's event sounds are off (\(from))",
                          fix: pinned(from) ? "event_sounds = \"follow\" (or true) in cued.toml's [desktop], then cuectl reload"
                                            : "turn event sounds on in the desktop's settings (GNOME: gsettings set org.gnome.desktop.sound event-sounds true), or pin [desktop] event_sounds = true in cued.toml")
        case .inputFeedbackOff(let sound, let from):
            return Reason(hold.name, says: "\(sound) is an input-feedback sound and the desktop's input-feedback sounds are off (\(from))",
                          fix: pinned(from) ? "input_feedback_sounds = \"follow\" (or true) in cued.toml's [desktop], then cuectl reload"
                                            : "gsettings set org.gnome.desktop.sound input-feedback-sounds true, or pin [desktop] input_feedback_sounds = true in cued.toml")
        case .doNotDisturb(let from):
            return Reason(hold.name, says: "the desktop's Do Not Disturb is on (\(from)): notification sounds and feedbackd's events play as in silent",
                          fix: pinned(from) ? "do_not_disturb = \"follow\" (or false) in cued.toml's [desktop], then cuectl reload"
                                            : "turn Do Not Disturb off in the desktop (its notification list's switch), or pin [desktop] do_not_disturb = false in cued.toml")
        case .stopping: return Reason(hold.name, says: "cued is stopping", fix: "start cued again")
        }
    }

    private static func pinned(_ from: String) -> Bool { from.hasPrefix("config:") }

    static func memory(_ cue: String, used: Int, limit: Int) -> Reason {
        Reason("memory", says: "the memory budget for decoded sound is nearly full (\(StatusNumbers.mib(used)) of \(StatusNumbers.mib(limit)) MiB) and \(cue) is not decoded yet: its decode may be refused",
               fix: "raise sound_budget_mb in cued.toml, then cuectl reload")
    }

    static let systemSoundsFix = """
        raise System Sounds in the desktop's sound settings (GNOME Settings → Sound → Volume Levels; pavucontrol → Playback), \
        or: pw-metadata -n route-settings 0 'restore.stream.Output/Audio.media.role:Notification' \
        '{"mute":false,"volumes":[1.0,1.0],"channels":["FL","FR"]}' Spa:String:JSON
        """

    /// The Notification role's kept volume silences cued's stream (`live`: the open stream has it now).
    static func systemSounds(_ muted: Bool, live: Bool, _ key: String) -> Reason {
        let what = muted ? "muted" : "at 0"
        return Reason("system-sounds", says: live
                      ? "cued's stream is \(what) on the sound server, as the desktop's System Sounds volume says (\(key))"
                      : "the desktop's System Sounds volume is \(what) (\(key)): the sound server puts it on cued's stream when it opens",
                      fix: systemSoundsFix)
    }

    static func streamMuted(_ p: StreamProps.Snapshot) -> Reason {
        let node = p.nodeID.map(String.init) ?? "ID"
        return Reason("stream-muted", says: "cued's stream is \(p.mute == true ? "muted" : "at 0") on the sound server's graph (node \(node))",
                      fix: "wpctl set-mute \(node) 0 && wpctl set-volume \(node) 1 (or raise cued in pavucontrol's Playback tab)")
    }

    static func outputMuted(_ o: Status.StreamVolume, name: String) -> Reason {
        let what = o.mute == true ? "muted" : "at 0"
        return Reason("output-muted", says: "the output \(name) is \(what) (\(o.from ?? "the sound server"))",
                      fix: "pactl set-sink-mute \(name) 0 && pactl set-sink-volume \(name) 100% (or the desktop's output volume)")
    }

    /// `why`: auto's reason for null (auto picks again at the next cue: no restart); nil: null was named.
    static func noOutput(why: String?) -> Reason {
        Reason("no-output", says: "cued plays to nothing: its output is null" + (why.map { " (\($0))" } ?? ""),
               fix: why != nil ? "start a sound server (systemctl --user start pipewire wireplumber pipewire-pulse) or plug a card: auto picks it at the next cue, no restart needed"
                               : "restart cued with --sink auto (the default), or --sink alsa:PCM for a card")
    }

    static func deviceFailing(_ error: String?) -> Reason {
        Reason("device-failing", says: "the output fails" + (error.map { ": \($0)" } ?? ""), fix: "cuectl doctor (is the sound server running?)")
    }

    /// The output opens and takes cues, and they are not heard (`OutputHealth`). `auto`: cued picks its output.
    static func notHeard(_ spec: String, _ summary: String, auto: Bool) -> Reason {
        Reason("device-failing", says: "the output \(spec) takes cues and plays nothing: it \(summary)",
               fix: auto ? "auto takes its next output after two failures in a row (cuectl doctor says which and why); to choose one: cued --sink alsa:default"
                         : "restart cued with --sink auto, or another output (cuectl doctor says more)")
    }
}

/// Bytes as MiB with one decimal (as `status`'s table shows them).
enum StatusNumbers {
    static func mib(_ bytes: Int) -> String {
        let tenths = (bytes * 10 + 524_288) / 1_048_576
        return "\(tenths / 10).\(tenths % 10)"
    }
}
