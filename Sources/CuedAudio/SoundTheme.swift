import CuedSystem
#if canImport(Glibc)
import Glibc
#endif

/// The desktop's sound theme, per the freedesktop Sound Theme Specification:
/// maps a sound name (`bell`, `message-new-instant`) to a file.
///
/// Resolved once (`init`): the base directories, the theme chain and the
/// locale. `lookup` and `names` then look at the file system on every call
/// (a file added or removed is seen at once): call them off the event loop.
///
/// Search order, for `lookup("message-new-instant")`:
/// 1. each theme of `chain` in turn: the configured one, what it `Inherits`
///    (depth first, each theme once), then `freedesktop`; then unthemed files
///    (`<base>/sounds/NAME.ext`);
/// 2. within a theme, the name, then the name truncated at its last `-`
///    (`message-new`, then `message`): a theme's own generic sound wins over
///    a parent's specific one, as the specification's "common sounds for
///    similar events" intends;
/// 3. for each name, the theme's directories whose `OutputProfile` is the
///    profile (`stereo`), then those with none, then the theme's own
///    directory; in each, every base directory in order (a user's
///    `$XDG_DATA_HOME` copy of a theme overrides the system's);
/// 4. in each of those, the locale's subdirectories (`de_DE@euro`, `de_DE`,
///    `de@euro`, `de`, `C`), then no locale;
/// 5. in each, `NAME.disabled` (the sound is switched off: `.disabled`,
///    nothing is played and nothing further is searched), then `.oga`,
///    `.ogg`, `.wav`.
/// libcanberra searches in almost this order (it nests base directories
/// outside name truncation: there a truncated name in `~/.local/share` beats
/// the exact name in `/usr/share` within one theme).
///
/// `index.theme` files are untrusted input: read through `UntrustedFile`
/// (regular files only, at most `maxIndexBytes`); one that cannot be read is
/// passed over with a warning, as is a theme that is missing; inheritance
/// loops are cut.
public struct SoundTheme: Sendable {
    /// What a name resolves to.
    public enum Lookup: Equatable, Sendable {
        /// The file to play.
        case file(String)
        /// The theme switches this sound off (the `.disabled` file that says
        /// so): play nothing, and do not fall back to another sound.
        case disabled(String)
        /// No theme, parent or unthemed file has it.
        case notFound
    }

    /// One theme of the chain: its name and the subdirectories searched in it,
    /// in order ("" is the theme's own directory).
    struct Theme: Sendable {
        let name: String
        let directories: [String]
    }

    /// The theme asked for.
    public let name: String
    /// The output profile whose directories come first.
    public let profile: String
    /// Where themes and unthemed sounds are looked for: `$XDG_DATA_HOME/sounds`,
    /// then each `$XDG_DATA_DIRS` entry's `/sounds`.
    public let baseDirectories: [String]
    /// Locale subdirectories tried, most specific first; no locale comes after them.
    public let locales: [String]
    /// Themes missing, unreadable or cut from the chain, in words (for the log).
    public let warnings: [String]
    let themes: [Theme]

    /// The themes searched, in order (each found in a base directory).
    public var chain: [String] { themes.map(\.name) }

    public static let defaultName = "freedesktop"
    /// Sound file extensions, in the order looked for (after `.disabled`).
    public static let extensions = ["oga", "ogg", "wav"]
    /// `index.theme` files are small (freedesktop's is 77 bytes).
    public static let maxIndexBytes = 64 << 10
    /// Themes in a chain, at most (inheritance is rarely more than 3 deep).
    public static let maxChain = 16
    /// Directories a theme may list.
    public static let maxDirectories = 64

    /// `name`: the configured theme (default `freedesktop`). `environment`:
    /// `XDG_DATA_HOME`, `XDG_DATA_DIRS`, `HOME`, and `LC_ALL`/`LC_MESSAGES`/`LANG`.
    public init(name: String = SoundTheme.defaultName, environment: [String: String], profile: String = "stereo") {
        self.init(name: name, baseDirectories: Self.baseDirectories(environment), locales: Self.locales(environment), profile: profile)
    }

    /// Another theme (or output profile) searched in the same directories and locale as
    /// `base`: a theme a request names (`play NAME theme=OTHER`).
    public init(name: String, like base: SoundTheme, profile: String = "stereo") {
        self.init(name: name, baseDirectories: base.baseDirectories, locales: base.locales, profile: profile)
    }

