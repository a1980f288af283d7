import CuedConfig
import Foundation

/// Persists the daemon's small state (mute) in `$XDG_STATE_HOME/cued/state`,
/// written atomically: temp file, fsync, rename, fsync of the directory.
public struct StateStore: Sendable {
    public let path: String

    public init(path: String) { self.path = path }

    public static func defaultPath(environment: [String: String]) -> String {
        XDGDirectory.path("XDG_STATE_HOME", else: ".local/state", environment: environment) + "/cued/state"
    }

    public struct Saved: Sendable, Equatable {
        public var muted = false
        /// Run-time per-app mutes (`mute app NAME`), by app.
        public var appMutes: [String: Bool] = [:]
        public init(muted: Bool = false, appMutes: [String: Bool] = [:]) { self.muted = muted; self.appMutes = appMutes }
    }

    /// The saved state; a missing file is the default state.
    public func load() throws -> Saved {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return Saved() }
        var s = Saved()
        for line in text.split(separator: "\n") {
            let kv = line.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard kv.count == 2 else { continue }
            if kv[0] == "muted" { s.muted = kv[1] == "true" }
            if kv[0].hasPrefix("app."), kv[0].hasSuffix(".muted") {
                let app = String(kv[0].dropFirst(4).dropLast(6))
                if !app.isEmpty { s.appMutes[app] = kv[1] == "true" }
            }
        }
        return s
    }

    public func save(_ s: Saved) throws {
        let dir = (path as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        let tmp = path + ".tmp.\(getpid())"
        var data = "# cued state; written by cued\nmuted=\(s.muted)\n"
        for (app, m) in s.appMutes.sorted(by: { $0.key < $1.key }) { data += "app.\(app).muted=\(m)\n" }
        let fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        var ok = data.utf8CString.withUnsafeBufferPointer { write(fd, $0.baseAddress, $0.count - 1) == $0.count - 1 }
        ok = ok && fsync(fd) == 0
        let err = errno
        close(fd)
        guard ok, rename(tmp, path) == 0 else {
            let e = ok ? errno : err
            unlink(tmp)
            throw POSIXError(POSIXErrorCode(rawValue: e) ?? .EIO)
        }
        let dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dfd >= 0 { fsync(dfd); close(dfd) }
    }
}
