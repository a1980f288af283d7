import CuedProtocol
import Foundation
import Testing
import TestSupport

/// cued's libcanberra plug-in on a private PipeWire (see `PipeWireStack`), heard at the
/// null sink's monitor: with cued down the plug-in hands each play to libcanberra's pulse
/// driver (pipewire-pulse), and back to cued when it answers again; cued stopped and
/// started under one live context. Run with the PipeWire tests (make test runs those on
/// their own).
@Suite(.serialized, .timeLimit(.minutes(3)),
       .enabled(if: PipeWireStack.unavailableReason == nil && CanberraSandbox.unavailableReason == nil
                && FileManager.default.fileExists(atPath: (CanberraSandbox.systemDirectory ?? "") + "/libcanberra-pulse.so"),
                "needs PipeWire, libcanberra and its pulse driver (libcanberra-pulse)"))
struct CanberraPipeWireTests {
    @Test func cuedDownPlaysThroughPulseAndALiveContextComesBackToCuedAfterARestart() throws {
        try HoleLedger.measured(make: { HoleLedger(watch: StallWatch()) }, ledger: { $0 }) { holes in
            try cuedDownAndBack(holes)
        }
    }

    func cuedDownAndBack(_ holes: HoleLedger) throws {
        let stack = try PipeWireStack()
        let sandbox = try CanberraSandbox()
        let shared = stack.dir.file("share")
        try CanberraFixture.install(dataHome: shared)
        let socket = stack.dir.file("cued.sock")
        let sync = stack.dir.path
        var env = CanberraSandbox.environment(stack.environment)
        env["CUED_SOCKET"] = socket
        env["XDG_DATA_HOME"] = shared
        env["XDG_CACHE_HOME"] = stack.dir.file("cache")
        let recording = stack.dir.file("monitor.raw")
        _ = try stack.record(to: recording)

        // One context all along, as GNOME Shell's: cued down, up, stopped, up again.
        let bell = ["event.id": "cuedtest-bell"]
        let steps: [Any] = [
            ["props", ["application.name": "Live"]],
            ["play", 1, bell], ["wait_callbacks", 1, 10], ["touch", sync + "/1"],
            ["wait_file", sync + "/2", 30], ["play", 2, bell], ["wait_callbacks", 2, 10], ["touch", sync + "/3"],
            ["wait_file", sync + "/4", 30], ["play", 3, bell], ["wait_callbacks", 3, 10], ["touch", sync + "/5"],
            ["wait_file", sync + "/6", 30], ["play", 4, bell], ["wait_callbacks", 4, 10],
        ]
        let json = String(decoding: try JSONSerialization.data(withJSONObject: steps), as: UTF8.self)
        let (path, args) = sandbox.wrap(["/usr/bin/python3", CanberraSandbox.client, json])
        let out = stack.dir.file("client.out")
        let client = try Subprocess(path, args, env: env, stdout: out, stderr: stack.dir.file("client.err"))
        func cued() throws -> DaemonHarness {
            try DaemonHarness(args: ["--sink", "pipewire", "--socket", socket],
                              extraEnv: stack.environment.merging(["XDG_DATA_HOME": shared]) { $1 })
        }
        #expect(eventually(timeout: 20) { FileManager.default.fileExists(atPath: sync + "/1") }, "the first play (cued down) ended not")
        let first = try cued()
        _ = FileManager.default.createFile(atPath: sync + "/2", contents: nil)
        #expect(eventually(timeout: 20) { FileManager.default.fileExists(atPath: sync + "/3") })
        let firstPlayed = try first.status().apps["Live"]
        #expect(first.stop() == 0)
        _ = FileManager.default.createFile(atPath: sync + "/4", contents: nil)
        #expect(eventually(timeout: 20) { FileManager.default.fileExists(atPath: sync + "/5") })
        let second = try cued()
        _ = FileManager.default.createFile(atPath: sync + "/6", contents: nil)
        #expect(client.wait(timeout: 30) == 0, "\((try? String(contentsOfFile: stack.dir.file("client.err"), encoding: .utf8)) ?? "")")
        let secondPlayed = try second.status().apps["Live"]

        let printed = (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
        let object = try #require(try JSONSerialization.jsonObject(with: Data(printed.utf8)) as? [String: Any], "\(printed)")
        let run = CanberraRun(object, stderr: "")
        // Every play accepted and called back once, with success, whichever way it went.
        #expect((1...4).allSatisfy { run.ret($0) == CA.success && run.codes($0) == [CA.success] }, "\(run)")
        // cued took the plays it was up for, and only those.
        #expect(firstPlayed?.played == 1 && firstPlayed?.via == ["libcanberra"], "\(String(describing: firstPlayed))")
        #expect(secondPlayed?.played == 1, "\(String(describing: secondPlayed))")
        // All four heard at the monitor: two through pulse, two through cued.
        let bellStereo = CanberraFixture.bell.stereo
        if !eventually(timeout: 5, { ((try? Recording(path: recording))?.occurrences(of: bellStereo).count ?? 0) >= 4 }) {
            // A hole: judged as the PipeWire tests judge one (the machine's, if it stopped for a
            // cycle: cued's native stream's 128 frames, the pulse driver's 256), by whose stream lost it.
            let st = try second.status()
            let what = "heard \((try? Recording(path: recording))?.occurrences(of: bellStereo).count ?? 0) of 4 bells"
            holes.note(what + "; cued counted \(st.missedCycles) missed cycles", cycle: st.missedCycles > 0 ? 128 : 256)
        }
        #expect(second.stop() == 0)
    }
}
