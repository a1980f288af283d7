// cued: the cue daemon. Argument parsing and wiring only. Plain Swift over
// Glibc (no Foundation, no ArgumentParser): the daemon stays small in memory
// and starts in a few milliseconds.
import CuedConfig
import CuedCore
import CuedProtocol
import CuedServer
import CuedSystem
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// To cued's stderr: fd 2 until `StderrDrain` takes it, then the original stderr.
func printErr(_ s: String) { LogWriter.write(s + "\n") }

func fail(_ message: String, code: Int32) -> Never {
    printErr("cued: " + message)
    exit(code)
}

/// EX_USAGE: a bad flag or value, with one line saying which.
func usageError(_ message: String) -> Never {
    printErr("cued: \(message) (see cued --help)")
    exit(64)
}

let help = """
    usage: cued [OPTIONS]
    Plays short UI cues (psst1, psst2, pop, fail…) the instant a client asks, over a Unix socket.
    Clients write one line per request: play CUE, state pull|release|loading|idle, drag N, drop,
    stop, mute, unmute, cues, status… Try:
      printf 'play pop\\n' | socat - UNIX-CONNECT:$XDG_RUNTIME_DIR/cued/cued.sock
    Settings not given as flags come from the config file, else the defaults shown.

    options:
      --socket PATH           socket (default: $CUED_SOCKET, else $XDG_RUNTIME_DIR/cued/cued.sock)
      --config PATH           config file (default: $XDG_CONFIG_HOME/cued/cued.toml, if it exists)
      --check-config PATH     check a config file and the cues it names; exit 0, or 78 with what is wrong
      --sink SPEC             auto, alsa[:PCM], pipewire[:TARGET], null or wav:PATH (default auto)
      --force                 let wav:PATH replace a file that is already there (else refused)
      --latency-ms N          device buffer in ms, 1…1000 (default: chosen for the device kind)
      --voices N              cues sounding at once, 1…256; the oldest is faded out for a new one (default 16)
      --idle-close-s S        close the device after S seconds of silence, 0…86400 (default 30)
      --session-ttl-s S       named refresh sessions expire after S idle seconds (default 300)
      --rate-limit N          cues a second one connection may start; 0: no limit (default 200)
      --max-clients N         connections at once, 1…100000; at the limit the longest idle one is
                              closed, else the new one gets `err busy` (default 256)
      --sounds DIR            a directory of cues; repeatable; replaces the default list
      --sound-budget-mb MB    memory for all decoded sound (cues, cache, playing, decoding), 1…65536;
                              past it a sound is refused with why (default 64)
      --muted, --unmuted      start muted or unmuted (overrides the saved state)
      --log-level L           trace, debug, info, notice, warning, error or critical (default info)
      -h, --help              this help
      --version               cued's version
    signals: TERM/INT stop (playing cues get up to 500 ms), HUP reloads the config and cues,
    USR1/USR2 and other stray signals are ignored.
    exit: 0 stopped, 1 cannot listen or run, 64 usage, 78 bad config, sink or cues.
    """

var options = CommandLineOptions()
var checkConfig: String?
var socketFlag: String?
var logLevel = Logger.Level.info

