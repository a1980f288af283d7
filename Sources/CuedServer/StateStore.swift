import CuedConfig
import CuedProtocol
import CuedSystem
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
#if canImport(Glibc)
import Glibc
#endif

/// The daemon's small persistent state: mute and profile, and the per-app
/// mutes and profiles set at run time.
public struct SavedState: Sendable, Equatable {
    public var muted = false
    /// Run-time per-app mutes (`mute app NAME`), by app; at most `maxAppMutes`.
    public var appMutes: [String: Bool] = [:]
    /// The global profile; nil in a file written before there were profiles (the config's applies).
    public var profile: Profile?
    /// Run-time per-app profiles (`profile app NAME LEVEL`), by app; at most `maxAppProfiles`.
    public var appProfiles: [String: Profile] = [:]
    public init(muted: Bool = false, appMutes: [String: Bool] = [:], profile: Profile? = nil, appProfiles: [String: Profile] = [:]) {
        self.muted = muted; self.appMutes = appMutes; self.profile = profile; self.appProfiles = appProfiles
    }
    public static let maxAppMutes = 256
    public static let maxAppProfiles = 256
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

    /// The saved state; nil if there is none yet. Lines it does not know, app
    /// names that are not labels and profiles it does not know are skipped; at
    /// most `maxAppMutes` app mutes and `maxAppProfiles` app profiles.
    public static func load(_ path: String) throws(FileError) -> SavedState? {
        guard FileSystem.entry(path) != .none else { return nil }
        let text = try UntrustedFile.readText(path, maxBytes: maxBytes)
        var s = SavedState()
        for line in text.split(separator: "\n") {
            let kv = line.split(separator: "=", maxSplits: 1).map { String($0) }
            guard kv.count == 2 else { continue }
            if kv[0] == "muted" { s.muted = kv[1] == "true" }
            if kv[0] == "profile", let p = Profile(rawValue: kv[1]) { s.profile = p }
            if kv[0].hasPrefix("app."), kv[0].hasSuffix(".muted"), s.appMutes.count < SavedState.maxAppMutes {
                let app = String(kv[0].dropFirst(4).dropLast(6))
                if Label.isValid(app) { s.appMutes[app] = kv[1] == "true" }
            }
            if kv[0].hasPrefix("app."), kv[0].hasSuffix(".profile"), s.appProfiles.count < SavedState.maxAppProfiles {
                let app = String(kv[0].dropFirst(4).dropLast(8))
                if Label.isValid(app), let p = Profile(rawValue: kv[1]) { s.appProfiles[app] = p }
            }
        }
        return s
    }

    public static func save(_ s: SavedState, to path: String) throws(FileError) {
        let dir = Path.directory(path)
        try FileSystem.makeDirectories(dir, mode: 0o700)
        var data = "# cued state; written by cued\nmuted=\(s.muted)\n"
        if let p = s.profile { data += "profile=\(p.rawValue)\n" }
        for (app, m) in s.appMutes.sorted(by: { $0.key < $1.key }) { data += "app.\(app).muted=\(m)\n" }
        for (app, p) in s.appProfiles.sorted(by: { $0.key < $1.key }) { data += "app.\(app).profile=\(p.rawValue)\n" }
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
/// A write that fails (a full disk, a read-only mount) is retried with back-off
/// — 0.5 s, doubling to at most 10 s — so the state reaches the disk once
/// space returns; `flush` tries once more at SIGTERM. Until a write succeeds,
/// `saved` is false and `error` says why (`status`: `state_saved`, `state_error`).
public final class StateSaver: Sendable {
    public let path: String
    private let pool: NIOThreadPool
    private let loop: any EventLoop
    private let logger: Logger
    private struct Pending {
        /// The next state to write.
        var state: SavedState?
        /// A drain is queued or running.
        var scheduled = false
        var writes = 0
        /// The state the last failed write could not save (nil once one succeeds).
        var unsaved: SavedState?
        var error: String?
        /// Failed writes in a row (the back-off's exponent).
        var failures = 0
        var retryArmed = false
        /// Set by `flush`: no more retries (the loop is going away).
        var stopped = false
    }
    private let pending = NIOLockedValueBox(Pending())
    /// Held while a write runs: `flush` waits on it.
    private let writing = NIOLock()

    static let firstRetry = TimeAmount.milliseconds(500)
    static let maxRetry = TimeAmount.seconds(10)

    public init(path: String, pool: NIOThreadPool, loop: any EventLoop, logger: Logger) {
        self.path = path; self.pool = pool; self.loop = loop; self.logger = logger
    }

    /// Files written so far (for tests and status).
    public var writes: Int { pending.withLockedValue { $0.writes } }

    /// False from a failed write until one succeeds.
    public var saved: Bool { pending.withLockedValue { $0.unsaved == nil } }

    /// Why the last write failed, while the state is not saved.
    public var error: String? { pending.withLockedValue { $0.unsaved == nil ? nil : $0.error } }

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

    /// The delay before retry number `failures` (1, 2, …).
    static func backoff(failures: Int) -> TimeAmount {
        let ns = firstRetry.nanoseconds << Int64(min(max(failures - 1, 0), 16))
        return .nanoseconds(min(ns, maxRetry.nanoseconds))
    }

    private func write(_ state: SavedState) {
        do {
            try StateFile.save(state, to: path)
            let recovered = pending.withLockedValue { p -> Int in
                defer { p.writes += 1; p.failures = 0; p.error = nil; p.unsaved = nil }
                return p.unsaved == nil ? 0 : p.failures
            }
            if recovered > 0 { logger.notice("state saved after \(recovered) failed attempts", metadata: ["file": "\(path)"]) }
        } catch {
            let (first, retryIn) = pending.withLockedValue { p -> (Bool, TimeAmount?) in
                p.failures += 1
                p.error = error.reason
                p.unsaved = state
                // A newer state pending is written next anyway; else retry later.
                guard p.state == nil, !p.retryArmed, !p.stopped else { return (p.failures == 1, nil) }
                p.retryArmed = true
                return (p.failures == 1, Self.backoff(failures: p.failures))
            }
            if first {
                logger.error("cannot save state; retrying until it can", metadata: ["file": "\(path)", "error": "\(error.reason)"])
            } else {
                logger.debug("cannot save state", metadata: ["file": "\(path)", "error": "\(error.reason)"])
            }
            if let retryIn { loop.scheduleTask(in: retryIn) { self.retry() } }
        }
    }

    /// The back-off ran out: write the unsaved state again (unless a newer one is queued).
    private func retry() {
        let start = pending.withLockedValue { p -> Bool in
            p.retryArmed = false
            guard !p.stopped, let unsaved = p.unsaved else { return false }
            if p.state == nil { p.state = unsaved }
            defer { p.scheduled = true }
            return !p.scheduled
        }
        if start { pool.submit { _ in self.drain() } }
    }

    /// Waits for a write in flight, then writes what is still pending or
    /// still unsaved after failing. At exit: no retry is armed after it.
    public func flush() {
        pending.withLockedValue { $0.stopped = true }
        writing.withLock {
            let next = pending.withLockedValue { p -> SavedState? in defer { p.state = nil }; return p.state ?? p.unsaved }
            if let next { write(next) }
        }
        if let error { logger.error("state not saved at exit", metadata: ["file": "\(path)", "error": "\(error)"]) }
    }
}
