import CuedAudio
import CuedConfig
import CuedCore
import CuedProtocol
import CuedSystem
#if canImport(Glibc)
import Glibc
#endif

/// What `cued` was told on its command line. Optional settings are nil when
/// the flag was not given: then the config file, then the default, applies.
public struct CommandLineOptions: Sendable {
    public var socketPath = ""
    /// `--config PATH` (must exist); nil: the default path, if anything is there.
    public var configPath: String?
    public var sink: String?
    public var latencyMs: Int?
    public var voices: Int?
    public var idleCloseSeconds: Double?
    public var soundDirectories: [String]?
    public var muted: Bool?
    /// `--sound-budget-mb MB`.
    public var soundBudgetMB: Double?
    /// `--force`: `wav:PATH` may replace a file that is already there.
    public var overwriteRecording = false
    public var sessionTTLSeconds = 300.0
    public var limits = Daemon.Limits()
    /// The process environment, read once at start.
    public var environment: [String: String] = [:]
    /// Test hook (CUED_TEST_HANG_AUDIO=1): the audio thread hangs on the first cue.
    public var hangAudioForTesting = false
    /// Test hook (CUED_TEST_SPIN_AUDIO=1): the audio thread spins on the first cue.
    public var spinAudioForTesting = false
    /// Test hook (CUED_TEST_RELOAD_DELAY_MS=N): every reload takes N ms longer,
    /// as one decoding many long cues does, so tests can show who waits for it.
    public var reloadDelayMsForTesting = 0

    public init() {}

    var home: String { Environment.home(environment) }
    public var defaultConfigPath: String { ConfigLoader.defaultPath(environment: environment) }
    public var statePath: String { StateFile.defaultPath(environment: environment) }
    public var defaultSoundDirectories: [String] { SoundDirectories.defaults(environment: environment) }

    /// Reads the config file: the explicit one (an error if missing), else
    /// the default one if anything is at that path (a dangling symlink or a
    /// FIFO there is an error, not "no config"), else none.
    public func loadConfig() throws(ConfigErrors) -> Config {
        let path: String
        if let configPath { path = configPath } else {
            guard FileSystem.entry(defaultConfigPath) != .none else { return Config() }
            path = defaultConfigPath
        }
        return try ConfigLoader.load(path: path, home: home)
    }

    /// The settings in force: flag, else config, else default.
    public func effective(_ c: Config) -> Settings {
        var s = Settings()
        s.sink = (try? SinkSpec.parse(sink ?? c.sink ?? "auto").get()) ?? .auto
        s.latencyMs = latencyMs ?? c.latencyMs
        s.voices = voices ?? c.voices ?? 16
        s.idleCloseSeconds = idleCloseSeconds ?? c.idleCloseS ?? 30
        s.sounds = soundDirectories ?? c.sounds ?? defaultSoundDirectories
        s.theme = c.theme ?? "freedesktop"
        s.themeCacheBytes = Int((c.themeCacheMB ?? Settings.defaultThemeCacheMB) * 1_048_576)
        s.soundBudgetBytes = Int((soundBudgetMB ?? c.soundBudgetMB ?? Settings.defaultSoundBudgetMB) * 1_048_576)
        s.stream = c.stream
        return s
    }

    /// Loads the config and every cue it and the directories name (blocking:
    /// call it off the event loop), charged to `budget` (see `RuntimeLoader.load`).
    public func loadRuntime(budget: SoundBudget? = nil, reuse: [FileIdentity: SoundBuffer] = [:],
                            cancelled: @escaping @Sendable () -> Bool = { false }) throws(LoadFailure) -> (Runtime, warnings: [String]) {
        var waited = 0
        while waited < reloadDelayMsForTesting {
            if cancelled() { throw .cancelled }
            usleep(10_000)
            waited += 10
        }
        var config: Config
        do { config = try loadConfig() } catch { throw LoadFailure(error) }
        if muted != nil { config.muted = nil }  // the flag wins
        let settings = effective(config)
        return try RuntimeLoader.load(config: config, settings: settings, environment: environment, budget: budget, reuse: reuse,
                                      cancelled: cancelled)
    }

    /// `--check-config PATH`: the file's syntax, keys and ranges, then the cues it names
    /// (within the memory budget it sets).
    public func check(configPath path: String) -> Result<String, LoadFailure> {
        var o = self
        o.configPath = path
        do {
            _ = try o.loadRuntime(budget: SoundBudget())
            return .success("\(path): ok")
        } catch {
            return .failure(error)
        }
    }
}

/// The settings in force, resolved once from flags, config and defaults.
public struct Settings: Sendable, Equatable {
    public static let defaultThemeCacheMB = 16.0
    /// See `SoundBudget.defaultLimitBytes`.
    public static let defaultSoundBudgetMB = Double(SoundBudget.defaultLimitBytes >> 20)
    public var sink = SinkSpec.auto
    /// nil: chosen for the device's kind.
    public var latencyMs: Int?
    public var voices = 16
    public var idleCloseSeconds = 30.0
    public var sounds: [String] = []
    public var theme = "freedesktop"
    public var themeCacheBytes = 16 << 20
    /// The memory budget for decoded sound (`SoundBudget`).
    public var soundBudgetBytes = SoundBudget.defaultLimitBytes
    /// `[stream]`: overrides of the sound-server stream's properties.
    public var stream: [String: String] = [:]

