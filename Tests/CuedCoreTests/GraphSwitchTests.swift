@testable import CuedCore
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// What cued hands the graph when the native stream's cycle changes under a cue (issue 31's
/// "frames out of order after the switch to a longer cycle"): the real `StreamWriter`,
/// `OutputStream`, `RenderBuffer`, `MarginTuner` and `GraphSlot` on a fake graph that takes
/// buffers the way PipeWire's stream does, driven by a stalling audio thread on a fake clock.
/// Stalls grow the margin from 128 to 512 and then to 1,024 frames mid-cue (the buffer made for
/// the shorter cycle given back and written again to the longer one), each across a late
/// answer; every frame of the cue must be handed over once, in order.
@Suite struct GraphSwitchTests {
    /// A 1 s cue whose every frame is told apart: left k/32768 (k 1...30,000, repeating), right
    /// the round; s16 holds exactly those values at unity gain.
    static let frames = 48_000
    static let cue: Cue = {
        var s = [Float](repeating: 0, count: 2 * frames)
        for i in 0..<frames { s[2 * i] = Float(i % 30_000 + 1) / 32_768; s[2 * i + 1] = Float(i / 30_000 + 1) / 32_768 }
        return Cue(name: "ramp", stereo: s)
    }()
    static func frame(_ i: Int) -> (Int16, Int16) { (Int16(i % 30_000 + 1), Int16(i / 30_000 + 1)) }

    /// Runs the cue with the audio thread stalled over `stalls` (ms from the cue's start, ms long);
    /// returns the graph and the writer's margin afterwards.
    func run(stalls: [(at: Double, ms: Double)]) -> (graph: FakeGraph, margins: [Int]) {
        let graph = FakeGraph()
        let device = try! graph.open()
        let mixer = Mixer(maxVoices: 2, maxFrames: 4_096, limiting: false)
        let writer = StreamWriter(sink: graph, device: device, tuner: MarginTuner(), buffer: nil, stats: EngineStats())
        _ = mixer.start(Self.cue, gain: 1)
        var now: UInt64 = 1_000_000_000
        let start = now
        var margins: [Int] = []
        /// The audio thread's turn: what a wake-up by the graph's cycle makes it do.
        func answer() {
            graph.now = now
            for _ in 0..<64 {
                guard case .write(let render) = writer.next(now: now, deviceWoke: true) else { return }
                if render > 0 { _ = writer.render(render, mixer: mixer) }
                let unwritten = writer.stream.unwritten
                let w = try! writer.write(mixer: mixer, heard: true, now: now)
                if let m = writer.stream.cycleFrames, margins.last != m { margins.append(m) }
                if w.frames == 0 && unwritten > 0 { return }
            }
        }
        answer()  // the first buffer, ready before the stream is scheduled
        while now < start + 1_400_000_000 {
            let ms = Double(now - start) / 1e6
            graph.cycleStarts(at: now)
            // Stalled over this cycle's start: the cycle runs without cued; it answers at the first
            // cycle after the stall (one wake-up for all the cycles it slept through: a late answer).
            if !stalls.contains(where: { ms >= $0.at && ms < $0.at + $0.ms }) { answer() }
            now += UInt64(graph.quantum) * 1_000_000_000 / 48_000
        }
        return (graph, margins)
    }

    /// The frames handed over, from the cue's first: whether they are the cue, once and in order.
    func inOrder(_ handed: [Int16]) -> (ok: Bool, what: String) {
        guard let first = stride(from: 0, to: handed.count, by: 2).first(where: { handed[$0] != 0 || handed[$0 + 1] != 0 }) else {
            return (false, "nothing of the cue handed over")
        }
        let got = (handed.count - first) / 2
        for i in 0..<Self.frames {
            guard i < got else { return (false, "\(i) of \(Self.frames) frames in order, then the handed-over frames end") }
            let (l, r) = Self.frame(i)
            if handed[first + 2 * i] != l || handed[first + 2 * i + 1] != r {
                return (false, "\(i) of \(Self.frames) frames in order, then (\(handed[first + 2 * i]), \(handed[first + 2 * i + 1])) where (\(l), \(r)) was due")
            }
        }
        return (true, "")
    }

