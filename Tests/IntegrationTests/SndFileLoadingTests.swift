import CSndFile
import CuedProtocol
import Foundation
import Testing
import TestSupport

/// cued loads libsndfile (and its codecs) only while it decodes (Sources/CSndFile/shim.h): a
/// daemon that has loaded its cues holds none of it, a decode after that loads it again, and
/// a machine without it gets an error that says so.
@Suite(.timeLimit(.minutes(2))) struct SndFileLoadingTests {
    /// The libraries of `pid` whose path names libsndfile.
    static func sndfileMapped(_ pid: pid_t) -> [String] {
        Array(Set(procText("/proc/\(pid)/maps").split(separator: "\n").compactMap { $0.split(separator: " ").last.map(String.init) }
            .filter { $0.contains("libsndfile") }))
    }

    /// A /proc file whole: read until its end (Foundation's `String(contentsOfFile:)` takes its
    /// first read only, 4 KiB of a process's maps, where no library past the first few shows).
    static func procText(_ path: String) -> String {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return "" }
        defer { close(fd) }
        var bytes: [UInt8] = [], chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            bytes += chunk[0..<n]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The file the dynamic loader gives for the name cued asks for: loaded here the way cued
    /// loads it (`cued_sf_acquire`: CUED_SF_SONAME, dlopen), then found in this process's maps.
    static func sndfileLibrary() throws -> String {
        var why: UnsafePointer<CChar>?
        let api = cued_sf_acquire(&why)
        let reason = why.map { String(cString: $0) } ?? ""
        _ = try #require(api, "\(reason)")
        defer { cued_sf_release() }
        let mapped = sndfileMapped(getpid())
        #expect(mapped.count == 1, "\(mapped)")
        return try #require(mapped.first, "\(CUED_SF_SONAME) loaded, yet no libsndfile in /proc/self/maps")
    }

    /// A command that runs what follows in a mount namespace of its own where `lib` reads as empty
    /// (as a user, in a user namespace of its own too: `MountNamespace`).
    static func hiding(_ lib: String) -> [String] {
        MountNamespace.unshare(["/bin/sh", "-c", "mount --bind /dev/null '\(lib)' && exec \"$@\"", "sh"])
    }

    @Test func libsndfileIsLoadedOnlyWhileCuedDecodes() throws {
        _ = try Self.sndfileLibrary()  // the maps reader finds libsndfile where it is mapped (not vacuous)
        let d = try DaemonHarness(args: ["--sink", "null"])
        #expect(Self.sndfileMapped(d.process.pid).isEmpty, "after start: \(Self.sndfileMapped(d.process.pid))")
        for (i, seed) in [11, 12].enumerated() {
            let path = d.dir.file("file\(i).wav")
            try WAV.write(path, int16: Fixture.samples(seed: UInt64(seed), frames: 960), sampleRate: 48_000, channels: 1)
            // Decoded (libsndfile loaded again, after the last decode unloaded it), played, unloaded.
            #expect(try d.request("play-file \(FilePath.encode(path)) wait") == "ok", "decode \(i + 1)")
            #expect(Self.sndfileMapped(d.process.pid).isEmpty, "after decode \(i + 1): \(Self.sndfileMapped(d.process.pid))")
        }
        #expect(d.stop() == 0)
    }

    /// Without libsndfile at start (hidden in a mount namespace of cued's own), cued cannot
    /// decode its cues: it stops with its bad-cues exit and says what is missing and which
    /// package has it, not the dynamic loader's error, and is not killed by a signal.
    @Test(.enabled(if: MountNamespace.unavailableReason == nil, Comment(rawValue: MountNamespace.unavailableReason ?? "")))
    func withoutLibsndfileAtStartCuedSaysSo() throws {
        let lib = try Self.sndfileLibrary()
        do {
            let d = try DaemonHarness(args: ["--sink", "null"], launcher: Self.hiding(lib))
            Issue.record("cued started without libsndfile: \(try d.request("status").prefix(200))")
            _ = d.stop()
        } catch HarnessError.exited(let status, let stderr) {
            #expect(status == 78, "exit \(status) (78: bad config, sink or cues; above 128: a signal): \(stderr)")
            #expect(stderr.contains("cannot load libsndfile (install libsndfile1)"), "\(stderr)")
            #expect(!stderr.contains("error while loading shared libraries"), "cued links libsndfile: \(stderr)")
        }
    }

    /// libsndfile gone while cued runs (hidden after start, in cued's own mount namespace): a
    /// file to play is refused with the same words, and cued goes on serving, its cues still playing.
    @Test(.enabled(if: MountNamespace.unavailableReason == nil, Comment(rawValue: MountNamespace.unavailableReason ?? "")))
    func libsndfileGoneWhileRunningRefusesTheFileNotCued() throws {
        let lib = try Self.sndfileLibrary()
        let d = try DaemonHarness(args: ["--sink", "null"], launcher: MountNamespace.unshare([]))
        defer { _ = d.stop() }
        let enter = MountNamespace.nsenter(d.process.pid, ["/bin/mount", "--bind", "/dev/null", lib])
        let hidden = try runProcess(enter[0], Array(enter.dropFirst()))
        #expect(hidden.status == 0, "\(hidden)")
        let path = d.dir.file("late.wav")
        try WAV.write(path, int16: Fixture.samples(seed: 21, frames: 960), sampleRate: 48_000, channels: 1)
        let refused = try d.request("play-file \(FilePath.encode(path))")
        #expect(refused.hasPrefix("err ") && refused.contains("cannot load libsndfile (install libsndfile1)"), "\(refused)")
        #expect(try d.request("ping") == "ok pong" && d.process.isRunning)
        #expect(try d.request("play pop wait") == "ok")
        #expect(d.stop() == 0)
    }
}
