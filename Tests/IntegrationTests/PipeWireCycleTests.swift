import CuedProtocol
import Foundation
import Testing
import TestSupport

/// The native stream and the graph's cycles, end to end: the quantum asked, cued's count of
/// missed cycles against what the monitor heard, cycles longer and shorter than cued's, the
/// linger, `play … wait`.
extension PipeWireTests {
    /// Five `play pop wait`, each `apartFrames` of the sink's clock after the last, recorded at the monitor.
    func fivePopsRecorded(_ d: DaemonHarness, _ stack: PipeWireStack, apartFrames: Int) throws -> Recording {
        let path = stack.dir.file("pops-\(UInt32.random(in: 0...UInt32.max)).raw")
        let recorder = try stack.record(to: path)
        for _ in 0..<5 {
            #expect(try d.request("play pop wait") == "ok")
            Recording.waitFrames(at: path, apartFrames)
        }
        let rec = Recording.waiting(at: path, for: Self.pop, count: 5)
        recorder.stop()
        return rec
    }

    /// The quantum the native stream asks the graph for: exactly 128/48000 unless told otherwise
    /// (`--latency-ms N`: N × 48 frames; the user's own `[stream] "node.latency"`), while its margin
    /// has not grown (a miss the machine made grows it: then the cycle it grew to, and the miss is
    /// judged). And the audio thread as the desktop grants it.
    @Test func theNativeStreamAsksTheQuantumItIsTold() throws {
        try PipeWireRun.measured { run in
            let cases: [(args: [String], config: String?, asked: String)] = [
                ([], nil, "128/48000"),
                (["--latency-ms", "6"], nil, "288/48000"),
                ([], "[stream]\n\"node.latency\" = \"512/48000\"\n", "512/48000"),
            ]
            for c in cases {
                let d = try run.cued("pipewire", args: c.args, config: c.config)
                let played = try d.request("play pop wait")
                #expect(played == "ok", "\(c.args): \(played); \(d.readStderr().suffix(800))")
                run.expectScheduling(d)
                let ours = (try run.stack.outputStreams()).filter { $0.props["application.id"] as? String == "cued" }
                let st = try d.status()
                if st.sink.marginGrowths == 0 {
                    #expect(ours.map { $0.props["node.latency"] as? String } == [c.asked], "\(c.args) \(c.config ?? ""): \(ours.map { $0.props["node.latency"] ?? "-" })")
                } else {
                    #expect(ours.map { $0.props["node.latency"] as? String } == ["\(st.sink.marginFrames ?? 0)/48000"])
                    run.expectNoMissedCycle(st, sink: "pipewire")
                }
                #expect(c.config == nil || st.sink.marginFrames == nil, "the user's node.latency is not cued's to change: \(st.sink)")
                _ = d.stop()
            }
        }
    }

