import CuedCore
import Testing

/// The output stream's accounting on a fake clock: how far ahead to write,
/// pacing a device without a clock, rewinds, when a frame is heard.
@Suite struct OutputStreamTests {
    let ms: UInt64 = 1_000_000
    let t0: UInt64 = 1_000_000_000
    /// 5 ms periods in a 100 ms buffer.
    let big = SinkFormat(rate: 48_000, channels: 2, sampleFormat: .s16, periodFrames: 240, bufferFrames: 4_800)

    func ns(_ frames: Int) -> UInt64 { (UInt64(frames) * 1_000_000_000 + 47_999) / 48_000 }

    @Test func lowWaterIsAPeriodAndAMarginWithinTheBuffer() {
        #expect(OutputStream(format: big, pacing: Pacing(writeAhead: .lowWater)).lowWaterFrames == 240 + 120)
        let small = SinkFormat(rate: 48_000, channels: 2, sampleFormat: .s16, periodFrames: 240, bufferFrames: 480)
        #expect(OutputStream(format: small, pacing: Pacing(writeAhead: .lowWater)).lowWaterFrames == 240)  // room for a period
        let tiny = SinkFormat(rate: 48_000, channels: 2, sampleFormat: .s16, periodFrames: 48, bufferFrames: 4_800)
        #expect(OutputStream(format: tiny, pacing: Pacing(writeAhead: .lowWater)).lowWaterFrames == 48 + 96)  // 2 ms of margin at least
    }

    /// Writes while less than the low water is queued, then sleeps exactly until it would be.
    @Test func aClockedDeviceIsWrittenWhenItsQueueFallsToTheLowWater() {
        var s = OutputStream(format: big, pacing: Pacing(writeAhead: .lowWater))
        #expect(s.next(now: t0, room: 4_800, deviceWoke: false) == .write(render: 240))
        s.didRender(240)
        s.didWrite(frames: 240, xruns: 0, delay: 240, now: t0)
        #expect(!s.clockless)
        #expect(s.next(now: t0, room: 4_560, deviceWoke: false) == .write(render: 240))  // 240 < 360
        s.didRender(240)
        s.didWrite(frames: 240, xruns: 0, delay: 480, now: t0)
        // 480 queued: wait until 121 frames have played (then 359 < 360 are left).
        #expect(s.next(now: t0, room: 4_320, deviceWoke: false) == .wait(until: t0 + ns(121)))
        #expect(s.ahead(now: t0 + ns(121)) == 359)
        #expect(s.next(now: t0 + ns(121), room: 4_441, deviceWoke: false) == .write(render: 240))
    }

    /// A device that took a write and holds less than half of it has no clock: it is
    /// paced by real time, up to a buffer and a period ahead, and what it took is heard.
    @Test func aClocklessDeviceIsPacedByRealTime() {
        let f = SinkFormat(rate: 48_000, channels: 2, sampleFormat: .s16, periodFrames: 240, bufferFrames: 480)
        var s = OutputStream(format: f, pacing: Pacing(writeAhead: .lowWater))
        #expect(s.next(now: t0, room: 480, deviceWoke: false) == .write(render: 240))
        s.didRender(240)
        s.didWrite(frames: 240, xruns: 0, delay: 0, now: t0)
        #expect(s.clockless)
        #expect(s.heard(now: t0) == 240)  // a file has what it was given
        #expect(s.timeHeard(239, now: t0) == t0)
        // A stream's start: all it may hold ahead (a buffer and a period) at once.
        for _ in 0..<2 {
            #expect(s.next(now: t0, room: 480, deviceWoke: false) == .write(render: 240))
            s.didRender(240)
            s.didWrite(frames: 240, xruns: 0, delay: 0, now: t0)
        }
        // 720 ahead of real time, the limit: wait until one frame's time has passed; then,
        // past the start, it keeps to the low water (240).
        #expect(s.next(now: t0, room: 480, deviceWoke: false) == .wait(until: t0 + ns(1)))
        #expect(s.next(now: t0 + ns(1), room: 480, deviceWoke: false) == .wait(until: t0 + ns(481)))
        let t1 = t0 + ns(481)
        #expect(s.next(now: t1, room: 480, deviceWoke: false) == .write(render: 240))
        s.didRender(240)
        s.didWrite(frames: 240, xruns: 0, delay: 0, now: t1)
        #expect(s.ahead(now: t1) == 479)
        // A voice started mid-stream is written at once, up to the limit (a buffer and a period).
        s.voiceStartedMidStream()
        #expect(s.next(now: t1, room: 480, deviceWoke: false) == .write(render: 240))
        s.didRender(240)
        s.didWrite(frames: 240, xruns: 0, delay: 0, now: t1)
        s.voiceStartedMidStream()
        #expect(s.next(now: t1, room: 480, deviceWoke: false) == .wait(until: t1 + ns(480)))  // 719 ahead: at the limit
        // A new stream starts with all it may hold again.
        s.stopped()
        #expect(s.next(now: t1 + 1_000_000_000, room: 480, deviceWoke: false) == .write(render: 240))
    }

