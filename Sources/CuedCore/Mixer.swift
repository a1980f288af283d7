/// Float mixer for up to `maxVoices` concurrent voices. Pure and
/// allocation-free after init. Owned by one thread (the audio thread): not Sendable.
public final class Mixer {
    struct Voice {
        var cue: Cue
        var position: Int
        var gain: Float
        /// Frames left in a fade-out, or -1 when not fading.
        var fadeLeft: Int
        var fadeLength: Int
        var serial: UInt64
        var requestTime: UInt64
        var started: Bool
        /// Who asked (an app name or a connection label), for `stop`.
        var owner: String
        /// Who waits for the end (0: nobody).
        var waitID: UInt64
        /// Faded out by `stop` (or stolen): ends as `.stopped`, not `.played`.
        var stopped: Bool
    }

    /// How a voice that somebody waits for ended.
    public enum Ending: Sendable, Equatable { case played, stopped }

    public let maxVoices: Int
    public let maxFrames: Int
    /// Fade applied to a stolen voice: 96 frames = 2 ms at 48 kHz.
    public let stealFadeFrames: Int
    private var voices: [Voice?]
    /// Stolen voices fading out; they no longer count as active.
    private var tails: [Voice?]
    private var serial: UInt64 = 0

    /// The last rendered period, interleaved stereo (`maxFrames * 2` floats).
    public let mix: UnsafeMutablePointer<Float>
    /// Request times of voices whose first frame is in the last rendered period.
    public private(set) var startedRequestTimes: [UInt64]
    public private(set) var startedCount = 0
    /// Wait IDs (≠ 0) of voices that ended in the last rendered period, and how.
    public private(set) var endedWaitIDs: [UInt64]
    public private(set) var endedHow: [Ending]
    public private(set) var endedCount = 0
    /// Wait IDs of stolen voices pushed out of their fading slot by `start`
    /// (between renders): `takeEvicted` hands them over, as `.stopped`.
    private var evictedWaitIDs: [UInt64] = []

    public init(maxVoices: Int, maxFrames: Int, stealFadeFrames: Int = 96) {
        precondition(maxVoices > 0 && maxFrames > 0)
        self.maxVoices = maxVoices
        self.maxFrames = maxFrames
        self.stealFadeFrames = stealFadeFrames
        voices = Array(repeating: nil, count: maxVoices)
        tails = Array(repeating: nil, count: maxVoices)
        mix = .allocate(capacity: maxFrames * 2)
        mix.initialize(repeating: 0, count: maxFrames * 2)
        startedRequestTimes = Array(repeating: 0, count: maxVoices * 2)
        endedWaitIDs = Array(repeating: 0, count: maxVoices * 2)
        endedHow = Array(repeating: .played, count: maxVoices * 2)
        evictedWaitIDs.reserveCapacity(maxVoices * 2)
    }

    deinit { mix.deallocate() }

    /// Voices playing, not counting stolen ones fading out.
    public var activeVoices: Int { voices.reduce(0) { $0 + ($1 == nil ? 0 : 1) } }
    /// True while anything (including a fading tail) still makes sound.
    public var isSounding: Bool { voices.contains { $0 != nil } || tails.contains { $0 != nil } }

    /// Starts a cue. When all voices are busy the oldest is faded out and
    /// replaced; returns true in that case (a steal).
    @discardableResult
    public func start(_ cue: Cue, gain: Float, requestTime: UInt64 = 0, owner: String = "", waitID: UInt64 = 0) -> Bool {
        start(cue, gain: gain, requestTime: requestTime, owner: owner, waitID: waitID).stole
    }

    /// Starts a cue whose first frames are mixed at once into `frames` frames
    /// already rendered (`into`, interleaved stereo: audio the device gave back to be
    /// written again); it goes on from there at the next `render`. As after `render`,
    /// `startedRequestTimes` and `endedWaitIDs` then say what started and ended in
    /// those frames. Returns true on a steal (the stolen voice fades from the next render).
    @discardableResult
    public func start(_ cue: Cue, gain: Float, requestTime: UInt64 = 0, owner: String = "", waitID: UInt64 = 0,
                      mixedInto rendered: UnsafeMutablePointer<Float>, frames: Int) -> Bool {
        let (stole, slot) = start(cue, gain: gain, requestTime: requestTime, owner: owner, waitID: waitID)
        startedCount = 0
        endedCount = 0
        if frames > 0 { renderVoice(&voices[slot], frames: frames, into: rendered) }
        return stole
    }

