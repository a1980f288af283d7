// cued: the cue daemon. Argument parsing and wiring only.
import ArgumentParser
import CuedConfig
import CuedCore
import CuedProtocol
import CuedServer
import Foundation
import Logging

@main
struct Cued: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cued",
        abstract: "Plays short UI cues (psst1, psst2, pop…) the instant a client asks, over a Unix socket.",
        discussion: """
            Clients write one line per request: ping, play CUE [GAIN_DB], state pull|release|loading|idle,
            drag N, drop, mute, unmute, cues, status… Try: printf 'play pop\\n' | socat - UNIX-CONNECT:$XDG_RUNTIME_DIR/cued/cued.sock
            Settings not given as flags come from the config file ($XDG_CONFIG_HOME/cued/cued.toml).
            """,
        version: CuedVersion.string)

    @Option(help: "Socket path (default: $CUED_SOCKET, else $XDG_RUNTIME_DIR/cued/cued.sock).")
    var socket: String?

    @Option(help: "Config file (default: $XDG_CONFIG_HOME/cued/cued.toml, if it exists).")
    var config: String?

    @Option(name: .customLong("check-config"), help: "Check a config file (and the cues it names), print what is wrong, exit 0 or 78.")
    var checkConfig: String?

    @Option(name: .customLong("check-config-syntax"), help: .hidden)
    var checkConfigSyntax: String?

    @Option(help: "Audio output: alsa[:PCM], null, or wav:PATH (default alsa:default).")
    var sink: String?

    @Option(name: .customLong("latency-ms"), help: "Device buffer in ms; the period is about half (default 10).")
    var latencyMs: Int?

    @Option(help: "Concurrent voices; when all are busy the oldest is faded out and replaced (default 16).")
    var voices: Int?

    @Option(name: .customLong("idle-close-s"), help: "Close the audio device after this many seconds of silence (default 30).")
    var idleCloseS: Double?

    @Option(name: .customLong("session-ttl-s"), help: "Named refresh sessions expire after this many idle seconds.")
    var sessionTTLS: Double = 300

    @Option(name: .customLong("rate-limit"), help: "Cues a second one connection may start (0: no limit).")
    var rateLimit: Double = 200

    @Option(name: .customLong("max-clients"), help: "Connections at once; more get `err busy` and are closed.")
    var maxClients: Int = 256

    @Option(name: .customLong("sounds"), help: "A directory of cues (repeatable; replaces the default list).")
    var sounds: [String] = []

    @Flag(name: .customLong("muted"), help: "Start muted (overrides the saved state).")
    var startMuted = false

    @Flag(name: .customLong("unmuted"), help: "Start unmuted (overrides the saved state).")
    var startUnmuted = false

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: String = "info"

    func validate() throws {
        if let sink, !SinkSyntax.isValid(sink) || SinkSpec.parse(sink) == nil {
            if sink.hasPrefix("fault:"), case .failure(let e) = FaultSink.parse(String(sink.dropFirst(6))) {
                throw ValidationError(e.message)
            }
            throw ValidationError("unknown sink '\(sink)': use alsa[:PCM], null or wav:PATH")
        }
        if let latencyMs, !ConfigLoader.latencyRange.contains(latencyMs) { throw ValidationError("--latency-ms must be 1...1000") }
        if let voices, !ConfigLoader.voicesRange.contains(voices) { throw ValidationError("--voices must be 1...256") }
        if let idleCloseS, !ConfigLoader.idleCloseRange.contains(idleCloseS) { throw ValidationError("--idle-close-s must be 0...86400") }
        guard rateLimit >= 0, rateLimit.isFinite else { throw ValidationError("--rate-limit must be ≥ 0") }
        guard (1...100_000).contains(maxClients) else { throw ValidationError("--max-clients must be 1...100000") }
        guard sessionTTLS > 0, sessionTTLS.isFinite else { throw ValidationError("--session-ttl-s must be > 0") }
        guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("unknown --log-level '\(logLevel)'") }
        guard !(startMuted && startUnmuted) else { throw ValidationError("--muted and --unmuted exclude each other") }
    }

    func run() throws {
        if let checkConfigSyntax { ConfigGuard.syntaxChild(checkConfigSyntax) }
        // A parent may hand down a blocked signal mask (exec keeps it): unblock
        // everything so SIGTERM/SIGHUP reach cued's handlers.
        var none = sigset_t()
        sigemptyset(&none)
        pthread_sigmask(SIG_SETMASK, &none, nil)
        let env = ProcessInfo.processInfo.environment
        let level = Logger.Level(rawValue: logLevel)!
        LoggingSystem.bootstrap { StderrLogHandler(label: $0, level: level) }
        let logger = Logger(label: "cued")

        var options = DaemonOptions(
            socketPath: "",
            defaultConfigPath: ConfigLoader.defaultPath(environment: env),
            defaultSoundDirectories: SoundDirectories.defaults(environment: env),
            statePath: StateStore.defaultPath(environment: env))
        options.configPath = config
        options.sink = sink
        options.latencyMs = latencyMs
        options.voices = voices
        options.idleCloseSeconds = idleCloseS
        options.soundDirectories = sounds.isEmpty ? nil : sounds
        options.sessionTTLSeconds = sessionTTLS
        options.limits.playsPerSecond = rateLimit
        options.limits.maxClients = maxClients
        options.muted = startMuted ? true : (startUnmuted ? false : nil)
        options.hangAudioForTesting = env["CUED_TEST_HANG_AUDIO"] == "1"

        if let checkConfig { check(checkConfig, options) }

        switch SocketLocation.resolve(explicit: socket, environment: env) {
        case .success(let p): options.socketPath = p
        case .failure(let e):
            // Under socket activation the socket comes from systemd; no path is needed.
            guard SocketActivation.isActivated(environment: env) else { fail(e.message, code: 1) }
        }

        do {
            try Server(options: options, logger: logger).run()
        } catch let e as StartupError {
            fail(e.message, code: e.exitCode)
        }
    }

    /// `--check-config PATH`: the file's syntax, keys and ranges, then the cues it names.
    func check(_ path: String, _ base: DaemonOptions) -> Never {
        var options = base
        options.configPath = path
        do {
            let config = try DaemonOptions.loadGuarded(path)
            _ = try RuntimeLoader.load(config: config, directories: options.effective(config).sounds)
        } catch let e as ConfigErrors {
            FileHandle.standardError.write(Data((e.description + "\n").utf8))
            Foundation.exit(78)
        } catch {
            FileHandle.standardError.write(Data("\(error)\n".utf8))
            Foundation.exit(78)
        }
        print("\(path): ok")
        Foundation.exit(0)
    }

    func fail(_ message: String, code: Int32) -> Never {
        FileHandle.standardError.write(Data("cued: \(message)\n".utf8))
        Foundation.exit(code)
    }
}
