// cued: the cue daemon. Argument parsing and wiring only.
import ArgumentParser
import CuedProtocol
import CuedServer
import Foundation
import Logging

@main
struct Cued: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cued",
        abstract: "Plays short UI cues (psst1, psst2, pop…) the instant a client asks, over a Unix socket.",
        discussion: """
            Clients write one line per request: ping, play CUE [GAIN_DB], state pull|release|loading|idle,
            mute, unmute, cues, status. Try: printf 'play pop\\n' | socat - UNIX-CONNECT:$XDG_RUNTIME_DIR/cued/cued.sock
            """,
        version: CuedVersion.string)

    @Option(help: "Socket path (default: $CUED_SOCKET, else $XDG_RUNTIME_DIR/cued/cued.sock).")
    var socket: String?

    @Option(help: "Audio output: alsa[:PCM], null, or wav:PATH.")
    var sink: String = "alsa:default"

    @Option(name: .customLong("latency-ms"), help: "Device buffer in ms (the period is about half).")
    var latencyMs: Int = 10

    @Option(help: "Concurrent voices; when all are busy the oldest is faded out and replaced.")
    var voices: Int = 16

    @Option(name: .customLong("idle-close-s"), help: "Close the audio device after this many seconds of silence.")
    var idleCloseS: Double = 30

    @Option(name: .customLong("session-ttl-s"), help: "Named refresh sessions expire after this many idle seconds.")
    var sessionTTLS: Double = 300

    @Option(name: .customLong("sounds"), help: "A directory of cues (repeatable; replaces the default list).")
    var sounds: [String] = []

    @Flag(name: .customLong("muted"), help: "Start muted (overrides the saved state).")
    var startMuted = false

    @Flag(name: .customLong("unmuted"), help: "Start unmuted (overrides the saved state).")
    var startUnmuted = false

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: String = "info"

    func validate() throws {
        guard SinkSpec.parse(sink) != nil else {
            throw ValidationError("unknown sink '\(sink)': use alsa[:PCM], null or wav:PATH")
        }
        guard (1...1000).contains(latencyMs) else { throw ValidationError("--latency-ms must be 1...1000") }
        guard (1...256).contains(voices) else { throw ValidationError("--voices must be 1...256") }
        guard sessionTTLS > 0, sessionTTLS.isFinite else { throw ValidationError("--session-ttl-s must be > 0") }
        guard idleCloseS >= 0, idleCloseS.isFinite else { throw ValidationError("--idle-close-s must be ≥ 0") }
        guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("unknown --log-level '\(logLevel)'") }
        guard !(startMuted && startUnmuted) else { throw ValidationError("--muted and --unmuted exclude each other") }
    }

    func run() async throws {
        // A parent may hand down a blocked signal mask (exec keeps it): unblock
        // everything so SIGTERM/SIGHUP reach cued's handlers.
        var none = sigset_t()
        sigemptyset(&none)
        pthread_sigmask(SIG_SETMASK, &none, nil)
        let env = ProcessInfo.processInfo.environment
        let level = Logger.Level(rawValue: logLevel)!
        LoggingSystem.bootstrap { StderrLogHandler(label: $0, level: level) }
        let logger = Logger(label: "cued")

        let socketPath: String
        switch SocketLocation.resolve(explicit: socket, environment: env) {
        case .success(let p): socketPath = p
        case .failure(let e):
            // Under socket activation the socket comes from systemd; no path is needed.
            guard SocketActivation.isActivated(environment: env) else { fail(e.message, code: 1) }
            socketPath = ""
        }
        var options = DaemonOptions(
            socketPath: socketPath,
            soundDirectories: sounds.isEmpty ? SoundDirectories.defaults(environment: env) : sounds,
            statePath: StateStore.defaultPath(environment: env))
        options.sink = SinkSpec.parse(sink)!
        options.latencyMs = latencyMs
        options.voices = voices
        options.idleCloseSeconds = idleCloseS
        options.sessionTTLSeconds = sessionTTLS
        options.hangAudioForTesting = env["CUED_TEST_HANG_AUDIO"] == "1"
        options.muted = startMuted ? true : (startUnmuted ? false : nil)

        do {
            try await Server(options: options, logger: logger).run()
        } catch let e as StartupError {
            fail(e.message, code: e.exitCode)
        }
    }

    func fail(_ message: String, code: Int32) -> Never {
        FileHandle.standardError.write(Data("cued: \(message)\n".utf8))
        Foundation.exit(code)
    }
}
