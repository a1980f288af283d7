import CuedProtocol
import Foundation
import TOMLKit

/// `[cues.NAME]`: where a cue comes from and how loud it is.
public struct CueSetting: Sendable, Equatable {
    /// A file of any format libsndfile reads; relative paths are relative to the config file.
    public var file: String?
    public var gainDB: Double = 0
    public init(file: String? = nil, gainDB: Double = 0) { self.file = file; self.gainDB = gainDB }
}

/// `[apps.NAME]`: one client app's mute and gain.
public struct AppSetting: Sendable, Equatable {
    public var muted: Bool?
    public var gainDB: Double = 0
    public init(muted: Bool? = nil, gainDB: Double = 0) { self.muted = muted; self.gainDB = gainDB }
}

/// A refresh transition, written `"release->pull"` in `[transitions]`.
public struct Transition: Hashable, Sendable, CustomStringConvertible {
    public let from: RefreshState
    public let to: RefreshState
    public init(from: RefreshState, to: RefreshState) { self.from = from; self.to = to }

    public init?(key: String) {
        let parts = key.components(separatedBy: "->").map { $0.trimmingCharacters(in: .whitespaces) }
        guard parts.count == 2, let f = RefreshState(rawValue: parts[0]), let t = RefreshState(rawValue: parts[1]), f != t
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
    public var cues: [String: CueSetting] = [:]
    /// A transition's cue; "" makes it silent.
    public var transitions: [Transition: String] = [:]
    public var apps: [String: AppSetting] = [:]
    /// Where each key was written (dotted path → line), for errors found later
    /// (a cue file that does not load, a transition to an unknown cue).
    public var lines: [String: Int] = [:]

    public init() {}

    public static func == (a: Config, b: Config) -> Bool {
        a.path == b.path && a.sink == b.sink && a.latencyMs == b.latencyMs && a.voices == b.voices
            && a.idleCloseS == b.idleCloseS && a.masterGainDB == b.masterGainDB && a.sounds == b.sounds
            && a.muted == b.muted && a.cues == b.cues && a.transitions == b.transitions && a.apps == b.apps
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

    public var description: String {
        var s = file
        if let line { s += ":\(line)" }
        s += ": "
        if let key { s += "\(key): " }
        return s + message
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

    /// `$XDG_CONFIG_HOME/cued/cued.toml`, default `~/.config/cued/cued.toml`.
    public static func defaultPath(environment: [String: String]) -> String {
        XDGDirectory.path("XDG_CONFIG_HOME", else: ".config", environment: environment) + "/cued/cued.toml"
    }

    public static func load(path: String) throws(ConfigErrors) -> Config {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            let reason = FileManager.default.fileExists(atPath: path) ? "cannot read it (\(error.localizedDescription))" : "no such file"
            throw ConfigErrors(issues: [ConfigIssue(file: path, line: nil, key: nil, message: reason)])
        }
        return try parse(text, file: path)
    }

    public static func parse(_ text: String, file: String) throws(ConfigErrors) -> Config {
        let table: TOMLTable
        do {
            table = try TOMLTable(string: text)
        } catch let e as TOMLParseError {
            throw ConfigErrors(issues: [ConfigIssue(file: file, line: e.source.begin.line, key: nil,
                                                    message: "TOML syntax: \(e.description)")])
        } catch {
            throw ConfigErrors(issues: [ConfigIssue(file: file, line: nil, key: nil, message: "TOML syntax: \(error)")])
        }
        var checker = Checker(file: file, lines: KeyLines(text))
        var config = checker.read(table)
        config.path = file
        config.lines = checker.lines.lines
        if !checker.issues.isEmpty {
            throw ConfigErrors(issues: checker.issues.sorted { ($0.line ?? 0, $0.key ?? "") < ($1.line ?? 0, $1.key ?? "") })
        }
        return config
    }
}

/// Walks the parsed table, type- and range-checks every key, and collects issues.
struct Checker {
    let file: String
    let lines: KeyLines
    var issues: [ConfigIssue] = []

    init(file: String, lines: KeyLines) { self.file = file; self.lines = lines }

    mutating func fail(_ key: String, _ message: String) {
        issues.append(ConfigIssue(file: file, line: lines.line(for: key), key: key, message: message))
    }

    static func typeName(_ v: TOMLValueConvertible) -> String {
        switch v.type {
        case .bool: return "a boolean"
        case .int: return "an integer"
        case .double: return "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .table: return "a table"
        default: return "a date/time"
        }
    }

    mutating func string(_ v: TOMLValueConvertible, _ key: String) -> String? {
        guard let s = v.string else { fail(key, "expected a string, found \(Self.typeName(v))"); return nil }
        return s
    }

    mutating func bool(_ v: TOMLValueConvertible, _ key: String) -> Bool? {
        guard v.type == .bool, let b = v.bool else { fail(key, "expected true or false, found \(Self.typeName(v))"); return nil }
        return b
    }

    mutating func int(_ v: TOMLValueConvertible, _ key: String, _ range: ClosedRange<Int>) -> Int? {
        guard v.type == .int, let i = v.int else { fail(key, "expected an integer, found \(Self.typeName(v))"); return nil }
        guard range.contains(i) else { fail(key, "must be \(range.lowerBound)...\(range.upperBound), got \(i)"); return nil }
        return i
    }

    mutating func number(_ v: TOMLValueConvertible, _ key: String, _ range: ClosedRange<Double>) -> Double? {
        let d: Double?
        switch v.type {
        case .double: d = v.double
        case .int: d = v.int.map(Double.init)
        default: d = nil
        }
        guard let d else { fail(key, "expected a number, found \(Self.typeName(v))"); return nil }
        guard d.isFinite, range.contains(d) else {
            fail(key, "must be \(Request.number(range.lowerBound))...\(Request.number(range.upperBound)), got \(Request.number(d))")
            return nil
        }
        return d
    }

    mutating func table(_ v: TOMLValueConvertible, _ key: String) -> TOMLTable? {
        guard let t = v.table else { fail(key, "expected a table, found \(Self.typeName(v))"); return nil }
        return t
    }

    mutating func unknown(_ key: String, expected: [String]) {
        fail(key, "unknown key (expected one of: \(expected.joined(separator: ", ")))")
    }

    static let topKeys = ["sink", "latency_ms", "voices", "idle_close_s", "master_gain_db", "sounds", "muted",
                          "cues", "transitions", "apps"]

    mutating func read(_ root: TOMLTable) -> Config {
        var c = Config()
        for key in root.keys.sorted() {
            guard let v = root[key] else { continue }
            switch key {
            case "sink":
                if let s = string(v, key) {
                    if SinkSyntax.isValid(s) { c.sink = s } else { fail(key, "unknown sink '\(s)' (alsa[:PCM], null or wav:PATH)") }
                }
            case "latency_ms": c.latencyMs = int(v, key, ConfigLoader.latencyRange)
            case "voices": c.voices = int(v, key, ConfigLoader.voicesRange)
            case "idle_close_s": c.idleCloseS = number(v, key, ConfigLoader.idleCloseRange)
            case "master_gain_db": c.masterGainDB = number(v, key, ConfigLoader.gainRange) ?? 0
            case "muted": c.muted = bool(v, key)
            case "sounds":
                guard let a = v.array else { fail(key, "expected an array of directories, found \(Self.typeName(v))"); break }
                var dirs: [String] = []
                for (i, item) in a.enumerated() {
                    if let s = string(item, "\(key)[\(i)]") { dirs.append(expand(s)) }
                }
                c.sounds = dirs
            case "cues":
                guard let t = table(v, key) else { break }
                for name in t.keys.sorted() {
                    let k = "cues.\(quoted(name))"
                    guard Label.isValid(name) else { fail(k, "'\(name)' is not a cue name (letters, digits, . _ -)"); continue }
                    guard let ct = t[name].flatMap({ table($0, k) }) else { continue }
                    var s = CueSetting()
                    for field in ct.keys.sorted() {
                        let fk = "\(k).\(field)"
                        switch field {
                        case "file": s.file = string(ct[field]!, fk).map(expand)
                        case "gain_db": s.gainDB = number(ct[field]!, fk, ConfigLoader.gainRange) ?? 0
                        default: unknown(fk, expected: ["file", "gain_db"])
                        }
                    }
                    c.cues[name] = s
                }
            case "transitions":
                guard let t = table(v, key) else { break }
                for name in t.keys.sorted() {
                    let k = "transitions.\(quoted(name))"
                    guard let tr = Transition(key: name) else {
                        fail(k, "not a transition: write \"FROM->TO\" with two different states of idle, pull, release, loading")
                        continue
                    }
                    guard let cue = string(t[name]!, k) else { continue }
                    guard cue.isEmpty || Label.isValid(cue) else { fail(k, "'\(cue)' is not a cue name (\"\" for silence)"); continue }
                    c.transitions[tr] = cue
                }
            case "apps":
                guard let t = table(v, key) else { break }
                for name in t.keys.sorted() {
                    let k = "apps.\(quoted(name))"
                    guard Label.isValid(name) else { fail(k, "'\(name)' is not an app name (letters, digits, . _ -)"); continue }
                    guard let at = t[name].flatMap({ table($0, k) }) else { continue }
                    var s = AppSetting()
                    for field in at.keys.sorted() {
                        let fk = "\(k).\(field)"
                        switch field {
                        case "muted": s.muted = bool(at[field]!, fk)
                        case "gain_db": s.gainDB = number(at[field]!, fk, ConfigLoader.gainRange) ?? 0
                        default: unknown(fk, expected: ["muted", "gain_db"])
                        }
                    }
                    c.apps[name] = s
                }
            default:
                unknown(key, expected: Self.topKeys)
            }
        }
        return c
    }

    /// `~/x` → `$HOME/x`; relative paths → relative to the config file's directory.
    func expand(_ path: String) -> String {
        if path.hasPrefix("~/") { return NSHomeDirectory() + path.dropFirst(1) }
        if path.hasPrefix("/") { return path }
        return ((file as NSString).deletingLastPathComponent as NSString).appendingPathComponent(path)
    }

    func quoted(_ k: String) -> String { KeyLines.isBare(k) ? k : "\"\(k)\"" }
}

/// `--sink` / `sink =` syntax, shared by the flag and the config file.
public enum SinkSyntax {
    public static func isValid(_ s: String) -> Bool {
        s == "alsa" || s == "null" || (s.hasPrefix("alsa:") && s.count > 5) || (s.hasPrefix("wav:") && s.count > 4)
            || s.hasPrefix("fault:")
    }
}

/// The XDG base-directory rule: `$KEY` if set and not empty, else `$HOME/FALLBACK`.
public enum XDGDirectory {
    public static func path(_ key: String, else fallback: String, environment: [String: String]) -> String {
        if let v = environment[key], !v.isEmpty { return v }
        return (environment["HOME"] ?? NSHomeDirectory()) + "/" + fallback
    }
}