    init(name: String, baseDirectories: [String], locales: [String], profile: String) {
        self.name = name
        self.profile = profile
        self.baseDirectories = baseDirectories
        self.locales = locales
        var warnings: [String] = []
        var themes: [Theme] = []
        var seen: Set<String> = []
        let bases = baseDirectories
        // What each theme's Inherits named that was passed over, by that theme:
        // one warning per broken index, however many names it lists.
        var passedOver: [(parent: String, problems: Problems)] = []
        func note(_ parent: String, _ change: (inout Problems) -> Void) {
            if passedOver.last?.parent != parent { passedOver.append((parent, Problems())) }
            change(&passedOver[passedOver.count - 1].problems)
        }
        let notFoundIn = "not found in " + (bases.isEmpty ? "(no base directories)" : bases.joined(separator: ", "))
        // Depth first through Inherits, each theme once (a loop is cut there).
        func visit(_ theme: String, from parent: String?) {
            guard !seen.contains(theme) else { return }
            seen.insert(theme)
            guard Self.isValidThemeName(theme) else {
                if let parent { note(parent) { $0.invalid.append(theme) } }
                else { warnings.append("sound theme name '\(theme)' is not valid; passed over") }
                return
            }
            guard themes.count < Self.maxChain else {
                if let parent { note(parent) { $0.overLimit.append(theme) } }
                else { warnings.append("sound theme '\(theme)' passed over: more than \(Self.maxChain) themes in the chain") }
                return
            }
            guard let index = Self.readIndex(theme, bases: bases, warnings: &warnings) else {
                if let parent { note(parent) { $0.notFound.append(theme) } }
                else { warnings.append("sound theme '\(theme)' \(notFoundIn)") }
                return
            }
            themes.append(Theme(name: theme, directories: index.directories(for: profile)))
            if index.inheritsPassedOver > 0 {
                warnings.append("sound theme '\(theme)' inherits \(index.inherits.count + index.inheritsPassedOver) themes; "
                                + "the first \(Self.maxChain) are used")
            }
            for p in index.inherits { visit(p, from: theme) }
        }
        visit(name, from: nil)
        visit(Self.defaultName, from: nil)
        for (parent, problems) in passedOver {
            warnings.append("sound theme '\(parent)' inherits themes that are passed over: " + problems.description(notFoundIn: notFoundIn))
        }
        self.themes = themes
        self.warnings = warnings
    }

    /// Names one theme's `Inherits` lists that are passed over, for its one warning.
    struct Problems {
        var invalid: [String] = []
        var notFound: [String] = []
        var overLimit: [String] = []
        /// A few names of each kind, and how many more.
        func description(notFoundIn: String) -> String {
            func few(_ names: [String]) -> String {
                let shown = names.prefix(5).map { "'\($0.prefix(64))'" }.joined(separator: ", ")
                return names.count > 5 ? shown + " and \(names.count - 5) more" : shown
            }
            var parts: [String] = []
            if !notFound.isEmpty { parts.append(few(notFound) + " " + notFoundIn) }
            if !invalid.isEmpty { parts.append(few(invalid) + (invalid.count == 1 ? " is" : " are") + " not a valid theme name") }
            if !overLimit.isEmpty { parts.append(few(overLimit) + ": more than \(SoundTheme.maxChain) themes in the chain") }
            return parts.joined(separator: "; ")
        }
    }

    /// Where `sound` is: a file, switched off, or nowhere.
    public func lookup(_ sound: String) -> Lookup {
        guard Self.isValidSoundName(sound) else { return .notFound }
        for theme in themes {
            for candidate in Self.truncations(sound) {
                for dir in theme.directories {
                    for base in baseDirectories {
                        if let found = find(candidate, in: Self.directory(base, theme.name, dir)) { return found }
                    }
                }
            }
        }
        for candidate in Self.truncations(sound) {
            for base in baseDirectories {
                if let found = find(candidate, in: base) { return found }
            }
        }
        return .notFound
    }

    /// Every sound name `lookup` finds a file for, sorted: what the theme
    /// chain and the unthemed directories offer in this locale.
    public func names() -> [String] {
        var candidates: Set<String> = []
        func collect(_ dir: String) {
            for sub in [dir] + locales.map({ dir + "/" + $0 }) where FileSystem.isDirectory(sub) {
                for file in FileSystem.list(sub) {
                    guard let dot = file.lastIndex(of: "."), dot != file.startIndex else { continue }
                    let ext = file[file.index(after: dot)...]
                    if Self.extensions.contains(String(ext)) { candidates.insert(String(file[..<dot])) }
                }
            }
        }
        for theme in themes {
            for dir in theme.directories {
                for base in baseDirectories { collect(Self.directory(base, theme.name, dir)) }
            }
        }
        for base in baseDirectories { collect(base) }
        return candidates.filter { if case .file = lookup($0) { return true } else { return false } }.sorted()
    }

