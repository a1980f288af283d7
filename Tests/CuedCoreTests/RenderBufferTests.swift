@testable import CuedCore
import Testing

/// The render buffer: what a render converts and reports, and a voice mixed into frames
/// rendered before (a rewind), with its clipping counted once.
@Suite struct RenderBufferTests {
    let format = SinkFormat(rate: 48_000, channels: 2, sampleFormat: .s16, periodFrames: 240, bufferFrames: 480)

    func samples(_ b: RenderBuffer, _ frames: Int) -> [Int16] {
        Array(UnsafeBufferPointer(start: b.pending.assumingMemoryBound(to: Int16.self), count: frames * 2))
    }

    /// A render converts a period to be written from the start, and reports the voices it
    /// started (their request times) and ended (their last frame's stream position).
    @Test func aRenderConvertsAndReportsItsVoices() {
        let b = RenderBuffer(format: format)
        let mixer = Mixer(maxVoices: 4, maxFrames: 240)
        mixer.start(Cue(name: "tick", stereo: [Float](repeating: 0.5, count: 100 * 2)), id: 7, gain: 1, requestTime: 42)
        let r = b.render(240, at: 1_000, mixer: mixer)
        var started: [UInt64] = [], ended: [(UInt64, VoiceEndReason, Int)] = []
        r.started { started.append($0) }
        r.ended { e, last in ended.append((e.id, e.reason, last)) }
        #expect(started == [42])
        #expect(ended.count == 1 && ended[0].0 == 7 && ended[0].1 == .played && ended[0].2 == 1_099)
        #expect(r.clipped == 0 && b.offset == 0)
        let out = samples(b, 240)
        #expect(out[0] == 16_384 && out[2 * 99 + 1] == 16_384 && out[2 * 100] == 0)
        b.wrote(100)
        #expect(b.offset == 100)
        let rest = samples(b, 140)  // what is left to write starts at frame 100, past the tick's 100 frames
        #expect(rest.allSatisfy { $0 == 0 })
    }

    /// A voice mixed into the last frames rendered: they are converted again, bed and voice
    /// together, to be written from the start; clipping counts only what the voice added.
    @Test func aVoiceMixedIntoFramesRenderedBeforeIsCountedOnce() {
        let b = RenderBuffer(format: format)
        let mixer = Mixer(maxVoices: 4, maxFrames: 240, limiting: false)  // the raw sum: what clipping counts
        mixer.start(Cue(name: "loud", stereo: [Float](repeating: 1.5, count: 480 * 2)), id: 1, gain: 1)  // clips every sample
        mixer.start(Cue(name: "bed", stereo: [Float](repeating: 0.25, count: 480 * 2)), id: 2, gain: 1)
        _ = b.render(240, at: 0, mixer: mixer)
        let first = b.render(240, at: 240, mixer: mixer)
        #expect(first.clipped == 480)
        b.wrote(100)  // 140 left unwritten: a rewind gives back 100 more
        let beep = Cue(name: "beep", stereo: [Float](repeating: -1.0, count: 240 * 2))
        let (result, report) = b.mixIn(240, at: 240, mixer: mixer) { scratch in
            mixer.start(beep, id: 3, gain: 1, mixedInto: scratch, frames: 240)
        }
        #expect(result == .started)
        #expect(report.clipped == 0)  // 1.5 + 0.25 - 1.0 = 0.75: clips no more (the old clipping was counted)
        #expect(b.offset == 0)
        let out = samples(b, 240)
        #expect(out.allSatisfy { $0 == 24_576 }, "\(out.prefix(4))")
        var started: [UInt64] = []
        report.started { started.append($0) }
        #expect(started.count == 1)
    }

    /// With the limiter on (as the daemon runs), the frames remembered are the limited ones: a
    /// voice mixed in is added to what was heard, and nothing passes full scale.
    @Test func withTheLimiterAVoiceIsMixedIntoWhatWasHeard() {
        let b = RenderBuffer(format: format)
        let mixer = Mixer(maxVoices: 4, maxFrames: 240)
        mixer.start(Cue(name: "loud", stereo: [Float](repeating: 1.5, count: 480 * 2)), id: 1, gain: 1)
        mixer.start(Cue(name: "bed", stereo: [Float](repeating: 0.25, count: 480 * 2)), id: 2, gain: 1)
        _ = b.render(240, at: 0, mixer: mixer)
        let first = b.render(240, at: 240, mixer: mixer)
        #expect(first.clipped == 0)
        #expect(samples(b, 240).allSatisfy { $0 >= 32_000 })  // 1.75 limited to about full scale
        b.wrote(100)
        let (result, report) = b.mixIn(240, at: 240, mixer: mixer) { scratch in
            mixer.start(Cue(name: "beep", stereo: [Float](repeating: -1.0, count: 240 * 2)), id: 3, gain: 1, mixedInto: scratch, frames: 240)
        }
        #expect(result == .started && report.clipped == 0)
        let out = samples(b, 240)
        #expect(out.allSatisfy { abs(Int($0)) < 800 }, "\(out.prefix(4))")  // about full scale minus full scale
    }

    /// The history ring wraps: a voice mixed in after more than its capacity was rendered still
    /// finds the right frames.
    @Test func theHistoryRingWraps() {
        let b = RenderBuffer(format: format)
        let mixer = Mixer(maxVoices: 4, maxFrames: 240)
        let ramp = Cue(name: "ramp", stereo: (0..<4_800).flatMap { [Float($0) / 32_768, 0] })
        mixer.start(ramp, id: 1, gain: 1)
        for i in 0..<5 { _ = b.render(240, at: i * 240, mixer: mixer) }  // 1,200 frames: past the 720 the ring holds
        let (_, _) = b.mixIn(240, at: 960, mixer: mixer) { scratch in
            mixer.start(Cue(name: "nothing", stereo: [Float](repeating: 0, count: 2)), id: 2, gain: 1, mixedInto: scratch, frames: 240)
        }
        let out = samples(b, 240)
        #expect(out[0] == 960 && out[2 * 239] == 1_199, "\(out[0]) \(out[2 * 239])")
    }
}
