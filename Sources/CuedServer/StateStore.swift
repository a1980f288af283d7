import CuedConfig
import CuedProtocol
import CuedSystem
import Logging
import NIOConcurrencyHelpers
import NIOPosix
#if canImport(Glibc)
import Glibc
#endif

/// The daemon's small persistent state: mute, and per-app mutes set at run time.
public struct SavedState: Sendable, Equatable {
    public var muted = false
    /// Run-time per-app mutes (`mute app NAME`), by app; at most `maxAppMutes`.
    public var appMutes: [String: Bool] = [:]
    public init(muted: Bool = false, appMutes: [String: Bool] = [:]) { self.muted = muted; self.appMutes = appMutes }
    public static let maxAppMutes = 256
}

/// `$XDG_STATE_HOME/cued/state`: read once at start (untrusted input: a
/// regular file of at most 64 KiB), written atomically: a temp file with a
/// random name created exclusively (never through a planted symlink),
/// fsync, rename, fsync of the directory.
public enum StateFile {
    static let maxBytes = 64 * 1024
    /// Temp files are `.state.XXXXXX` beside the state file.
    static let tempPrefix = ".state."

    public static func defaultPath(environment: [String: String]) -> String {
        XDGDirectory.path("XDG_STATE_HOME", else: ".local/state", environment: environment) + "/cued/state"
    }

    /// The saved state; nil if there is none yet. Lines it does not know, and
    /// app names that are not labels, are skipped; at most `maxAppMutes` apps.
    public static func load(_ path: String) throws(FileError) -> SavedState? {
        guard FileSystem.entry(path) != .none else { return nil }
        let text = try UntrustedFile.readText(path, maxBytes: maxBytes)
        var s = SavedState()
        for line in text.split(separator: "\n") {
            let kv = line.split(separator: "=", maxSplits: 1).map { String($0) }
            guard kv.count == 2 else { continue }
            if kv[0] == "muted" { s.muted = kv[1] == "true" }
            if kv[0].hasPrefix("app."), kv[0].hasSuffix(".muted"), s.appMutes.count < SavedState.maxAppMutes {
                let app = String(kv[0].dropFirst(4).dropLast(6))
                if Label.isValid(app) { s.appMutes[app] = kv[1] == "true" }
            }
        }
        return s
    }

    public static func save(_ s: SavedState, to path: String) throws(FileError) {
        let dir = Path.directory(path)
        try FileSystem.makeDirectories(dir, mode: 0o700)
        var data = "# cued state; written by cued\nmuted=\(s.muted)\n"
        for (app, m) in s.appMutes.sorted(by: { $0.key < $1.key }) { data += "app.\(app).muted=\(m)\n" }
        var template = Array((dir + "/" + tempPrefix + "XXXXXX").utf8CString)
        // mkstemp: a random name, created with O_EXCL and mode 0600.
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else {
            let e = errno
            throw FileError(path: dir, reason: "cannot create a temp file: \(errnoString(e))", code: e)
        }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        let tmp = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        var ok = data.utf8CString.withUnsafeBufferPointer { write(fd, $0.baseAddress, $0.count - 1) == $0.count - 1 }
        let writeErr = errno
        ok = ok && fsync(fd) == 0
        let err = ok ? 0 : (errno == 0 ? writeErr : errno)
        close(fd)
        guard ok, rename(tmp, path) == 0 else {
            let e = ok ? errno : err
            unlink(tmp)
            throw FileError(path: path, reason: errnoString(e == 0 ? EIO : e), code: e)
        }
        let dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dfd >= 0 { fsync(dfd); close(dfd) }
    }

    /// Removes temp files a killed cued left behind (its own kind only:
    /// regular files, not symlinks, named `.state.*` or the old `state.tmp.*`).
    public static func removeStaleTemps(beside path: String) -> Int {
        let dir = Path.directory(path)
        let base = Path.lastComponent(path)
        var removed = 0
        for name in FileSystem.list(dir) where name.hasPrefix(tempPrefix) || name.hasPrefix(base + ".tmp.") {
            if FileSystem.entry(dir + "/" + name) == .regular, unlink(dir + "/" + name) == 0 { removed += 1 }
        }
        return removed
    }
}

/// Saves the state off the event loop, coalesced: the latest state wins, at
/// most one write is in flight, and `flush` (at exit) writes what is pending.
public final class StateSaver: Sendable {
    public let path: String
    private let pool: NIOThreadPool
    private let logger: Logger
    private struct Pending { var state: SavedState?; var scheduled = false; var writes = 0 }
    private let pending = NIOLockedValueBox(Pending(state: nil))
    /// Held while a write runs: `flush` waits on it.
    private let writing = NIOLock()

    public init(path: String, pool: NIOThreadPool, logger: Logger) {
        self.path = path; self.pool = pool; self.logger = logger
    }

    /// Files written so far (for tests and status).
    public var writes: Int { pending.withLockedValue { $0.writes } }

    public func save(_ state: SavedState) {
        let start = pending.withLockedValue { p -> Bool in
            p.state = state
            defer { p.scheduled = true }
            return !p.scheduled
        }
        if start { pool.submit { _ in self.drain() } }
    }

    private func drain() {
        while true {
            let next = pending.withLockedValue { p -> SavedState? in
                defer { p.state = nil }
                if p.state == nil { p.scheduled = false }
                return p.state
            }
            guard let state = next else { return }
            writing.withLock { write(state) }
        }
    }

    private func write(_ state: SavedState) {
        do {
            try StateFile.save(state, to: path)
            pending.withLockedValue { $0.writes += 1 }
        } catch {
            logger.error("cannot save state", metadata: ["file": "\(path)", "error": "\(error.reason)"])
        }
    }

    /// Waits for a write in flight, then writes what is still pending. At exit.
    public func flush() {
        writing.withLock {
            let next = pending.withLockedValue { p -> SavedState? in defer { p.state = nil }; return p.state }
            if let next { write(next) }
        }
    }
}
