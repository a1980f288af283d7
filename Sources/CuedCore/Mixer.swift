import CuedProtocol

/// At most `maxVoices` voices of one cue (by name: its variants together) at once; a new
/// one past that takes the place of the oldest, or of the quietest (the lowest gain).
public struct CueVoiceLimit: Sendable, Equatable {
    public var maxVoices: Int
    public var steal: VoiceSteal
    public init(maxVoices: Int, steal: VoiceSteal = .oldest) { self.maxVoices = maxVoices; self.steal = steal }
}

/// Float mixer for up to `maxVoices` concurrent voices. Pure and
/// allocation-free after init. Owned by one thread (the audio thread): not Sendable.
/// It knows voices by id only; who asked for them is the `VoiceLedger`'s business.
public final class Mixer {
    struct Voice {
        var cue: Cue
        var id: UInt64
        /// The cue's frame being read; with `step` ≠ 1, plus `phase` (0 ≤ phase < 1).
        var position: Int
        var phase: Double
        /// Cue frames per output frame (`rate=`, `pitch=`): 1 reads the samples as they are.
        var step: Double
        /// It has gone round once (a resampled loop then reads across its start).
        var looped: Bool
        var gain: Float
        /// Plays still to come after the current one; -1: until stopped.
        var loopsLeft: Int
        /// Frames it may sound in all (`Int.max`: no limit); it fades out to end there.
        var frameLimit: Int
        /// Frames rendered so far, over every loop.
        var played: Int
        /// Frames left in a fade-out, or -1 when not fading.
        var fadeLeft: Int
        var fadeLength: Int
        var serial: UInt64
        var priority: Int
        /// Who asked (`VoiceRequest.ownerKey`): the unit of the fair share.
        var owner: UInt64
        /// Never refused a slot (an alarm an allowed app asked for).
        var important: Bool
        var requestTime: UInt64
        var started: Bool
        /// Why it is fading out (stop, steal, mute); nil: it plays to its end.
        var stopReason: VoiceEndReason?
    }

    /// What `start` did.
    public enum Start: Equatable, Sendable {
        case started
        /// Every slot was busy: the voice `id` (the lowest priority, then the oldest) fades out to make room.
        case stole(id: UInt64)
        /// Every slot is busy with voices of a higher priority: the new voice was not started.
        case refused
    }

    /// A voice that ended in the last render (or mix-in).
    public struct Ended: Sendable, Equatable {
        public var id: UInt64
        public var reason: VoiceEndReason
        /// Index of its last frame in those frames; -1 if it ended without one there.
        public var lastFrame: Int
        public init(id: UInt64, reason: VoiceEndReason, lastFrame: Int) { self.id = id; self.reason = reason; self.lastFrame = lastFrame }
    }

    public let maxVoices: Int
    public let maxFrames: Int
    public let rate: Int
    /// Fade applied to a stolen voice: 96 frames = 2 ms at 48 kHz.
    public let stealFadeFrames: Int
    /// Reads voices played at another rate.
    let interpolator = Interpolator()
    /// Turns the mix down where it would pass full scale, instead of clipping it.
    public private(set) var limiter: PeakLimiter
    /// The same for frames mixed again after a rewind: they were limited when first mixed,
    /// so each pass over them starts from unity and turns down only what the new voice adds.
    private var remixLimiter: PeakLimiter
    /// Off only in tests of the raw sum and of the conversion's clipping.
    let limiting: Bool
    /// Fade at the end of a time-limited loop: 4 ms.
    public var limitFadeFrames: Int { stealFadeFrames * 2 }
    /// Fade of a stopped (or muted) voice: 4 ms.
    public var stopFadeFrames: Int { rate * 4 / 1000 }
    private var voices: [Voice?]
    /// Stolen voices fading out; they no longer count as active.
    private var tails: [Voice?]
    private var serial: UInt64 = 0

