/// Counts the graph cycles a PipeWire playback stream missed: cycles the graph ran
/// while the stream had nothing queued for them, so that PipeWire played silence in
/// its place (inside a cue: a hole). Neither libpipewire nor ALSA reports these to
/// the client, and on the native stream cued's `xruns` never see them.
///
/// The stream's own clock says it: between two looks, the graph's position
/// (`pw_time.ticks`, the first frame of the last cycle it ran) advances by the frames
/// of the cycles it ran, and the frames it took from the stream's queue (frames
/// queued less `pw_time.queued`) advance by as much when every cycle found a buffer.
/// What the position gained beyond what was taken, the graph played without the
/// stream. Either because the stream's buffer came too late for a cycle (cued's
/// audio thread), or because the graph ran cycles without scheduling the stream's
/// node at all (its data thread did not run in time): both are silence heard.
///
/// It compares only looks taken at the same quantum, with every buffer filled to
/// what the graph asked for (`pw_buffer.requested`): while the quantum changes, or a
/// buffer of another size is being played across cycles, position and frames taken
/// are out of step and the count starts afresh. It counts once position and frames
/// taken have moved in step for a cycle (the graph switching to the stream's quantum,
/// the converter completing a cycle from two buffers are not misses), or at once from a
/// look the caller knows is in step (`aligned`: a stream's first look, when the graph
/// has run a cycle since it started and the buffer it started with was a whole cycle of
/// this quantum: a miss in its second cycle counts). No allocation: the audio thread's.
public struct CycleAccount: Sendable, Equatable {
    /// Frames and cycles the graph played without the stream since the account was made.
    public private(set) var missedFrames = 0
    public private(set) var missedCycles = 0
    private var last: Look?
    /// Position and frames taken have moved in step since the last fresh start.
    private var inStep = false

    public init() {}

    private struct Look: Sendable, Equatable {
        var ticks: UInt64
        var taken: Int
        var quantum: Int
    }

    /// One look, taken just before a buffer is queued: `ticks` the graph position of the
    /// last cycle, `taken` the frames the graph had taken from the queue by then,
    /// `quantum` the frames it asks for a cycle (nil: not known, the count starts afresh);
    /// `aligned`: position and frames taken are known to be in step here (see the type).
    /// Returns the cycles found missed since the last look.
    public mutating func look(ticks: UInt64, taken: Int, quantum: Int?, aligned: Bool = false) -> Int {
        guard let quantum, quantum > 0 else {
            restart()
            return 0
        }
        defer { last = Look(ticks: ticks, taken: taken, quantum: quantum) }
        guard let last, last.quantum == quantum, ticks >= last.ticks, taken >= last.taken else {
            inStep = self.last == nil && aligned
            return 0
        }
        let ran = Int(clamping: ticks - last.ticks)
        let deficit = ran - (taken - last.taken)
        guard inStep else {
            inStep = ran == quantum && deficit == 0
            return 0
        }
        // Less than a cycle short is not a cycle missed (the position and the frames taken
        // are read a cycle apart at most); a whole cycle or more is.
        guard deficit >= quantum else { return 0 }
        let cycles = deficit / quantum
        missedFrames += cycles * quantum
        missedCycles += cycles
        return cycles
    }

    /// The stream stopped (or its counters were reset): the next look starts afresh.
    public mutating func restart() {
        last = nil
        inStep = false
    }
}
