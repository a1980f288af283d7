import CuedProtocol
import CuedSystem

/// `[cues.NAME]`: where a cue comes from, how loud it is, and how it varies and is
/// limited from play to play (its design: see `CueDesign`).
public struct CueSetting: Sendable, Equatable {
    /// A file of any format libsndfile reads; relative paths are relative to the config file.
    public var file: String?
    /// The cue's variants, as files (instead of `file`, and of `NAME-2.wav`… in the directories).
    public var files: [String]?
    public var gainDB: Double = 0
    public var order: VariantOrder?
    public var pitchJitterCents: Double = 0
    public var gainJitterDB: Double = 0
    public var maxVoices: Int?
    public var steal: VoiceSteal = .oldest
    public var cooldownMs: Double = 0
    public var cooldown: CooldownMode = .drop
    public init(file: String? = nil, gainDB: Double = 0) { self.file = file; self.gainDB = gainDB }

    static let keys = ["file", "files", "gain_db", "order", "pitch_jitter_cents", "gain_jitter_db", "max_voices", "steal",
                       "cooldown_ms", "cooldown"]
}

/// `[pull]`: a pull you can hear, off by default: below the release threshold, a soft
/// tick each `detent_points` of pull, rising `detent_pitch_cents` towards the threshold.
public struct PullSetting: Sendable, Equatable {
    public var detentPoints: Double = 0
    public var detentCue = "tick"
    public var detentGainDB: Double = -12
    public var detentPitchCents: Double = 0
    public init() {}

    static let keys = ["detent_points", "detent_cue", "detent_gain_db", "detent_pitch_cents"]
}

/// `[apps.NAME]`: one client app's mute, gain and profile.
public struct AppSetting: Sendable, Equatable {
    public var muted: Bool?
    public var gainDB: Double = 0
    public var profile: Profile?
    public init(muted: Bool? = nil, gainDB: Double = 0, profile: Profile? = nil) {
        self.muted = muted; self.gainDB = gainDB; self.profile = profile
    }
}

/// `[profiles]`: what the `quiet` profile plays, and who gets through `silent`.
public struct ProfileSettings: Sendable, Equatable {
    /// Added to every cue's gain under the `quiet` profile.
    public var quietGainDB: Double = -12
    /// Apps whose `important` voices pass `silent` and `quiet` (feedbackd's allow-important).
    public var importantApps: Set<String> = []
    public init(quietGainDB: Double = -12, importantApps: Set<String> = []) {
        self.quietGainDB = quietGainDB; self.importantApps = importantApps
    }
}

/// A refresh transition, written `"release->pull"` in `[transitions]`.
public struct Transition: Hashable, Sendable, CustomStringConvertible {
    public let from: RefreshState
    public let to: RefreshState
    public init(from: RefreshState, to: RefreshState) { self.from = from; self.to = to }

    public init?(key: String) {
        // "FROM->TO": split at the one '-' followed by '>' (state names have neither).
        let chars = Array(key)
        let arrows = chars.indices.dropLast().filter { chars[$0] == "-" && chars[$0 + 1] == ">" }
        guard arrows.count == 1, let at = arrows.first else { return nil }
        let parts = [String(chars[..<at]).trimmingSpaces(), String(chars[(at + 2)...]).trimmingSpaces()]
        guard let f = RefreshState(rawValue: parts[0]), let t = RefreshState(rawValue: parts[1]), f != t
        else { return nil }
        from = f; to = t
    }

    public var description: String { "\(from.rawValue)->\(to.rawValue)" }
}

/// Everything `cued.toml` can set. Optional fields were not in the file (a
/// flag or the built-in default applies).
public struct Config: Sendable, Equatable {
    public var path: String?
    public var sink: String?
    public var latencyMs: Int?
    public var voices: Int?
    public var idleCloseS: Double?
    public var masterGainDB: Double = 0
    public var sounds: [String]?
    public var muted: Bool?
    /// The global profile at start (unless the saved state has one), and at a reload that changes it.
    public var profile: Profile?
    public var profiles = ProfileSettings()
    public var cues: [String: CueSetting] = [:]
    /// A transition's cue; "" makes it silent.
    public var transitions: [Transition: String] = [:]
    public var apps: [String: AppSetting] = [:]
    public var pull = PullSetting()
    /// The freedesktop sound theme `play NAME` falls back to (nil: freedesktop).
    public var theme: String?
    /// Decoded theme sounds and files kept in memory, MiB.
    public var themeCacheMB: Double?
    /// The memory budget for all decoded sound (cues, cache, playing, decoding), MiB.
    public var soundBudgetMB: Double?
    /// Properties of the audio stream on a sound server (`[stream]`), e.g.
    /// `"media.role" = "event"`; they replace the built-in ones key by key.
    public var stream: [String: String] = [:]
    /// `[dbus]` and `[notifications]` (DesktopConfig.swift).
    public var dbus = BusSetting()
    public var notifications = NotificationSetting()
    /// Where each key was written (dotted path → line), for errors found later
    /// (a cue file that does not load, a transition to an unknown cue).
    public var lines: [String: Int] = [:]

