@testable import CuedCore

/// The tests' way to start a voice by its parts; the engine hands the mixer a whole
/// `VoiceRequest` (`Mixer.start(_:)`). `owner` is the owner's key, as the mixer counts it.
extension Mixer {
    static func request(_ cue: Cue, id: UInt64, gain: Float, rate: Double, priority: Int, owner: UInt64,
                        important: Bool, limit: CueVoiceLimit?, loop: VoiceLoop, requestTime: UInt64) -> VoiceRequest {
        var r = VoiceRequest(id: id, cue: cue, gain: gain, requestTime: requestTime, priority: priority, important: important, loop: loop)
        r.rate = rate
        r.limit = limit
        r.ownerKey = owner
        return r
    }

    @discardableResult
    func start(_ cue: Cue, id: UInt64 = 0, gain: Float, rate: Double = 1, priority: Int = 0, owner: UInt64 = 0,
               important: Bool = false, limit: CueVoiceLimit? = nil, loop: VoiceLoop = .once, requestTime: UInt64 = 0) -> Start {
        start(Self.request(cue, id: id, gain: gain, rate: rate, priority: priority, owner: owner, important: important,
                           limit: limit, loop: loop, requestTime: requestTime))
    }

    @discardableResult
    func start(_ cue: Cue, id: UInt64 = 0, gain: Float, rate: Double = 1, priority: Int = 0, owner: UInt64 = 0,
               important: Bool = false, limit: CueVoiceLimit? = nil, loop: VoiceLoop = .once, requestTime: UInt64 = 0,
               mixedInto rendered: UnsafeMutablePointer<Float>, frames: Int) -> Start {
        start(Self.request(cue, id: id, gain: gain, rate: rate, priority: priority, owner: owner, important: important,
                           limit: limit, loop: loop, requestTime: requestTime), mixedInto: rendered, frames: frames)
    }
}
