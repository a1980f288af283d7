import CSampleRate
import CSndFile
import CuedCore
import CuedSystem
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A sound file that cannot be used, and why: `PATH: REASON`.
public struct SndFileError: Error, Sendable, CustomStringConvertible {
    public let path: String
    public let reason: String
    /// Refused by the memory budget, not for what the file is: a reload fails for it
    /// as a whole, even for a file it would otherwise skip.
    public let overBudget: Bool
    public init(path: String, reason: String, overBudget: Bool = false) {
        self.path = path; self.reason = reason; self.overBudget = overBudget
    }
    init(path: String, _ failure: SampleMemoryFailure) {
        self.init(path: path, reason: failure.reason, overBudget: { if case .overBudget = failure { true } else { false } }())
    }
    public var description: String { "\(path): \(reason)" }
}

/// Decodes audio files once into `Cue`s in the output format (float,
/// interleaved stereo, `rate`), resampling with libsamplerate.
///
/// Sound files are untrusted input. A file is opened with
/// `UntrustedFile` (nothing but a regular file is read, nothing blocks) and
/// libsndfile reads that descriptor through a `SoundFileReader` (bounded
/// reads, no kernel readahead). Every allocation is bounded before it is
/// made by what the header and the file's size allow: rate and channels are
/// checked against what is played (`sourceRates`, `maxChannels`), the header's
/// length against `maxSeconds`, an uncompressed file's length against its
/// bytes; the file is decoded in chunks of `chunkFrames`, mixed to stereo and
/// resampled as it goes, so only the output (at most `maxSeconds` at `rate`)
/// is ever held whole, and decoding stops just past `maxSeconds` whatever the
/// header said. The buffers are `SampleMemory` charged to `budget` (with an
/// estimate of what libsndfile and libsamplerate hold meanwhile): an allocation
/// the budget refuses or the system cannot make (say under `RLIMIT_AS`) is an
/// error naming the file, not a trap.
public struct CueLoader: Sendable {
    public var rate: Int
    public var maxSeconds: Double
    /// What decoded sound is charged to; nil: not counted.
    public var budget: SoundBudget?

    /// Source rates accepted: 1 kHz (below any real recording; libsamplerate's
    /// 256:1 ratio limit would allow 188 Hz at 48 kHz out) to 768 kHz (the
    /// highest rate DACs and ALSA offer).
    public static let sourceRates: ClosedRange<Int> = 1_000...768_000
    /// Channels accepted: up to 64 (large ambisonic and cinema layouts; the
    /// first two are played). The decode chunk is 64 × 4096 floats = 1 MiB at most.
    public static let maxChannels = 64
    /// Frames decoded per libsndfile call.
    static let chunkFrames = 4_096

    static let openLock = Mutex(())

    public init(rate: Int = 48_000, maxSeconds: Double = 10, budget: SoundBudget? = nil) {
        self.rate = rate; self.maxSeconds = maxSeconds; self.budget = budget
    }

    /// Loads one file as a cue named `name`.
    public func load(path: String, name: String) throws(SndFileError) -> Cue {
        try loadIdentified(path: path, name: name).cue
    }

    /// Loads one file and returns, with the cue, the identity of the file
    /// that was decoded (both from the same open), e.g. to cache it.
    public func loadIdentified(path: String, name: String) throws(SndFileError) -> (cue: Cue, identity: FileIdentity) {
        let file: OpenedFile
        do { file = try UntrustedFile.openIdentified(path) } catch { throw SndFileError(path: path, reason: error.reason) }
        defer { close(file.fd) }
        return (try load(file, path: path, name: name), file.identity)
    }

    /// The reason a decode stopped because its caller cancelled it.
    public static let cancelledReason = "decoding was cancelled"

    /// Decodes a file already opened by `UntrustedFile.openIdentified`, from
    /// its first byte; `path` names it in errors and in `Cue.source`. The
    /// descriptor is left open (the caller closes it). `cancelled` is asked
    /// between chunks: once it says true, decoding stops (`cancelledReason`),
    /// so a caller whose deadline passed gets its thread back within a chunk.
    public func load(_ file: OpenedFile, path: String, name: String,
                     cancelled: () -> Bool = { false }) throws(SndFileError) -> Cue {
        // Without a bound there is always a cue (or an error).
        try decode(file, path: path, name: name, maxSamples: nil, cancelled: cancelled)!
    }