    public init() {}

    public static func == (a: Config, b: Config) -> Bool {
        a.path == b.path && a.sink == b.sink && a.latencyMs == b.latencyMs && a.voices == b.voices
            && a.idleCloseS == b.idleCloseS && a.masterGainDB == b.masterGainDB && a.sounds == b.sounds
            && a.muted == b.muted && a.profile == b.profile && a.profiles == b.profiles && a.cues == b.cues && a.transitions == b.transitions && a.apps == b.apps && a.pull == b.pull
            && a.theme == b.theme && a.themeCacheMB == b.themeCacheMB && a.soundBudgetMB == b.soundBudgetMB && a.stream == b.stream
            && a.dbus == b.dbus && a.notifications == b.notifications
    }

    /// An issue about `key`, placed at the line it was written on.
    public func issue(_ key: String, _ message: String) -> ConfigIssue {
        ConfigIssue(file: path ?? "(config)", line: lines[key], key: key, message: message)
    }
}

/// One problem in a config file: file, line, key and what is wrong.
public struct ConfigIssue: Error, Sendable, Equatable, CustomStringConvertible {
    public var file: String
    public var line: Int?
    public var key: String?
    public var message: String

    public init(file: String, line: Int?, key: String?, message: String) {
        self.file = file; self.line = line; self.key = key; self.message = message
    }

    /// `FILE:LINE: key: message`, the one format of every config error.
    public var description: String {
        var s = file
        if let line { s += ":\(line)" }
        s += ": "
        if let key { s += "\(key): " }
        return s + message
    }
}

extension String {
    func trimmingSpaces() -> String {
        String(drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }
}

/// All the problems found in one file (checking goes on past the first).
public struct ConfigErrors: Error, Sendable, CustomStringConvertible {
    public var issues: [ConfigIssue]
    public init(issues: [ConfigIssue]) { self.issues = issues }
    public var description: String { issues.map(\.description).joined(separator: "\n") }
}

public enum ConfigLoader {
    public static let latencyRange = 1...1000
    public static let voicesRange = 1...256
    public static let idleCloseRange: ClosedRange<Double> = 0...86_400
    public static let gainRange = ProtocolLimits.gainRange
    public static let themeCacheRange: ClosedRange<Double> = 0...1024
    /// At least the shipped cues' few hundred KB; at most 64 GiB.
    public static let soundBudgetRange: ClosedRange<Double> = 1...65_536
    public static let quietGainRange: ClosedRange<Double> = -60...0
    /// A config file is small; anything bigger is refused unread.
    public static let maxFileBytes = 1 << 20

    /// `$XDG_CONFIG_HOME/cued/cued.toml`, default `~/.config/cued/cued.toml`.
    public static func defaultPath(environment: [String: String]) -> String {
        XDGDirectory.path("XDG_CONFIG_HOME", else: ".config", environment: environment) + "/cued/cued.toml"
    }

    /// Reads and checks a config file. It is untrusted input: only a regular
    /// file (or a symlink to one) of at most 1 MiB is read; a FIFO, a dangling
    /// symlink or a loop is an error naming the path. `/dev/null` is the usual way to say
    /// "no config": the defaults.
    public static func load(path: String, home: String) throws(ConfigErrors) -> Config {
        if path == "/dev/null" { return try parse("", file: path, home: home) }
        let text: String
        do {
            text = try UntrustedFile.readText(path, maxBytes: maxFileBytes)
        } catch {
            throw ConfigErrors(issues: [ConfigIssue(file: path, line: nil, key: nil, message: error.reason)])
        }
        return try parse(text, file: path, home: home)
    }

