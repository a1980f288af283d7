import CSampleRate
import CSndFile
import CuedCore
import CuedSystem
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// libsndfile's words for an error (from its table of functions, whose strings are not annotated).
func sfText(_ text: UnsafePointer<CChar>?) -> String { text.map { String(cString: $0) } ?? "unknown error" }

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
        // libsndfile is loaded while something decodes (see CSndFile/shim.h).
        var why: UnsafePointer<CChar>?
        guard let sf = cued_sf_acquire(&why)?.pointee else { throw fail(why.map { String(cString: $0) } ?? "cannot load libsndfile") }
        defer { cued_sf_release() }
        var info = SF_INFO()
        var io = SoundFileReader.virtualIO()
        // libsndfile keeps the reason an open failed in one process-wide
        // variable: opens are serialised so that the reason read is this one's.
        let user = Unmanaged.passUnretained(reader).toOpaque()
        var handle: OpaquePointer?
        let openError: String? = Self.openLock.withLock { _ in
            handle = sf.sf_open_virtual!(&io, Int32(SFM_READ), &info, user)
            return handle == nil ? sfText(sf.sf_strerror!(nil)) : nil
        }
        guard let sndfile = handle else {
            if let read = reader.failure { throw fail("cannot read it: \(errnoString(read))") }
            throw fail(openError ?? "cannot be opened")
        }
        defer {
            _ = sf.sf_close!(sndfile)
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
            guard Self.fewestFrames(claimed: frames, format: info.format) <= limit else {
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

        // Output (owned by the cue once made), then the per-chunk buffers. A mono source stays mono
        // (half the memory; the mixer plays it on both sides), anything else becomes stereo.
        var out: SampleBuffer
        let outChannels = channels == 1 ? 1 : 2
        do { out = try SampleBuffer(frames: capacity, channels: outChannels, budget: budget) } catch { throw fail(error) }
        let chunk: SampleBuffer
        do { chunk = try SampleBuffer(frames: Self.chunkFrames, channels: channels, budget: budget) } catch { throw fail(error) }
        var resampler: Resampler?
        if srcRate != rate {
            do { resampler = try Resampler(ratio: ratio, chunkFrames: Self.chunkFrames, channels: outChannels, budget: budget) } catch {
                if case .noMemory = error { throw fail(error.reason + " (resampler)") }
                throw fail(error)
            }
        }

        var decoded = 0
        while decoded <= limit {
            if cancelled() { throw fail(Self.cancelledReason) }
            let want = min(Self.chunkFrames, limit + 1 - decoded)
            let n = Int(sf.sf_readf_float!(sndfile, chunk.base, sf_count_t(want)))
            if n <= 0 { break }
            if let bad = Self.firstNonFinite(chunk.base, count: n * channels) {
                throw fail("holds a sample that \(bad.value) in frame \(decoded + bad.index / channels + 1)")
            }
            decoded += n
            guard decoded <= limit else {
                throw fail("decodes to more than \(Self.number(maxSeconds)) s of audio (stopped there); at most \(Self.number(maxSeconds)) s")
            }
            if let resampler {
                Self.convert(chunk.base, channels: channels, frames: n, into: resampler.input, outChannels: outChannels)
                guard resampler.process(frames: n, into: &out) else { throw fail(resampler.failure) }
            } else {
                guard out.count + n <= out.capacity else { throw fail("decodes to more frames than its header claims") }
                Self.convert(chunk.base, channels: channels, frames: n, into: out.base + out.count * outChannels, outChannels: outChannels)
                out.count += n
            }
        }
        if let e = reader.failure { throw fail("cannot read it: \(errnoString(e))") }
        if sf.sf_error!(sndfile) != 0 { throw fail(sfText(sf.sf_strerror!(sndfile))) }
        if let frames = known, decoded < Self.fewestFrames(claimed: frames, format: info.format) {
            let estimate = Self.isMPEG(info.format)
                ? " (an MP3's count is an estimate: at least \(Self.fewestFrames(claimed: frames, format: info.format)) were due)" : ""
            throw fail("is truncated: \(decoded) of the \(frames) frames its header claims could be read" + estimate)
        }
        guard decoded > 0 else { throw fail("has no audio frames") }
        if let resampler {
            guard resampler.finish(into: &out) else { throw fail(resampler.failure) }
            // libsamplerate's last frames depend on the channel count (its end test adds a
            // position in frames to one in samples: stereo gets a frame more than mono, which
            // would make a mono file and its stereo copy differ in length). Both are cut to the
            // output frames that end before the source does: the same frames for any channels.
            out.count = min(out.count, (decoded * rate - 1) / srcRate)
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

    /// Into `outChannels`: mono kept (1), stereo kept, more channels: the first two.
    static func convert(_ src: UnsafePointer<Float>, channels: Int, frames: Int, into dst: UnsafeMutablePointer<Float>, outChannels: Int) {
        if outChannels == 1 || channels == 2 {
            dst.update(from: src, count: frames * channels)
            return
        }
        toStereo(src, channels: channels, frames: frames, into: dst)
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

    /// The fewest frames a file whose header claims `frames` decodes to whole. Exactly those
    /// but for MPEG audio (MP3), whose count is an estimate: without a LAME or Xing tag,
    /// libmpg123 reckons it from the file's size and its first frame's, which at 44.1, 22.05
    /// and 11.025 kHz can be a byte short of the average (up to 0.47 % too many frames, as
    /// sox's and `lame -t`'s files show), and a last partial frame or a tag may be counted
    /// as audio. So an MP3 is whole within 1/128 of its count and two MPEG frames (2 × 1,152)
    /// more; shorter, it is truncated (cued.toml(5), SOUND FILES). (libsndfile never reads past
    /// the count, so none decodes to more.)
    static func fewestFrames(claimed frames: Int, format: Int32) -> Int {
        guard isMPEG(format) else { return frames }
        return max(0, frames - frames / 128 - 2 * 1_152)
    }

    /// MPEG audio: an MP3 (or MP2) file, or such a stream inside another container.
    static func isMPEG(_ format: Int32) -> Bool {
        let major = Int(format) & Int(SF_FORMAT_TYPEMASK), sub = Int(format) & Int(SF_FORMAT_SUBMASK)
        return major == Int(SF_FORMAT_MPEG)
            || [SF_FORMAT_MPEG_LAYER_I, SF_FORMAT_MPEG_LAYER_II, SF_FORMAT_MPEG_LAYER_III].map { Int($0) }.contains(sub)
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
