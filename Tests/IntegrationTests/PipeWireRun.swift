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
    /// cued runs as a user: the desktop user (the tests are root) or the tester (they are not).
    var aUser: Bool { asUser || getuid() != 0 }
    /// cued's audio thread runs at normal scheduling: a user's without RTKit.
    var normalThread: Bool { aUser && rtkit == nil }

    init() throws {
        stack = try PipeWireStack(forUser: asUser)
        rtkit = Self.withRTKit && RealtimeKitStack.unavailableReason == nil ? try RealtimeKitStack() : nil
        watch = StallWatch(rtkit: getuid() == 0 ? nil : rtkit)
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
        guard aUser else { return }
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

    /// The timing claims this run found false, judged once it is over (`measured`).
    lazy var holes = HoleLedger(watch: watch, normalThread: normalThread)

    /// A hole heard (`what`) on a graph whose shortest cycle was `cycle` frames: noted, judged
    /// when the run is over (decision 0006).
    func noteHole(_ what: String, cycle frames: Int, sourceLocation: SourceLocation = #_sourceLocation) {
        holes.note(what, cycle: frames, sourceLocation: sourceLocation)
    }

    /// `body` on a new run (a new stack, a new cued), measured again while the machine spoils it
    /// (`HoleLedger.measured`).
    static func measured(attempts: Int = 8, sourceLocation: SourceLocation = #_sourceLocation,
                         _ body: (PipeWireRun) throws -> Void) throws {
        try HoleLedger.measured(attempts: attempts, sourceLocation: sourceLocation, make: { try PipeWireRun() }, ledger: \.holes, body)
    }

    /// The graph's cycle with `sink` (frames at 48 kHz): the ALSA plugin's from cued's period
    /// (528 → 512), pipewire-pulse's floor, the native stream's first node.latency.
    static func cycle(of sink: String) -> Int {
        ["alsa:default": 512, "alsa:pulse": 256, "alsa:pulsecap": 256][sink] ?? 128
    }

    /// cued's own count on the native stream: no graph cycle without its audio, or the machine's.
    func expectNoMissedCycle(_ st: Status, sink: String, sourceLocation: SourceLocation = #_sourceLocation) {
        guard sink.hasPrefix("pipewire"), st.missedCycles > 0 else { return }
        noteHole("cued counted \(st.missedCycles) graph cycles without its audio (its margin \(st.sink.marginFrames ?? 0) frames, grown \(st.sink.marginGrowths)×)",
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

/// The timing claims a run found false (holes, late replies), each with how the machine spoiled the
/// run when it was found (`StallWatch.spoiled`; nil: it did not, the hole is cued's).
final class HoleLedger: @unchecked Sendable {
    struct Hole { let what: String; let spoiledBy: String?; let location: SourceLocation }
    let watch: StallWatch
    let normalThread: Bool
    private(set) var found: [Hole] = []
    /// Set by `measured`, which judges the holes once the run is over; without it a hole is
    /// judged where it is noted, and fails there (no run to measure again).
    fileprivate var judgedAfter = false

    init(watch: StallWatch, normalThread: Bool = false) {
        self.watch = watch
        self.normalThread = normalThread
    }

    func note(_ what: String, cycle frames: Int, sourceLocation: SourceLocation = #_sourceLocation) {
        let hole = Hole(what: what, spoiledBy: watch.spoiled(cycle: frames, normalThread: normalThread), location: sourceLocation)
        guard judgedAfter else {
            Issue.record("\(what) (a hole in a run that is not measured again: \(hole.spoiledBy ?? "the machine did not stall for it"); \(watch.summary))",
                         sourceLocation: sourceLocation)
            return
        }
        found.append(hole)
        print("PipeWireTests: a hole: \(what); the machine: \(watch.summary)")
    }

    /// Runs `body` on a new run (`make`), and judges the holes it noted (decision 0006): none, it
    /// passed; one in a run the machine did not stall, cued's, a failure; all in a run the watch saw
    /// the machine stop for a graph cycle, the run proves nothing and is measured again, up to
    /// `attempts` runs, and a machine that spoils every one fails the test too (cued could not be
    /// measured). Nothing is excused: a hole is never a known issue.
    static func measured<Run>(attempts: Int = 8, sourceLocation: SourceLocation = #_sourceLocation,
                              make: () throws -> Run, ledger: (Run) -> HoleLedger, _ body: (Run) throws -> Void) throws {
        var spoiled: [String] = []
        for attempt in 1...attempts {
            let run = try make()
            let book = ledger(run)
            book.judgedAfter = true
            try body(run)
            book.watch.stop()
            if book.found.isEmpty { return }
            let cueds = book.found.filter { $0.spoiledBy == nil }
            for h in cueds {
                Issue.record("\(h.what); the machine did not stall for it: \(book.watch.summary)", sourceLocation: h.location)
            }
            if !cueds.isEmpty { return }
            let said = book.found.map { "\($0.what): \($0.spoiledBy ?? "")" }.joined(separator: "; ")
            spoiled.append("run \(attempt): \(said) (\(book.watch.summary))")
            print("PipeWireTests: run \(attempt) of \(attempts) spoiled by the machine, measured again: \(said)")
        }
        Issue.record("the machine stopped for a graph cycle in each of \(attempts) runs, so cued could not be measured: \(spoiled.joined(separator: " | "))",
                     sourceLocation: sourceLocation)
    }
}
