import CuedClient
import CuedProtocol
import Foundation
import Testing
import TestSupport

/// A file on a file system that stopped answering (as NFS or sshfs do when the network
/// goes), for real: a FUSE file system whose read never returns (python3-fusepy).
enum HungMount {
    /// As root the file system is mounted and unmounted directly; as a user libfuse opens /dev/fuse
    /// (0666 on a desktop) and has setuid fusermount mount it, which unmounts it too.
    static let fusermount = "/usr/bin/fusermount"

    static var unavailableReason: String? {
        if !FileManager.default.fileExists(atPath: "/dev/fuse") { return "no /dev/fuse" }
        if getuid() != 0 {
            if access("/dev/fuse", R_OK | W_OK) != 0 {
                return "mounting FUSE as a user needs /dev/fuse open to it (read and write: 0666, as on a desktop); here it is not"
            }
            if !FileManager.default.isExecutableFile(atPath: fusermount) { return "mounting FUSE as a user needs \(fusermount) (fuse3)" }
        }
        if !FileManager.default.fileExists(atPath: "/usr/lib/python3/dist-packages/fusepy.py") { return "python3-fusepy is not installed" }
        return nil
    }

    /// The hung file system, mounted at `path` (DIR/mnt) by its server.
    final class Mounted {
        let path: String
        let server: Subprocess
        init(in dir: TempDir) throws {
            path = dir.file("mnt")
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            server = try Subprocess("/usr/bin/python3", [StuckFileTests.script, path], stderr: dir.file("hungfs.log"))
            #expect(eventually { FileManager.default.fileExists(atPath: path + "/hang.wav") }, "\(dir.file("hungfs.log"))")
        }
        /// Its server dies (every read still waiting is answered, with an error) and the mount goes.
        func unmount() {
            kill(server.pid, SIGKILL)
            _ = server.wait(timeout: 10)
            if getuid() == 0 {
                _ = try? runProcess("/bin/umount", ["-l", path], timeout: 10)
            } else {
                _ = try? runProcess(HungMount.fusermount, ["-u", "-z", path], timeout: 10)
            }
        }
    }
}

@Suite(.serialized, .timeLimit(.minutes(2)),
       .enabled(if: HungMount.unavailableReason == nil, Comment(rawValue: HungMount.unavailableReason ?? "")))
struct StuckFileTests {

    /// Files named `hang*.wav` (`hang.wav` listed) whose every read waits forever.
    static let script = TestPaths.repoRoot.appendingPathComponent("bench/hungfs.py").path

