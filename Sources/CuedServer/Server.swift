import CuedAudio
import CuedConfig
import CuedCore
import CuedProtocol
import CuedSystem
import Logging
import NIOCore
import NIOPosix
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The running daemon: settings, cue bank, audio engine, socket server,
/// signals. Threads: the main thread waits for signals; one NIO event loop
/// does protocol work only; the audio thread mixes and writes; blocking work runs
/// in lanes of its own (a reload thread, a state-save thread, decoding workers
/// with a share per client and a deadline); a log writer thread.
/// No Swift concurrency and no dispatch queues, whose worker-thread monitor
/// would wake an idle daemon every second.
public final class Server: Sendable {
    public let options: CommandLineOptions
    public let logger: Logger
    /// How long playing cues may finish at SIGTERM.
    static let graceMs = 500
    /// cued's native PipeWire stream as the graph sets it (every PipeWire sink made publishes there).
    let streamProps = StreamProps()

    public init(options: CommandLineOptions, logger: Logger) {
        self.options = options; self.logger = logger
    }

    /// Runs until SIGTERM/SIGINT.
    public func run() throws(StartupError) {
        umask(0o077)
        let signals = Signals.block()
        let env = options.environment

        // Settings, then every cue: a bad config, a missing cue or a sink that
        // cannot work as configured ends cued at once (exit 78) with the fix.
        // One budget for every decoded sound: the cues, the cache, voices, decodes, a reload's overlap.
        let budget = SoundBudget()
        // The start's runtime is the daemon's once it is made, and this function's no
        // more (it runs until cued stops: a reference kept here kept the first config's
        // cues for good, whatever reloads replaced them).
        var start: Runtime?
        let (settings, config) = try loadStart(budget: budget, into: &start)
        // auto (the default) picks again at every open of the device; preflight picks once to say where.
        let sink = makeSink(settings)
        do { try sink.preflight() } catch {
            throw StartupError("sink \(settings.sink): \(error.message)", exitCode: StartupError.configExit)
        }

        // Mute at start: the flag, else the saved state, else the config.
        let statePath = options.statePath
        let stale = StateFile.removeStaleTemps(beside: statePath)
        if stale > 0 { logger.info("removed stale temp files of the state", metadata: ["count": "\(stale)"]) }
        var saved = SavedState()
        do { saved = try StateFile.load(statePath) ?? SavedState() } catch {
            logger.error("cannot read the saved state; starting from defaults", metadata: ["error": "\(error)"])
        }
        let muted = options.muted ?? (FileSystem.entry(statePath) != .none ? saved.muted : nil) ?? config.muted ?? false
        let cueNames = start!.bank.names.joined(separator: " ")

        let notifier = SystemdNotifier(environment: env)
        let activated = SocketActivation.inheritedSocket(environment: env)
        if activated == nil { try SocketFile.prepare(options.socketPath, cuedsOwn: SocketLocation.ownDirectory(environment: env)) }
        let limits = options.limits
        let fdLimit = DescriptorLimit.raise()

        // The loop's ticks let the scheduler put a slice off until the loop has polled its sockets.
        let ticks = LoopTicks()
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1, metricsDelegate: ticks)
        let loop = group.next()
        // Lanes: a reload never holds up a state save, and neither waits behind a decoder.
        let reloads = NIOThreadPool(numberOfThreads: 1)
        reloads.start()
        let saves = NIOThreadPool(numberOfThreads: 1)
        saves.start()
        let decoding = DecodeLane()