    /// The last rendered period, interleaved stereo (`maxFrames * 2` floats).
    public let mix: UnsafeMutablePointer<Float>
    /// Voices whose first frame is in the last rendered frames: ids and request times.
    public private(set) var startedIDs: [UInt64]
    public private(set) var startedRequestTimes: [UInt64]
    public private(set) var startedCount = 0
    /// Voices that ended in the last rendered frames.
    public private(set) var ended: [Ended]
    public private(set) var endedCount = 0
    /// Stolen voices pushed out of their fading slot by `start` (between renders):
    /// `takeEvicted` hands them over.
    private var evicted: [(id: UInt64, reason: VoiceEndReason)] = []
    /// Owners holding slots and how many each, counted by `victim` (reserved: no allocation).
    private var ownerKeys: [UInt64]
    private var ownerCounts: [Int]

    public init(maxVoices: Int, maxFrames: Int, stealFadeFrames: Int = 96, rate: Int = 48_000, limiting: Bool = true) {
        precondition(maxVoices > 0 && maxFrames > 0)
        self.maxVoices = maxVoices
        self.maxFrames = maxFrames
        self.stealFadeFrames = stealFadeFrames
        self.rate = max(1, rate)
        voices = Array(repeating: nil, count: maxVoices)
        tails = Array(repeating: nil, count: maxVoices)
        mix = .allocate(capacity: maxFrames * 2)
        mix.initialize(repeating: 0, count: maxFrames * 2)
        startedIDs = Array(repeating: 0, count: maxVoices * 2)
        startedRequestTimes = Array(repeating: 0, count: maxVoices * 2)
        ended = Array(repeating: Ended(id: 0, reason: .played, lastFrame: -1), count: maxVoices * 2)
        evicted.reserveCapacity(maxVoices * 2)
        ownerKeys = Array(repeating: 0, count: maxVoices)
        ownerCounts = Array(repeating: 0, count: maxVoices)
        limiter = PeakLimiter(maxFrames: maxFrames, attackFrames: rate / 1000, releaseFrames: rate / 20)
        remixLimiter = PeakLimiter(maxFrames: maxFrames, attackFrames: rate / 1000, releaseFrames: rate / 20)
        self.limiting = limiting
    }

    deinit {
        mix.deallocate()
        limiter.deallocate()
        remixLimiter.deallocate()
    }

    /// Voices playing, not counting stolen ones fading out.
    /// (Index loops here and in `place`: `reduce`, `contains(where:)` and `firstIndex(where:)`
    /// allocate in a debug build, where the audio thread's allocations are counted.)
    public var activeVoices: Int {
        var n = 0
        for i in 0..<voices.count where voices[i] != nil { n += 1 }
        return n
    }
    /// True while anything (including a fading tail) still makes sound.
    public var isSounding: Bool {
        for i in 0..<voices.count where voices[i] != nil { return true }
        for i in 0..<tails.count where tails[i] != nil { return true }
        return false
    }
    /// Whether voice `id` is in a slot (playing or fading).
    public func contains(_ id: UInt64) -> Bool {
        voices.contains { $0?.id == id } || tails.contains { $0?.id == id }
    }

    /// Starts the voice `request` asks for (its cue, gain, rate, priority, owner's key, limit,
    /// loop), handed over whole. When all voices are busy one is faded out and replaced
    /// (see `victim`: a fair share per owner first, then the lowest priority and the
    /// oldest), unless the new voice may not take any.
    @discardableResult
    public func start(_ request: VoiceRequest) -> Start { place(request).result }

    /// Starts a cue whose first frames are mixed at once into `frames` frames
    /// already rendered (`into`, interleaved stereo: audio the device gave back to be
    /// written again); it goes on from there at the next `render`. As after `render`,
    /// `started…` and `ended` then say what started and ended in those frames.
    @discardableResult
    public func start(_ request: VoiceRequest, mixedInto rendered: UnsafeMutablePointer<Float>, frames: Int) -> Start {
        let (result, slot) = place(request)
        startedCount = 0
        endedCount = 0
        if let slot, frames > 0 {
            renderVoice(&voices[slot], frames: frames, into: rendered)
            // Those frames were limited as they were first mixed; only what the new voice
            // adds past full scale is turned down now (never a clip).
            remixLimiter.reset()
            var done = 0
            while limiting && done < frames {
                let n = min(maxFrames, frames - done)
                remixLimiter.process(rendered + done * 2, frames: n)
                done += n
            }
        }
        return result
    }