    /// Like `load`, but only if the header says the file is small: a known
    /// length of at most `maxSamples` samples (frames × channels, what decoding
    /// costs in proportion to: a small file on disk may decode to a lot). nil,
    /// after reading only the header, if it is longer or its length is unknown.
    /// Errors the header shows (channels, rate, length, size) are thrown either way.
    public func loadIfSmall(_ file: OpenedFile, path: String, name: String, maxSamples: Int,
                            cancelled: () -> Bool = { false }) throws(SndFileError) -> Cue? {
        try decode(file, path: path, name: name, maxSamples: maxSamples, cancelled: cancelled)
    }

    private func decode(_ file: OpenedFile, path: String, name: String, maxSamples: Int?,
                        cancelled: () -> Bool) throws(SndFileError) -> Cue? {
        func fail(_ reason: String) -> SndFileError { SndFileError(path: path, reason: reason) }
        func fail(_ failure: SampleMemoryFailure) -> SndFileError { SndFileError(path: path, failure) }
        // What libsndfile holds while it decodes, charged until the end.
        guard let decoder = BudgetReservation(bytes: BudgetReservation.decoderBytes, budget: budget) else {
            throw fail(.overBudget(budget!.refusal(BudgetReservation.decoderBytes)))
        }
        defer { withExtendedLifetime(decoder) {} }
        // libsndfile reads through a reader of cued's: bounded reads, no kernel readahead
        // (a read of a sparse file would zero megabytes in the kernel, holding a core).
        let reader: SoundFileReader
        do { reader = try SoundFileReader(file, budget: budget) } catch { throw fail(error) }
        // The header is read here first, outside the lock below: a file on a file system
        // that stopped answering blocks this thread alone (the decoding lane writes it
        // off), not every other decode waiting for the lock.
        if let problem = reader.readStart() { throw fail(problem) }
        var info = SF_INFO()
        var io = SoundFileReader.virtualIO()
        // libsndfile keeps the reason an open failed in one process-wide
        // variable: opens are serialised so that the reason read is this one's.
        let user = Unmanaged.passUnretained(reader).toOpaque()
        var handle: OpaquePointer?
        let openError: String? = Self.openLock.withLock { _ in
            handle = sf_open_virtual(&io, Int32(SFM_READ), &info, user)
            return handle == nil ? String(cString: sf_strerror(nil)) : nil
        }
        guard let sndfile = handle else {
            if let read = reader.failure { throw fail("cannot read it: \(errnoString(read))") }
            throw fail(openError ?? "cannot be opened")
        }
        defer {
            sf_close(sndfile)
            withExtendedLifetime(reader) {}
        }

        let channels = Int(info.channels), srcRate = Int(info.samplerate)
        guard (1...Self.maxChannels).contains(channels) else {
            throw fail("has \(channels) channels; at most \(Self.maxChannels) are played")
        }
        guard Self.sourceRates.contains(srcRate) else {
            throw fail("has a sample rate of \(srcRate) Hz; \(Self.sourceRates.lowerBound) to \(Self.sourceRates.upperBound) Hz are played")
        }
        let ratio = Double(rate) / Double(srcRate)
        guard srcRate == rate || src_is_valid_ratio(ratio) != 0 else {
            throw fail("cannot be resampled from \(srcRate) Hz to \(rate) Hz")
        }
        // The most frames played; decoding reads one more to see a file that is longer.
        let limit = Int(maxSeconds * Double(srcRate))
        // libsndfile says SF_COUNT_MAX (or nonsense) when it cannot know the length.
        let known: Int? = info.frames >= 0 && info.frames < sf_count_t.max ? Int(info.frames) : nil
        if let frames = known {
            guard frames <= limit else {
                throw fail("is \(Self.seconds(frames, rate: srcRate, over: maxSeconds)) s long; at most \(Self.number(maxSeconds)) s")
            }
            guard frames > 0 else { throw fail("has no audio frames") }
            if let problem = Self.sizeProblem(frames: frames, channels: channels, format: info.format, fileSize: file.size) {
                throw fail(problem)
            }
        }
        if let maxSamples {
            guard let frames = known else { return nil }
            let (samples, overflow) = frames.multipliedReportingOverflow(by: channels)
            guard !overflow, samples <= maxSamples else { return nil }
        }
        if cancelled() { throw fail(Self.cancelledReason) }
        let inFrames = min(known ?? limit, limit)
        let capacity = srcRate == rate ? inFrames : Int((Double(inFrames) * ratio).rounded(.up)) + Int(ratio.rounded(.up)) + 32

        // Output (owned by the cue once made), then the per-chunk buffers.
        var out: SampleBuffer
        do { out = try SampleBuffer(frames: capacity, channels: 2, budget: budget) } catch { throw fail(error) }
        let chunk: SampleBuffer
        do { chunk = try SampleBuffer(frames: Self.chunkFrames, channels: channels, budget: budget) } catch { throw fail(error) }
        var resampler: Resampler?
        if srcRate != rate {
            do { resampler = try Resampler(ratio: ratio, chunkFrames: Self.chunkFrames, budget: budget) } catch {
                if case .noMemory = error { throw fail(error.reason + " (resampler)") }
                throw fail(error)
            }
        }

        var decoded = 0
        while decoded <= limit {
            if cancelled() { throw fail(Self.cancelledReason) }
            let want = min(Self.chunkFrames, limit + 1 - decoded)
            let n = Int(sf_readf_float(sndfile, chunk.base, sf_count_t(want)))
            if n <= 0 { break }
            if let bad = Self.firstNonFinite(chunk.base, count: n * channels) {
                throw fail("holds a sample that \(bad.value) in frame \(decoded + bad.index / channels + 1)")
            }
            decoded += n
            guard decoded <= limit else {
                throw fail("decodes to more than \(Self.number(maxSeconds)) s of audio (stopped there); at most \(Self.number(maxSeconds)) s")
            }
            if let resampler {
                Self.toStereo(chunk.base, channels: channels, frames: n, into: resampler.input)
                guard resampler.process(frames: n, into: &out) else { throw fail(resampler.failure) }
            } else {
                guard out.count + n <= out.capacity else { throw fail("decodes to more frames than its header claims") }
                Self.toStereo(chunk.base, channels: channels, frames: n, into: out.base + out.count * 2)
                out.count += n
            }
        }
        if let e = reader.failure { throw fail("cannot read it: \(errnoString(e))") }
        if sf_error(sndfile) != 0 { throw fail(String(cString: sf_strerror(sndfile))) }
        if let frames = known, decoded < frames {
            throw fail("is truncated: \(decoded) of the \(frames) frames its header claims could be read")
        }
        guard decoded > 0 else { throw fail("has no audio frames") }
        if let resampler {
            guard resampler.finish(into: &out) else { throw fail(resampler.failure) }
        }
        return Cue(name: name, sound: out.take(), source: path)
    }