    private func start(_ cue: Cue, gain: Float, requestTime: UInt64, owner: String, waitID: UInt64) -> (stole: Bool, slot: Int) {
        serial &+= 1
        let voice = Voice(cue: cue, position: 0, gain: gain, fadeLeft: -1, fadeLength: 0,
                          serial: serial, requestTime: requestTime, started: false,
                          owner: owner, waitID: waitID, stopped: false)
        if let free = voices.firstIndex(where: { $0 == nil }) {
            voices[free] = voice
            return (false, free)
        }
        var oldest = 0
        for i in voices.indices where voices[i]!.serial < voices[oldest]!.serial { oldest = i }
        var stolen = voices[oldest]!
        if stolen.fadeLeft < 0 || stolen.fadeLeft > stealFadeFrames {
            stolen.fadeLeft = stealFadeFrames
            stolen.fadeLength = stealFadeFrames
        }
        stolen.stopped = true
        // A tail slot: a free one, else the one closest to silence.
        var slot = 0
        for i in tails.indices {
            guard let t = tails[i] else { slot = i; break }
            if t.fadeLeft < tails[slot]!.fadeLeft { slot = i }
        }
        // Noted apart from `ended`, which the next render starts afresh: a waiter
        // must hear how its voice ended even when it ends between renders.
        if let evicted = tails[slot], evicted.waitID != 0 { evictedWaitIDs.append(evicted.waitID) }
        tails[slot] = stolen
        voices[oldest] = voice
        return (true, oldest)
    }

    /// Hands over (and forgets) the wait IDs of voices `start` evicted; they ended `.stopped`.
    public func takeEvicted(_ each: (UInt64) -> Void) {
        guard !evictedWaitIDs.isEmpty else { return }
        for id in evictedWaitIDs { each(id) }
        evictedWaitIDs.removeAll(keepingCapacity: true)
    }

    /// Fades every voice out over `frames` (mute).
    public func fadeOutAll(frames: Int) {
        func fade(_ v: inout Voice?) {
            guard var x = v else { return }
            if x.fadeLeft < 0 || x.fadeLeft > frames { x.fadeLeft = frames; x.fadeLength = max(frames, 1) }
            x.stopped = true
            v = x
        }
        for i in voices.indices { fade(&voices[i]) }
        for i in tails.indices { fade(&tails[i]) }
    }

    /// Fades out, over `frames`, the playing voices `matches` selects (by cue
    /// name and owner); returns how many. Their endings are `.stopped`.
    public func stop(fadeFrames frames: Int, where matches: (_ cue: String, _ owner: String) -> Bool) -> Int {
        var count = 0
        for i in voices.indices {
            guard var v = voices[i], !v.stopped, matches(v.cue.name, v.owner) else { continue }
            if v.fadeLeft < 0 || v.fadeLeft > frames { v.fadeLeft = frames; v.fadeLength = max(frames, 1) }
            v.stopped = true
            voices[i] = v
            count += 1
        }
        return count
    }

    /// What a voice removed without sounding to its end was: for the shell's reports.
    public struct RemovedVoice {
        public var cue: Cue
        public var owner: String
        public var waitID: UInt64
        public var requestTime: UInt64
        /// Already stopped (faded by `stop` or stolen) when removed.
        public var stopped: Bool
        /// Had started sounding (the device failed while it played).
        public var started: Bool
    }

    /// Stops everything at once (shutdown, device lost); `each` sees every voice removed.
    public func removeAll(_ each: (RemovedVoice) -> Void = { _ in }) {
        for i in voices.indices { remove(&voices[i], each) }
        for i in tails.indices { remove(&tails[i], each) }
    }

    /// After the device was reopened under running voices: the voices requested
    /// at or after `since` (or with no request time) start again from their
    /// first frame; the others, and fading tails, are removed and passed to `dropped`.
    public func restart(requestedSince since: UInt64, dropped: (RemovedVoice) -> Void) {
        for i in voices.indices {
            guard var v = voices[i] else { continue }
            if !v.stopped && (v.requestTime == 0 || v.requestTime >= since) {
                v.position = 0
                v.started = false
                voices[i] = v
            } else {
                remove(&voices[i], dropped)
            }
        }
        for i in tails.indices { remove(&tails[i], dropped) }
    }