    private func place(_ r: VoiceRequest) -> (result: Start, slot: Int?) {
        let (cue, priority, owner, important) = (r.cue, r.priority, r.ownerKey, r.important)
        var loopsLeft = 0, frameLimit = Int.max
        switch r.loop {
        case .once: break
        case .times(let n): loopsLeft = max(0, n - 1)
        case .forever: loopsLeft = -1
        case .seconds(let s):
            loopsLeft = -1
            frameLimit = s.isFinite && s > 0 ? Int(min(s, VoiceLoop.maxSeconds) * Double(rate)) : 0
        }
        if cue.frames == 0 { loopsLeft = 0 }  // nothing to repeat
        serial &+= 1
        let step = r.rate.isFinite ? min(max(r.rate, Interpolator.minRate), Interpolator.maxRate) : 1
        let voice = Voice(cue: cue, id: r.id, position: 0, phase: 0, step: step, looped: false, gain: r.gain,
                          loopsLeft: loopsLeft, frameLimit: frameLimit,
                          played: 0, fadeLeft: -1, fadeLength: 0, serial: serial, priority: priority, owner: owner,
                          important: important, requestTime: r.requestTime, started: false, stopReason: nil)
        if let limit = r.limit, let own = overLimit(cue.name, limit) { return (steal(own, for: voice), own) }
        for free in 0..<voices.count where voices[free] == nil {
            voices[free] = voice
            return (.started, free)
        }
        guard let victim = victim(owner: owner, priority: priority, important: important) else { return (.refused, nil) }
        return (steal(victim, for: voice), victim)
    }

    /// The slot of the voice of cue `name` to give up when `limit.maxVoices` of it already
    /// play (not counting those fading out), or nil.
    private func overLimit(_ name: String, _ limit: CueVoiceLimit) -> Int? {
        var count = 0
        var pick: Int?
        for i in voices.indices {
            guard let v = voices[i], v.stopReason == nil, v.cue.name == name else { continue }
            count += 1
            guard let p = pick, let w = voices[p] else { pick = i; continue }
            let better = limit.steal == .quietest ? v.gain < w.gain || (v.gain == w.gain && v.serial < w.serial) : v.serial < w.serial
            if better { pick = i }
        }
        return count >= max(1, limit.maxVoices) ? pick : nil
    }

    /// Fades the voice in `victim` out (into a tail slot) and puts `voice` in its place.
    private func steal(_ victim: Int, for voice: Voice) -> Start {
        var stolen = voices[victim]!
        if stolen.fadeLeft < 0 || stolen.fadeLeft > stealFadeFrames {
            stolen.fadeLeft = stealFadeFrames
            stolen.fadeLength = stealFadeFrames
        }
        if stolen.stopReason == nil { stolen.stopReason = .stolen }
        // A tail slot: a free one, else the one closest to silence.
        var slot = 0
        for i in tails.indices {
            guard let t = tails[i] else { slot = i; break }
            if t.fadeLeft < tails[slot]!.fadeLeft { slot = i }
        }
        // Noted apart from `ended`, which the next render starts afresh: its end
        // must be told even when it ends between renders.
        if let out = tails[slot] { evicted.append((out.id, out.stopReason ?? .stolen)) }
        tails[slot] = stolen
        voices[victim] = voice
        return .stole(id: stolen.id)
    }