    /// The native stream's `missed_cycles` counts the silence the graph played in its place:
    /// cued stopped (SIGSTOP, every thread) for 30 ms or more inside a 1 s cue leaves a hole at the
    /// monitor as long as the cycles it counted (to a cycle a hole: a client cannot see whether a
    /// buffer it finished late was mixed in that cycle or the next), and the rest of the cue in
    /// order. Two parts, judged apart: what cued handed the graph (its buffers as the graph's cycles
    /// took them, `CUED_TEST_HANDED_OVER`) is the whole cue in order, nothing lost, repeated or
    /// torn, whatever the stop and the switch to a longer cycle after it (cued's part, strict);
    /// what the graph made of it may lose or tear at most the one cycle the late answer lands in,
    /// in the stop's window (PipeWire's part). The margin then grows, and the cues after it are whole.
    @Test func aStreamStoppedMidCueLeavesAHoleMissedCyclesCounts() throws {
        var cues = Fixture.standard
        let tone = Fixture.samples(seed: 7, frames: 48_000).map { $0 == 0 ? 1 : $0 }  // no silent frame of its own
        cues["tone"] = tone
        try PipeWireRun.measured { run in
            let stack = run.stack
            let handed = stack.dir.file("handed-over.raw")
            let d = try run.cued("pipewire", cues: cues, extraEnv: ["CUED_TEST_HANDED_OVER": try run.writable(handed)])
            #expect(try d.request("play pop") == "ok")
            #expect(waitIdle(d))
            let idle = try d.status()
            let path = stack.dir.file("monitor.raw")
            let recorder = try stack.record(to: path)
            let cue = tone.stereo
            #expect(try d.request("play tone") == "ok")
            // The tone's start at the monitor, and 200 ms more of it.
            _ = Recording.waiting(at: path, for: Array(cue.prefix(2 * 97)), count: 1)
            Recording.waitFrames(at: path, 9_600)
            // The graph's cycle now: cued's margin, which a miss before the stop (a stall of this
            // machine's) may have grown already.
            let atStop = try d.status()
            let cycle = atStop.sink.marginFrames ?? 128
            // Longer than what cued has queued (a buffer ready, one in the graph), so that it is a miss
            // at any cycle the margin has grown to.
            let stopUs = max(30_000, 3 * cycle * 1_000_000 / 48_000 + 5_000)
            d.process.signal(SIGSTOP)
            usleep(useconds_t(stopUs))  // the stop itself: its length is what the test sets
            d.process.signal(SIGCONT)
            #expect(waitIdle(d), "cued not idle after the tone: \(((try? d.status()).map { "\($0.sink), missed cycles \($0.missedCycles)" }) ?? "no status")")
            let rec = Recording.waiting(at: path, for: Array(cue.suffix(2 * 97)), count: 1)
            recorder.stop()
            let after = try d.status()
            let missed = after.missedCycles - idle.missedCycles
            // cued's part: every frame of the tone handed over once, in order (a frame lost, repeated
            // or out of order here is cued's, whatever the machine did).
            let gave = (try Recording(path: handed)).follow(cue)
            #expect(gave.map { $0.heard == tone.count && $0.complete && $0.disturbed == 0 && $0.lost == 0 } == true,
                    "cued did not hand the graph the tone in order: \(gave.map { "\($0)" } ?? "its start not found") of \(tone.count) frames; margin \(idle.sink.marginFrames ?? 0) → \(atStop.sink.marginFrames ?? 0) → \(after.sink.marginFrames ?? 0) frames")
            // The graph's part: the tone at the monitor.
            guard let f = rec.follow(cue) else {
                Issue.record("the tone's start is not at the monitor: \(rec.sounds().prefix(4)); cued counted \(missed) missed cycles")
                return
            }
            // A missed cycle is of the tone's first cycle or up to the grown one.
            let shortest = min(cycle, idle.sink.marginFrames ?? cycle)
            let longest = max(cycle, after.sink.marginFrames ?? cycle)
            let stopAt = f.stopWindow(stopFrames: stopUs * 48 / 1000, longest: longest)
            let what = "a stop of \(stopUs / 1000) ms; the tone at the monitor: \(f); cued counted \(missed) missed cycles of \(shortest) to \(longest) frames (\(cycle) at the stop); its margin grew \(after.sink.marginGrowths)× after \(after.sink.marginMisses) misses"
            #expect(f.heard > 0 && missed > 0, "the stop was not heard, or not counted: \(what)")
            if !f.complete { run.noteHole("the tone's end is not at the monitor in order: \(what)", cycle: shortest) }
            if f.disturbed > stopAt {
                // Another hole, away from the stop (at the tone's start, a first miss of this machine's).
                run.noteHole("a hole away from the stop: \(what)", cycle: shortest)
            } else {
                // The counters match the monitor: the hole, to a cycle a hole, the cycles cued counted.
                if !(f.hole >= (missed - f.holes) * shortest && f.hole <= (missed + f.holes) * longest) {
                    run.noteHole("the hole at the monitor is not the cycles cued counted: \(what)", cycle: shortest)
                }
                // All cued handed over came (above): frames lost here are the graph's, at most the cycle
                // the late answer landed in.
                if f.lost > longest { run.noteHole("more lost than the cycle the late answer landed in: \(what)", cycle: shortest) }
            }
            // That stop was a miss: the margin grew (the graph's cycle cued asks, doubled as often as
            // covers the stop, to its 1,024-frame limit), and the cues after it are heard whole.
            let grown = try d.status()
            #expect(grown.sink.marginGrowths >= 1 && ((grown.sink.marginFrames ?? 0) > cycle || cycle >= 1_024), "\(grown.sink)")
            let pops = try fivePopsRecorded(d, stack, apartFrames: 4_800)
            let end = try d.status()
            if pops.occurrences(of: Self.pop).count != 5 || end.missedCycles > grown.missedCycles {
                run.noteHole("after the margin grew to \(grown.sink.marginFrames ?? 0) frames: \(pops.occurrences(of: Self.pop).count) of 5 pops whole, \(pops.firstMismatch(pops.sounds(), Self.pop)); missed cycles \(grown.missedCycles) → \(end.missedCycles)",
                              cycle: shortest)
            }
        }
    }

    /// A graph cycle longer than cued's period (a `[stream]` node.latency of 512 here; a grown
    /// margin, or a graph forced large, the same): each buffer is filled to the whole cycle, and
    /// every cue is heard whole. (Filled to what the graph's `requested` said, a part-cycle, the
    /// converter lost every other cycle: 0 of 10 cues whole at 512.)
    @Test func aGraphCycleLongerThanCuedsPeriodLosesNoCycle() throws {
        try PipeWireRun.measured { run in
            let d = try run.cued("pipewire", config: "[stream]\n\"node.latency\" = \"512/48000\"\n")
            #expect(try d.request("play pop wait") == "ok")  // opened before the recording
            let rec = try fivePopsRecorded(d, run.stack, apartFrames: 2_400)
            let st = try d.status()
            #expect(st.sink.marginFrames == nil, "the user's node.latency is not cued's to change: \(st.sink)")
            if rec.occurrences(of: Self.pop).count != 5 {
                run.noteHole("\(rec.occurrences(of: Self.pop).count) of 5 pops whole at a graph cycle of 512: \(rec.firstMismatch(rec.sounds(), Self.pop))", cycle: 512)
            }
        }
    }

    /// A graph quantum below cued's own (the user, or a pro-audio app, forces 64 frames while cued
    /// asks 128): the native stream fills the smaller buffers the graph asks for. Judged on what
    /// the graph's cycles took of cued's (`CUED_TEST_HANDED_OVER`): every cue whole, in order, none
    /// stalled or dropped, and heard at the monitor. (It stalled: cued waited for a period's room
    /// that a 64-frame buffer never has, and no cue sounded at all.) Whether the monitor has each
    /// sample-exact at a 1.3 ms cycle is the graph's: a stop of this VM of 0.8 ms loses it a cycle,
    /// and at rest every run of this test had one (3 of 3 measured again, all spoiled); that rate
    /// is `make bench`'s, not a verdict on cued.
    @Test func aGraphQuantumBelowCuedsIsFilledAsItAsks() throws {
        let run = try PipeWireRun()
        let stack = run.stack
        let force = try runOnStack("/usr/bin/pw-metadata", ["-n", "settings", "0", "clock.force-quantum", "64"], env: stack.environment, timeout: 10)
        #expect(force.status == 0, "\(force)")
        let handed = stack.dir.file("handed-over.raw")
        let d = try run.cued("pipewire", extraEnv: ["CUED_TEST_HANDED_OVER": try run.writable(handed)])
        let raw = stack.dir.file("monitor.raw")
        let recorder = try stack.record(to: raw)
        for _ in 0..<3 {
            #expect(try d.request("play pop wait") == "ok")
            Recording.waitFrames(at: raw, 4_800)
        }
        let st = try d.status()
        #expect(st.stalls == 0 && st.dropped == 0, "stalls \(st.stalls), dropped \(st.dropped); \(d.readStderr().suffix(600))")
        let rec = Recording.waiting(at: raw, for: Self.pop, count: 3)
        recorder.stop()
        let mine = try Recording(path: handed)
        #expect(mine.occurrences(of: Self.pop).count == 3,
                "what the graph took of cued's: \(mine.occurrences(of: Self.pop).count) of 3 pops whole; \(mine.firstMismatch(mine.sounds(), Self.pop))")
        #expect(rec.holds(partOf: Self.pop), "no pop at the monitor: \(rec.sounds().prefix(6)); missed cycles \(st.missedCycles)")
        print("PipeWireTests: at a forced quantum of 64, \(rec.occurrences(of: Self.pop).count) of 3 pops sample-exact at the monitor; the machine: \(run.watch.summary)")
    }

    /// `play … wait` on the native stream answers once the cue has sounded: not before its last
    /// frame can have reached the graph (its length after the request), and not long after (the
    /// stream's timing, not a guess); the cue is heard once, sample-exact.
    @Test func playWaitOnTheNativeStreamRepliesOnceTheCueHasSounded() throws {
        try PipeWireRun.measured { run in
            let stack = run.stack
            let d = try run.cued("pipewire")
            #expect(try d.request("play pop") == "ok")  // opened: the waits below time the stream, not the connection
            #expect(waitIdle(d))
            let path = stack.dir.file("monitor.raw"), second = stack.dir.file("monitor2.wav")
            let recorder = try stack.record(to: path)
            let recorder2 = try stack.recordNatively(to: second)
            let popSeconds = Double(Self.pop.count / 2) / 48_000
            let c = try d.client()
            var took: [Double] = []
            for _ in 0..<5 {
                let t0 = Date()
                #expect(try c.request("play pop wait") == "ok")
                took.append(Date().timeIntervalSince(t0))
                #expect(waitIdle(d))
            }
            let rec = Recording.waiting(at: path, for: Self.pop, count: 5)
            recorder.stop()
            recorder2.stop()
            for t in took {
                if t < popSeconds {
                    // After the machine stalls, the null sink (a timer) runs the cycles it owes back
                    // to back: the graph then plays a cue's frames faster than real time.
                    run.noteHole("replied \(t) s after the request, before a \(popSeconds) s cue can have sounded in real time", cycle: 128)
                }
                if t >= popSeconds + 0.1 { run.noteHole("replied \(t) s after the request for a \(popSeconds) s cue", cycle: 128) }
            }
            let st = try d.status()
            if rec.occurrences(of: Self.pop).count != 5 {
                let otherWhole = (try Recording(wav: second)).occurrences(of: Self.pop).count
                let what = "\(rec.occurrences(of: Self.pop).count) of 5 pops sample-exact at parec's recording, \(otherWhole) at pw-record's: \(rec.firstMismatch(rec.sounds(), Self.pop)); cued: missed cycles \(st.missedCycles)"
                if otherWhole == 5 { print("PipeWireTests: parec lost frames pw-record heard: \(what)") }
                else { run.noteHole(what, cycle: 128) }
            }
            run.expectNoMissedCycle(st, sink: "pipewire")
            #expect(st.sink.kind == "pipewire" && st.dropped == 0 && st.stalls == 0, "\(st.sink)")
        }
    }

    /// The native stream stays active for a while after its last cue (fed silence, so that the next
    /// cue of a gesture is taken in the graph's next cycle), then goes inactive; with nothing else
    /// playing the graph then suspends its sink (WirePlumber, after 5 s idle) and cued's device
    /// stays open, costing the server nothing. The next cue wakes it, heard whole.
    @Test func theNativeStreamLingersThenTheGraphSuspends() throws {
        try PipeWireRun.measured { run in
            let stack = run.stack
            let d = try run.cued("pipewire")
            func ours() -> String? { (try? stack.outputStreams())?.first { $0.props["application.id"] as? String == "cued" }?.state }
            let t0 = Date()
            #expect(try d.request("play pop wait") == "ok")
            let lingering = ours()
            // The linger is 2 s: a look taken within 1.5 s of the cue's end must see it (a slower look proves nothing).
            if Date().timeIntervalSince(t0) < 1.5 { #expect(lingering == "running", "the stream did not linger after its cue") }
            #expect(eventually(timeout: 8) { ours() == "idle" }, "cued's stream still \(ours() ?? "?") long after the linger")
            #expect(eventually(timeout: 15) { (try? stack.nodes("Audio/Sink"))?.first { $0.props["node.name"] as? String == "nul" }?.state == "suspended" },
                    "the sink did not suspend with cued idle: \(((try? stack.nodes("Audio/Sink")) ?? []).map { $0.state })")
            let st = try d.status()
            #expect(st.sink.state == "idle" && st.dropped == 0, "\(st.sink)")
            run.expectNoMissedCycle(st, sink: "pipewire")
            let path = stack.dir.file("monitor.raw")
            let recorder = try stack.record(to: path)
            #expect(try d.request("play pop wait") == "ok")
            let rec = Recording.waiting(at: path, for: Self.pop, count: 1)
            recorder.stop()
            if rec.occurrences(of: Self.pop).count != 1 {
                run.noteHole("the cue after the suspend was not heard whole: \(rec.sounds().prefix(4)); \(rec.firstMismatch(rec.sounds(), Self.pop))", cycle: 128)
            }
        }
    }
}

