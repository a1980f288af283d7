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

/// Runs a program to completion and returns (status, stdout, stderr).
@discardableResult
public func runProcess(_ path: String, _ args: [String], env: [String: String]? = nil,
                       stdin: String? = nil) throws -> (status: Int32, out: String, err: String) {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: path)
    p.arguments = args
    if let env { p.environment = env }
    let out = Pipe(), err = Pipe(), inp = Pipe()
    p.standardOutput = out; p.standardError = err; p.standardInput = inp
    try p.run()
    if let stdin { inp.fileHandleForWriting.write(Data(stdin.utf8)) }
    try? inp.fileHandleForWriting.close()
    let o = out.fileHandleForReading.readDataToEndOfFile()
    let e = err.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return (p.terminationStatus, String(decoding: o, as: UTF8.self), String(decoding: e, as: UTF8.self))
}
