import CuedConfig
import CuedProtocol
import CuedSystem

/// feedbackd's theme files, as far as sound goes: which sound an event makes
/// in each profile. Found and merged as feedbackd does (its
/// fbd-theme-expander): `$FEEDBACK_THEME` names the file; else the theme
/// (`default` unless the config names another) is
/// `$XDG_CONFIG_HOME/feedbackd/themes/NAME.json`, else `default.json` in the
/// first `$XDG_DATA_DIRS` entry holding `feedbackd/themes/default.json`. A
/// theme's `parent-name` is found the same way and merged under it (the child
/// wins per profile and event), at most 10 deep; `default` has no parent.
/// feedbackd's device themes (by the device tree's `compatible`) are for
/// phones and are not looked for. Only `Sound` feedbacks matter; the others
/// (vibration, LEDs) only make an event known.
public struct FeedbackTheme: Sendable, Equatable {
    /// feedbackd's levels are cued's profiles (silent < quiet < full).
    public typealias Level = Profile

    /// A sound feedback: a sound-theme name (`effect`) or a file (`file-name`).
    public enum Sound: Sendable, Equatable {
        case effect(String)
        case file(String)
    }

    /// What an event makes, for the event and level asked.
    public enum Lookup: Sendable, Equatable {
        case sound(Sound)
        /// The theme knows the event but has no sound for it at this level (or below).
        case noSound
        /// The theme does not know the event.
        case unknown
    }

    /// Sounds by level, then event.
    public private(set) var sounds: [Level: [String: Sound]] = [:]
    /// Every event the theme names, whatever its feedbacks.
    public private(set) var events: Set<String> = []
    /// The files read, child first (for status and logs).
    public private(set) var files: [String] = []

    public init() {}

    public static let maxBytes = 1 << 20
    static let maxDepth = 10

    /// The sound of the highest level at or below `level` that has one for `event`.
    public func lookup(_ event: String, at level: Level) -> Lookup {
        guard events.contains(event) else { return .unknown }
        for l in [Level.full, .quiet, .silent] where l <= level {
            if let s = sounds[l]?[event] { return .sound(s) }
        }
        return .noSound
    }

    /// One theme file's content: its name, parent and sound feedbacks.
    public struct File: Sendable, Equatable {
        public var name: String
        public var parent: String?
        public var sounds: [Level: [String: Sound]] = [:]
        public var events: Set<String> = []
    }

    /// Parses one theme file's text; the error says what is wrong (the caller names the file).
    public static func parse(_ text: String) -> Result<File, ThemeError> {
        let json: JSON
        do { json = try JSON.parse(text) } catch { return .failure(ThemeError(error.description)) }
        guard case .object(let top) = json else { return .failure(ThemeError("not a JSON object")) }
        guard case .string(let name)? = top.first(where: { $0.0 == "name" })?.1, !name.isEmpty else {
            return .failure(ThemeError("no \"name\""))
        }
        var file = File(name: name)
        if let p = top.first(where: { $0.0 == "parent-name" })?.1 {
            guard case .string(let parent) = p, !parent.isEmpty else { return .failure(ThemeError("\"parent-name\" is not a name")) }
            if name == "default" { return .failure(ThemeError("the default theme cannot have a parent")) }
            file.parent = parent
        }
        guard case .array(let profiles)? = top.first(where: { $0.0 == "profiles" })?.1 else {
            return .failure(ThemeError("no \"profiles\" array"))
        }
        for profile in profiles {
            guard case .object(let p) = profile, case .string(let pname)? = p.first(where: { $0.0 == "name" })?.1 else {
                return .failure(ThemeError("a profile without a \"name\""))
            }
            guard let level = Level(rawValue: pname) else {
                return .failure(ThemeError("profile \"\(pname)\" is not one of full, quiet, silent"))
            }
            guard case .array(let feedbacks)? = p.first(where: { $0.0 == "feedbacks" })?.1 else { continue }
            for fb in feedbacks {
                guard case .object(let f) = fb, case .string(let event)? = f.first(where: { $0.0 == "event-name" })?.1,
                      case .string(let type)? = f.first(where: { $0.0 == "type" })?.1 else {
                    return .failure(ThemeError("a feedback of profile \"\(pname)\" without \"event-name\" and \"type\""))
                }
                file.events.insert(event)
                guard type == "Sound" else { continue }
                if case .string(let path)? = f.first(where: { $0.0 == "file-name" })?.1, !path.isEmpty {
                    file.sounds[level, default: [:]][event] = .file(path)
                } else if case .string(let effect)? = f.first(where: { $0.0 == "effect" })?.1, !effect.isEmpty {
                    file.sounds[level, default: [:]][event] = .effect(effect)
                }
            }
        }
        return .success(file)
    }

    public struct ThemeError: Error, Sendable, Equatable, CustomStringConvertible {
        public let description: String
        init(_ d: String) { description = d }
    }

    /// Where feedbackd would find the theme `name` (nil: nowhere).
    public static func path(of name: String, environment env: [String: String], exists: (String) -> Bool) -> String? {
        let config = XDGDirectory.path("XDG_CONFIG_HOME", else: ".config", environment: env)
        let user = "\(config)/feedbackd/themes/\(name).json"
        if exists(user) { return user }
        let dirs = (env["XDG_DATA_DIRS"].flatMap { $0.isEmpty ? nil : $0 } ?? "/usr/local/share:/usr/share")
            .split(separator: ":").map(String.init)
        for dir in dirs where dir.hasPrefix("/") {
            let p = "\(dir)/feedbackd/themes/default.json"
            if exists(p) { return p }
        }
        return nil
    }

    /// Finds, reads and merges the theme (blocking: off the loop). No theme
    /// anywhere is not a problem (events then resolve through cued's cues and
    /// the sound theme); a broken one is a warning naming the file, and no theme.
    public static func load(name: String, environment env: [String: String],
                            read: (String) throws(FileError) -> String = { p throws(FileError) in try UntrustedFile.readText(p, maxBytes: maxBytes) },
                            exists: (String) -> Bool = { FileSystem.isRegularFile($0) }) -> (FeedbackTheme, warnings: [String]) {
        let first: String?
        if let f = env["FEEDBACK_THEME"], !f.isEmpty { first = f } else { first = path(of: name, environment: env, exists: exists) }
        guard var path = first else { return (FeedbackTheme(), []) }
        var chain: [File] = []
        var paths: [String] = []
        while true {
            let file: File
            do {
                switch parse(try read(path)) {
                case .success(let f): file = f
                case .failure(let e): return (FeedbackTheme(), ["feedbackd theme \(path): \(e.description); feedbackd events use cued's cues and the sound theme"])
                }
            } catch {
                return (FeedbackTheme(), ["feedbackd theme \(error.description); feedbackd events use cued's cues and the sound theme"])
            }
            chain.append(file)
            paths.append(path)
            guard let parent = file.parent else { break }
            guard chain.count <= maxDepth else {
                return (FeedbackTheme(), ["feedbackd theme \(paths[0]): more than \(maxDepth) parents; feedbackd events use cued's cues and the sound theme"])
            }
            guard let next = Self.path(of: parent, environment: env, exists: exists) else {
                return (FeedbackTheme(), ["feedbackd theme \(path): parent '\(parent)' not found"])
            }
            path = next
        }
        var theme = FeedbackTheme()
        theme.files = paths
        for file in chain.reversed() {  // the root first; each child overrides
            theme.events.formUnion(file.events)
            for (level, sounds) in file.sounds { theme.sounds[level, default: [:]].merge(sounds) { $1 } }
        }
        return (theme, [])
    }
}