/// How a cue came through at the monitor, frame by frame from its first: in order, silent, lost
/// (skipped: the next frames are found further on) or torn (neither the cue nor silence).
struct CueAtMonitor: CustomStringConvertible {
    /// Frames of the cue heard in order, and whether its last frame was among them.
    var heard = 0
    var complete = false
    /// Monitor frames of silence, and of neither cue nor silence, inside the cue; frames of it
    /// never heard; the holes (runs of silence or tearing).
    var silent = 0, torn = 0, lost = 0, holes = 0
    /// The first and last monitor frame (from the cue's start) that was not the next frame of the cue.
    var firstDisturbed = -1, lastDisturbed = -1
    /// The hole's length at the monitor: silence and tearing.
    var hole: Int { silent + torn }
    /// How far apart the disturbances lie (0: none).
    var disturbed: Int { firstDisturbed < 0 ? 0 : lastDisturbed - firstDisturbed + 1 }

    /// How wide the disturbances may lie for one stop of `stopFrames`: the stop and two of the
    /// longest cycles (the stop, the cycles being caught up after it), at least 100 ms.
    func stopWindow(stopFrames: Int, longest: Int) -> Int { max(4_800, stopFrames + 2 * longest) }

    var description: String {
        "\(heard) frames in order\(complete ? " to its end" : ""), \(silent) silent and \(torn) torn in \(holes) holes over \(disturbed) frames, \(lost) lost"
    }
}

