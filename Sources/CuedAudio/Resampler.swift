import CSampleRate
import CuedCore
#if canImport(Glibc)
import Glibc
#endif

/// Interleaved float frames in `SampleMemory` (charged to the budget), filled from
/// the front. Not copyable: one owner; `take()` hands the filled part to a `SoundBuffer`.
struct SampleBuffer: ~Copyable {
    private var memory: SampleMemory
    let base: UnsafeMutablePointer<Float>
    let channels: Int
    /// Frames the memory holds, and frames filled.
    let capacity: Int
    var count = 0

    init(frames: Int, channels: Int, budget: SoundBudget?) throws(SampleMemoryFailure) {
        let stride = channels * MemoryLayout<Float>.stride
        guard frames >= 0, channels > 0, frames <= Int.max / stride else { throw .noMemory(bytes: Int.max) }
        // At least one page, so that `base` is never nil.
        switch SampleMemory.allocate(max(frames * stride, 1), budget: budget) {
        case .success(let m): memory = m
        case .failure(let e): throw e
        }
        base = memory.base!.assumingMemoryBound(to: Float.self)
        self.channels = channels
        capacity = frames
    }

    /// The filled part, the pages past it given back.
    consuming func take() -> SoundBuffer {
        let samples = count * channels
        memory.shrink(to: samples * MemoryLayout<Float>.stride)
        return SoundBuffer(adopting: memory, count: samples, channels: channels)
    }
}

/// libsamplerate's streaming converter (best quality), of `channels` (mono or stereo), fed
/// chunk by chunk so the source is never held whole.
final class Resampler {
    private let state: OpaquePointer
    private let ratio: Double
    /// Where the caller puts up to `chunkFrames` frames of `channels` before `process`.
    let input: UnsafeMutablePointer<Float>
    let channels: Int
    private let memory: SampleBuffer
    /// The budget held for libsamplerate's own state.
    private let held: BudgetReservation
    private(set) var failure = ""

    init(ratio: Double, chunkFrames: Int, channels: Int = 2, budget: SoundBudget?) throws(SampleMemoryFailure) {
        var error: Int32 = 0
        // Best quality costs time in proportion to the source rate: from
        // above twice the output rate (96 kHz for 48), medium quality (121 dB
        // SNR, 90 % bandwidth: far beyond what a cue needs) keeps a 10 s file
        // at 768 kHz to about a second instead of six.
        let best = ratio >= 0.5
        let stateBytes = best ? BudgetReservation.bestResamplerBytes : BudgetReservation.mediumResamplerBytes
        guard let held = BudgetReservation(bytes: stateBytes, budget: budget) else { throw .overBudget(budget!.refusal(stateBytes)) }
        memory = try SampleBuffer(frames: chunkFrames, channels: channels, budget: budget)
        guard let s = src_new(Int32(best ? SRC_SINC_BEST_QUALITY : SRC_SINC_MEDIUM_QUALITY), Int32(channels), &error) else {
            throw .noMemory(bytes: stateBytes)
        }
        self.held = held
        self.channels = channels
        state = s
        input = memory.base
        self.ratio = ratio
    }

    deinit {
        src_delete(state)
    }

    /// Converts the `frames` in `input`, appending to `out`. False (see
    /// `failure`) if libsamplerate fails or `out` is full.
    func process(frames: Int, into out: inout SampleBuffer) -> Bool {
        var used = 0
        while used < frames {
            guard let (consumed, _) = step(input + used * channels, frames - used, end: false, into: &out) else { return false }
            used += consumed
        }
        return true
    }

    /// Flushes what the filter still holds at the end of the input.
    func finish(into out: inout SampleBuffer) -> Bool {
        while true {
            guard let (_, generated) = step(input, 0, end: true, into: &out) else { return false }
            if generated == 0 { return true }
        }
    }

    private func step(_ source: UnsafeMutablePointer<Float>, _ frames: Int, end: Bool,
                      into out: inout SampleBuffer) -> (consumed: Int, generated: Int)? {
        let room = out.capacity - out.count
        guard room > 0 else {
            failure = "resampling produced more frames than its length allows"
            return nil
        }
        var data = SRC_DATA()
        data.data_in = UnsafePointer(source)
        data.input_frames = frames
        data.data_out = out.base + out.count * out.channels
        data.output_frames = room
        data.end_of_input = end ? 1 : 0
        data.src_ratio = ratio
        let rc = src_process(state, &data)
        guard rc == 0 else {
            failure = "resampling failed: \(String(cString: src_strerror(rc)))"
            return nil
        }
        out.count += data.output_frames_gen
        if frames > 0 && data.input_frames_used == 0 && data.output_frames_gen == 0 {
            failure = "resampling made no progress"
            return nil
        }
        return (data.input_frames_used, data.output_frames_gen)
    }
}