    /// When a frame is heard: the device's delay after the last write, counted down in real time.
    @Test func aFrameIsHeardWhenTheFramesBeforeItHavePlayed() {
        var s = OutputStream(format: big, pacing: Pacing(writeAhead: .lowWater))
        s.didRender(480)
        s.didWrite(frames: 480, xruns: 0, delay: 480, now: t0)
        #expect(s.heard(now: t0) == 0)
        #expect(s.timeHeard(0, now: t0) == t0 + ns(1))
        #expect(s.timeHeard(479, now: t0) == t0 + ns(480))
        #expect(s.heard(now: t0 + 5 * ms) == 240)
        #expect(s.heard(now: t0 + 20 * ms) == 480)
        #expect(s.timeHeard(100, now: t0 + 20 * ms) == t0 + 20 * ms)  // already heard: now
        s.stopped()
        #expect(s.heard(now: t0 + 20 * ms) == 480)
    }

    /// A sound server's plugin is filled as far as it takes; a device full after a wake
    /// on its descriptor sleeps on a timer for the frames missing, not on the descriptor.
    @Test func aFillDeviceIsWrittenWheneverItHasRoomForAPeriod() {
        var s = OutputStream(format: big, pacing: Pacing(writeAhead: .fill))
        s.didRender(240)
        s.didWrite(frames: 240, xruns: 0, delay: 4_000, now: t0)
        #expect(s.next(now: t0, room: 800, deviceWoke: false) == .write(render: 240))
        #expect(s.next(now: t0, room: 100, deviceWoke: false) == .waitForDevice)
        #expect(s.next(now: t0, room: 100, deviceWoke: true) == .wait(until: t0 + ns(140)))
        #expect(s.next(now: t0, room: 239, deviceWoke: true) == .wait(until: t0 + 500_000))  // half a millisecond at least
    }

    /// A device whose descriptors say only what is new (the native PipeWire stream) is
    /// polled again when a wake-up brought no room: the next one may (a timer would sleep
    /// through it).
    @Test func aDeviceThatWakesOnlyForNewsIsPolledAgain() {
        var s = OutputStream(format: big, pacing: Pacing(writeAhead: .fill, descriptorsStayReadable: false))
        s.didRender(240)
        s.didWrite(frames: 240, xruns: 0, delay: 4_000, now: t0)
        #expect(s.next(now: t0, room: 100, deviceWoke: true) == .waitForDevice)
        #expect(s.next(now: t0, room: 100, deviceWoke: false) == .waitForDevice)
        #expect(s.next(now: t0, room: 800, deviceWoke: true) == .write(render: 240))
    }

    /// A device whose room is all it takes before its next cycle (PipeWire's own stream at a
    /// graph quantum below cued's period) is written what fits, a period rendered and the
    /// rest written next; one whose room grows waits for a period's worth.
    @Test func aDeviceThatTakesAnyRoomIsWrittenLessThanAPeriod() {
        var s = OutputStream(format: big, pacing: Pacing(writeAhead: .fill, descriptorsStayReadable: false, partialWrites: true))
        #expect(s.next(now: t0, room: 64, deviceWoke: true) == .write(render: 240))
        s.didRender(240)
        s.didWrite(frames: 64, xruns: 0, delay: 64, now: t0)
        #expect(s.unwritten == 176)
        #expect(s.next(now: t0, room: 0, deviceWoke: true) == .waitForDevice)
        #expect(s.next(now: t0, room: 64, deviceWoke: true) == .write(render: 0))  // the rest of the period, 64 at a time
        let ring = OutputStream(format: big, pacing: Pacing(writeAhead: .fill, descriptorsStayReadable: false))
        #expect(ring.next(now: t0, room: 64, deviceWoke: true) == .waitForDevice)
    }

    /// A write that took nothing although the device claimed room is not retried at once.
    @Test func aWriteThatTookNothingWaitsForTheDevice() {
        var s = OutputStream(format: big, pacing: Pacing(writeAhead: .fill))
        s.didRender(240)
        s.didWrite(frames: 0, xruns: 0, delay: 0, now: t0)
        #expect(s.next(now: t0, room: 4_800, deviceWoke: false) == .waitForDevice)
        #expect(s.next(now: t0, room: 4_800, deviceWoke: true) == .write(render: 0))  // the unwritten period
        s.didWrite(frames: 240, xruns: 0, delay: 240, now: t0)
        #expect(s.next(now: t0, room: 4_560, deviceWoke: false) == .write(render: 240))
    }