    /// A float or double file may hold NaN or ±infinity (a double beyond a float's
    /// range reads as infinity), which no mix can play (`Int16(NaN)` traps): the
    /// first such value, if any, and what it is.
    static func firstNonFinite(_ p: UnsafePointer<Float>, count: Int) -> (index: Int, value: String)? {
        for i in 0..<count where !p[i].isFinite {
            return (i, p[i].isNaN ? "is not a number (NaN)"
                : "is infinite or beyond a float's range (\(p[i] < 0 ? "-" : "+")infinity when read)")
        }
        return nil
    }

    /// Mono is copied to both channels; stereo kept; more channels: the first two.
    static func toStereo(_ src: UnsafePointer<Float>, channels: Int, frames: Int, into dst: UnsafeMutablePointer<Float>) {
        if channels == 2 {
            dst.update(from: src, count: frames * 2)
            return
        }
        for f in 0..<frames {
            let l = src[f * channels]
            dst[2 * f] = l
            dst[2 * f + 1] = channels > 1 ? src[f * channels + 1] : l
        }
    }

    /// Uncompressed, the header cannot claim more frames than the file's
    /// bytes hold. (libsndfile already cuts WAV, RF64 and AU headers to the
    /// file's size; this holds for every uncompressed format whatever it does.)
    static func sizeProblem(frames: Int, channels: Int, format: Int32, fileSize: Int) -> String? {
        guard let width = bytesPerSample(format: format) else { return nil }
        let (needed, overflow) = frames.multipliedReportingOverflow(by: channels * width)
        guard overflow || needed > fileSize else { return nil }
        return "its header claims \(frames) frames (\(overflow ? "more than \(Int.max)" : "\(needed)") bytes of audio) but the file has \(fileSize) bytes"
    }

