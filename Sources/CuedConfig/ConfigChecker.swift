import CuedProtocol
import CuedSystem

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
                          "dbus", "notifications", "desktop", "pull"]

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
            case "desktop": readDesktop(v, into: &c)
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