        var engineConfig = AudioEngine.Configuration()
        engineConfig.voices = settings.voices
        engineConfig.idleCloseSeconds = settings.idleCloseSeconds
        engineConfig.hangOnPlayForTesting = options.hangAudioForTesting
        engineConfig.spinOnPlayForTesting = options.spinAudioForTesting
        // The daemon lives on the loop; the audio thread's events hop there to reach it.
        let daemonBox = NIOLoopBoundBox.makeEmptyBox(valueType: Daemon.self, eventLoop: loop)
        let deviceLog = DeviceLog(logger: logger)
        // The audio thread's scheduling: its own attempt, then the desktop's (RTKit, the portal).
        let stats = EngineStats(realtime: RealtimeGrant(priority: Int(engineConfig.realtimePriority ?? 20), sandboxed: RealtimeAsker.sandboxed))
        let realtime = RealtimeAsker(stats: stats, environment: env, logger: logger)
        let engine = AudioEngine(sink: sink, configuration: engineConfig, stats: stats) { event in
            // The engine's relay thread (the audio thread's events, in order): hop to the loop.
            loop.execute {
                deviceLog.log(event, output: daemonBox.value.map { ($0.engine.sinkSpec, $0.engine.sinkWhy) })
                daemonBox.value?.handle(event)
                // A device opened: a chance to ask again for real time that was refused or taken away;
                // the thread started after the chance cued gave once up: that chance, again.
                switch event {
                case .opened, .threadStarted: realtime.chance()
                default: break
                }
            }
        }
        let saver = StateSaver(path: statePath, pool: saves, loop: loop, logger: logger)
        let opts = options
        let sounds = SoundLibrary(theme: start!.theme, cacheLimitBytes: settings.themeCacheBytes, budget: budget)
        let stopping = StopFlag()
        let sessionTTL = options.sessionTTLSeconds
        // Made on the loop, it stays there: other threads hold it only as a NIOLoopBound.
        deviceLog.picked(spec: sink.spec, why: sink.why)
        let made = loop.submit { [logger, saved, start] in
            let daemon = Daemon(loop: loop, engine: engine, runtime: start!, saved: saved, muted: muted, saver: saver, reloads: reloads, decoding: decoding,
                                sounds: sounds, sessions: SessionRegistry(ttlSeconds: sessionTTL), limits: limits, stopping: stopping,
                                budget: budget, streamProps: self.streamProps, logger: logger,
                                loadRuntime: { reuse, cancelled throws(LoadFailure) in
                                    try opts.loadRuntime(budget: budget, reuse: reuse, cancelled: cancelled)
                                },
                                notify: { notifier.notify($0) })
            daemonBox.value = daemon
            // The scheduler lives there too; memory is given back after a burst of clients leaves.
            let memory = ConnectionMemory(loop: loop, lane: saves, logger: logger)
            daemon.clients.onChange = { memory.changed(open: $0) }
            return (NIOLoopBound(daemon, eventLoop: loop), NIOLoopBound(FairScheduler(loop: loop, ticks: ticks), eventLoop: loop))
        }
        let daemon: NIOLoopBound<Daemon>, scheduler: NIOLoopBound<FairScheduler>
        do { (daemon, scheduler) = try made.wait() } catch {
            try? group.syncShutdownGracefully()
            throw StartupError("cannot start the event loop: \(error)", exitCode: 1)
        }
        start = nil
        // The flag's mute is saved with the rest of the saved state as it was.
        if options.muted != nil { var s = saved; s.muted = muted; saver.save(s) }
        engine.start()
        // Made now (its eventfd and socket watch are counted with the rest), started once cued listens.
        let desktop = makeDesktopBus(dbus: config.dbus, notifications: config.notifications, desktop: config.desktop,
                                     daemon: daemon, loop: loop)

        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: 4096)
            // Out of descriptors (EMFILE/ENFILE): stop accepting for a moment instead of spinning.
            .serverChannelInitializer { [logger] channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(AcceptPauseHandler(logger: logger))
                }
            }
            .childChannelOption(ChannelOptions.allowRemoteHalfClosure, value: true)
            // One read of at most 4 KiB a turn per connection: a client's pipeline is
            // decoded a few hundred lines at a time, never 10,000 in one go (and a
            // heavy connection reads only when the scheduler grants it).
            .childChannelOption(ChannelOptions.maxMessagesPerRead, value: 1)
            .childChannelOption(ChannelOptions.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: 4096))
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ConnectionHandler(host: VerbTable(daemon.value), scheduler: scheduler.value))
                }
            }
        let channel: Channel
        do {
            if let fd = activated {
                channel = try bootstrap.withBoundSocket(fd).wait()
            } else {
                channel = try bootstrap.bind(unixDomainSocketPath: options.socketPath, cleanupExistingSocketFile: false).wait()
            }
        } catch {
            try? group.syncShutdownGracefully()
            throw StartupError("cannot listen on \(activated == nil ? options.socketPath : "the inherited socket"): \(error)", exitCode: 1)
        }
        // The cap fits the descriptors left now that cued is up (event loop,
        // listening socket, log, device if open), less the reserve.
        let fdsInUse = DescriptorLimit.inUse()
        let busRoom = desktop != nil && DescriptorLimit.roomForBus(limit: fdLimit, inUse: fdsInUse)
        let fdCap = DescriptorLimit.maxClients(for: fdLimit, inUse: fdsInUse, extra: busRoom ? DescriptorLimit.busReserve : 0)
        if limits.maxClients > fdCap {
            try? loop.submit { daemon.value.clients.capacity = fdCap }.wait()
            logger.warning("connection cap lowered to fit the descriptor limit", metadata: [
                "max_clients": "\(fdCap)", "nofile": "\(fdLimit)", "open": "\(fdsInUse)", "reserve": "\(DescriptorLimit.reserve + (busRoom ? DescriptorLimit.busReserve : 0))"])
        }
        // Only a socket cued created itself is chmod'ed and, at exit, unlinked.
        var socketInode: UInt64?
        if activated == nil {
            chmod(options.socketPath, 0o600)
            socketInode = SocketFile.inode(options.socketPath)
        }
        // Said once cued is sure to run (a second instance or an unsafe socket
        // directory is refused above, and says only that).
        logger.info("cues loaded", metadata: ["cues": "\(cueNames)",
                                                "dirs": "\(settings.sounds.joined(separator: ":"))",
                                                "config": "\(config.path ?? "none")"])
        // The switches as restored (the saved state, else the config): the mute and the global profile.
        let profile = (try? loop.submit { daemon.value.switches.profile.rawValue }.wait()) ?? "?"
        logger.info("cued \(CuedVersion.string) listening", metadata: [
            "socket": "\(activated == nil ? options.socketPath : "fd 3 (socket activation)")",
            "sink": "\(engine.sinkSpec)", "muted": "\(muted)", "profile": "\(profile)"])
        if let desktop {
            if busRoom { desktop.start() } else {
                logger.warning("D-Bus: off: the descriptor limit leaves no room for the bus's sockets", metadata: ["nofile": "\(fdLimit)", "open": "\(fdsInUse)"])
                desktop.turnedOff(because: "too few descriptors (nofile \(fdLimit))")
            }
        }
        let readyStatus = (try? loop.submit { daemon.value.statusLine() }.wait()) ?? ""
        notifier.notify("READY=1", "STATUS=" + readyStatus)
        let watchdog = startWatchdog(engine: engine, notifier: notifier, environment: env, on: loop)
        // Real time from the desktop, asked once cued is up: never on the start-up's path.
        loop.execute { realtime.chance() }

        loop: while true {
            let signal = Signals.wait(signals)
            switch Signals.meaning(signal) {
            case .reload:
                loop.execute { _ = daemon.value.reload() }
            case .ignore:
                logger.notice("ignored signal", metadata: ["signal": "\(signal)"])
            case .overran:
                let dropped = engine.dropRealtime()
                logger.warning("a real-time thread ran past its real-time budget without sleeping (SIGXCPU): dropped to normal scheduling",
                               metadata: ["threads": "\(dropped.joined(separator: " "))"])
            case .stop:
                // The flag before the line: whoever reads "stopping" in the log knows no new cue starts.
                stopping.store(true, ordering: .relaxed)
                logger.info("stopping", metadata: ["signal": "\(signal)"])
                break loop
            }
        }
        stop(stopping: stopping, engine: engine, channel: channel, group: group, saver: saver, watchdog: watchdog, notifier: notifier,
             socketInode: socketInode, desktop: desktop)
    }

    /// What the start keeps of the config file (not its cues: those are the runtime's).
    struct StartConfig {
        var path: String?
        var muted: Bool?
        var dbus: BusSetting
        var notifications: NotificationSetting
        var desktop: DesktopSetting
    }

    /// Reads the config and loads every cue into `start`, charged to `budget`.
    private func loadStart(budget: SoundBudget, into start: inout Runtime?) throws(StartupError) -> (Settings, StartConfig) {
        var config: Config
        do { config = try options.loadConfig() } catch {
            throw StartupError("invalid config:\n" + error.description, exitCode: StartupError.configExit)
        }
        let kept = StartConfig(path: config.path, muted: config.muted, dbus: config.dbus, notifications: config.notifications,
                               desktop: config.desktop)
        if options.muted != nil { config.muted = nil }
        let settings = options.effective(config)
        do {
            let (rt, warnings) = try RuntimeLoader.load(config: config, settings: settings, environment: options.environment, budget: budget)
            for w in warnings { logger.warning("\(w)") }
            start = rt
        } catch {
            throw StartupError(error.description, exitCode: StartupError.configExit)
        }
        return (settings, kept)
    }

    /// The D-Bus face (`[dbus]`), to run on a thread of its own (`start`); nil when turned off.
    func makeDesktopBus(dbus: BusSetting, notifications: NotificationSetting, desktop: DesktopSetting, daemon: NIOLoopBound<Daemon>,
                        loop: any EventLoop) -> DesktopBus? {
        guard dbus.enabled else {
            logger.info("D-Bus: off ([dbus] enabled = false)")
            return nil
        }
        var o = DesktopBus.Options()
        o.feedback = dbus.feedback
        o.replace = dbus.replace
        o.notifications = notifications.enabled
        o.socketPath = DesktopBus.socketPath(environment: options.environment)
        o.busConfigured = DesktopBus.busConfigured(environment: options.environment)
        o.followDesktop = desktop.follow
        o.preferKDE = PortalSettings.isKDE(environment: options.environment)
        o.wirePlumberDirectory = WirePlumberState.directory(environment: options.environment)
        let bridge = BusBridge(loop: loop)
        let bus = DesktopBus(options: o, host: bridge, logger: logger)
        let made = loop.submit { [logger] in
            let d = daemon.value
            let center = FeedbackCenter(daemon: d, signals: bus, logger: logger)
            bridge.center.value = center
            d.desktop = center
            d.connectProfile(to: bus)
        }
        guard (try? made.wait()) != nil else { return nil }
        return bus
    }

    /// SIGTERM: stop accepting, give playing cues up to 500 ms, save what is
    /// pending, close the device, exit. Bounded: whatever hangs (a stuck
    /// device, a full disk) cannot keep cued alive past the deadline.
    private func stop(stopping: StopFlag, engine: AudioEngine, channel: Channel, group: MultiThreadedEventLoopGroup, saver: StateSaver,
                      watchdog: RepeatedTask?, notifier: SystemdNotifier, socketInode: UInt64?, desktop: DesktopBus?) {
        notifier.notify("STOPPING=1")
        stopping.store(true, ordering: .relaxed)
        ExitDeadline.arm(afterMs: Self.graceMs + 1500, logger: logger)
        // Off the bus first (under the deadline: a hung bus cannot hold the exit): the
        // feedback name goes back to whoever queued for it.
        desktop?.stop()
        watchdog?.cancel()
        try? channel.close().wait()
        if !engine.shutdown(graceMs: Self.graceMs) {
            logger.error("the audio thread did not stop in time (a stuck device?); exiting without it")
        }
        saver.flush()
        if let socketInode, SocketFile.inode(options.socketPath) == socketInode { unlink(options.socketPath) }
        try? group.syncShutdownGracefully()
        logger.info("stopped")
        LogWriter.shared.flush(timeoutMs: 200)
    }

    /// The sink the settings name. `[stream]` properties replace the built-in
    /// ones key by key (ALSASink exports them for the sound server's plugin, so
    /// this runs before any other thread starts).
    func makeSink(_ s: Settings) -> any Sink {
        let latency = s.latencyMs ?? 10
        switch s.sink {
        case .alsa(let pcm):
            return ALSASink(device: pcm, latencyMs: s.latencyMs,
                            streamProperties: ALSASink.defaultStreamProperties.merging(s.stream) { $1 })
        case .pipewire(let target):
            // --latency-ms: the quantum the stream asks of the graph (default 128 frames, 2.7 ms).
            return PipeWireSink(target: target, quantumFrames: s.latencyMs.map { max(16, $0 * 48) } ?? 128,
                                streamProperties: PipeWireSink.defaultStreamProperties.merging(s.stream) { $1 }, props: streamProps,
                                handedOverPath: options.environment["CUED_TEST_HANDED_OVER"])
        case .null: return NullSink(latencyMs: latency)
        case .auto:
            let env = options.environment
            var named = s
            return FollowingSink(
                pick: { open in AutoSink.choose(environment: env, exists: { FileSystem.entry($0) != .none }, opens: open) },
                make: { spec in
                    named.sink = (try? SinkSpec.parse(spec).get()) ?? .null
                    return self.makeSink(named)
                })
        case .wav(let path): return WAVSink(path: path, latencyMs: latency, overwrite: options.overwriteRecording)
        case .fault(let spec):
            guard case .success(let sink) = FaultSink.parse(spec, latencyMs: latency) else { return NullSink(latencyMs: latency) }
            return sink
        }
    }

    /// WATCHDOG=1 at half systemd's interval, only while the audio thread is
    /// healthy (idle-waiting, or it turned its loop within half the interval).
    /// It runs on the event loop, so a stuck loop stops the pings too.
    func startWatchdog(engine: AudioEngine, notifier: SystemdNotifier, environment: [String: String],
                       on loop: any EventLoop) -> RepeatedTask? {
        guard notifier.isEnabled, let interval = SystemdNotifier.watchdogInterval(environment: environment) else { return nil }
        let half = interval / 2
        let halfNs = UInt64(half.components.seconds) * 1_000_000_000 + UInt64(half.components.attoseconds / 1_000_000_000)
        let log = logger
        let reported = Atomic<Bool>(false)
        let task = loop.scheduleRepeatedTask(initialDelay: .zero, delay: .nanoseconds(Int64(halfNs))) { _ in
            if engine.stats.audioThreadIsHealthy(maxStallNanoseconds: max(halfNs, 1_000_000_000)) {
                notifier.notify("WATCHDOG=1")
                reported.store(false, ordering: .relaxed)
            } else if !reported.exchange(true, ordering: .relaxed) {
                log.critical("audio thread is not responding; withholding watchdog pings so systemd restarts cued")
            }
        }
        logger.info("watchdog enabled", metadata: ["interval_ms": "\(halfNs * 2 / 1_000_000)"])
        return task
    }
}