    /// Bytes per sample of uncompressed formats, whose length the file's
    /// size bounds; nil for compressed ones (FLAC, Ogg, MPEG, ADPCM…).
    static func bytesPerSample(format: Int32) -> Int? {
        let major = Int(format) & Int(SF_FORMAT_TYPEMASK), sub = Int(format) & Int(SF_FORMAT_SUBMASK)
        let plain = [SF_FORMAT_WAV, SF_FORMAT_WAVEX, SF_FORMAT_RF64, SF_FORMAT_W64, SF_FORMAT_AIFF, SF_FORMAT_AU,
                     SF_FORMAT_CAF, SF_FORMAT_RAW].map { Int($0) }
        guard plain.contains(major) else { return nil }
        switch sub {
        case Int(SF_FORMAT_PCM_S8), Int(SF_FORMAT_PCM_U8), Int(SF_FORMAT_ULAW), Int(SF_FORMAT_ALAW): return 1
        case Int(SF_FORMAT_PCM_16): return 2
        case Int(SF_FORMAT_PCM_24): return 3
        case Int(SF_FORMAT_PCM_32), Int(SF_FORMAT_FLOAT): return 4
        case Int(SF_FORMAT_DOUBLE): return 8
        default: return nil
        }
    }

    /// `frames / rate` seconds with the fewest decimals (2 to 6, cut, never
    /// rounded up) that show it is over `limit`: 10.01, 10.00002, 11.
    static func seconds(_ frames: Int, rate: Int, over limit: Double) -> String {
        var scale = 100
        for decimals in 2...6 {
            let (scaled, overflow) = frames.multipliedReportingOverflow(by: scale)
            if overflow { break }
            let value = scaled / rate
            if Double(value) / Double(scale) > limit || decimals == 6 {
                var digits = String(value)
                while digits.count <= decimals { digits = "0" + digits }
                var whole = String(digits.dropLast(decimals)), fraction = String(digits.suffix(decimals))
                while fraction.hasSuffix("0") { fraction.removeLast() }
                if whole.isEmpty { whole = "0" }
                return fraction.isEmpty ? whole : whole + "." + fraction
            }
            scale *= 10
        }
        return String(frames / rate)
    }

    /// 10 → "10", 2.5 → "2.5" (three decimals at most).
    static func number(_ x: Double) -> String {
        let thousandths = Int((x * 1000).rounded())
        var s = String(thousandths / 1000)
        var fraction = String(thousandths % 1000)
        while fraction.count < 3 { fraction = "0" + fraction }
        while fraction.hasSuffix("0") { fraction.removeLast() }
        if !fraction.isEmpty { s += "." + fraction }
        return s
    }
}

/// Interleaved float frames in `SampleMemory` (charged to the budget), filled from
/// the front. Not copyable: one owner; `take()` hands the filled part to a `SoundBuffer`.
struct SampleBuffer: ~Copyable {
    private var memory: SampleMemory
    let base: UnsafeMutablePointer<Float>
    let channels: Int
    /// Frames the memory holds, and frames filled.
    let capacity: Int
    var count = 0

