import CSndFile
import CuedCore
import CuedSystem
#if canImport(Glibc)
import Glibc
#endif

/// Builds the cue bank from the sounds directories: every readable file, named
/// by its base name, a later directory overriding an earlier one. A file is decoded
/// once however many cues name it (keyed by what the file is: device, inode, size,
/// mtime, as the sound cache keys it), and not at all if the bank it replaces
/// decoded that same file (`reuse`).
public struct CueBankLoader: Sendable {
    public struct Result: Sendable {
        public var bank: CueBank
        /// Files skipped, with why (unreadable, too long…).
        public var warnings: [String]
        /// The bank's decoded files by identity (for the next load's `reuse`).
        public var sounds: [FileIdentity: SoundBuffer]
    }

    public enum Failure: Error, Sendable, CustomStringConvertible {
        case missingRequired(String, searched: [String])
        case brokenRequired(SndFileError)
        /// A cue named explicitly (config `[cues.NAME] file`) that does not load.
        case brokenConfigured(name: String, SndFileError)
        /// A cue the memory budget has no room for: the whole load fails.
        case overBudget(name: String, SndFileError)
        public var description: String {
            switch self {
            case .brokenConfigured(_, let e): return "\(e)"
            case .overBudget(let name, let e): return "\(e.path): cue '\(name)': \(e.reason)"
            case .missingRequired(let name, let dirs):
                return "required cue '\(name)' not found in \(dirs.isEmpty ? "(no sounds directories)" : dirs.joined(separator: ", "))"
            case .brokenRequired(let e): return "required cue unreadable: \(e)"
            }
        }
    }

    public var loader: CueLoader
    public init(loader: CueLoader = CueLoader()) { self.loader = loader }

    /// `files` names cues explicitly (name → paths: one, or its variants); they override the
    /// directories, and unlike files found there, one that fails is an error. In a
    /// directory, `NAME-2.wav`, `NAME-3.wav`… beside `NAME.wav` are NAME's variants (a
    /// later directory's NAME replaces the whole set). `reuse`: files decoded before (the
    /// bank in force), taken as they are if unchanged.
    public func load(directories: [String], files: [String: [String]] = [:],
                     reuse: [FileIdentity: SoundBuffer] = [:]) throws(Failure) -> Result {
        // libsndfile loaded once for the whole bank, not once a file (each decode takes a reference).
        var why: UnsafePointer<CChar>?
        let held = cued_sf_acquire(&why) != nil
        defer { if held { cued_sf_release() } }
        var chosen: [String: (paths: [String], dir: Int)] = [:]  // name → its variants' paths; later directories win
        for (i, dir) in directories.enumerated() {
            var here: [String: [Int: String]] = [:]  // name → variant number → path
            for entry in Self.listFiles(dir) where !entry.hasPrefix(".") && Self.isAudioName(entry) {
                let name = Self.baseName(entry)
                guard !name.isEmpty else { continue }
                here[name, default: [:]][1] = dir + "/" + entry
            }
            for name in here.keys.sorted() {
                guard let (base, n) = Self.variantOf(name), here[base] != nil, let path = here[name]?[1] else { continue }
                here[base]![n] = path
                here[name] = nil
            }
            for (name, set) in here { chosen[name] = (set.keys.sorted().map { set[$0]! }, i) }
        }
        for (name, paths) in files where !paths.isEmpty { chosen[name] = (paths, -1) }
        var variants: [String: [Cue]] = [:]
        var sounds: [FileIdentity: SoundBuffer] = [:]
        var skipped = [[String]](repeating: [], count: directories.count)
        for (name, found) in chosen.sorted(by: { $0.key < $1.key }) {
            for (k, path) in found.paths.enumerated() {
                do throws(SndFileError) {
                    variants[name, default: []].append(try load(name: name, path: path, decoded: &sounds, reuse: reuse))
                } catch {
                    if error.overBudget { throw .overBudget(name: name, error) }
                    if files[name] != nil { throw .brokenConfigured(name: name, error) }
                    if k == 0 && CueBank.required.contains(name) { throw .brokenRequired(error) }
                    skipped[found.dir].append("skipped \(error)")
                }
            }
        }
        for name in CueBank.required where variants[name]?.isEmpty ?? true {
            throw .missingRequired(name, searched: directories)
        }
        let warnings = zip(directories, skipped).compactMap { dir, lines in Self.skipWarning(dir: dir, lines) }
        return Result(bank: CueBank(variants: variants), warnings: warnings, sounds: sounds)
    }

