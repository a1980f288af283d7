import CuedAudio
import CuedConfig
import CuedCore
import CuedProtocol
import CuedSystem
import Logging
import NIOCore
import NIOPosix

/// The daemon: its parts, and the typed calls every client asks through (the socket's
/// `VerbTable`, the D-Bus face's `FeedbackCenter`, notifications). The parts hold the
/// state: the clients (`ClientTable`), who gets a voice (`VoiceBroker`), which sound a
/// cue plays (`CuePicker`), sounds from the theme and files (`SoundFetch`), mute and
/// profiles (`Switches`), refresh sessions (`RefreshDesk`); the daemon holds the runtime
/// a reload swaps (Daemon+Reload.swift) and plays (Daemon+Play.swift). Nothing here
/// words a reply: the socket's edge does (`Replies`).
///
/// Confined to the event loop, in its type: not Sendable, it stays where it is
/// made (on the loop); other threads hold it only in a `NIOLoopBound` or
/// `NIOLoopBoundBox`, which checks the loop at each use, and hop onto the loop.
/// Blocking work runs in lanes and completes back on the loop: reloads on
/// `reloads` (one at a time), decoding and listing the theme on `decoding` (a
/// share per client, a deadline), state saves on the saver's own thread; the
/// audio engine is fed through its queue and never waited on.
public final class Daemon {
    public let loop: any EventLoop
    public let engine: AudioEngine
    public let logger: Logger
    public let limits: Limits
    /// Set at SIGTERM (from the main thread): a reload in progress gives up
    /// between files, and no new cue starts.
    public let stopping: StopFlag
    /// The config, cues and theme in force (a reload swaps them whole).
    public internal(set) var current: Runtime
    /// Every client, socket and bus alike, under one cap.
    let clients: ClientTable
    let broker: VoiceBroker
    let switches: Switches
    var desk: RefreshDesk
    var picker = CuePicker()
    let fetch: SoundFetch
    let saver: StateSaver?
    let reloads: NIOThreadPool
    /// Re-reads the config and cues (blocking; run on `reloads`), taking the files of
    /// `reuse` (the bank in force) that did not change as they are.
    public typealias LoadRuntime = @Sendable (_ reuse: [FileIdentity: SoundBuffer], _ cancelled: @escaping @Sendable () -> Bool)
        throws(LoadFailure) -> (Runtime, warnings: [String])
    let loadRuntime: LoadRuntime
    /// The memory budget for decoded sound (status), if any.
    let budget: SoundBudget?
    /// Called when something `statusLine` shows changes, and around reloads (systemd's notify).
    let notify: @Sendable (_ fields: [String]) -> Void
    lazy var reloader = Reloader(loop: loop) { [unowned self] in self.reloadOnce() }
    /// The D-Bus face's loop side, when the bus is on (`status`'s bus).
    var desktop: FeedbackCenter?
    /// cued's own stream as the sound server's graph sets it (`status`'s `sink.stream`, `why`).
    let streamProps: StreamProps
    /// What only a start applies, as this one did: a reload names each key changed since.
    let startOnly: StartOnly

    /// Limits that keep one client from drowning the others.
    public struct Limits: Sendable {
        /// Cues a second per client (token bucket, 1 s burst); 0: unlimited.
        public var playsPerSecond: Double = 200
        /// State changes (mute, unmute, mute app, unmute app, reload) a second per
        /// client; each may write the state file. 0 when plays are unlimited.
        public var changesPerSecond: Double { playsPerSecond > 0 ? 20 : 0 }
        /// Clients at once; at the cap the longest idle one is let go.
        public var maxClients = 256
        public init() {}
    }

    public init(loop: any EventLoop, engine: AudioEngine, runtime: Runtime, saved: SavedState, muted: Bool,
                saver: StateSaver?, reloads: NIOThreadPool, decoding: DecodeLane, sounds: SoundLibrary,
                sessions: SessionRegistry = SessionRegistry(), limits: Limits = Limits(), stopping: StopFlag = StopFlag(),
                budget: SoundBudget? = nil, streamProps: StreamProps = StreamProps(), logger: Logger, loadRuntime: @escaping LoadRuntime,
                notify: @escaping @Sendable ([String]) -> Void = { _ in }) {
        (self.loop, self.engine, self.logger, self.limits, self.stopping) = (loop, engine, logger, limits, stopping)
        (current, self.saver, self.reloads, self.loadRuntime, self.budget, self.notify) = (runtime, saver, reloads, loadRuntime, budget, notify)
        self.streamProps = streamProps
        startOnly = StartOnly(runtime)
        switches = Switches(muted: muted, saved: saved, config: runtime.config, saver: saver, logger: logger)
        desk = RefreshDesk(sessions: sessions)
        clients = ClientTable(capacity: limits.maxClients)
        broker = VoiceBroker(loop: loop, engine: engine, clients: clients, stopping: stopping, logger: logger)
        fetch = SoundFetch(loop: loop, sounds: sounds, decoding: decoding)
        clients.onRemove = { [unowned self] gone in clientRemoved(gone) }
        switches.onChange = { [unowned self] in notify(["STATUS=" + statusLine()]) }
    }

    /// The audio thread's events, hopped onto the loop.
    func handle(_ event: EngineEvent) { broker.handle(event) }

    /// A client left the table (closed, let go at the cap, done leaving): the loops it
    /// started end.
    private func clientRemoved(_ gone: ClientTable.Entry) {
        if gone.loops { broker.stopLoops(of: gone.client.id) }
        logger.debug("client left", metadata: ["client.id": "\(gone.client.id)", "client.played": "\(gone.client.granted)",
                                               "client.refused": "\(gone.client.refused)"])
    }

    /// Sets the global mute (a global mute fades out what plays, changed or not).
    public func setMuted(_ value: Bool) {
        switches.setMuted(value)
        if value { engine.submit(.fadeOutAll) }
    }

    /// Sets the global profile (requests, a reload, the bus's Profile property).
    public func setProfile(_ p: Profile) { switches.setProfile(p) }

    /// Sets the global profile for `client`, within its limit on state changes: the typed
    /// call behind `profile LEVEL` and the D-Bus face's Profile property. The limit a
    /// second if it was refused.
    func setProfile(_ p: Profile, _ client: inout Client, at: UInt64) -> Double? {
        if let limit = broker.allowChange(&client, at) { return limit }
        switches.setProfile(p)
        return nil
    }

    // MARK: - Status

    /// One line for systemd's STATUS=: cues, sink state, mute.
    public func statusLine() -> String {
        StatusReport.line(cues: current.bank.names.count, engine: engine, muted: switches.muted, profile: switches.profile)
    }

    public func status() -> Status {
        StatusReport(engine: engine, runtime: current, mutes: switches.mutes, profiles: switches.profiles, stateSaved: saver?.saved ?? true,
                     stateError: saver?.error, sinkWhy: engine.sinkWhy, connections: clients.figures, rateLimited: broker.rateLimited,
                     sessions: desk.count(now: MonotonicClock.now()), decodersStuck: fetch.decodersStuck,
                     counts: broker.counts.apps, played: broker.played, playedByCue: broker.playedByCue,
                     unlistedPlays: broker.counts.otherPlayed, theme: fetch.sounds.status(),
                     memory: StatusReport.memory(budget, cues: current.bank.bytes, cache: fetch.sounds.cachedBytes),
                     bus: desktop?.busStatus ?? Status.Bus(), desktop: desktopStatus, stream: streamStatus,
                     outputVolume: outputVolumeStatus, health: broker.health).status
    }
}