    /// `home` is what `~/` in a path stands for (`$HOME`).
    public static func parse(_ text: String, file: String, home: String = Environment.home(Environment.current())) throws(ConfigErrors) -> Config {
        let table: TOMLTable
        do {
            table = try TOMLParser.parse(text)
        } catch {
            throw ConfigErrors(issues: [ConfigIssue(file: file, line: error.line, key: nil, message: "TOML syntax: \(error.message)")])
        }
        var checker = Checker(file: file, home: home)
        var config = checker.read(table)
        config.path = file
        config.lines = checker.lines
        if !checker.issues.isEmpty {
            throw ConfigErrors(issues: checker.issues.sorted { ($0.line ?? 0, $0.key ?? "") < ($1.line ?? 0, $1.key ?? "") })
        }
        return config
    }
}

/// Walks the parsed table, type- and range-checks every key, and collects issues.
struct Checker {
    let file: String
    let home: String
    var issues: [ConfigIssue] = []
    /// Dotted key path → line, for errors found later (see `Config.lines`).
    var lines: [String: Int] = [:]

    init(file: String, home: String) { self.file = file; self.home = home }

    mutating func fail(_ key: String, _ node: TOMLNode, _ message: String) {
        issues.append(ConfigIssue(file: file, line: node.line, key: key, message: message))
    }

    mutating func string(_ v: TOMLNode, _ key: String) -> String? {
        guard case .string(let s) = v.value else { fail(key, v, "expected a string, found \(v.value.typeName)"); return nil }
        return s
    }

    mutating func bool(_ v: TOMLNode, _ key: String) -> Bool? {
        guard case .bool(let b) = v.value else { fail(key, v, "expected true or false, found \(v.value.typeName)"); return nil }
        return b
    }

    mutating func int(_ v: TOMLNode, _ key: String, _ range: ClosedRange<Int>) -> Int? {
        guard case .integer(let i) = v.value else { fail(key, v, "expected an integer, found \(v.value.typeName)"); return nil }
        guard i >= Int64(range.lowerBound), i <= Int64(range.upperBound) else {
            fail(key, v, "must be \(range.lowerBound)...\(range.upperBound), got \(i)"); return nil
        }
        return Int(i)
    }

    mutating func number(_ v: TOMLNode, _ key: String, _ range: ClosedRange<Double>) -> Double? {
        let d: Double
        switch v.value {
        case .float(let f): d = f
        case .integer(let i): d = Double(i)
        default: fail(key, v, "expected a number, found \(v.value.typeName)"); return nil
        }
        guard d.isFinite, range.contains(d) else {
            fail(key, v, "must be \(Request.number(range.lowerBound))...\(Request.number(range.upperBound)), got \(d.isFinite ? Request.number(d) : "\(d)")")
            return nil
        }
        return d
    }

    mutating func profile(_ v: TOMLNode, _ key: String) -> Profile? {
        guard let s = string(v, key) else { return nil }
        guard let p = Profile(rawValue: s) else { fail(key, v, "expected \(Profile.names), got '\(s.prefix(32))'"); return nil }
        return p
    }

    mutating func table(_ v: TOMLNode, _ key: String) -> TOMLTable? {
        guard case .table(let t) = v.value else { fail(key, v, "expected a table, found \(v.value.typeName)"); return nil }
        return t
    }

    mutating func unknown(_ key: String, _ v: TOMLNode, expected: [String]) {
        fail(key, v, "unknown key (expected one of: \(expected.joined(separator: ", ")))")
    }

    static let topKeys = ["sink", "latency_ms", "voices", "idle_close_s", "master_gain_db", "sounds", "muted", "profile",
                          "theme", "theme_cache_mb", "sound_budget_mb", "cues", "transitions", "apps", "profiles", "stream",
                          "dbus", "notifications", "pull"]