    /// `BASE/THEME/DIR` ("" is the theme's own directory).
    static func directory(_ base: String, _ theme: String, _ dir: String) -> String {
        dir.isEmpty ? base + "/" + theme : base + "/" + theme + "/" + dir
    }

    /// `NAME.disabled`, then `NAME.oga` … in `dir`'s locale subdirectories, then in `dir`.
    private func find(_ sound: String, in dir: String) -> Lookup? {
        guard FileSystem.isDirectory(dir) else { return nil }
        for locale in locales {
            let sub = dir + "/" + locale
            if FileSystem.isDirectory(sub), let found = Self.find(sound, inExisting: sub) { return found }
        }
        return Self.find(sound, inExisting: dir)
    }

    private static func find(_ sound: String, inExisting dir: String) -> Lookup? {
        let stem = dir + "/" + sound
        if exists(stem + ".disabled") { return .disabled(stem + ".disabled") }
        for ext in extensions where exists(stem + "." + ext) { return .file(stem + "." + ext) }
        return nil
    }

    /// Anything at the path, following symlinks (a dangling one is nothing).
    /// What it is, and whether it decodes, is for the loader to say.
    private static func exists(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0
    }

    /// `message-new-instant` → [`message-new-instant`, `message-new`, `message`].
    static func truncations(_ sound: String) -> [String] {
        var out = [sound]
        var rest = Substring(sound)
        while let dash = rest.lastIndex(of: "-"), dash != rest.startIndex {
            rest = rest[..<dash]
            out.append(String(rest))
        }
        return out
    }

    /// `$XDG_DATA_HOME` (else `~/.local/share`), then `$XDG_DATA_DIRS` (else
    /// `/usr/local/share:/usr/share`), each with `/sounds`; relative entries
    /// are ignored, as the XDG Base Directory spec says.
    static func baseDirectories(_ env: [String: String]) -> [String] {
        var dirs: [String] = []
        if let home = env["XDG_DATA_HOME"], home.hasPrefix("/") { dirs.append(home) }
        else { dirs.append(Path.join(Environment.home(env), ".local/share")) }
        let system = env["XDG_DATA_DIRS"].flatMap { $0.isEmpty ? nil : $0 } ?? "/usr/local/share:/usr/share"
        dirs += system.split(separator: ":").map(String.init).filter { $0.hasPrefix("/") }
        var seen: Set<String> = []
        return dirs.map { Path.normalize($0) + "/sounds" }.filter { seen.insert($0).inserted }
    }

