import CSndFile
import Foundation

/// Where the repository and the built binaries are. `make test` sets
/// CUED_BIN_DIR; a plain `swift test` falls back to .build/debug.
public enum TestPaths {
    public static let repoRoot: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    public static var binDir: URL {
        if let d = ProcessInfo.processInfo.environment["CUED_BIN_DIR"], !d.isEmpty { return URL(fileURLWithPath: d) }
        return repoRoot.appendingPathComponent(".build/debug")
    }

    public static func binary(_ name: String) -> String { binDir.appendingPathComponent(name).path }
}

/// A temporary directory with a short path (Unix socket paths are limited to
/// 108 bytes), removed when the value is released.
public final class TempDir: @unchecked Sendable {
    public let path: String
    public init() {
        var template = Array("/tmp/cued-t.XXXXXX".utf8CString)
        let p = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        path = String(cString: p!)
    }
    public func file(_ name: String) -> String { path + "/" + name }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}

public struct WAVData: Sendable {
    public var sampleRate: Int
    public var channels: Int
    public var format: Int32
    /// Interleaved 16-bit samples.
    public var samples: [Int16]
    public var frames: Int { channels == 0 ? 0 : samples.count / channels }
}

public enum WAVError: Error, CustomStringConvertible {
    case open(String, String)
    public var description: String {
        switch self { case .open(let p, let r): return "\(p): \(r)" }
    }
}

public enum WAV {
    public static func read(_ path: String) throws -> WAVData {
        var info = SF_INFO()
        guard let f = sf_open(path, Int32(SFM_READ), &info) else {
            throw WAVError.open(path, String(cString: sf_strerror(nil)))
        }
        defer { sf_close(f) }
        var buf = [Int16](repeating: 0, count: Int(info.frames) * Int(info.channels))
        let n = buf.withUnsafeMutableBufferPointer { sf_readf_short(f, $0.baseAddress, info.frames) }
        buf.removeLast(buf.count - Int(n) * Int(info.channels))
        return WAVData(sampleRate: Int(info.samplerate), channels: Int(info.channels), format: info.format, samples: buf)
    }

    /// Writes float samples (interleaved) in any libsndfile format.
    public static func write(_ path: String, samples: [Float], sampleRate: Int, channels: Int,
                             format: Int32 = Int32(SF_FORMAT_WAV | SF_FORMAT_PCM_16)) throws {
        var info = SF_INFO()
        info.samplerate = Int32(sampleRate); info.channels = Int32(channels); info.format = format
        guard let f = sf_open(path, Int32(SFM_WRITE), &info) else {
            throw WAVError.open(path, String(cString: sf_strerror(nil)))
        }
        defer { sf_close(f) }
        _ = samples.withUnsafeBufferPointer { sf_writef_float(f, $0.baseAddress, sf_count_t(samples.count / channels)) }
    }

    /// Writes 16-bit samples exactly as given.
    public static func write(_ path: String, int16 samples: [Int16], sampleRate: Int, channels: Int) throws {
        var info = SF_INFO()
        info.samplerate = Int32(sampleRate); info.channels = Int32(channels)
        info.format = Int32(SF_FORMAT_WAV | SF_FORMAT_PCM_16)
        guard let f = sf_open(path, Int32(SFM_WRITE), &info) else {
            throw WAVError.open(path, String(cString: sf_strerror(nil)))
        }
        defer { sf_close(f) }
        _ = samples.withUnsafeBufferPointer { sf_writef_short(f, $0.baseAddress, sf_count_t(samples.count / channels)) }
    }
}

/// A child process started with posix_spawn and reaped with waitpid: no
/// SIGCHLD machinery, a clean signal mask, and nothing inherited but the three
/// standard descriptors (files, so output can never block the child).
public final class Subprocess: @unchecked Sendable {
    public let pid: pid_t
    private var exitStatus: Int32?

    /// `stdin`/`stdout`/`stderr` are file paths (nil: /dev/null).
    public init(_ path: String, _ args: [String], env: [String: String]? = nil,
                stdin: String? = nil, stdout: String? = nil, stderr: String? = nil) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, stdin ?? "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdout ?? "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, stderr ?? "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        pid = try spawnClean(path, args, env: env ?? ProcessInfo.processInfo.environment, actions: &actions)
    }

    /// Reaps the child if it has exited; true while it runs.
    public var isRunning: Bool {
        if exitStatus != nil { return false }
        var st: Int32 = 0
        let r = waitpid(pid, &st, WNOHANG)
        if r == pid { exitStatus = Self.decode(st); return false }
        return r == 0
    }

    /// Exit code (128 + signal when killed), or nil if still running after `timeout`.
    @discardableResult
    public func wait(timeout: Double = 30) -> Int32? {
        _ = eventually(timeout: timeout, interval: 0.005) { !isRunning }
        return exitStatus
    }

    public var terminationStatus: Int32 { exitStatus ?? -1 }

    public func signal(_ sig: Int32) { if exitStatus == nil { kill(pid, sig) } }

    /// SIGTERM, then SIGKILL after `grace` seconds; always reaps.
    @discardableResult
    public func stop(grace: Double = 10) -> Int32 {
        guard isRunning else { return terminationStatus }
        signal(SIGTERM)
        if wait(timeout: grace) == nil { signal(SIGKILL); wait(timeout: 10) }
        return terminationStatus
    }

    static func decode(_ st: Int32) -> Int32 {
        let sig = st & 0x7F
        return sig == 0 ? (st >> 8) & 0xFF : 128 + sig
    }

    deinit { if exitStatus == nil { kill(pid, SIGKILL); var st: Int32 = 0; waitpid(pid, &st, 0) } }
}