    mutating func read(_ root: TOMLTable) -> Config {
        var c = Config()
        for key in root.keys.sorted() {
            let v = root[key]!
            lines[key] = v.line
            switch key {
            case "sink":
                if let s = string(v, key) {
                    if let problem = SinkSyntax.problem(s) { fail(key, v, problem) } else { c.sink = s }
                }
            case "theme":
                if let s = string(v, key) {
                    if Label.isValid(s) { c.theme = s } else { fail(key, v, Label.problem(s, what: "theme")) }
                }
            case "dbus": readBus(v, into: &c)
            case "notifications": readNotifications(v, into: &c)
            case "theme_cache_mb": c.themeCacheMB = number(v, key, ConfigLoader.themeCacheRange)
            case "sound_budget_mb": c.soundBudgetMB = number(v, key, ConfigLoader.soundBudgetRange)
            case "latency_ms": c.latencyMs = int(v, key, ConfigLoader.latencyRange)
            case "voices": c.voices = int(v, key, ConfigLoader.voicesRange)
            case "idle_close_s": c.idleCloseS = number(v, key, ConfigLoader.idleCloseRange)
            case "master_gain_db": c.masterGainDB = number(v, key, ConfigLoader.gainRange) ?? 0
            case "muted": c.muted = bool(v, key)
            case "profile": c.profile = profile(v, key)
            case "profiles": c.profiles = profiles(v, key)
            case "sounds":
                guard case .array(let a) = v.value else { fail(key, v, "expected an array of directories, found \(v.value.typeName)"); break }
                var dirs: [String] = []
                for (i, item) in a.enumerated() {
                    if let s = string(item, "\(key)[\(i)]") { dirs.append(expand(s)) }
                }
                c.sounds = dirs
            case "stream":
                guard let t = table(v, key) else { break }
                for name in t.keys.sorted() {
                    let k = "stream.\(quoted(name))", node = t[name]!
                    lines[k] = node.line
                    guard StreamProperty.isValidKey(name) else {
                        fail(k, node, "not a property name (letters, digits, . _ -, e.g. \"media.role\")"); continue
                    }
                    guard let value = string(node, k) else { continue }
                    guard StreamProperty.isValidValue(value) else {
                        fail(k, node, "a property value is at most 256 bytes, without control characters, quotes or backslashes"); continue
                    }
                    c.stream[name] = value
                }
            case "cues":
                guard let t = table(v, key) else { break }
                for name in t.keys.sorted() {
                    let k = "cues.\(quoted(name))", node = t[name]!
                    lines[k] = node.line
                    guard Label.isValid(name) else { fail(k, node, "'\(name)' is not a cue name (letters, digits, . _ -)"); continue }
                    guard let ct = table(node, k) else { continue }
                    var s = CueSetting()
                    for field in ct.keys.sorted() {
                        let fk = "\(k).\(field)", f = ct[field]!
                        lines[fk] = f.line
                        switch field {
                        case "file": s.file = string(f, fk).map(expand)
                        case "files": s.files = files(f, fk)
                        case "gain_db": s.gainDB = number(f, fk, ConfigLoader.gainRange) ?? 0
                        case "order": s.order = word(f, fk, VariantOrder.self)
                        case "pitch_jitter_cents": s.pitchJitterCents = number(f, fk, 0...1_200) ?? 0
                        case "gain_jitter_db": s.gainJitterDB = number(f, fk, 0...24) ?? 0
                        case "max_voices": s.maxVoices = int(f, fk, 1...256)
                        case "steal": s.steal = word(f, fk, VoiceSteal.self) ?? .oldest
                        case "cooldown_ms": s.cooldownMs = number(f, fk, 0...60_000) ?? 0
                        case "cooldown": s.cooldown = word(f, fk, CooldownMode.self) ?? .drop
                        default: unknown(fk, f, expected: CueSetting.keys)
                        }
                    }
                    if s.file != nil && s.files != nil { fail("\(k).files", ct["files"]!, "give file or files, not both") }
                    c.cues[name] = s
                }
            case "transitions":
                guard let t = table(v, key) else { break }
                for name in t.keys.sorted() {
                    let k = "transitions.\(quoted(name))", node = t[name]!
                    lines[k] = node.line
                    guard let tr = Transition(key: name) else {
                        fail(k, node, "not a transition: write \"FROM->TO\" with two different states of idle, pull, release, loading")
                        continue
                    }
                    guard let cue = string(node, k) else { continue }
                    guard cue.isEmpty || Label.isValid(cue) else { fail(k, node, "'\(cue)' is not a cue name (\"\" for silence)"); continue }
                    c.transitions[tr] = cue
                }
            case "apps":
                guard let t = table(v, key) else { break }
                for name in t.keys.sorted() {
                    let k = "apps.\(quoted(name))", node = t[name]!
                    lines[k] = node.line
                    guard Label.isValid(name) else { fail(k, node, "'\(name)' is not an app name (letters, digits, . _ -)"); continue }
                    guard let at = table(node, k) else { continue }
                    var s = AppSetting()
                    for field in at.keys.sorted() {
                        let fk = "\(k).\(field)", f = at[field]!
                        lines[fk] = f.line
                        switch field {
                        case "muted": s.muted = bool(f, fk)
                        case "gain_db": s.gainDB = number(f, fk, ConfigLoader.gainRange) ?? 0
                        case "profile": s.profile = profile(f, fk)
                        default: unknown(fk, f, expected: ["muted", "gain_db", "profile"])
                        }
                    }
                    c.apps[name] = s
                }
            case "pull": c.pull = pull(v, key)
            default:
                unknown(key, v, expected: Self.topKeys)
            }
        }
        return c
    }

