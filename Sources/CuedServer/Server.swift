import CuedAudio
import CuedClient
import CuedConfig
import CuedCore
import CuedProtocol
import Foundation
import Logging
import NIOCore
import NIOPosix
import Synchronization

/// Everything `cued` can be told on its command line. Optional settings are
/// nil when the flag was not given: then the config file, then the default, applies.
public struct DaemonOptions: Sendable {
    public var socketPath: String
    /// `--config PATH` (must exist); nil: the default path, if it exists.
    public var configPath: String?
    public var defaultConfigPath: String
    public var sink: String?
    public var latencyMs: Int?
    public var voices: Int?
    public var idleCloseSeconds: Double?
    public var soundDirectories: [String]?
    public var defaultSoundDirectories: [String]
    public var muted: Bool?
    public var sessionTTLSeconds = 300.0
    public var limits = Daemon.Limits()
    public var statePath: String
    /// Test hook (CUED_TEST_HANG_AUDIO=1): the audio thread hangs on the first cue.
    public var hangAudioForTesting = false

    public init(socketPath: String, defaultConfigPath: String, defaultSoundDirectories: [String], statePath: String) {
        self.socketPath = socketPath; self.defaultConfigPath = defaultConfigPath
        self.defaultSoundDirectories = defaultSoundDirectories; self.statePath = statePath
    }

    /// Reads the config file: the explicit one (an error if missing), else the
    /// default one if it exists, else none.
    public func loadConfig() throws(ConfigErrors) -> Config {
        let path: String
        if let configPath { path = configPath } else {
            guard FileManager.default.fileExists(atPath: defaultConfigPath) else { return Config() }
            path = defaultConfigPath
        }
        return try Self.loadGuarded(path)
    }

    /// Loads a config file, first making sure it cannot crash the parser (see `ConfigGuard`).
    public static func loadGuarded(_ path: String) throws(ConfigErrors) -> Config {
        if FileManager.default.isReadableFile(atPath: path), let crash = ConfigGuard.probe(path) {
            throw ConfigErrors(issues: [crash])
        }
        return try ConfigLoader.load(path: path)
    }

    /// The settings in force: flag, else config, else default.
    /// `latencyMs` nil: the sink picks per kind of device (see `ALSASink.Timing`).
    public func effective(_ c: Config) -> (sink: SinkSpec, latencyMs: Int?, voices: Int, idleCloseSeconds: Double, sounds: [String]) {
        (SinkSpec.parse(sink ?? c.sink ?? "alsa:default") ?? .alsa("default"), latencyMs ?? c.latencyMs,
         voices ?? c.voices ?? 16, idleCloseSeconds ?? c.idleCloseS ?? 30, soundDirectories ?? c.sounds ?? defaultSoundDirectories)
    }

    /// Loads the config and every cue it and the directories name.
    public func loadRuntime() throws(LoadFailure) -> Runtime {
        var config: Config
        do { config = try loadConfig() } catch { throw LoadFailure(error.issues[0]) }
        if muted != nil { config.muted = nil }  // the flag wins
        return try RuntimeLoader.load(config: config, directories: effective(config).sounds).0
    }
}

/// `--sink SPEC`: `alsa[:PCM]`, `null` or `wav:PATH`.
public enum SinkSpec: Sendable, Equatable {
    case alsa(String)
    case null
    case wav(String)
    /// A fault-injecting sink for tests (see `FaultSink`).
    case fault(String)

    public static func parse(_ s: String) -> SinkSpec? {
        if s.hasPrefix("fault:") {
            guard case .success = FaultSink.parse(String(s.dropFirst(6))) else { return nil }
            return .fault(String(s.dropFirst(6)))
        }
        if s == "alsa" { return .alsa("default") }
        if s == "null" { return .null }
        if s.hasPrefix("alsa:"), s.count > 5 { return .alsa(String(s.dropFirst(5))) }
        if s.hasPrefix("wav:"), s.count > 4 { return .wav(String(s.dropFirst(4))) }
        return nil
    }

    func makeSink(latencyMs: Int?) -> any Sink {
        switch self {
        case .alsa(let pcm): return ALSASink(device: pcm, latencyMs: latencyMs)
        case .null: return NullSink(latencyMs: latencyMs ?? 10)
        case .wav(let path): return WAVSink(path: path, latencyMs: latencyMs ?? 10)
        case .fault(let spec):
            guard case .success(let sink) = FaultSink.parse(spec, latencyMs: latencyMs ?? 10) else { return NullSink(latencyMs: latencyMs ?? 10) }
            return sink
        }
    }
}

/// A start-up failure with the exit code cued should end with.
public struct StartupError: Error, CustomStringConvertible {
    public let message: String
    public let exitCode: Int32
    public var description: String { message }
    public static let configExit: Int32 = 78  // EX_CONFIG
}