    /// The slot a new voice of `owner` takes when every slot is busy, or nil (refused).
    ///
    /// Max-min fairness between owners first, so that one app cannot silence the others
    /// (16 loops at priority 100 from one client used to leave every other app's cue
    /// unheard): each owner playing, the newcomer's included, has a share of
    /// `maxVoices / owners` slots (at least 1). A newcomer under its share takes a voice
    /// of an owner over its share, whatever their priorities; one at or over its share
    /// takes one of its own or of an owner over its share. Among those, the lowest
    /// priority, then the oldest (Android SoundPool's rule), and a voice of a higher
    /// priority than the newcomer's refuses it — unless the newcomer is under its share
    /// or `important`. When no owner is over its share, the same rule over every slot.
    /// O(voices × owners), allocation-free.
    private func victim(owner: UInt64, priority: Int, important: Bool) -> Int? {
        var owners = 0
        func index(of o: UInt64) -> Int? {
            for k in 0..<owners where ownerKeys[k] == o { return k }
            return nil
        }
        for v in voices {
            let o = v!.owner
            if let k = index(of: o) { ownerCounts[k] += 1 } else { ownerKeys[owners] = o; ownerCounts[owners] = 1; owners += 1 }
        }
        let mine = index(of: owner).map { ownerCounts[$0] } ?? 0
        let share = max(1, maxVoices / (owners + (mine == 0 ? 1 : 0)))
        func isOver(_ o: UInt64) -> Bool { index(of: o).map { ownerCounts[$0] > share } ?? false }
        func lowest(_ eligible: (Voice) -> Bool) -> Int? {
            var best: Int?
            for i in voices.indices where eligible(voices[i]!) {
                guard let b = best else { best = i; continue }
                let v = voices[i]!, w = voices[b]!
                if v.priority < w.priority || (v.priority == w.priority && v.serial < w.serial) { best = i }
            }
            return best
        }
        let under = mine < share
        if let fair = lowest({ $0.owner == owner ? !under : isOver($0.owner) }) {
            if under || important || voices[fair]!.priority <= priority { return fair }
            return nil
        }
        let any = lowest { _ in true }!
        return important || voices[any]!.priority <= priority ? any : nil
    }

    /// Hands over (and forgets) the voices `start` pushed out of their fading slot.
    public func takeEvicted(_ each: (UInt64, VoiceEndReason) -> Void) {
        guard !evicted.isEmpty else { return }
        for e in evicted { each(e.id, e.reason) }
        evicted.removeAll(keepingCapacity: true)
    }

    /// Fades out, over `frames`, the playing voices `matches` selects (by id);
    /// returns how many. They end with `reason`.
    public func stop(fadeFrames frames: Int, reason: VoiceEndReason, where matches: (UInt64) -> Bool) -> Int {
        var count = 0
        for i in voices.indices {
            guard var v = voices[i], v.stopReason == nil, matches(v.id) else { continue }
            if v.fadeLeft < 0 || v.fadeLeft > frames { v.fadeLeft = frames; v.fadeLength = max(frames, 1) }
            v.stopReason = reason
            voices[i] = v
            count += 1
        }
        return count
    }

    /// Fades every voice out over `frames` (mute); fading tails keep their own reason.
    public func fadeOutAll(frames: Int, reason: VoiceEndReason = .muted) {
        func fade(_ v: inout Voice?) {
            guard var x = v else { return }
            if x.fadeLeft < 0 || x.fadeLeft > frames { x.fadeLeft = frames; x.fadeLength = max(frames, 1) }
            if x.stopReason == nil { x.stopReason = reason }
            v = x
        }
        for i in voices.indices { fade(&voices[i]) }
        for i in tails.indices { fade(&tails[i]) }
    }

    /// What a voice removed before its end was: for the ledger.
    public struct RemovedVoice: Sendable {
        public var id: UInt64
        public var requestTime: UInt64
        /// Why it was fading when removed (nil: it was not).
        public var stopReason: VoiceEndReason?
        /// Had started sounding.
        public var started: Bool
    }

    /// Stops everything at once (shutdown, device lost); `each` sees every voice removed.
    public func removeAll(_ each: (RemovedVoice) -> Void = { _ in }) {
        for i in voices.indices { remove(&voices[i], each) }
        for i in tails.indices { remove(&tails[i], each) }
    }

