import CuedProtocol
import Foundation
import Testing
import TestSupport

/// Issue 19, problem 7: a mute answered `ok` while the disk is full is saved
/// once space returns (retried with back-off), and survives a restart;
/// meanwhile `status` says it is not saved, and why. The disk is a 64 KiB
/// tmpfs mounted as XDG_STATE_HOME in a mount namespace of the test's own
/// (`PrivateTmpfs`: as a user, in a user namespace too), where cued runs.
@Suite(.enabled(if: MountNamespace.unavailableReason == nil, Comment(rawValue: MountNamespace.unavailableReason ?? "")),
       .timeLimit(.minutes(2)))
struct FullDiskTests {
    /// A full 64 KiB tmpfs at `dir` (as cued sees it), with `cued/` made and a filler taking every page.
    final class FullDisk {
        let disk: PrivateTmpfs
        var dir: String { disk.path }
        /// What cued is run under to see the disk.
        var launcher: [String] { disk.launcher }
        var filler: String { disk.outside("/filler") }
        init(_ dir: String) throws {
            disk = try PrivateTmpfs(at: dir, options: "size=64k,mode=0700")
            try FileManager.default.createDirectory(atPath: disk.outside("/cued"), withIntermediateDirectories: false,
                                                    attributes: [.posixPermissions: 0o700])
            fill()
        }
        func fill() {
            let fd = open(filler, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
            defer { close(fd) }
            let page = [UInt8](repeating: 7, count: 4096)
            while write(fd, page, page.count) > 0 {}
        }
        func free() { unlink(filler) }
        /// A file on the disk, read from outside the namespace.
        func read(_ sub: String) throws -> String { try String(contentsOfFile: disk.outside(sub), encoding: .utf8) }
    }

    func state(_ d: DaemonHarness) -> Status? { try? d.status() }

    @Test func aMuteOnAFullDiskIsSavedWhenSpaceReturns() throws {
        let dir = TempDir()
        let disk = try FullDisk(dir.file("state"))
        let env = ["XDG_STATE_HOME": disk.dir]
        let d = try DaemonHarness(args: ["--sink", "null"], extraEnv: env, launcher: disk.launcher)
        #expect(try d.status().stateSaved)
        #expect(try d.request("mute") == "ok muted")
        #expect(eventually { state(d)?.stateSaved == false })
        let s = try d.status()
        #expect(s.stateError?.contains("No space left on device") == true, "\(String(describing: s.stateError))")
        #expect(s.muted)
        // Retried, not given up: still unsaved while the disk stays full.
        #expect(try d.status().stateSaved == false)
        disk.free()
        #expect(eventually(timeout: 20) { state(d)?.stateSaved == true })
        #expect(try d.status().stateError == nil)
        #expect(try disk.read("/cued/state").contains("muted=true"))
        #expect(d.stop() == 0)
        #expect(d.readStderr().contains("cannot save state; retrying until it can"))
        // A new cued on the same state directory starts muted.
        let again = try DaemonHarness(args: ["--sink", "null"], extraEnv: env, launcher: disk.launcher)
        #expect(try again.status().muted)
        #expect(again.stop() == 0)
    }

    /// Space returns and cued is stopped at once: whether a retry or SIGTERM's
    /// last attempt writes it, the mute is on disk; had it still failed, the log says so.
    @Test func sigtermTriesTheUnsavedStateOnceMore() throws {
        let dir = TempDir()
        let disk = try FullDisk(dir.file("state"))
        let d = try DaemonHarness(args: ["--sink", "null"], extraEnv: ["XDG_STATE_HOME": disk.dir], launcher: disk.launcher)
        #expect(try d.request("mute app mutt") == "ok muted mutt")
        #expect(eventually { state(d)?.stateSaved == false })
        // Still full at SIGTERM: cued exits (bounded) and says the state was not saved.
        #expect(d.stop() == 0)
        #expect(d.readStderr().contains("state not saved at exit"), "\(d.readStderr())")
        let second = try DaemonHarness(args: ["--sink", "null"], extraEnv: ["XDG_STATE_HOME": disk.dir], launcher: disk.launcher)
        #expect(try second.request("mute") == "ok muted")
        #expect(eventually { state(second)?.stateSaved == false })
        disk.free()
        #expect(second.stop() == 0)
        #expect(try disk.read("/cued/state").contains("muted=true"))
    }
}
