import CuedProtocol
import Foundation
import Testing
import TestSupport

/// One PipeWire test's world: a private PipeWire (`PipeWireStack`), cued run as a desktop user
/// runs it (`DesktopUser`: no privilege, where the tests run as root), the desktop's RTKit on a
/// private system bus for its real time (`RealtimeKitStack`; none when `CUED_TEST_RTKIT=off`,
/// make test's second run, so that the fallback is tested too), and a `StallWatch` that tells the
/// machine's stalls from cued's holes (and, without RTKit, how long the kernel kept cued's audio
/// threads waiting to run). Everything is stopped when it is released.
final class PipeWireRun: @unchecked Sendable {
    /// RTKit for cued's audio thread (make test runs the suite once more without).
    static var withRTKit: Bool { ProcessInfo.processInfo.environment["CUED_TEST_RTKIT"] != "off" }

    let watch: StallWatch
    let stack: PipeWireStack
    let rtkit: RealtimeKitStack?
    /// cued runs as the desktop user (else, not root, as the tester).
    let asUser = DesktopUser.unavailableReason == nil
    /// cued's audio thread runs at normal scheduling: a user's without RTKit.
    var normalThread: Bool { asUser && rtkit == nil }

    init() throws {
        stack = try PipeWireStack(forUser: asUser)
        rtkit = asUser && Self.withRTKit && RealtimeKitStack.unavailableReason == nil ? try RealtimeKitStack() : nil
        watch = StallWatch()
    }

    deinit { watch.stop() }

    /// What cued runs with: the stack's, and the system bus with RTKit (or none at all).
    var environment: [String: String] {
        var env = stack.environment
        env["DBUS_SYSTEM_BUS_ADDRESS"] = rtkit?.address ?? "unix:path=" + stack.dir.file("no-system-bus")
        return env
    }

    /// cued on `sink` (`args` more; `config`: its cued.toml, then `--config` is given).
    func cued(_ sink: String, cues: [String: [Int16]] = Fixture.standard, args: [String] = [], config: String? = nil,
              extraEnv: [String: String] = [:]) throws -> DaemonHarness {
        let configArgs = config == nil ? [] : ["--config", "%DIR%/config/cued/cued.toml"]
        let d = try DaemonHarness(cues: cues, args: ["--sink", sink, "--log-level", "debug"] + configArgs + args,
                                  extraEnv: environment.merging(extraEnv) { $1 }, config: config, asUser: asUser)
        watch.follow(pid: d.pid)
        return d
    }

    /// The audio thread's scheduling cued must report here: real time from RTKit, or (no RTKit)
    /// normal and why. Once cued is up it has asked (a bounded exchange, well under the wait).
    func expectScheduling(_ d: DaemonHarness, sourceLocation: SourceLocation = #_sourceLocation) {
        guard asUser else { return }
        var thread = ""
        let want = rtkit == nil ? "normal: no rtkit" : "realtime (rtkit)"
        #expect(eventually(timeout: 5) { thread = (try? d.status().audioThread) ?? "?"; return thread.hasPrefix(want) },
                "audio thread \(thread), expected \(want)", sourceLocation: sourceLocation)
    }

    /// `path`, made empty and writable by cued's user (for a file cued writes).
    func writable(_ path: String) throws -> String {
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        if asUser { DesktopUser.own(path) }
        return path
    }

    /// An ALSA PCM that keeps what cued hands the pulse plugin (`PipeWireStack.captureEnvironment`),
    /// at `path`, writable by cued's user.
    func captureEnvironment(to path: String) throws -> [String: String] {
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        if asUser { DesktopUser.own(path) }
        return try stack.captureEnvironment(to: path)
    }

    /// Judges a hole heard (`what`) on a graph whose shortest cycle was `cycle` frames: the
    /// machine's, as decision 0006 says, if the watch saw it stop for a cycle (less the half
    /// millisecond it looks every) or lose a cycle in stalls within four, or, where cued's thread
    /// is a normal one (no RTKit), if the kernel kept one of its audio threads waiting to run for a cycle,
    /// recorded as that known issue; else a failure, cued's. (Whether cued's margin answered a stall is `MarginTuner`'s
    /// and `GraphSlot`'s to show, on a fake clock.)
    func judgeHole(_ what: String, cycle frames: Int, sourceLocation: SourceLocation = #_sourceLocation) {
        Self.judgeHole(what, cycle: frames, watch: watch, normalThread: normalThread, sourceLocation: sourceLocation)
    }

    /// `normalThread`: cued's audio threads ran at normal scheduling, so that the time the scheduler
    /// kept one waiting (the watch's `waits`) is the machine's too: its other work, not only its stalls.
    static func judgeHole(_ what: String, cycle frames: Int, watch: StallWatch, normalThread: Bool = false,
                          sourceLocation: SourceLocation = #_sourceLocation) {
        let cycle = Double(frames) * 1000 / 48_000
        let burst = watch.worstBurstMs(windowMs: 4 * cycle)
        let stopped = watch.stalled(atLeastMs: cycle - 0.5) || burst >= cycle
        let normal = !stopped && normalThread && watch.waited(atLeastMs: cycle - 0.5)
        if watch.available && (stopped || normal) {
            withKnownIssue("the machine stopped running \(normal ? "a normal audio thread of cued's" : "threads") for a graph cycle of \(frames) frames (\(String(format: "%.1f", cycle)) ms) or more (\(watch.summary); at most \(String(format: "%.1f", burst)) ms lost on one CPU within 4 cycles): \(what)") {
                Issue.record("\(what)", sourceLocation: sourceLocation)
            }
        } else {
            Issue.record("\(what); the machine: \(watch.summary)", sourceLocation: sourceLocation)
        }
    }

    /// The graph's cycle with `sink` (frames at 48 kHz): the ALSA plugin's from cued's period
    /// (528 → 512), pipewire-pulse's floor, the native stream's first node.latency.
    static func cycle(of sink: String) -> Int {
        ["alsa:default": 512, "alsa:pulse": 256, "alsa:pulsecap": 256][sink] ?? 128
    }

    /// cued's own count on the native stream: no graph cycle without its audio, or the machine's.
    func expectNoMissedCycle(_ st: Status, sink: String, sourceLocation: SourceLocation = #_sourceLocation) {
        guard sink.hasPrefix("pipewire"), st.missedCycles > 0 else { return }
        judgeHole("cued counted \(st.missedCycles) graph cycles without its audio (its margin \(st.sink.marginFrames ?? 0) frames, grown \(st.sink.marginGrowths)×)",
                  cycle: Self.cycle(of: sink), sourceLocation: sourceLocation)
    }
}

extension Recording {
    /// Waits until the raw recording at `path` holds `count` whole copies of `cue` (stereo), the
    /// sink's clock moving it on; the recording then (whatever it holds at the deadline).
    static func waiting(at path: String, for cue: [Int16], count: Int, timeout: Double = 5) -> Recording {
        var rec = Recording(samples: [])
        _ = eventually(timeout: timeout, interval: 0.05) {
            rec = (try? Recording(path: path)) ?? rec
            return rec.occurrences(of: cue).count >= count
        }
        return rec
    }

    /// Waits until the raw recording at `path` has gone on `frames` frames past where it was when
    /// called: the sink's own clock, not a fixed sleep (a recorder is realtime, so this is the
    /// graph's time to within its buffer).
    static func waitFrames(at path: String, _ frames: Int, timeout: Double = 5) {
        func size() -> Int { ((try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0) / 4 }
        let start = size()
        _ = eventually(timeout: timeout, interval: 0.005) { size() >= start + frames }
    }
}