    /// After the device was reopened under running voices: the voices requested
    /// at or after `since` (or with no request time) start again from their
    /// first frame; the others, and fading ones, are removed and passed to `dropped`.
    public func restart(requestedSince since: UInt64, dropped: (RemovedVoice) -> Void) {
        for i in voices.indices {
            guard var v = voices[i] else { continue }
            if v.stopReason == nil && (v.requestTime == 0 || v.requestTime >= since) {
                v.position = 0
                v.phase = 0
                v.looped = false
                v.played = 0
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
        each(RemovedVoice(id: v.id, requestTime: v.requestTime, stopReason: v.stopReason, started: v.started))
    }

    private func noteEnded(_ v: Voice, lastFrame: Int) {
        guard endedCount < ended.count else { return }
        ended[endedCount] = Ended(id: v.id, reason: v.stopReason ?? .played, lastFrame: lastFrame)
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
        if limiting { limiter.process(mix, frames: frames) }
    }

    private func renderVoice(_ slot: inout Voice?, frames: Int, into out: UnsafeMutablePointer<Float>) {
        guard var v = slot else { return }
        if !v.started {
            v.started = true
            if startedCount < startedIDs.count {
                startedIDs[startedCount] = v.id
                startedRequestTimes[startedCount] = v.requestTime
                startedCount += 1
            }
        }
        var offset = 0
        var done = false
        while offset < frames && !done {
            // A time limit ends in a fade, not a click.
            let untilLimit = v.frameLimit == .max ? Int.max : v.frameLimit - v.played
            if v.fadeLeft < 0 && untilLimit <= limitFadeFrames {
                v.fadeLeft = max(0, untilLimit)
                v.fadeLength = max(1, untilLimit)
            }
            var n = min(frames - offset, framesToEnd(v))
            if v.fadeLeft >= 0 { n = min(n, v.fadeLeft) } else if untilLimit != .max { n = min(n, untilLimit - limitFadeFrames) }
            n = max(0, n)
            mixFrames(v, n, into: out + offset * 2)
            if v.fadeLeft >= 0 { v.fadeLeft -= n }
            offset += n
            advance(&v, by: n)
            v.played += n
            if v.fadeLeft == 0 {
                done = true
            } else if v.position >= v.cue.frames {
                if v.loopsLeft != 0 && v.cue.frames > 0 {
                    v.position -= v.cue.frames  // a resampled voice keeps its phase
                    v.looped = true
                    if v.loopsLeft > 0 { v.loopsLeft -= 1 }
                } else {
                    done = true
                }
            } else if n == 0 && v.fadeLeft < 0 && untilLimit == .max {
                done = true  // cannot happen: no progress without an end; never loop forever
            }
        }
        if done {
            noteEnded(v, lastFrame: offset - 1)
            slot = nil
        } else {
            slot = v
        }
    }

    /// Output frames until the cue's end (at least 1 while any of it is left).
    private func framesToEnd(_ v: Voice) -> Int {
        guard v.step != 1 else { return v.cue.frames - v.position }
        let left = (Double(v.cue.frames - v.position) - v.phase) / v.step
        return left > 0 ? max(1, Int(left.rounded(.up))) : 0
    }

    private func advance(_ v: inout Voice, by n: Int) {
        guard v.step != 1 else { v.position += n; return }
        let p = v.phase + Double(n) * v.step
        let whole = p.rounded(.down)
        v.position += Int(whole)
        v.phase = p - whole
    }

    private func mixFrames(_ v: Voice, _ n: Int, into out: UnsafeMutablePointer<Float>) {
        guard n > 0 else { return }
        if v.step != 1 {
            interpolator.mix(v.cue.samples, channels: v.cue.channels, count: v.cue.frames, position: v.position, phase: v.phase,
                             step: v.step, frames: n, gain: v.gain, fadeFrom: v.fadeLeft, fadeLength: v.fadeLength,
                             wrap: v.loopsLeft != 0, looped: v.looped, into: out)
            return
        }
        let src = v.cue.samples
        if v.cue.channels == 1 {
            // A mono cue, the same on both sides (what a stereo copy of it gives, sample for sample).
            let base = v.position
            if v.fadeLeft < 0 {
                for f in 0..<n {
                    let x = src[base + f] * v.gain
                    out[2 * f] += x
                    out[2 * f + 1] += x
                }
            } else {
                let len = Float(v.fadeLength)
                for f in 0..<n {
                    let x = src[base + f] * (v.gain * Float(v.fadeLeft - f) / len)
                    out[2 * f] += x
                    out[2 * f + 1] += x
                }
            }
            return
        }
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
        }
    }
}
