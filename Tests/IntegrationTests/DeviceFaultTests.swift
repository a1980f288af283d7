import CuedConfig
import CuedProtocol
import Foundation
import Testing
import TestSupport

/// A device that fails (the `fault:` sink): cued keeps answering, reports it,
/// retries, plays again when the device is back, and never plays a cue late.
@Suite(.timeLimit(.minutes(2))) struct DeviceFaultTests {

    @Test func xrunAndSuspendAreRecovered() throws {
        var cues = Fixture.standard
        cues["long"] = Fixture.constant(100, frames: 9_600)  // 200 ms: 40 periods
        let d = try DaemonHarness(cues: cues, args: ["--sink", "fault:write-3=EPIPE,write-7=ESTRPIPE"])
        #expect(try d.request("play long") == "ok")
        // "idle" alone would not do: the sink is idle right after opening, before any write.
        #expect(eventually { (try? d.status()).map { s in s.xruns == 2 && s.sink.state == "idle" } ?? false })
        let s = try d.status()
        #expect(s.xruns == 2)
        #expect(s.played == 1)
        #expect(s.dropped == 0)
        #expect(s.sink.error == nil)
    }

    @Test func failedOpensAreRetriedAndTheWaitingCuePlays() throws {
        // Two failed opens: retried after 50 and 100 ms, well inside the cue's 250 ms.
        let d = try DaemonHarness(args: ["--sink", "fault:open-fail=2"])
        // `wait`: the reply comes once the cue has sounded (played counts it when it is answered).
        #expect(try d.request("play pop wait") == "ok")
        let s = try d.status()
        #expect(s.played == 1)
        #expect(s.dropped == 0)
        #expect(s.sink.state != "failed")
    }

    @Test func unpluggedDeviceNeverStopsTheDaemonAndLateCuesAreDropped() throws {
        var cues = Fixture.standard
        cues["long"] = Fixture.constant(100, frames: 48_000)
        let d = try DaemonHarness(cues: cues, args: ["--sink", "fault:write-5=ENODEV,down-ms=800"])
        #expect(try d.request("play long") == "ok")
        #expect(eventually { (try? d.status())?.sink.state == "failed" })
        var s = try d.status()
        guard let error = s.sink.error else { Issue.record("no error in status"); return }
        #expect(error.contains("ENODEV"))
        #expect(s.dropped == 1)  // the long cue, cut off by the unplug
        // While the device is gone: still answering; a cue waits at most 250 ms, then is dropped.
        #expect(try d.request("ping") == "ok pong")
        #expect(try d.request("play pop") == "ok")
        #expect(eventually { (try? d.status())?.dropped == 2 })
        s = try d.status()
        #expect(s.played == 1)  // only the long cue, started before the unplug
        // The device returning and the next cue playing: DeviceMachineTests, on a fake clock.
    }

    /// cued on a device that, from its 3rd write, takes nothing until it is reopened, a 500 ms cue
    /// played and waited for across the stall, and the device reopened once (idle): the daemon and
    /// the waited play's reply.
    func stalledOnce(sourceLocation: SourceLocation = #_sourceLocation) throws -> (DaemonHarness, String) {
        var cues = Fixture.standard
        cues["long"] = Fixture.constant(100, frames: 24_000)  // 500 ms
        let d = try DaemonHarness(cues: cues, args: ["--sink", "fault:stall-3=once"])
        let r = try d.request("play long wait")
        #expect(eventually { (try? d.status()).map { s in s.stalls == 1 && s.sink.state == "idle" } ?? false },
                sourceLocation: sourceLocation)
        return (d, r)
    }

    @Test func aStalledDeviceIsCountedReopenedAndPlaysTheNextCue() throws {
        let (d, r) = try stalledOnce()
        // It had started sounding: the waiter hears that the device failed under it, not
        // that it never started.
        #expect(r.hasPrefix("err not-played cut the device failed while it played; too late to start it again"), "\(r)")
        var s = try d.status()
        // Stalled ~10 ms after its request, found stalled 250 ms later: too late to start again, so dropped.
        #expect(s.dropped == 1)
        #expect(s.played == 1)
        let log = d.readStderr()
        #expect(log.contains("stalled"))
        #expect(log.contains("cue cut off: the device failed while it played"))
        #expect(try d.request("play pop") == "ok")  // the reopened device works
        #expect(eventually { (try? d.status()).map { s in s.played == 2 && s.sink.state == "idle" } ?? false })
        s = try d.status()
        #expect(s.stalls == 1)
        #expect(s.dropped == 1)
    }

    /// An output that opens and takes cues and plays none of them is never "ok": `status`,
    /// `why` and `doctor` say it fails, with the fix, until a cue is heard whole through it.
    @Test func anOutputThatStallsIsFailingUntilACueIsHeard() throws {
        let (d, r) = try stalledOnce()
        #expect(r.hasPrefix("err not-played cut"), "\(r)")
        var s = try d.status()
        #expect(s.sink.failing)
        #expect(s.sink.faultsSinceHeard == 1 && s.sink.lostSinceHeard == 1, "\(s.sink)")
        #expect(s.sink.lastFault == "stalled: it took no frames")
        let why = try d.request("why pop")
        #expect(why.contains("device-failing"), "\(why)")
        #expect(why.contains("takes cues and plays nothing: it failed once and lost 1 cue since a cue was last heard whole"), "\(why)")
        let doctor = try runProcess(TestPaths.binary("cuectl"), ["--socket", d.socketPath, "doctor"], env: d.environment)
        #expect(doctor.status == 1, "\(doctor)")
        #expect(doctor.out.contains("!!  output fault:stall-3=once (idle) takes cues and plays nothing: it failed once and lost 1 cue"), "\(doctor.out)")
        let table = try runProcess(TestPaths.binary("cuectl"), ["--socket", d.socketPath, "status"], env: d.environment)
        #expect(table.out.contains("sink health   failing: it failed once and lost 1 cue"), "\(table.out)")
        // The reopened device plays: heard whole, the output is healthy again.
        #expect(try d.request("play pop wait") == "ok")
        s = try d.status()
        #expect(!s.sink.failing && s.sink.lastFault == nil, "\(s.sink)")
        let again = try runProcess(TestPaths.binary("cuectl"), ["--socket", d.socketPath, "doctor"], env: d.environment)
        #expect(!again.out.contains("plays nothing"), "\(again.out)")
    }

    /// A device that never takes another frame does not hold the stop: the audio
    /// thread gives up on the cue at the end of the grace and ends, so cued stops
    /// by itself (not by its exit deadline, nor leaving the thread behind).
    /// How long that takes: `make bench`.
    @Test func sigtermEndsCuedByItselfOnADeviceThatAlwaysStalls() throws {
        var cues = Fixture.standard
        cues["long"] = Fixture.constant(100, frames: 48_000 * 5)
        let d = try DaemonHarness(cues: cues, args: ["--sink", "fault:stall-2=always"])
        #expect(try d.request("play long") == "ok")
        #expect(eventually { (try? d.status()).map { s in s.stalls >= 1 } ?? false })
        d.process.signal(SIGTERM)
        d.expectStopsByItself()
    }

    /// An audio thread that never returns (a stuck driver) is left behind, said
    /// so, and the rest of the stop runs: cued does not need its exit deadline.
    @Test func sigtermEndsCuedEvenWhenTheAudioThreadHangs() throws {
        let d = try DaemonHarness(args: ["--sink", "null"], extraEnv: ["CUED_TEST_HANG_AUDIO": "1"])
        #expect(try d.request("play pop") == "ok")  // the audio thread now hangs for good…
        // …in the hook's sleep(3600): clock_nanosleep (230) on CLOCK_REALTIME, relative
        // (a clocked sink's pacing sleeps on CLOCK_MONOTONIC, absolute).
        #expect(eventually { Self.threadSyscalls(d.pid).contains { $0.hasPrefix("230 0x0 0x0 ") } },
                "\(Self.threadSyscalls(d.pid))")
        d.process.signal(SIGTERM)
        d.expectStopsByItself(leavesAudioThread: true)
    }

    /// What each thread of `pid` is blocked in (/proc/PID/task/TID/syscall: number, arguments).
    static func threadSyscalls(_ pid: pid_t) -> [String] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.compactMap { try? String(contentsOfFile: "/proc/\(pid)/task/\($0)/syscall", encoding: .utf8) }
    }

    @Test func preflightRefusesAWAVFileInAMissingDirectory() throws {
        let r = try runProcess(TestPaths.binary("cued"), ["--sink", "wav:/nonexistent-dir/x.wav", "--socket", "/tmp/none.sock"])
        #expect(r.status == 78)
        #expect(r.err.contains("/nonexistent-dir"))
        #expect(r.err.contains("does not exist"))
    }

    /// `cued --sink pulse`: a usage error that says what was probably meant.
    @Test func sinkNearMissSuggestsTheSpec() throws {
        let r = try runProcess(TestPaths.binary("cued"), ["--sink", "pulse", "--socket", "/tmp/none.sock"])
        #expect(r.status == 64)
        #expect(r.err == "cued: unknown sink 'pulse': did you mean alsa:pulse? (\(SinkSyntax.summary)) (see cued --help)\n", "\(r.err)")
    }

    /// wav:FILE never overwrites a recording: a file with something in it is
    /// refused at start (exit 78, left as it was) unless --force; an empty one is written.
    @Test func wavSinkRefusesAnExistingRecording() throws {
        let dir = TempDir()
        let old = dir.file("old.wav")
        try "an earlier recording".write(toFile: old, atomically: false, encoding: .utf8)
        let r = try runProcess(TestPaths.binary("cued"), ["--sink", "wav:" + old, "--socket", dir.file("s.sock")])
        #expect(r.status == 78)
        #expect(r.err == "cued: sink wav:\(old): the file already exists (20 bytes) and cued does not overwrite a recording; "
                + "move it away, pick another path, or add --force\n", "\(r.err)")
        #expect(try String(contentsOfFile: old, encoding: .utf8) == "an earlier recording")
        // --force: replaced.
        let forced = try DaemonHarness(args: ["--sink", "wav:" + old, "--force"])
        #expect(try forced.request("play pop wait") == "ok")
        #expect(forced.stop() == 0)
        #expect(((try? WAV.read(old))?.samples.filter { $0 != 0 }.count ?? 0) > 0)
        let empty = dir.file("empty.wav")
        _ = FileManager.default.createFile(atPath: empty, contents: nil)
        let d = try DaemonHarness(args: ["--sink", "wav:" + empty])
        #expect(try d.request("play pop wait") == "ok")
        #expect(d.stop() == 0)
        #expect(((try? WAV.read(empty))?.samples.filter { $0 != 0 }.count ?? 0) > 0)
    }

    @Test func aDeviceBrokenOnceIsReopenedAtOnceAndTheCueRestarted() throws {
        let d = try DaemonHarness(args: ["--sink", "fault:write-2=EIO"])
        #expect(try d.request("play pop wait") == "ok")  // restarted on the reopened device, and sounded
        #expect(eventually { (try? d.status()).map { s in s.played == 1 && s.sink.state == "idle" } ?? false })
        let s = try d.status()
        #expect(s.dropped == 0)
        #expect(d.readStderr().contains("EIO"))
        #expect(try d.request("play pop") == "ok")
        #expect(eventually { (try? d.status())?.played == 2 })
    }

    @Test func badFaultSpecIsAUsageError() throws {
        let r = try runProcess(TestPaths.binary("cued"), ["--sink", "fault:write-x=EPIPE", "--socket", "/tmp/none.sock"])
        #expect(r.status == 64)
        #expect(r.err.contains("fault sink"))
    }
}