var args = Array(CommandLine.arguments.dropFirst())[...]
while let arg = args.popFirst() {
    // `--flag=value` and `--flag value` both work.
    var name = arg, inline: String?
    if arg.hasPrefix("--"), let eq = arg.firstIndex(of: "=") {
        name = String(arg[..<eq]); inline = String(arg[arg.index(after: eq)...])
    }
    func value() -> String {
        if let inline { return inline }
        guard let v = args.popFirst() else { usageError("\(name) needs a value") }
        return v
    }
    func number<T: LosslessStringConvertible & Comparable>(_ range: ClosedRange<T>) -> T {
        let v = value()
        guard let n = T(v), range.contains(n) else { usageError("\(name) must be \(range.lowerBound)…\(range.upperBound), got '\(v)'") }
        return n
    }
    func decimal(_ range: ClosedRange<Double>, _ what: String) -> Double {
        let v = value()
        guard let n = RequestParser.decimal(Substring(v)), range.contains(n) else {
            usageError("\(name) must be a number of \(what) in \(Request.number(range.lowerBound))…\(Request.number(range.upperBound)), got '\(v)'")
        }
        return n
    }
    func seconds(_ range: ClosedRange<Double>) -> Double { decimal(range, "seconds") }
    switch name {
    case "-h", "--help": print(help); exit(0)
    case "--version": print("cued \(CuedVersion.string)"); exit(0)
    case "--socket": socketFlag = value()
    case "--config": options.configPath = value()
    case "--check-config": checkConfig = value()
    case "--sink":
        let s = value()
        if case .failure(let e) = SinkSpec.parse(s) { usageError(e.message) }
        options.sink = s
    case "--latency-ms": options.latencyMs = number(ConfigLoader.latencyRange)
    case "--voices": options.voices = number(ConfigLoader.voicesRange)
    case "--idle-close-s": options.idleCloseSeconds = seconds(ConfigLoader.idleCloseRange)
    case "--session-ttl-s": options.sessionTTLSeconds = seconds(0.001...31_536_000)
    case "--rate-limit": options.limits.playsPerSecond = seconds(0...1_000_000)
    case "--max-clients": options.limits.maxClients = number(1...100_000)
    case "--sounds": options.soundDirectories = (options.soundDirectories ?? []) + [value()]
    case "--sound-budget-mb": options.soundBudgetMB = decimal(ConfigLoader.soundBudgetRange, "MiB")
    case "--force": options.overwriteRecording = true
    case "--muted": options.muted = true
    case "--unmuted": options.muted = false
    case "--log-level":
        let v = value()
        guard let l = Logger.Level(rawValue: v) else { usageError("unknown --log-level '\(v)' (trace, debug, info, notice, warning, error, critical)") }
        logLevel = l
    default:
        usageError(arg.hasPrefix("-") ? "unknown option '\(arg)'" : "unexpected argument '\(arg)'")
    }
}
if CommandLine.arguments.contains("--muted") && CommandLine.arguments.contains("--unmuted") {
    usageError("--muted and --unmuted exclude each other")
}


let env = Environment.current()
options.environment = env
options.hangAudioForTesting = env["CUED_TEST_HANG_AUDIO"] == "1"
options.spinAudioForTesting = env["CUED_TEST_SPIN_AUDIO"] == "1"
options.reloadDelayMsForTesting = env["CUED_TEST_RELOAD_DELAY_MS"].flatMap { Int($0) } ?? 0

if let checkConfig {
    switch options.check(configPath: checkConfig) {
    case .success(let line): print(line); exit(0)
    case .failure(let e): printErr(e.description); exit(78)
    }
}

switch SocketLocation.resolve(explicit: socketFlag, environment: env) {
case .success(let p): options.socketPath = p
case .failure(let e):
    // Under socket activation the socket comes from systemd; no path is needed.
    guard SocketActivation.isActivated(environment: env) else { fail(e.message, code: 1) }
}

// A parent may hand down a blocked signal mask (exec keeps it): start clean.
var none = sigset_t()
sigemptyset(&none)
pthread_sigmask(SIG_SETMASK, &none, nil)
StandardStreams.ensureOpen()
let journal = env["JOURNAL_STREAM"] != nil
let level = logLevel
LoggingSystem.bootstrap { StderrLogHandler(label: $0, level: level, journal: journal) }
// C libraries write to fd 2 themselves: from here on it is a pipe cued drains into its log.
StderrDrain.install(logger: Logger(label: "cued"))

do {
    try Server(options: options, logger: Logger(label: "cued")).run()
    exit(0)
} catch {
    fail(error.message, code: error.exitCode)
}
