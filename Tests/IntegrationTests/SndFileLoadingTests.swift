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
        let maps = (try? String(contentsOfFile: "/proc/\(pid)/maps", encoding: .utf8)) ?? ""
        return Array(Set(maps.split(separator: "\n").compactMap { $0.split(separator: " ").last.map(String.init) }
            .filter { $0.contains("libsndfile") }))
    }

    @Test func libsndfileIsLoadedOnlyWhileCuedDecodes() throws {
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

    /// Without libsndfile (hidden in a mount namespace of cued's own), cued does not start with
    /// a dynamic loader's error: it says what is missing and which package has it.
    @Test func withoutLibsndfileCuedSaysSo() throws {
        let mine = Self.sndfileMapped(getpid())  // the test links it: its real file
        let lib = try #require(mine.first)
        let hide = ["/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c",
                    "mount --bind /dev/null '\(lib)' && exec \"$@\"", "sh"]
        do {
            let d = try DaemonHarness(args: ["--sink", "null"], launcher: hide)
            Issue.record("cued started without libsndfile: \(try d.request("status").prefix(200))")
        } catch HarnessError.exited(let status, let stderr) {
            #expect(status != 0)
            #expect(stderr.contains("cannot load libsndfile (install libsndfile1)"), "\(stderr)")
            #expect(!stderr.contains("error while loading shared libraries"), "cued links libsndfile: \(stderr)")
        }
    }
}