    /// Rewinds: what can be given back is what was written and whose mix is at hand.
    @Test func framesGivenBackAreWrittenAgain() {
        var s = OutputStream(format: big, pacing: Pacing(writeAhead: .fill))
        s.didRender(240)
        s.didWrite(frames: 240, xruns: 0, delay: 240, now: t0)
        s.didRender(240)  // rendered, not written
        #expect(s.rewindable(deviceCan: 10_000) == 240)
        #expect(s.rewindable(deviceCan: 100) == 100)
        s.didRewind(100, now: t0)
        #expect(s.written == 140 && s.unwritten == 340 && s.rendered == 480)
        // An xrun drops what the device held: nothing written can be given back then.
        s.didWrite(frames: 340, xruns: 1, delay: 0, now: t0)
        #expect(s.rewindable(deviceCan: 10_000) == 0)
    }
}

/// The voice ledger: one end per voice, in order, with its reason.
@Suite struct VoiceLedgerTests {
    let cue = Cue(name: "pop", stereo: [0, 0])

    func request(_ id: UInt64, owner: String = "a", notify: VoiceNotify = [.wait]) -> VoiceRequest {
        VoiceRequest(id: id, cue: cue, owner: owner, connection: 7, notify: notify)
    }

    func ends(_ l: inout VoiceLedger) -> [VoiceEnd] {
        var out: [VoiceEnd] = []
        l.takeEnds { out.append($0) }
        return out
    }

    @Test func aVoiceEndsExactlyOnce() {
        var l = VoiceLedger()
        l.admit(request(1))
        l.playing(1)
        l.finish(1, .stoppedByID, started: true)
        l.finish(1, .cut, started: true)
        l.rendered(1, lastFrame: 10)
        l.sounded(through: .max)
        #expect(ends(&l) == [VoiceEnd(id: 1, cue: "pop", owner: "a", connection: 7, notify: [.wait], reason: .stoppedByID, started: true)])
        #expect(l.count == 0)
    }

    @Test func renderedVoicesEndPlayedOnceTheirLastFrameIsHeardInOrder() {
        var l = VoiceLedger()
        for id: UInt64 in 1...3 { l.admit(request(id)); l.playing(id) }
        l.rendered(2, lastFrame: 100)
        l.rendered(1, lastFrame: 50)
        #expect(l.nextSoundingFrame == 50)
        l.sounded(through: 50)
        #expect(ends(&l).isEmpty)  // frame 50 itself not heard yet
        l.sounded(through: 101)
        #expect(ends(&l).map(\.id) == [2, 1])
        #expect(l.phase(of: 3) == .playing)
    }

    @Test func whatTheDeviceThrewAwayEndsWithTheReasonGiven() {
        var l = VoiceLedger()
        l.admit(request(1)); l.playing(1); l.rendered(1, lastFrame: 5)
        l.admit(request(2)); l.playing(2)
        l.finishSounding(.cut)
        #expect(ends(&l).map(\.reason) == [.cut])
        #expect(l.phase(of: 2) == .playing)
    }

    @Test func scopesSelectByOwnerCueIDOrAll() {
        var l = VoiceLedger()
        l.admit(request(1, owner: "a"))
        l.admit(request(2, owner: "b"))
        #expect(l.matches(1, .owner("a")) && !l.matches(2, .owner("a")))
        #expect(l.matches(2, .cue(name: "pop", owner: "b")) && !l.matches(2, .cue(name: "bell", owner: "b")))
        #expect(l.matches(2, .id(2)) && !l.matches(1, .id(2)))
        #expect(l.matches(1, .all) && !l.matches(9, .all))
        #expect(StopScope.id(2).reason == .stoppedByID && StopScope.all.reason == .stoppedAll)
    }

    /// Full: the oldest voice waiting to be heard is taken as heard, so a new one is never refused.
    @Test func aFullLedgerEndsTheOldestSoundingVoice() {
        var l = VoiceLedger(capacity: 2)
        l.admit(request(1)); l.playing(1); l.rendered(1, lastFrame: 5)
        l.admit(request(2))
        l.admit(request(3))
        #expect(ends(&l).map(\.id) == [1])
        #expect(l.count == 2)
    }

    @Test func onlyEndsSomebodyWatchesOrThatDidNotPlayAreReported() {
        #expect(!VoiceEnd(id: 1, cue: "x", reason: .played, started: true).isReported)
        #expect(VoiceEnd(id: 1, cue: "x", notify: [.events], reason: .played, started: true).isReported)
        #expect(VoiceEnd(id: 1, cue: "x", reason: .late, started: false).isReported)
    }
}