    init(frames: Int, channels: Int, budget: SoundBudget?) throws(SampleMemoryFailure) {
        let stride = channels * MemoryLayout<Float>.stride
        guard frames >= 0, channels > 0, frames <= Int.max / stride else { throw .noMemory(bytes: Int.max) }
        // At least one page, so that `base` is never nil.
        switch SampleMemory.allocate(max(frames * stride, 1), budget: budget) {
        case .success(let m): memory = m
        case .failure(let e): throw e
        }
        base = memory.base!.assumingMemoryBound(to: Float.self)
        self.channels = channels
        capacity = frames
    }

    /// The filled part, the pages past it given back.
    consuming func take() -> SoundBuffer {
        let samples = count * channels
        memory.shrink(to: samples * MemoryLayout<Float>.stride)
        return SoundBuffer(adopting: memory, count: samples)
    }
}

/// libsamplerate's streaming converter (best quality), stereo, fed chunk by
/// chunk so the source is never held whole.
final class Resampler {
    private let state: OpaquePointer
    private let ratio: Double
    /// Where the caller puts up to `chunkFrames` stereo frames before `process`.
    let input: UnsafeMutablePointer<Float>
    private let memory: SampleBuffer
    /// The budget held for libsamplerate's own state.
    private let held: BudgetReservation
    private(set) var failure = ""

    init(ratio: Double, chunkFrames: Int, budget: SoundBudget?) throws(SampleMemoryFailure) {
        var error: Int32 = 0
        // Best quality costs time in proportion to the source rate: from
        // above twice the output rate (96 kHz for 48), medium quality (121 dB
        // SNR, 90 % bandwidth: far beyond what a cue needs) keeps a 10 s file
        // at 768 kHz to about a second instead of six.
        let best = ratio >= 0.5
        let stateBytes = best ? BudgetReservation.bestResamplerBytes : BudgetReservation.mediumResamplerBytes
        guard let held = BudgetReservation(bytes: stateBytes, budget: budget) else { throw .overBudget(budget!.refusal(stateBytes)) }
        memory = try SampleBuffer(frames: chunkFrames, channels: 2, budget: budget)
        guard let s = src_new(Int32(best ? SRC_SINC_BEST_QUALITY : SRC_SINC_MEDIUM_QUALITY), 2, &error) else {
            throw .noMemory(bytes: stateBytes)
        }
        self.held = held
        state = s
        input = memory.base
        self.ratio = ratio
    }

    deinit {
        src_delete(state)
    }

    /// Converts the `frames` in `input`, appending to `out`. False (see
    /// `failure`) if libsamplerate fails or `out` is full.
    func process(frames: Int, into out: inout SampleBuffer) -> Bool {
        var used = 0
        while used < frames {
            guard let (consumed, _) = step(input + used * 2, frames - used, end: false, into: &out) else { return false }
            used += consumed
        }
        return true
    }

    /// Flushes what the filter still holds at the end of the input.
    func finish(into out: inout SampleBuffer) -> Bool {
        while true {
            guard let (_, generated) = step(input, 0, end: true, into: &out) else { return false }
            if generated == 0 { return true }
        }
    }

    private func step(_ source: UnsafeMutablePointer<Float>, _ frames: Int, end: Bool,
                      into out: inout SampleBuffer) -> (consumed: Int, generated: Int)? {
        let room = out.capacity - out.count
        guard room > 0 else {
            failure = "resampling produced more frames than its length allows"
            return nil
        }
        var data = SRC_DATA()
        data.data_in = UnsafePointer(source)
        data.input_frames = frames
        data.data_out = out.base + out.count * 2
        data.output_frames = room
        data.end_of_input = end ? 1 : 0
        data.src_ratio = ratio
        let rc = src_process(state, &data)
        guard rc == 0 else {
            failure = "resampling failed: \(String(cString: src_strerror(rc)))"
            return nil
        }
        out.count += data.output_frames_gen
        if frames > 0 && data.input_frames_used == 0 && data.output_frames_gen == 0 {
            failure = "resampling made no progress"
            return nil
        }
        return (data.input_frames_used, data.output_frames_gen)
    }
}

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