    @Test func aCueHandedOverWholeAndInOrderAcrossSwitchesTo512And1024() {
        // 2 ms over a cycle's start at 2.7 ms cycles: one missed, the cycle grows to 512; 40 ms at 512: to 1,024.
        let (graph, margins) = run(stalls: [(at: 100, ms: 2), (at: 400, ms: 40)])
        #expect(margins.contains(512) && margins.last == 1_024, "the margin went \(margins): the test is of switches to 512 and 1,024 mid-cue")
        #expect(graph.switches.contains { $0.from == 128 && $0.to == 512 } && graph.switches.contains { $0.from == 512 && $0.to == 1_024 },
                "the graph's cycles: \(graph.switches)")
        let (ok, what) = inOrder(graph.handedOver)
        #expect(ok, "\(what); margins \(margins), graph cycles \(graph.switches)")
        #expect(graph.shortBuffers == 0, "\(graph.shortBuffers) buffers shorter than the graph's cycle")
    }

    @Test func aCueHandedOverWholeAndInOrderAcrossASwitchStraightTo1024() {
        // 30 ms at 2.7 ms cycles: eleven cycles missed, the cycle grows at once to 1,024.
        let (graph, margins) = run(stalls: [(at: 250, ms: 30)])
        #expect(margins == [128, 1_024], "\(margins)")
        let (ok, what) = inOrder(graph.handedOver)
        #expect(ok, "\(what); margins \(margins), graph cycles \(graph.switches)")
        #expect(graph.shortBuffers == 0, "\(graph.shortBuffers) buffers shorter than the graph's cycle")
    }
}

/// The native stream's graph, as `PipeWireSink` sees it, without PipeWire: the sink's own use of
/// `GraphSlot` (room, fill, hand over, take back, resize, the cycle asked), and a graph of cycles
/// of `quantum` frames whose stream takes the one buffer cued made ready when its converter needs
/// input (PipeWire 0.3.65's RT_PROCESS stream and audioconvert: a buffer longer than the cycle
/// is kept for the next ones, a shorter one leaves the cycle short). A cycle asked of the graph
/// runs from its next cycle on. It records every frame a cycle took (`handedOver`).
final class FakeGraph: Sink {
    let spec = "fake-graph"
    var now: UInt64 = 0
    private var slot = GraphSlot<Int>(rate: 48_000, quantum: 128)
    private var pool = [[Int16]](repeating: [Int16](repeating: 0, count: 2 * 8_192), count: 4)
    private var free = [3, 2, 1, 0]
    private var sealed = [Int](repeating: 0, count: 4)
    /// The process callback's view of the ready buffer (`cued_pw_events.ready`).
    private var callbackReady: Int?
    private var latency = 128, switchPending = 0
    /// The cycle the graph runs, the one it runs from its next cycle, and the last one the stream ran in.
    private(set) var quantum = 128
    private var nextQuantum = 128, lastQuantum = 0
    private var position: UInt64 = 0, ticks: UInt64 = 0, cycleAt: UInt64 = 0, queuedTotal: UInt64 = 0, lastTook: UInt64 = 0
    /// A cycle whose process has not run yet (the thread stalled), and the converter's input.
    private var pending = false
    private var input: (buffer: Int, frames: Int, offset: Int)?
    private(set) var handedOver: [Int16] = []
    private(set) var switches: [(from: Int, to: Int)] = []
    /// Cycles the converter found too few frames for.
    private(set) var shortBuffers = 0

    func open() throws(SinkError) -> OpenedDevice {
        OpenedDevice(kind: "pipewire", format: SinkFormat(rate: 48_000, channels: 2, sampleFormat: .s16, periodFrames: 128, bufferFrames: 2_048),
                     pacing: Pacing(writeAhead: .fill, descriptorsStayReadable: false, partialWrites: true, rewindKeeps: 0,
                                    watchesWhileIdle: true, lingerNs: 2_000_000_000, margin: .quantum(start: 128, limit: 1_024)))
    }