    /// `files = ["a.wav", …]`: a cue's variants, 1 to 64 paths.
    mutating func files(_ v: TOMLNode, _ key: String) -> [String]? {
        guard case .array(let a) = v.value else { fail(key, v, "expected an array of file paths, found \(v.value.typeName)"); return nil }
        guard (1...64).contains(a.count) else { fail(key, v, "expected 1...64 files, got \(a.count)"); return nil }
        var out: [String] = []
        for (i, item) in a.enumerated() {
            guard let p = string(item, "\(key)[\(i)]") else { return nil }
            out.append(expand(p))
        }
        return out
    }

    /// One of an enum's words (`order = "shuffle"`).
    mutating func word<W: RawRepresentable & CaseIterable>(_ v: TOMLNode, _ key: String, _: W.Type) -> W? where W.RawValue == String {
        guard let s = string(v, key) else { return nil }
        guard let w = W(rawValue: s) else {
            fail(key, v, "expected \(W.allCases.map(\.rawValue).joined(separator: ", ")), got '\(s.prefix(32))'")
            return nil
        }
        return w
    }

    /// `[pull]`: detent ticks while pulling.
    mutating func pull(_ v: TOMLNode, _ key: String) -> PullSetting {
        var p = PullSetting()
        guard let t = table(v, key) else { return p }
        for field in t.keys.sorted() {
            let fk = "\(key).\(quoted(field))", f = t[field]!
            lines[fk] = f.line
            switch field {
            case "detent_points": p.detentPoints = number(f, fk, 0...1_000) ?? 0
            case "detent_cue":
                guard let name = string(f, fk) else { continue }
                guard Label.isValid(name) else { fail(fk, f, Label.problem(name, what: "cue name")); continue }
                p.detentCue = name
            case "detent_gain_db": p.detentGainDB = number(f, fk, ConfigLoader.gainRange) ?? p.detentGainDB
            case "detent_pitch_cents": p.detentPitchCents = number(f, fk, -1_200...1_200) ?? 0
            default: unknown(fk, f, expected: PullSetting.keys)
            }
        }
        return p
    }

    /// `[profiles]`: `quiet_gain_db` and `important_apps` (app names).
    mutating func profiles(_ v: TOMLNode, _ key: String) -> ProfileSettings {
        var p = ProfileSettings()
        guard let t = table(v, key) else { return p }
        for field in t.keys.sorted() {
            let fk = "\(key).\(quoted(field))", f = t[field]!
            lines[fk] = f.line
            switch field {
            case "quiet_gain_db": p.quietGainDB = number(f, fk, ConfigLoader.quietGainRange) ?? p.quietGainDB
            case "important_apps":
                guard case .array(let a) = f.value else { fail(fk, f, "expected an array of app names, found \(f.value.typeName)"); continue }
                for (i, item) in a.enumerated() {
                    guard let name = string(item, "\(fk)[\(i)]") else { continue }
                    guard Label.isValid(name) else { fail("\(fk)[\(i)]", item, Label.problem(name, what: "app name")); continue }
                    p.importantApps.insert(name)
                }
            default: unknown(fk, f, expected: ["quiet_gain_db", "important_apps"])
            }
        }
        return p
    }

    /// `~/x` → `$HOME/x`; relative paths → relative to the config file's directory.
    func expand(_ path: String) -> String {
        if path == "~" { return home }
        if path.hasPrefix("~/") { return Path.join(home, String(path.dropFirst(2))) }
        return Path.normalize(Path.join(Path.directory(file), path))
    }

    func quoted(_ k: String) -> String { !k.isEmpty && k.utf8.allSatisfy({ $0 < 0x80 && (Character(Unicode.Scalar($0)).isLetter || Character(Unicode.Scalar($0)).isNumber || $0 == 0x5F || $0 == 0x2D) }) ? k : "\"\(k)\"" }
}

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

/// The XDG base-directory rule: `$KEY` if set and not empty, else `$HOME/FALLBACK`.
public enum XDGDirectory {
    public static func path(_ key: String, else fallback: String, environment: [String: String]) -> String {
        if let v = environment[key], !v.isEmpty { return v }
        return Path.join(Environment.home(environment), fallback)
    }
}