    private func remove(_ slot: inout Voice?, _ each: (RemovedVoice) -> Void) {
        guard let v = slot else { return }
        slot = nil
        each(RemovedVoice(cue: v.cue, owner: v.owner, waitID: v.waitID, requestTime: v.requestTime, stopped: v.stopped,
                          started: v.started))
    }

    private func noteEnded(_ v: Voice, _ how: Ending) {
        guard v.waitID != 0, endedCount < endedWaitIDs.count else { return }
        endedWaitIDs[endedCount] = v.waitID
        endedHow[endedCount] = how
        endedCount += 1
    }

    /// Mixes `frames` frames into `mix[0 ..< frames*2]`.
    public func render(frames: Int) {
        precondition(frames <= maxFrames)
        startedCount = 0
        endedCount = 0
        mix.update(repeating: 0, count: frames * 2)
        for i in voices.indices { renderVoice(&voices[i], frames: frames, into: mix) }
        for i in tails.indices { renderVoice(&tails[i], frames: frames, into: mix) }
    }

    private func renderVoice(_ slot: inout Voice?, frames: Int, into out: UnsafeMutablePointer<Float>) {
        guard var v = slot else { return }
        if !v.started {
            v.started = true
            if startedCount < startedRequestTimes.count {
                startedRequestTimes[startedCount] = v.requestTime
                startedCount += 1
            }
        }
        let remaining = v.cue.frames - v.position
        var n = min(frames, remaining)
        if v.fadeLeft >= 0 { n = min(n, v.fadeLeft) }
        do {
            let src = v.cue.samples
            let base = v.position * 2
            if v.fadeLeft < 0 {
                for f in 0..<n {
                    out[2 * f] += src[base + 2 * f] * v.gain
                    out[2 * f + 1] += src[base + 2 * f + 1] * v.gain
                }
            } else {
                let len = Float(v.fadeLength)
                for f in 0..<n {
                    let g = v.gain * Float(v.fadeLeft - f) / len
                    out[2 * f] += src[base + 2 * f] * g
                    out[2 * f + 1] += src[base + 2 * f + 1] * g
                }
                v.fadeLeft -= n
            }
        }
        v.position += n
        if v.position >= v.cue.frames || v.fadeLeft == 0 {
            noteEnded(v, v.stopped ? .stopped : .played)
            slot = nil
        } else {
            slot = v
        }
    }

    /// How many samples of `frames` frames of `source` a conversion to `format` clips
    /// (what `convert` returns for them).
    public static func clipped(_ source: UnsafePointer<Float>, frames: Int, format: SampleFormat) -> Int {
        var n = 0
        switch format {
        case .s16:
            for i in 0..<(frames * 2) { let v = source[i] * 32768; if v > 32767 || v < -32768 { n += 1 } }
        case .float:
            for i in 0..<(frames * 2) { let v = source[i]; if v > 1 || v < -1 { n += 1 } }
        }
        return n
    }

    /// Converts the last `frames` mixed frames (or `frames` frames of `source`) to
    /// 16-bit, clipping; returns how many samples had to be clipped.
    public func convert(frames: Int, from source: UnsafePointer<Float>? = nil, toS16 out: UnsafeMutablePointer<Int16>) -> Int {
        var clipped = 0
        do {
            let m = source ?? UnsafePointer(mix)
            for i in 0..<(frames * 2) {
                let v = m[i] * 32768
                if v > 32767 { out[i] = 32767; clipped += 1 }
                else if v >= -32768 { out[i] = Int16(v < 0 ? v - 0.5 : v + 0.5) }  // round half away from zero, as .rounded(), without libm
                else if v < -32768 { out[i] = -32768; clipped += 1 }
                else { out[i] = 0 }  // NaN (a file's own, or +inf and -inf mixed): Int16(NaN) would trap
            }
        }
        return clipped
    }

    /// Converts to float, clipping to [-1, 1]; returns the clipped count.
    public func convert(frames: Int, from source: UnsafePointer<Float>? = nil, toFloat out: UnsafeMutablePointer<Float>) -> Int {
        var clipped = 0
        do {
            let m = source ?? UnsafePointer(mix)
            for i in 0..<(frames * 2) {
                let v = m[i]
                if v > 1 { out[i] = 1; clipped += 1 }
                else if v >= -1 { out[i] = v }
                else if v < -1 { out[i] = -1; clipped += 1 }
                else { out[i] = 0 }  // NaN: never handed to a device
            }
        }
        return clipped
    }
}