public enum SoundDirectories {
    /// The installed (or source tree) cues, then the user's own.
    public static func defaults(environment: [String: String]) -> [String] {
        var dirs: [String] = []
        let exeDir = (((try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]) as NSString)
            .deletingLastPathComponent
        let installed = (exeDir as NSString).appendingPathComponent("../share/cued/sounds")
        if FileManager.default.fileExists(atPath: installed) {
            dirs.append((installed as NSString).standardizingPath)
        } else {
            // Running from a build tree (.build/release/cued): the repo's Sounds/.
            var dir = exeDir
            for _ in 0..<5 {
                let candidate = dir + "/Sounds"
                if FileManager.default.fileExists(atPath: candidate + "/psst1.wav") { dirs.append(candidate); break }
                dir = (dir as NSString).deletingLastPathComponent
            }
        }
        dirs.append(XDGDirectory.path("XDG_DATA_HOME", else: ".local/share", environment: environment) + "/cued/sounds")
        return dirs
    }
}

/// The running daemon: cue bank, audio engine, socket server, signals.
public final class Server: Sendable {
    public let options: DaemonOptions
    public let logger: Logger

    public init(options: DaemonOptions, logger: Logger) {
        self.options = options; self.logger = logger
    }

    /// Runs until SIGTERM/SIGINT. Synchronous on purpose: no Swift concurrency
    /// and no dispatch queues, whose worker-thread monitor would wake an idle
    /// daemon every second. Signals are blocked in every thread and taken here
    /// with sigwaitinfo.
    public func run() throws {
        umask(0o077)
        signal(SIGPIPE, SIG_IGN)
        let handled = Signals.blockForSigwait([SIGTERM, SIGINT, SIGHUP])
        let config: Config
        do { config = try options.loadConfig() } catch {
            throw StartupError(message: "invalid config:\n" + error.description, exitCode: StartupError.configExit)
        }
        let settings = options.effective(config)
        let runtime: Runtime
        do {
            let (rt, warnings) = try RuntimeLoader.load(config: config, directories: settings.sounds)
            for w in warnings { logger.warning("\(w)") }
            runtime = rt
        } catch {
            throw StartupError(message: error.description, exitCode: StartupError.configExit)
        }
        logger.info("cues loaded", metadata: ["cues": "\(runtime.bank.names.joined(separator: " "))",
                                                "dirs": "\(settings.sounds.joined(separator: ":"))",
                                                "config": "\(config.path ?? "none")"])

        // Mute at start: the flag, else the saved state, else the config.
        let store = StateStore(path: options.statePath)
        let saved = FileManager.default.fileExists(atPath: options.statePath) ? (try? store.load()) : nil
        let muted = options.muted ?? saved?.muted ?? config.muted ?? false

        let env = ProcessInfo.processInfo.environment
        let notifier = SystemdNotifier(environment: env)
        let activated = SocketActivation.inheritedSocket(environment: env)
        if activated == nil { try SocketFile.prepare(options.socketPath) }

        var engineConfig = AudioEngine.Configuration()
        engineConfig.voices = settings.voices
        engineConfig.idleCloseSeconds = settings.idleCloseSeconds
        engineConfig.hangOnPlayForTesting = options.hangAudioForTesting
        let log = logger
        let lastError = Mutex<String?>(nil)
        let sink = settings.sink.makeSink(latencyMs: settings.latencyMs)
        do { try sink.preflight() } catch {
            throw StartupError(message: "sink \(sink.spec): \(error.message)", exitCode: StartupError.configExit)
        }
        let engine = AudioEngine(sink: sink, configuration: engineConfig) { event in
            switch event {
            case .opened(let f, let kind):
                lastError.withLock { $0 = nil }
                log.info("audio device opened", metadata: ["sink.kind": "\(kind)", "sink.rate": "\(f.rate)", "sink.format": "\(f.sampleFormat.rawValue)",
                                                            "sink.period_frames": "\(f.periodFrames)", "sink.buffer_frames": "\(f.bufferFrames)"])
            case .openFailed(let e), .writeFailed(let e):
                // Logged once per distinct error, not on every retry.
                let isNew = lastError.withLock { last in defer { last = e }; return last != e }
                if isNew { log.error("audio device failed; reopening it", metadata: ["error": "\(e)"]) }
            case .stalled: log.error("audio device stalled (took no frames): reopened")
            case .lost: log.error("audio device lost (recovering made no progress): reopened")
            case .streamStopped: log.debug("audio stream stopped (idle)")
            case .closed: log.info("audio device closed")
            case .dropped(let cue, let owner, let late):
                log.warning("cue dropped: could not start in time", metadata: ["cue.name": "\(cue)", "app": "\(owner)", "late_ms": "\(late)"])
            case .stopped, .voiceEnded: break  // issues 13/14 wire these
            }
        }
        let opts = options
        let log2 = logger
        let daemon = Daemon(engine: engine, runtime: runtime, muted: muted, appMutes: saved?.appMutes ?? [:],
                            store: store, sessions: SessionRegistry(ttlSeconds: options.sessionTTLSeconds),
                            limits: options.limits, logger: logger,
                            loadRuntime: { () throws(LoadFailure) -> Runtime in
                                let rt = try opts.loadRuntime()
                                let now = opts.effective(rt.config)
                                if now.sink != settings.sink || now.latencyMs != settings.latencyMs || now.voices != settings.voices
                                    || now.idleCloseSeconds != settings.idleCloseSeconds {
                                    log2.warning("sink, latency_ms, voices and idle_close_s take effect at the next start")
                                }
                                return rt
                            },
                            onStatusChange: { notifier.notify("STATUS=" + $0) })
        if options.muted != nil { try? store.save(.init(muted: muted, appMutes: saved?.appMutes ?? [:])) }
        engine.start()

        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: 4096)
            .childChannelOption(ChannelOptions.allowRemoteHalfClosure, value: true)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(LineDecoder()))
                    try channel.pipeline.syncOperations.addHandler(ConnectionHandler(daemon: daemon))
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
            throw StartupError(message: "cannot listen on \(activated == nil ? options.socketPath : "the inherited socket"): \(error)", exitCode: 1)
        }
        // Only a socket cued created itself is chmod'ed and, at exit, unlinked.
        var socketInode: UInt64?
        if activated == nil {
            chmod(options.socketPath, 0o600)
            socketInode = SocketFile.inode(options.socketPath)
        }
        logger.info("cued \(CuedVersion.string) listening", metadata: [
            "socket": "\(activated == nil ? options.socketPath : "fd 3 (socket activation)")",
            "sink": "\(engine.sinkSpec)", "muted": "\(muted)"])
        notifier.notify("READY=1", "STATUS=" + daemon.statusLine())
        let watchdog = startWatchdog(engine: engine, notifier: notifier, environment: env, on: group.next())

        while true {
            let signal = Signals.wait(handled)
            if signal == SIGHUP {
                notifier.notify("RELOADING=1", "MONOTONIC_USEC=\(SystemdNotifier.monotonicMicroseconds())")
                _ = daemon.reload()
                notifier.notify("READY=1", "STATUS=" + daemon.statusLine())
                continue
            }
            logger.info("stopping", metadata: ["signal": "\(signal)"])
            notifier.notify("STOPPING=1")
            break
        }
        watchdog?.cancel()
        // Stop accepting, let playing cues finish (at most 500 ms), close the PCM.
        try? channel.close().wait()
        if !engine.shutdown(graceMs: 500) {
            logger.error("the audio thread did not stop within 1 s (a stuck device?); exiting without it")
        }
        if let socketInode, SocketFile.inode(options.socketPath) == socketInode { unlink(options.socketPath) }
        try? group.syncShutdownGracefully()
        logger.info("stopped")
    }

    /// WATCHDOG=1 at half systemd's interval, only while the audio thread is
    /// healthy (idle-waiting, or it turned its loop within half the interval).
    /// A hung audio thread stops the pings and systemd restarts cued.
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