    /// A cycle begins at `t`: the graph's position moves on; the stream's process runs when the thread answers.
    func cycleStarts(at t: UInt64) {
        if nextQuantum != quantum { switches.append((quantum, nextQuantum)); quantum = nextQuantum }
        cycleAt = t
        ticks = position
        position += UInt64(quantum)
        if slot.active { pending = true }
    }

    /// The cycle's process: the converter takes a cycle's frames, asking the stream for a buffer
    /// when its input runs out; the stream queues the ready one, once.
    private func process() {
        lastQuantum = quantum
        lastTook = 0
        var need = quantum
        while need > 0 {
            if input == nil {
                guard let b = callbackReady else { shortBuffers += 1; return }
                callbackReady = nil
                handedOver += pool[b][0..<(2 * sealed[b])]
                queuedTotal += UInt64(sealed[b])
                lastTook = UInt64(sealed[b])
                input = (b, sealed[b], 0)
            }
            let (b, frames, offset) = input!
            let n = min(need, frames - offset)
            need -= n
            if offset + n >= frames { free.append(b); input = nil } else { input = (b, frames, offset + n) }
        }
    }

    /// `PipeWireSink.dispatch`: the pending cycle first (unless a buffer taken back is being filled again).
    private func dispatch() {
        if pending && slot.cycleMayRun { pending = false; process() }
        if slot.ready != nil && callbackReady == nil {
            slot.taken()
            switchPending = lastQuantum >= latency ? 0 : max(0, switchPending - 1)
        }
        callbackReady = slot.ready
    }

    private func room() -> Int {
        let q = lastQuantum
        let n = slot.room(want: switchPending > 0 || q == 0 ? max(q, latency) : q) {
            guard let b = free.popLast() else { return nil }
            return (b, q, 8_192)
        }
        callbackReady = slot.ready
        return n
    }

    func hasRoom() throws(SinkError) -> Bool { dispatch(); return room() > 0 }
    func availableFrames() -> Int { dispatch(); return room() }

    func write(_ data: UnsafeRawPointer, frames: Int) throws(SinkError) -> SinkWrite {
        dispatch()
        guard room() > 0, let f = slot.fill(frames) else { return SinkWrite(frames: 0, missedCycles: slot.takeMissedCycles()) }
        let src = data.assumingMemoryBound(to: Int16.self)
        for i in 0..<(2 * f.count) { pool[f.buffer][2 * f.offset + i] = src[i] }
        if f.full {
            sealed[f.buffer] = f.offset + f.count
            let time = GraphSlot<Int>.GraphTime(now: cycleAt, ticks: ticks, queuedTotal: queuedTotal, lastTook: lastTook)
            _ = slot.handOver(time: cycleAt > 0 ? time : nil, quantum: lastQuantum)
            callbackReady = slot.ready
        }
        return SinkWrite(frames: f.count, missedCycles: slot.takeMissedCycles())
    }

    func delayFrames(now: UInt64) -> Int { slot.holding }
    func rewindableFrames() -> Int { slot.rewindable }
    func rewind(frames: Int) -> Int { defer { callbackReady = slot.ready }; return slot.rewind(frames) }

    /// `PipeWireSink.setMargin`: the graph runs the cycle asked from its next cycle (no other node holds it shorter).
    func setMargin(frames: Int, canGiveBack: Int) -> Int {
        guard frames != latency else { return 0 }
        let back = slot.resize(to: frames, canGiveBack: canGiveBack)
        callbackReady = slot.ready
        switchPending = frames > latency ? 16 : 0
        latency = frames
        nextQuantum = frames
        return back
    }

    func stop() { _ = slot.deactivate(); callbackReady = nil }
    func close() { slot.reset(); callbackReady = nil }
}
