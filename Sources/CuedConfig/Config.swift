import CuedProtocol
import CuedSystem

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
    /// `[desktop]`: following the desktop's sound settings, or each pinned (DesktopConfig.swift).
    public var desktop = DesktopSetting()
    /// Where each key was written (dotted path → line), for errors found later
    /// (a cue file that does not load, a transition to an unknown cue).
    public var lines: [String: Int] = [:]

    public init() {}

    public static func == (a: Config, b: Config) -> Bool {
        a.path == b.path && a.sink == b.sink && a.latencyMs == b.latencyMs && a.voices == b.voices
            && a.idleCloseS == b.idleCloseS && a.masterGainDB == b.masterGainDB && a.sounds == b.sounds
            && a.muted == b.muted && a.profile == b.profile && a.profiles == b.profiles && a.cues == b.cues && a.transitions == b.transitions && a.apps == b.apps && a.pull == b.pull
            && a.theme == b.theme && a.themeCacheMB == b.themeCacheMB && a.soundBudgetMB == b.soundBudgetMB && a.stream == b.stream
            && a.dbus == b.dbus && a.notifications == b.notifications && a.desktop == b.desktop
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

/// The XDG base-directory rule: `$KEY` if set and not empty, else `$HOME/FALLBACK`.
public enum XDGDirectory {
    public static func path(_ key: String, else fallback: String, environment: [String: String]) -> String {
        if let v = environment[key], !v.isEmpty { return v }
        return Path.join(Environment.home(environment), fallback)
    }
}