enum SocketFile {
    /// Creates the socket's directory (0700) and clears a stale socket file.
    /// Refuses if a live daemon answers there, or if the path is not a socket.
    static func prepare(_ path: String) throws(StartupError) {
        let dir = (path as NSString).deletingLastPathComponent
        if !dir.isEmpty, !FileManager.default.fileExists(atPath: dir) {
            do {
                try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true,
                                                        attributes: [.posixPermissions: 0o700])
            } catch {
                throw StartupError(message: "cannot create socket directory \(dir): \(error.localizedDescription)", exitCode: 1)
            }
        }
        var st = stat()
        guard lstat(path, &st) == 0 else { return }
        guard (st.st_mode & S_IFMT) == S_IFSOCK else {
            throw StartupError(message: "\(path) exists and is not a socket; remove it or choose another --socket", exitCode: 1)
        }
        if isAnswering(path) {
            throw StartupError(message: "another cued is already running on \(path); not starting a second one", exitCode: 1)
        }
        unlink(path)  // stale: nobody listens
    }

    /// A live daemon accepts a connection; a stale socket file refuses it.
    static func isAnswering(_ path: String) -> Bool {
        (try? CueClient(path: path, timeoutSeconds: 1)) != nil
    }

    static func inode(_ path: String) -> UInt64? {
        var st = stat()
        return lstat(path, &st) == 0 ? UInt64(st.st_ino) : nil
    }
}

enum Signals {
    /// Blocks `signals` in the calling thread, and so in every thread it starts
    /// later (they inherit the mask); `wait` then takes them synchronously.
    static func blockForSigwait(_ signals: [Int32]) -> sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        for s in signals { sigaddset(&set, s) }
        pthread_sigmask(SIG_BLOCK, &set, nil)
        return set
    }

    /// The next of the blocked signals.
    static func wait(_ set: sigset_t) -> Int32 {
        var set = set
        while true {
            let s = sigwaitinfo(&set, nil)
            if s > 0 { return s }
        }
    }
}