/// Logs the device's state changes, each distinct failure once.
final class DeviceLog: Sendable {
    private let logger: Logger
    private let lastError = Mutex<String?>(nil)
    /// `--sink auto`'s last pick said (it is said at start, then at each change).
    private let lastPick = Mutex<String?>(nil)
    init(logger: Logger) { self.logger = logger }

    /// `--sink auto`'s pick (a sink with a why), said at start and then at each change:
    /// a warning when it plays to nothing.
    func picked(spec: String, why: String?) {
        guard let why, lastPick.withLock({ last in defer { last = spec }; return last != spec }) else { return }
        if spec == "null" { logger.warning("sink \(spec): \(why)") } else { logger.info("sink \(spec): \(why)") }
    }

    /// `output`: the sink's spec and why, as they are now (auto's pick).
    func log(_ event: EngineEvent, output: (spec: String, why: String?)? = nil) {
        switch event {
        case .opened(let f, let kind):
            lastError.withLock { $0 = nil }
            if let output { picked(spec: output.spec, why: output.why) }
            logger.info("audio device opened", metadata: ["sink.kind": "\(kind)", "sink.rate": "\(f.rate)", "sink.format": "\(f.sampleFormat.rawValue)",
                                                        "sink.period_frames": "\(f.periodFrames)", "sink.buffer_frames": "\(f.bufferFrames)"])
        case .openFailed(let e), .writeFailed(let e):
            let isNew = lastError.withLock { last in defer { last = e }; return last != e }
            if isNew { logger.error("audio device failed; will retry on the next cue", metadata: ["error": "\(e)"]) }
        case .stalled: logger.error("audio device stalled (it took no frames); reopened")
        case .lost: logger.error("audio device lost (recovering made no progress; a sound server restart?); reopened")
        case .streamStopped: logger.debug("audio stream stopped (idle)")
        case .closed: logger.info("audio device closed")
        default: break
        }
    }
}

/// The last resort at SIGTERM: if stopping takes longer than it may (a
/// device that never returns, a disk that never syncs), the process ends anyway.
enum ExitDeadline {
    static func arm(afterMs ms: Int, logger: Logger) {
        let args = DeadlineArgs(ms: ms, logger: logger)
        CuedThread.start("cued-deadline") {
            var ts = timespec(tv_sec: args.ms / 1000, tv_nsec: (args.ms % 1000) * 1_000_000)
            var rest = timespec()
            while nanosleep(&ts, &rest) != 0 && errno == EINTR { ts = rest }
            args.logger.error("stopping took longer than \(args.ms) ms; exiting anyway")
            LogWriter.shared.flush(timeoutMs: 100)
            _exit(0)
        }
    }

    final class DeadlineArgs: Sendable {
        let ms: Int
        let logger: Logger
        init(ms: Int, logger: Logger) { self.ms = ms; self.logger = logger }
    }
}