extension Recording {
    /// `cue` (stereo) followed through the recording from its first 97 frames (nil: not found):
    /// a frame that is not the next one is silence, a skip (the next frames of the cue follow
    /// within two cycles of 1,024 frames: those between are lost) or tearing.
    func follow(_ cue: [Int16]) -> CueAtMonitor? {
        guard let at = occurrences(of: Array(cue.prefix(2 * 97))).first else { return nil }
        let frames = cue.count / 2, got = samples.count / 2 - at
        func same(_ i: Int, _ k: Int) -> Bool { samples[2 * (at + i)] == cue[2 * k] && samples[2 * (at + i) + 1] == cue[2 * k + 1] }
        var f = CueAtMonitor()
        var next = 0, i = 0, inHole = false
        func disturbed(_ i: Int) {
            if f.firstDisturbed < 0 { f.firstDisturbed = i }
            f.lastDisturbed = i
            if !inHole { f.holes += 1; inHole = true }
        }
        while next < frames && i < got {
            if same(i, next) {
                next += 1; f.heard += 1; inHole = false
            } else if samples[2 * (at + i)] == 0 && samples[2 * (at + i) + 1] == 0 {
                disturbed(i); f.silent += 1
            } else if let skip = (1...2_048).first(where: { n in next + n + 8 < frames && i + 8 < got && (0..<8).allSatisfy { k in same(i + k, next + n + k) } }) {
                disturbed(i)
                f.lost += skip
                next += skip
                continue  // this frame is the cue's again
            } else {
                disturbed(i); f.torn += 1
            }
            i += 1
        }
        f.complete = next == frames
        return f
    }
}