    /// `pop-2` → (`pop`, 2): a variant's name, numbered from 2 (at most 64).
    static func variantOf(_ name: String) -> (base: String, number: Int)? {
        guard let dash = name.lastIndex(of: "-") else { return nil }
        let digits = name[name.index(after: dash)...]
        guard !digits.isEmpty, digits.count <= 2, digits.allSatisfy(\.isASCII), let n = Int(digits), (2...64).contains(n),
              !digits.hasPrefix("0"), dash != name.startIndex else { return nil }
        return (String(name[..<dash]), n)
    }

    /// One cue: the file's samples decoded by this load or the last, else decoded now.
    private func load(name: String, path: String, decoded: inout [FileIdentity: SoundBuffer],
                      reuse: [FileIdentity: SoundBuffer]) throws(SndFileError) -> Cue {
        let file: OpenedFile
        do { file = try UntrustedFile.openIdentified(path) } catch { throw SndFileError(path: path, reason: error.reason) }
        defer { close(file.fd) }
        if let sound = decoded[file.identity] ?? reuse[file.identity] {
            decoded[file.identity] = sound
            return Cue(name: name, sound: sound, source: path)
        }
        let cue = try loader.load(file, path: path, name: name)
        decoded[file.identity] = cue.sound
        return cue
    }

    /// Files named at most in a directory's one warning about what it skipped.
    public static let maxNamedSkips = 8

    /// One warning per directory, not one per file (a directory of 5,000 broken
    /// files logged 5,000 lines a reload): the first `maxNamedSkips` files with
    /// their reasons, and how many more.
    static func skipWarning(dir: String, _ lines: [String]) -> String? {
        guard !lines.isEmpty else { return nil }
        let named = lines.prefix(maxNamedSkips).joined(separator: "; ")
        let more = lines.count - maxNamedSkips
        return more > 0 ? named + "; and \(more) more files in \(dir) that cannot be played" : named
    }

    /// Extensions of the formats libsndfile reads. Other files (a README, a
    /// licence) are not cues and are passed over without a warning.
    static let audioExtensions: Set<String> = [
        "wav", "wave", "wavex", "aif", "aiff", "aifc", "au", "snd", "caf", "flac", "ogg", "oga", "opus",
        "w64", "rf64", "voc", "paf", "svx", "nist", "sph", "ircam", "sf", "mat4", "mat5", "pvf", "xi",
        "htk", "sds", "avr", "sd2", "wve", "mpc", "mp3", "mp2", "raw",
    ]

    static func isAudioName(_ file: String) -> Bool {
        guard let dot = file.lastIndex(of: ".") else { return false }
        return audioExtensions.contains(file[file.index(after: dot)...].lowercased())
    }

    /// `pop.wav` → `pop`; names that are not valid cue names are skipped.
    static func baseName(_ file: String) -> String {
        let stem = file.split(separator: ".", omittingEmptySubsequences: false).dropLast().joined(separator: ".")
        let name = stem.isEmpty ? file : stem
        return name.utf8.allSatisfy({ $0 > 0x20 && $0 != 0x2F }) ? name : ""
    }

    /// The names in `dir` whatever they are: a FIFO, a device or a directory
    /// named like a sound is then refused by `UntrustedFile` with a reason
    /// (a warning, or the error if it is a required cue), not passed over.
    static func listFiles(_ dir: String) -> [String] { FileSystem.list(dir) }
}