    public init() {}
}

/// What only a start applies (cued.toml(5)): the settings of the device and the stream, and
/// what the D-Bus face is started with, as cued started with them; a reload names each key
/// of its config changed since, which waits for the next start.
struct StartOnly: Sendable, Equatable {
    struct Key: Sendable, Equatable {
        /// As cued.toml(5) names it.
        var name: String
        var value: String
    }
    private(set) var keys: [Key]
    /// `[desktop] follow`: turned off, a reload applies it (the desktop's settings are read no
    /// more); turned on, it waits, as nothing watches the desktop that was not watched at start.
    private(set) var follows: Bool

    init(_ settings: Settings, _ config: Config) {
        keys = [Key(name: "sink", value: "\(settings.sink)"), Key(name: "latency_ms", value: settings.latencyMs.map(String.init) ?? "auto"),
                Key(name: "voices", value: "\(settings.voices)"), Key(name: "idle_close_s", value: "\(settings.idleCloseSeconds)"),
                Key(name: "[stream]", value: "\(settings.stream.sorted { $0.key < $1.key })"),
                Key(name: "[dbus] enabled", value: "\(config.dbus.enabled)"), Key(name: "[dbus] feedback", value: "\(config.dbus.feedback)"),
                Key(name: "[dbus] replace", value: "\(config.dbus.replace)"),
                Key(name: "[notifications] enabled", value: "\(config.notifications.enabled)")]
        follows = config.desktop.follow
    }

    init(_ runtime: Runtime) { self.init(runtime.settings, runtime.config) }

    /// The keys `reloaded` sets otherwise than these, which wait for the next start; in the config's order.
    func waiting(_ reloaded: StartOnly) -> [String] {
        var names = zip(keys, reloaded.keys).filter { $0.value != $1.value }.map(\.0.name)
        if !follows && reloaded.follows { names.append("[desktop] follow") }
        return names
    }

    /// The warning a reload gives for keys that wait (status's `warnings`, which `cuectl reload` prints).
    static func warning(_ names: [String]) -> String {
        "changed since cued started, but read only at start: \(names.joined(separator: ", ")) "
            + "(a restart applies \(names.count == 1 ? "it" : "them"): systemctl --user restart cued, or stop cued and start it again)"
    }
}

/// `--sink SPEC`: `auto`, `alsa[:PCM]`, `pipewire[:TARGET]`, `null`, `wav:PATH`, or `fault:SPEC` for tests.
public enum SinkSpec: Sendable, Equatable, CustomStringConvertible {
    /// One of the others, picked at start (`AutoSink`).
    case auto
    case alsa(String)
    /// A native PipeWire stream; the target node (name or serial), nil: the default.
    case pipewire(String?)
    case null
    case wav(String)
    /// A fault-injecting sink for tests (see `FaultSink`).
    case fault(String)

    public static func parse(_ s: String) -> Result<SinkSpec, SinkError> {
        if let problem = SinkSyntax.problem(s) { return .failure(SinkError(problem)) }
        if s.hasPrefix("fault:") {
            let spec = String(s.dropFirst(6))
            if case .failure(let e) = FaultSink.parse(spec) { return .failure(e) }
            return .success(.fault(spec))
        }
        if s == "auto" { return .success(.auto) }
        if s == "alsa" { return .success(.alsa("default")) }
        if s == "null" { return .success(.null) }
        if s.hasPrefix("alsa:") { return .success(.alsa(String(s.dropFirst(5)))) }
        if s == "pipewire" { return .success(.pipewire(nil)) }
        if s.hasPrefix("pipewire:") { return .success(.pipewire(String(s.dropFirst(9)))) }
        return .success(.wav(String(s.dropFirst(4))))
    }

    public var description: String {
        switch self {
        case .auto: return "auto"
        case .alsa(let pcm): return "alsa:" + pcm
        case .pipewire(let target): return target.map { "pipewire:" + $0 } ?? "pipewire"
        case .null: return "null"
        case .wav(let path): return "wav:" + path
        case .fault(let spec): return "fault:" + spec
        }
    }
}

/// A start-up failure with the exit code cued should end with.
public struct StartupError: Error, CustomStringConvertible {
    public let message: String
    public let exitCode: Int32
    public init(_ message: String, exitCode: Int32) { self.message = message; self.exitCode = exitCode }
    public var description: String { message }
    public static let configExit: Int32 = 78  // EX_CONFIG
}

public enum SoundDirectories {
    /// The installed (or source tree) cues, then the user's own.
    public static func defaults(environment: [String: String]) -> [String] {
        var dirs: [String] = []
        let exe = FileSystem.executablePath ?? CommandLine.arguments[0]
        let exeDir = Path.directory(exe)
        let installed = Path.normalize(exeDir + "/../share/cued/cues")
        if FileSystem.isDirectory(installed) {
            dirs.append(installed)
        } else {
            // Running from a build tree (.build/release/cued): the repo's Sounds/.
            var dir = exeDir
            for _ in 0..<5 {
                if FileSystem.isRegularFile(dir + "/Sounds/psst1.wav") { dirs.append(dir + "/Sounds"); break }
                dir = Path.directory(dir)
            }
        }
        dirs.append(XDGDirectory.path("XDG_DATA_HOME", else: ".local/share", environment: environment) + "/cued/sounds")
        return dirs
    }
}
