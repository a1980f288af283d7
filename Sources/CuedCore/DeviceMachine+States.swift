/// What `DeviceMachine` knows and says: its settings, what an opened device asks of it, the
/// states with their data, the events it takes and the actions it returns. The transitions are
/// DeviceMachine.swift's.
extension DeviceMachine {
    public struct Settings: Sendable {
        /// Close an idle (stopped) device after this long; nil: never.
        public var idleCloseNs: UInt64? = 30_000_000_000
        /// A cue that cannot start within this of its request is dropped, never played late.
        public var maxStartDelayNs: UInt64 = 250_000_000
        /// Retries while the device fails: 50 ms doubling to 2 s.
        public var minRetryNs: UInt64 = 50_000_000
        public var maxRetryNs: UInt64 = 2_000_000_000
        /// A running device that takes no frame for max(this, 4 buffers) is stalled.
        /// Not shorter: on a loaded machine a sound server's non-realtime threads
        /// (stream start, the plugin's main loop) were late by > 100 ms.
        public var minStallNs: UInt64 = 250_000_000
        /// Until a started stream has taken more than its first buffer (the server has to
        /// link and start a new stream: over 250 ms on a loaded machine), it is given this long.
        public var startStallNs: UInt64 = 1_000_000_000
        /// xruns recovered in a row without a frame taken: the device is lost.
        public var maxRecoveriesWithoutProgress = 3
        /// Silence written past the device's own delay before the stream is stopped:
        /// a sound server's delay figure can miss the last milliseconds (pulse's did,
        /// by 2 ms), and stopping discards whatever is still queued.
        public var drainMarginNs: UInt64 = 20_000_000
        /// Cues held while the device (re)opens; the oldest is dropped beyond this.
        public var maxPending = 64
        public init() {}
    }

    /// What an opened device asks of the machine (from its `Pacing`), and its buffer.
    public struct Device: Sendable, Equatable {
        /// The buffer's duration.
        public var bufferNs: UInt64
        /// Its size (0: unknown, then any frame taken counts as the stream having started).
        public var bufferFrames: Int
        /// The longest it should stay open with its stream stopped (it costs the desktop
        /// something even then); nil: `settings.idleCloseNs`.
        public var idleCloseLimitNs: UInt64?
        /// How long past its own delay figure to let it play before stopping it; nil: `settings.drainMarginNs`.
        public var drainMarginNs: UInt64?
        /// How long the stream stays active, written silence, once everything has sounded (0: stopped then).
        public var lingerNs: UInt64
        public init(bufferNs: UInt64, bufferFrames: Int = 0, idleCloseLimitNs: UInt64? = nil, drainMarginNs: UInt64? = nil,
                    lingerNs: UInt64 = 0) {
            self.bufferNs = bufferNs; self.bufferFrames = bufferFrames
            self.idleCloseLimitNs = idleCloseLimitNs; self.drainMarginNs = drainMarginNs; self.lingerNs = lingerNs
        }
    }

    /// A cue held while the device is not open yet.
    public struct Pending {
        public var job: Job
        public var requestTime: UInt64
    }

    /// Attempts at opening: the cues they hold, and the backoff.
    public struct Attempts {
        public var pending: [Pending] = []
        /// The delay before the next retry, should this attempt fail (50 ms doubling to 2 s).
        public var retryDelay: UInt64
        /// When the last attempt began.
        public var lastAttempt: UInt64
        /// The open under way replaces a device lost under running voices.
        public var underVoices = false
        /// A reopen under voices was tried since the device last took a frame: the next
        /// failure gives up (drops the voices) instead of reopening again.
        public var reopenedSinceProgress = false
    }

    /// The open device, as the machine keeps it (the settings and its pacing, combined).
    public struct Open: Sendable, Equatable {
        public var idleCloseNs: UInt64?
        public var drainMarginNs: UInt64
        public var lingerNs: UInt64
        /// A running device that takes no frame for this long is stalled.
        public var stallNs: UInt64
        public var bufferFrames: Int
    }

    /// A running stream's progress.
    public struct Run: Sendable, Equatable {
        public var lastProgress: UInt64
        /// Frames written since the stream (re)started: beyond one buffer, the device is consuming.
        public var framesSinceStart = 0
        /// xruns recovered in a row without a frame taken.
        public var recoveries = 0
        /// As `Attempts.reopenedSinceProgress`, for the device that reopen opened.
        public var reopenedSinceProgress = false
        public init(lastProgress: UInt64) { self.lastProgress = lastProgress }
    }

    /// Where the device is, with all the machine knows in that state.
    public enum State {
        /// No device. Nothing to wait for.
        case closed
        /// `open` was asked for; the shell answers `opened` or `openFailed`.
        case opening(Attempts)
        /// The last open failed; try again at `retryAt` if cues wait, or at the next cue.
        case failed(Attempts, retryAt: UInt64)
        /// Open, stream stopped (nothing queued). Closes at `since + idleCloseNs`.
        case idle(Open, since: UInt64)
        /// Voices sound: the shell writes a period whenever the device has room.
        case streaming(Open, Run)
        /// The last voice has been written; silence is written until `until`, when
        /// everything written has sounded, then the stream lingers or is stopped.
        case draining(Open, Run, until: UInt64)
        /// Everything has sounded; silence is still written until `until` (`Device.lingerNs`),
        /// so that the next cue finds the stream running; then it is stopped. `status` shows idle.
        case lingering(Open, Run, until: UInt64)
        /// Shut down: the shell ends the thread.
        case finished
    }

    public enum Event {
        /// A cue to play, requested at `requestTime` (0: never too late).
        case cue(Job, requestTime: UInt64)
        /// Open the device now so that the next cue starts warm.
        case prewarm
        /// The device opened.
        case opened(Device)
        case openFailed
        /// A write went through: `frames` taken (0 is no progress), `xruns`
        /// recovered on the way, whether any voice still sounds, and how long
        /// what is queued in the device will take to play (`delayNs`).
        case wrote(frames: Int, xruns: Int, sounding: Bool, delayNs: UInt64)
        /// The device failed for good (unplugged, broken, server gone).
        case writeFailed
        /// While idle, the device reported an error or hang-up (a sound server went away).
        case deviceError
        /// The deadline passed.
        case timer
        /// Stop taking cues; let what plays finish until `deadline`, then close.
        case shutdown(deadline: UInt64)
    }

    public enum Action {
        case open
        case close
        /// Stop the stream (drop what is queued: by then only silence); a device that lingered goes inactive.
        case stopStream
        /// Everything written has sounded: the voices have ended; the stream goes on, written silence.
        case linger
        /// Start a voice now.
        case start(Job)
        /// Drop a cue that could not start in time (or arrived during shutdown).
        case drop(Job, lateNs: UInt64)
        /// The device was reopened under running voices: those requested at or
        /// after `requestedSince` start again from their first frame, the others are dropped.
        case restartVoices(requestedSince: UInt64)
        /// Every voice is dropped (the device is gone).
        case dropVoices
        /// Shutdown: every voice still sounding is cut off. They started, so
        /// they are stopped (as by `stop`), not dropped.
        case cutVoices
        /// The running device took no frame for `stallNs`: counted, logged once.
        case reportStall
        /// xruns recovered in a row without progress: the device is treated as lost.
        case reportLost
        /// End the audio thread.
        case exit
    }

    /// The state without its data: cheap to compare on every period.
    public enum Phase: Sendable { case closed, opening, failed, idle, streaming, draining, lingering, finished }
}
