import CuedProtocol

/// `--sink` / `sink =` syntax, shared by the flag and the config file: the
/// one place that knows the sink grammar's words.
public enum SinkSyntax {
    public static let summary = "auto, alsa[:PCM], pipewire[:TARGET], null or wav:PATH"

    /// nil if `s` is a sink spec, else why not.
    public static func problem(_ s: String) -> String? {
        if s == "auto" || s == "alsa" || s == "pipewire" || s == "null" || s.hasPrefix("fault:") { return nil }
        if s.hasPrefix("pipewire:") {
            return s.count > 9 ? nil : "'pipewire:' needs a target node's name or serial, e.g. pipewire:alsa_output.pci-0000_00_1f.3.analog-stereo (list them with pw-cli ls Node), or plain 'pipewire' for the default output"
        }
        if s.hasPrefix("alsa:") { return s.count > 5 ? nil : "'alsa:' needs a PCM name, e.g. alsa:default (list them with aplay -L)" }
        if s.hasPrefix("wav:") {
            guard s.count > 4 else { return "'wav:' needs a file path, e.g. wav:/tmp/cued.wav" }
            return s.dropFirst(4).hasPrefix("/") ? nil : "wav: needs an absolute path, got '\(s.dropFirst(4))'"
        }
        return "unknown sink '\(s)'" + (nearMiss(s).map { ": did you mean \($0)?" } ?? "") + " (\(summary))"
    }

    /// The spec a near-miss probably meant: an ALSA PCM name without `alsa:`
    /// (`pulse`, `pipewire`, `default`, `hw:0`…), a path without `wav:`.
    static func nearMiss(_ s: String) -> String? {
        if s.hasPrefix("/") && s.count > 1 { return "wav:" + s }
        let lower = s.lowercased()
        if ["pulse", "pulseaudio"].contains(lower) { return "alsa:pulse" }
        if ["pipewire", "pw"].contains(lower) { return "pipewire" }
        if ["default", "sysdefault", "dmix", "dsnoop", "jack", "oss"].contains(lower) { return "alsa:" + lower }
        for prefix in ["hw:", "plughw:", "sysdefault:", "dmix:", "front:", "iec958:", "hdmi:"] where lower.hasPrefix(prefix) {
            return "alsa:" + s
        }
        if ["wav", "file"].contains(lower) { return "wav:/tmp/cued.wav" }
        return nil
    }
}

/// `--sink auto`: where a desktop user's sound goes, picked again at each open of
/// the device. PipeWire's own stream when a PipeWire server answers (its socket is
/// in $XDG_RUNTIME_DIR and the stream opens), else its ALSA plugin; a PulseAudio
/// server through its plugin; else ALSA's default if it opens; else null, with why
/// (which `status` shows as `sink.why`).
public enum AutoSink {
    /// `exists`: whether a path exists; `opens`: nil if the sink of that spec
    /// (`pipewire`, `alsa:default`, `alsa:pulse`) opens for playback now, else why not.
    public static func choose(environment: [String: String], exists: (String) -> Bool,
                              opens: (String) -> String?) -> (spec: String, why: String) {
        let rt = environment["XDG_RUNTIME_DIR"].flatMap { $0.isEmpty ? nil : $0 }
        if let rt, exists(rt + "/pipewire-0") {
            guard let native = opens("pipewire") else {
                return ("pipewire", "auto: PipeWire answers at \(rt)/pipewire-0: its own stream")
            }
            if native.includes(OutputFailure.notLinked) {
                // Its ALSA and pulse plugins wait for the same link: none would be heard. Played to
                // nothing, the device closes once idle and the next cue picks again (the session
                // manager starts a moment after PipeWire at login).
                return ("null", "auto: PipeWire answers at \(rt)/pipewire-0 but its stream was \(OutputFailure.notLinked) "
                        + "(\(native)); cues are played to nothing, and the next cue tries again")
            }
            if opens("alsa:default") == nil {
                return ("alsa:default", "auto: PipeWire answers at \(rt)/pipewire-0 and ALSA's default PCM opens "
                        + "(its own stream did not: \(native))")
            }
        }
        if let rt, exists(rt + "/pulse/native"), opens("alsa:pulse") == nil {
            return ("alsa:pulse", "auto: a PulseAudio server answers at \(rt)/pulse/native")
        }
        guard let error = opens("alsa:default") else { return ("alsa:default", "auto: ALSA's default PCM opens (no sound server found)") }
        return ("null", "auto: no sound server answers and ALSA's default PCM does not open (\(error)); "
                + "cues are played to nothing: to record them instead, --sink wav:FILE")
    }
}

/// Stream property names and values for `[stream]`: plain words, so they can
/// be handed to PipeWire's and PulseAudio's property lists as they are.
public enum StreamProperty {
    public static func isValidKey(_ k: String) -> Bool { Label.isValid(k) }
    public static func isValidValue(_ v: String) -> Bool {
        v.utf8.count <= 256 && !v.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F || $0 == "\"" || $0 == "\\" }
    }
}
