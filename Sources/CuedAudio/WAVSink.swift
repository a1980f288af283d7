import CSndFile
import CuedCore
#if canImport(Glibc)
import Glibc
#endif

/// Like the null sink (paced by its own clock at the real rate) and writes
/// every frame that reaches it to a WAV file (`--sink wav:PATH`). The header
/// is rewritten after each write, so a reader sees frames within one period
/// and the file stays valid even if cued is killed.
/// Its write waits as a device would (`Pacing.selfClocked`).
/// Threading: every method on the audio thread only (see `Sink`).
public final class WAVSink: Sink {
    public let spec: String
    public let path: String
    private let format: SinkFormat
    private var clock: DeviceClock
    private var file: OpaquePointer?

    /// `overwrite` (cued --force): replace a file already at `path`, else refuse it.
    private let overwrite: Bool

    public init(path: String, latencyMs: Int = 10, rate: Int = 48_000, overwrite: Bool = false) {
        self.path = path
        self.overwrite = overwrite
        spec = "wav:" + path
        format = .clocked(rate: rate, latencyMs: latencyMs)
        clock = DeviceClock(rate: rate, bufferFrames: format.bufferFrames)
    }

    /// libsndfile, held from `preflight` (see CSndFile/shim.h): loaded at start-up, so the
    /// audio thread's first `open` does not dlopen it.
    private var sf: cued_sf_api?

    private func loadLibrary() throws(SinkError) -> cued_sf_api {
        if let sf { return sf }
        var why: UnsafePointer<CChar>?
        guard let api = cued_sf_acquire(&why) else { throw SinkError(why.map { String(cString: $0) } ?? "cannot load libsndfile") }
        sf = api.pointee
        return api.pointee
    }

    deinit {
        if let file, let sf { _ = sf.sf_close!(file) }
        if sf != nil { cued_sf_release() }
    }

    /// Creates (truncates) the file; done once so the capture spans the
    /// daemon's whole run, across idle closes.
    public func createFile() throws(SinkError) {
        guard file == nil else { return }
        let sf = try loadLibrary()
        var info = SF_INFO()
        info.samplerate = Int32(format.rate)
        info.channels = Int32(format.channels)
        info.format = Int32(SF_FORMAT_WAV | SF_FORMAT_PCM_16)
        guard let f = sf.sf_open!(path, Int32(SFM_WRITE), &info) else {
            throw SinkError("cannot write \(path): \(sfText(sf.sf_strerror!(nil)))")
        }
        _ = sf.sf_command!(f, Int32(SFC_SET_UPDATE_HEADER_AUTO), nil, Int32(SF_TRUE))
        file = f
    }

    /// The file's directory must exist and be writable: no retry would fix that.
    /// A file already there with something in it is refused, not overwritten
    /// (an earlier recording), unless `overwrite`; an empty one (`mktemp`'s) is used.
    public func preflight() throws(SinkError) {
        _ = try loadLibrary()
        var existing = stat()
        if !overwrite, stat(path, &existing) == 0, existing.st_mode & S_IFMT == S_IFREG, existing.st_size > 0 {
            throw SinkError("the file already exists (\(existing.st_size) bytes) and cued does not overwrite a recording; "
                            + "move it away, pick another path, or add --force")
        }
        let dir = path.contains("/") ? String(path[..<path.lastIndex(of: "/")!]) : "."
        var st = stat()
        guard stat(dir.isEmpty ? "/" : dir, &st) == 0, st.st_mode & S_IFMT == S_IFDIR else {
            throw SinkError("cannot write \(path): the directory \(dir) does not exist (create it, or pick another path for wav:PATH)")
        }
        guard access(dir.isEmpty ? "/" : dir, W_OK) == 0 else {
            throw SinkError("cannot write \(path): the directory \(dir) is not writable (fix its permissions, or pick another path for wav:PATH)")
        }
    }

    public func open() throws(SinkError) -> OpenedDevice {
        try createFile()
        clock.drop()
        return OpenedDevice(kind: "wav", format: format, pacing: .selfClocked)
    }

    public func write(_ data: UnsafeRawPointer, frames: Int) throws(SinkError) -> SinkWrite {
        guard let file, let sf else { throw SinkError("\(path) is not open") }
        let n = sf.sf_writef_short!(file, data.assumingMemoryBound(to: Int16.self), sf_count_t(frames))
        guard n == frames else { throw SinkError("writing \(path): \(sfText(sf.sf_strerror!(file)))") }
        clock.write(frames: frames)
        return SinkWrite(frames: frames)
    }

    public func delayFrames(now: UInt64) -> Int { clock.delay(now: now) }
    public func stop() { clock.drop() }
    public func close() { clock.drop() }
}
