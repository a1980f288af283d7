import CSampleRate
import CSndFile
import CuedCore
#if canImport(Glibc)
import Glibc
#endif

/// A libsndfile failure, with the file and libsndfile's reason.
public struct SndFileError: Error, Sendable, CustomStringConvertible {
    public let path: String
    public let reason: String
    public var description: String { "\(path): \(reason)" }
}

/// Decodes audio files once into `Cue`s in the output format (float,
/// interleaved stereo, `rate`), resampling with libsamplerate.
public struct CueLoader: Sendable {
    public var rate: Int
    public var maxSeconds: Double

    public init(rate: Int = 48_000, maxSeconds: Double = 10) {
        self.rate = rate; self.maxSeconds = maxSeconds
    }

    /// Loads one file as a cue named `name`.
    public func load(path: String, name: String) throws(SndFileError) -> Cue {
        var info = SF_INFO()
        guard let file = sf_open(path, Int32(SFM_READ), &info) else {
            throw SndFileError(path: path, reason: String(cString: sf_strerror(nil)))
        }
        defer { sf_close(file) }
        let channels = Int(info.channels), frames = Int(info.frames), srcRate = Int(info.samplerate)
        guard channels > 0, srcRate > 0 else { throw SndFileError(path: path, reason: "no audio channels") }
        let seconds = Double(frames) / Double(srcRate)
        guard seconds <= maxSeconds else {
            throw SndFileError(path: path, reason: "cue is \(Int(seconds.rounded())) s long; at most \(Int(maxSeconds)) s allowed")
        }
        guard frames > 0 else { throw SndFileError(path: path, reason: "file has no audio frames") }

        var raw = [Float](repeating: 0, count: frames * channels)
        let read = raw.withUnsafeMutableBufferPointer { sf_readf_float(file, $0.baseAddress, sf_count_t(frames)) }
        guard read == frames else {
            let why = sf_error(file) != 0 ? String(cString: sf_strerror(file)) : "truncated: read \(read) of \(frames) frames"
            throw SndFileError(path: path, reason: why)
        }

        // Mono is copied to both channels; stereo kept; more channels: the first two.
        var stereo = [Float](repeating: 0, count: frames * 2)
        for f in 0..<frames {
            let l = raw[f * channels]
            stereo[2 * f] = l
            stereo[2 * f + 1] = channels > 1 ? raw[f * channels + 1] : l
        }
        if srcRate != rate { stereo = try resample(stereo, from: srcRate, path: path) }
        return Cue(name: name, stereo: stereo, source: path)
    }

    private func resample(_ input: [Float], from srcRate: Int, path: String) throws(SndFileError) -> [Float] {
        let ratio = Double(rate) / Double(srcRate)
        let inFrames = input.count / 2
        let outCapacity = Int((Double(inFrames) * ratio).rounded(.up)) + 16
        var output = [Float](repeating: 0, count: outCapacity * 2)
        var data = SRC_DATA()
        let rc: Int32 = input.withUnsafeBufferPointer { inp in
            output.withUnsafeMutableBufferPointer { out in
                data.data_in = inp.baseAddress
                data.input_frames = inFrames
                data.data_out = out.baseAddress
                data.output_frames = outCapacity
                data.src_ratio = ratio
                return src_simple(&data, Int32(SRC_SINC_BEST_QUALITY), 2)
            }
        }
        guard rc == 0 else { throw SndFileError(path: path, reason: "resampling failed: \(String(cString: src_strerror(rc)))") }
        output.removeLast(output.count - Int(data.output_frames_gen) * 2)
        return output
    }
}

/// Builds the cue bank from the sounds directories: every readable file, named
/// by its base name, a later directory overriding an earlier one.
public struct CueBankLoader: Sendable {
    public struct Result: Sendable {
        public var bank: CueBank
        /// Files skipped, with why (unreadable, too long…).
        public var warnings: [String]
    }

    public enum Failure: Error, Sendable, CustomStringConvertible {
        case missingRequired(String, searched: [String])
        case brokenRequired(SndFileError)
        /// A cue named explicitly (config `[cues.NAME] file`) that does not load.
        case brokenConfigured(name: String, SndFileError)
        public var description: String {
            switch self {
            case .brokenConfigured(_, let e): return "\(e)"
            case .missingRequired(let name, let dirs):
                return "required cue '\(name)' not found in \(dirs.isEmpty ? "(no sounds directories)" : dirs.joined(separator: ", "))"
            case .brokenRequired(let e): return "required cue unreadable: \(e)"
            }
        }
    }

    public var loader: CueLoader
    public init(loader: CueLoader = CueLoader()) { self.loader = loader }

    /// `files` names cues explicitly (name → path); they override the
    /// directories, and unlike files found there, one that fails is an error.
    public func load(directories: [String], files: [String: String] = [:]) throws(Failure) -> Result {
        var chosen: [String: String] = [:]  // name → path; later directories win
        for dir in directories {
            for entry in Self.listFiles(dir) where !entry.hasPrefix(".") && Self.isAudioName(entry) {
                let name = Self.baseName(entry)
                guard !name.isEmpty else { continue }
                chosen[name] = dir + "/" + entry
            }
        }
        for (name, path) in files { chosen[name] = path }
        var cues: [Cue] = []
        var warnings: [String] = []
        for (name, path) in chosen.sorted(by: { $0.key < $1.key }) {
            do throws(SndFileError) {
                cues.append(try loader.load(path: path, name: name))
            } catch {
                if files[name] != nil { throw .brokenConfigured(name: name, error) }
                if CueBank.required.contains(name) { throw .brokenRequired(error) }
                warnings.append("skipped \(error)")
            }
        }
        for name in CueBank.required where !cues.contains(where: { $0.name == name }) {
            throw .missingRequired(name, searched: directories)
        }
        return Result(bank: CueBank(cues), warnings: warnings)
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

    static func listFiles(_ dir: String) -> [String] {
        guard let d = opendir(dir) else { return [] }
        defer { closedir(d) }
        var names: [String] = []
        while let e = readdir(d) {
            let name = withUnsafeBytes(of: e.pointee.d_name) { buf in
                String(cString: buf.baseAddress!.assumingMemoryBound(to: CChar.self))
            }
            var st = stat()
            if stat(dir + "/" + name, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG { names.append(name) }
        }
        return names.sorted()
    }
}