/// A Unix socket of `type` (SOCK_STREAM, SOCK_DGRAM) bound to `path`.
public func boundUnixSocket(_ path: String, type: Int32) throws -> Int32 {
    let fd = socket(AF_UNIX, type, 0)
    var addr = sockaddr_un()
    addr.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &addr.sun_path) { raw in
        let b = Array(path.utf8); raw.copyBytes(from: b); raw[b.count] = 0
    }
    let rc = withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    guard rc == 0 else { close(fd); throw POSIXError(.EADDRINUSE) }
    return fd
}

/// glibc's posix_spawn_file_actions_addclosefrom_np, looked up at run time.
private let addCloseFrom: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32)? = {
    guard let sym = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") else { return nil }
    return unsafeBitCast(sym, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32).self)
}()

/// posix_spawn with a clean signal mask and default dispositions; `extraFlags`
/// (e.g. POSIX_SPAWN_SETSID) are added to those.
func spawnClean(_ path: String, _ args: [String], env: [String: String], actions: inout posix_spawn_file_actions_t,
                extraFlags: Int32 = 0) throws -> pid_t {
    var attr = posix_spawnattr_t()
    posix_spawnattr_init(&attr)
    defer { posix_spawnattr_destroy(&attr) }
    var empty = sigset_t(), all = sigset_t()
    sigemptyset(&empty)
    sigfillset(&all)
    posix_spawnattr_setsigmask(&attr, &empty)
    posix_spawnattr_setsigdefault(&attr, &all)
    posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | extraFlags))
    let argv = ([path] + args).map { strdup($0) } + [nil]
    let envp = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer { argv.forEach { free($0) }; envp.forEach { free($0) } }
    // Nothing else the test process has open goes to the child: descriptors opened without
    // O_CLOEXEC by any test running in parallel (sockets, pipes) were inherited, and a daemon
    // started with a descriptor limit of 32 found its slots taken by other tests' sockets (the
    // out-of-descriptors tests: minutes, or 1 client of 40 answered, inside the full suite only).
    // (glibc ≥ 2.34 has it; Swift's Glibc module does not declare it.)
    _ = addCloseFrom?(&actions, 3)
    var child = pid_t()
    let rc = posix_spawn(&child, path, &actions, &attr, argv, envp)
    guard rc == 0 else { throw POSIXError(POSIXErrorCode(rawValue: rc) ?? .EIO) }
    return child
}

/// Runs a program to completion and returns (status, stdout, stderr).
@discardableResult
public func runProcess(_ path: String, _ args: [String], env: [String: String]? = nil,
                       stdin: String? = nil, timeout: Double = 60) throws -> (status: Int32, out: String, err: String) {
    let dir = TempDir()
    var input: String?
    if let stdin {
        input = dir.file("in")
        try stdin.write(toFile: input!, atomically: false, encoding: .utf8)
    }
    let p = try Subprocess(path, args, env: env, stdin: input, stdout: dir.file("out"), stderr: dir.file("err"))
    if p.wait(timeout: timeout) == nil { p.signal(SIGKILL); p.wait() }
    let out = (try? String(contentsOfFile: dir.file("out"), encoding: .utf8)) ?? ""
    let err = (try? String(contentsOfFile: dir.file("err"), encoding: .utf8)) ?? ""
    return (p.terminationStatus, out, err)
}

/// Polls `condition` every `interval` seconds until it is true or `timeout`
/// seconds have passed; the last answer after the time is up. For waiting on an
/// event; the time limit only bounds a failure.
public func eventually(timeout: Double = 10, interval: Double = 0.01, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if try condition() { return true }
        usleep(useconds_t(interval * 1_000_000))  // the poll's interval: the wait itself is on `condition`, with a deadline
    }
    return try condition()
}

/// `s` single-quoted, a `'` as `'\''`: one word in sh, bash, zsh and fish
/// (a checkout's path may hold a space).
public func shellQuoted(_ s: String) -> String { "'" + s.replacingOccurrences(of: "'", with: "'\\''") + "'" }

/// nil when equal; else where and how two sample arrays first differ (keeps
/// test failures short instead of printing a million samples).
public func sampleDifference(_ got: [Int16], _ expected: [Int16]) -> String? {
    if got.count < expected.count { return "got \(got.count) samples, expected \(expected.count)" }
    for i in expected.indices where got[i] != expected[i] {
        return "sample \(i) (frame \(i / 2)): got \(got[i]), expected \(expected[i])"
    }
    return nil
}