    /// Two clients ask for a file on the hung mount: each is answered `err bad-file … timed
    /// out` at the deadline, and meanwhile every other client's request is answered (ping,
    /// a cue, another file, a mute that reaches the disk, the theme's names); SIGTERM still
    /// runs cued's whole stop while the mount hangs.
    @Test func aHungMountTimesOutItsFilesAndNeverStallsOthers() throws {
        let dir = TempDir()
        let hung = try HungMount.Mounted(in: dir)
        let mount = hung.path, fs = hung.server
        // The file system goes first: its death answers every read still waiting (with an error).
        defer { hung.unmount() }
        let normal = dir.file("ok.wav")
        try WAV.write(normal, int16: [Int16](repeating: 1000, count: 9_600), sampleRate: 48_000, channels: 2)

        let d = try DaemonHarness(args: ["--sink", "null"])
        let stuck = try (0..<2).map { _ in try d.client() }
        for c in stuck { try c.send(Array("play-file \(mount)/hang.wav\n".utf8)) }
        let other = try d.client()
        #expect(try other.request("ping") == "ok pong")
        #expect(try other.request("play pop") == "ok")
        let played = try other.request("play-file \(normal) wait")
        #expect(played == "ok", "\(played)")
        #expect(try other.request("mute") == "ok muted")
        #expect(eventually {
            (try? String(contentsOfFile: d.dir.file("state/cued/state"), encoding: .utf8))?.contains("muted=true") == true
        })
        #expect(try other.request("unmute") == "ok unmuted")
        #expect(try other.request("cues theme").hasPrefix("ok "))
        for c in stuck {
            let r = try c.readLine()
            #expect(r.hasPrefix("err bad-file timed-out \(mount)/hang.wav: timed out after 5 s"), "\(r)")
        }
        // The lane wrote the stuck workers off; it still decodes.
        let again = try other.request("play-file \(normal) wait")
        #expect(again == "ok", "\(again)")
        // SIGTERM: cued stops at once (its whole stop runs) although two of its threads are
        // still blocked in the kernel on the mount; the process is reaped once the file
        // system answers (here: its server is killed).
        kill(d.pid, SIGTERM)
        #expect(eventually(timeout: 20) { d.readStderr().contains("info cued: stopped") }, "\(d.readStderr())")
        kill(fs.pid, SIGKILL)
        _ = d.expectStopsByItself()
    }

    /// Issue 29, problem 4: four apps keep asking for files on the hung mount. Another app's
    /// local file and uncached theme sound are answered at once all the while (they waited
    /// 4.5 s for the deadline that wrote the stuck decoders off, and once 8 were stuck every
    /// app's files were refused: "earlier files are stuck"); a stuck app's own third file is
    /// refused at once.
    @Test func fourAppsStuckOnAHungMountTakeNoOtherAppsFiles() throws {
        let dir = TempDir()
        let hung = try HungMount.Mounted(in: dir)
        let mount = hung.path, fs = hung.server
        defer { hung.unmount() }
        let local = try (0..<2).map { i -> String in
            let path = dir.file("local\(i).wav")
            try WAV.write(path, int16: Fixture.samples(seed: UInt64(50 + i), frames: 9_600), sampleRate: 48_000, channels: 1)
            return path
        }
        let d = try DaemonHarness(args: ["--sink", "null"], extraEnv: ["XDG_DATA_DIRS": "/usr/share"])
        // Each app asks on connections of its own (a connection's next request waits for its reply).
        func ask(_ k: Int, _ file: String) throws -> CueClient {
            let c = try d.client()
            #expect(try c.request("app stuck\(k)") == "ok stuck\(k)")
            try c.send(Array("play-file \(mount)/\(file)\n".utf8))
            return c
        }
        var stuck = try (0..<4).map { k in try ask(k, "hang\(k)-a.wav") }
        // The four express decoders are asleep in the kernel, and written off as stuck.
        #expect(eventually { (try? d.status().decodersStuck) == 4 }, "\((try? d.status().decodersStuck) ?? -1)")
        let other = try d.client()
        #expect(try other.request("app other") == "ok other")
        func timed(_ line: String) throws -> (String, Double) {
            let t = Date()
            let r = try other.request(line)
            return (r, Date().timeIntervalSince(t))
        }
        var (r, s) = try timed("play-file \(FilePath.encode(local[0]))")
        #expect(r == "ok" && s < 1.5, "\(r) after \(s) s")
        (r, s) = try timed("play bell")
        #expect(r == "ok" && s < 1.5, "\(r) after \(s) s")
        // They keep asking: a second file each is stuck too, and a third (from another
        // connection of the same app) refused at once.
        stuck += try (0..<4).map { k in try ask(k, "hang\(k)-b.wav") }
        #expect(eventually { (try? d.status().decodersStuck) == 8 }, "\((try? d.status().decodersStuck) ?? -1)")
        (r, s) = try timed("play-file \(FilePath.encode(local[1]))")
        #expect(r == "ok" && s < 1.5, "\(r) after \(s) s")
        (r, s) = try timed("play message-new-instant")
        #expect(r == "ok" && s < 1.5, "\(r) after \(s) s")
        for k in 0..<4 {
            let again = try d.client()
            #expect(try again.request("app stuck\(k)") == "ok stuck\(k)")
            let t = Date()
            let refused = try again.request("play-file \(mount)/hang\(k)-c.wav")
            #expect(refused.hasPrefix("err bad-file not-tried \(mount)/hang\(k)-c.wav: not tried: this client's earlier files are stuck"),
                    "\(refused)")
            #expect(Date().timeIntervalSince(t) < 1.5)
        }
        withExtendedLifetime(stuck) {}
        kill(fs.pid, SIGKILL)  // the mount goes: the stuck reads return, and cued stops as usual
        #expect(d.stop() == 0)
    }
}