    /// The message locale (`LC_ALL`, else `LC_MESSAGES`, else `LANG`) as the
    /// subdirectories to try: `de_DE.UTF-8@euro` → de_DE@euro, de_DE,
    /// de@euro, de, C. The codeset is dropped (directories are named without it).
    static func locales(_ env: [String: String]) -> [String] {
        let value = ["LC_ALL", "LC_MESSAGES", "LANG"].lazy.compactMap { env[$0] }.first { !$0.isEmpty } ?? "C"
        var rest = Substring(value)
        var modifier: Substring?
        if let at = rest.firstIndex(of: "@") { modifier = rest[rest.index(after: at)...]; rest = rest[..<at] }
        if let dot = rest.firstIndex(of: ".") { rest = rest[..<dot] }
        var territory: Substring?
        if let underscore = rest.firstIndex(of: "_") { territory = rest[rest.index(after: underscore)...]; rest = rest[..<underscore] }
        let language = rest
        func ok(_ s: Substring?) -> Bool {
            guard let s else { return true }
            return !s.isEmpty && s.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7A) || $0 == 0x2D }
        }
        guard ok(language), ok(territory), ok(modifier), language != "C", language != "POSIX" else { return ["C"] }
        var out: [String] = []
        let l = String(language)
        if let territory {
            if let modifier { out.append("\(l)_\(territory)@\(modifier)") }
            out.append("\(l)_\(territory)")
        }
        if let modifier { out.append("\(l)@\(modifier)") }
        out.append(l)
        out.append("C")
        return out
    }

    /// Theme names are directory names: ASCII, no `/`, comma or space (the
    /// specification), and not `.` or `..`.
    static func isValidThemeName(_ s: String) -> Bool {
        !s.isEmpty && s != "." && s != ".." && s.utf8.count <= 255
            && s.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != 0x2F && $0 != 0x2C }
    }

    /// A sound name is one file name: no `/`, not hidden, no control bytes.
    static func isValidSoundName(_ s: String) -> Bool {
        !s.isEmpty && !s.hasPrefix(".") && s.utf8.count <= 255 && s.utf8.allSatisfy { $0 >= 0x20 && $0 != 0x2F && $0 != 0x7F }
    }

    // MARK: index.theme

    /// What the search needs of an `index.theme`.
    struct Index {
        /// At most `maxChain` names: each one not yet seen costs a search of every base
        /// directory, and a 64 KiB index can list 30,000.
        var inherits: [String] = []
        /// Names `Inherits` listed past `maxChain`, passed over.
        var inheritsPassedOver = 0
        /// `Directories=` in order, with each one's `OutputProfile` if its section gives one.
        var directories: [(name: String, profile: String?)] = []

        /// The subdirectories to search for `profile`: those made for it, then
        /// (if it is not stereo) stereo's, then those that name no profile,
        /// then the theme's own directory.
        func directories(for profile: String) -> [String] {
            var out = directories.filter { $0.profile == profile }.map(\.name)
            if profile != "stereo" { out += directories.filter { $0.profile == "stereo" }.map(\.name) }
            out += directories.filter { $0.profile == nil }.map(\.name)
            return out + [""]
        }
    }

    /// The first `index.theme` of `theme` in the base directories (as the
    /// specification says); one that cannot be read is passed over with a warning.
    static func readIndex(_ theme: String, bases: [String], warnings: inout [String]) -> Index? {
        for base in bases {
            let path = base + "/" + theme + "/index.theme"
            guard FileSystem.entry(path) != .none else { continue }
            do {
                return parseIndex(try UntrustedFile.readText(path, maxBytes: maxIndexBytes))
            } catch {
                warnings.append("sound theme index \(error) (passed over)")
            }
        }
        return nil
    }

    /// The `[Sound Theme]` group's `Inherits` and `Directories` (lists split
    /// at commas, and at spaces as the specification's example has them) and
    /// each directory group's `OutputProfile`. Other keys, localized keys and
    /// unsafe directory names (absolute, `..`) are ignored.
    static func parseIndex(_ text: String) -> Index {
        var index = Index()
        var group = ""
        var profiles: [String: String] = [:]
        for rawLine in text.split(omittingEmptySubsequences: true, whereSeparator: { $0 == "\n" || $0 == "\r\n" || $0 == "\r" }) {
            let line = rawLine.trimmingSpaces
            if line.isEmpty || line.hasPrefix("#") { continue }
            if line.hasPrefix("[") && line.hasSuffix("]") {
                group = String(line.dropFirst().dropLast())
                continue
            }
            guard let eq = line.firstIndex(of: "=") else { continue }
            let key = line[..<eq].trimmingSpaces, value = line[line.index(after: eq)...].trimmingSpaces
            func list() -> [String] {
                value.split(whereSeparator: { $0 == "," || $0 == " " || $0 == "\t" }).map(String.init)
            }
            if group == "Sound Theme" {
                if key == "Inherits" {
                    let names = list()
                    index.inherits = Array(names.prefix(maxChain))
                    index.inheritsPassedOver = names.count - index.inherits.count
                }
                if key == "Directories" {
                    index.directories = list().filter(isSafeSubdirectory).prefix(maxDirectories).map { ($0, nil) }
                }
            } else if key == "OutputProfile", !value.isEmpty {
                profiles[group] = String(value)
            }
        }
        for i in index.directories.indices { index.directories[i].profile = profiles[index.directories[i].name] }
        return index
    }

    /// A relative path below the theme directory: no `..`, `.` or empty part.
    static func isSafeSubdirectory(_ s: String) -> Bool {
        !s.hasPrefix("/") && s.utf8.count <= 255
            && s.split(separator: "/", omittingEmptySubsequences: false).allSatisfy { !$0.isEmpty && $0 != "." && $0 != ".." }
            && s.utf8.allSatisfy { $0 >= 0x20 && $0 != 0x7F }
    }
}

/// Cache keys for decoded sounds (`SoundCache<SoundKey>`): a theme sound by
/// theme, the name asked for and the theme's generation (a reload that changes
/// the theme starts a new one, so the old sounds are never found again and age
/// out), or a file by what it is (so an edited or replaced file is decoded anew).
public enum SoundKey: Hashable, Sendable {
    case theme(theme: String, sound: String, generation: Int = 0)
    case file(FileIdentity)
}

extension Substring {
    var trimmingSpaces: Substring {
        var s = self
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" { s.removeLast() }
        return s
    }
}
