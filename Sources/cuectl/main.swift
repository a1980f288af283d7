// cuectl: talks to cued. Plain Swift + Glibc (no Foundation, no
// ArgumentParser): it runs on a tool's critical path, so start-up is kept lean.
import CuedClient
import CuedProtocol
#if canImport(Glibc)
import Glibc
#endif

let usage = """
    usage: cuectl [--socket PATH] [--session NAME] [--app NAME] COMMAND
      ping                      check that cued answers
      play CUE [--gain DB]      play a cue (gain -60…12 dB)
      state pull|release|loading|idle [--quiet]
                                drive the refresh state; prints the cue that sounded or -
                                (--quiet: set it without any cue)
      drag POINTS               report the pull distance; prints the cue or -
      drop                      the finger lifted; prints the cue or -
      threshold POINTS          the session's release threshold (default 65)
      session [NAME]            show (or bind to) a named session: NAME STATE THRESHOLD
      --session NAME            run the command in the shared session NAME (state
                                survives between cuectl calls)
      --app NAME                the app the cue is for (default: $CUED_APP, else the
                                name of cuectl's parent process)
      mute | unmute             silence all cues (persists across restarts)
      mute app NAME | unmute app NAME
                                silence one app's cues
      reload                    re-read the config and cues (all or nothing)
      config check [PATH]       validate a config file without a daemon (exit 78 if bad)
      cues                      list loaded cues
      status [--json]           daemon, device and latency figures
    exit: 0 ok, 1 error reply, 64 usage, 69 no daemon
    """

func printErr(_ s: String) {
    let line = s + "\n"
    _ = line.withCString { write(2, $0, strlen($0)) }
}

func die(_ message: String, _ code: Int32) -> Never {
    printErr("cuectl: " + message)
    exit(code)
}

var args = Array(CommandLine.arguments.dropFirst())
var socketFlag: String?
var sessionFlag: String?
var appFlag: String?
var quiet = false
var json = false
var gain: String?
var words: [String] = []
var i = 0
while i < args.count {
    let a = args[i]
    switch a {
    case "--socket":
        guard i + 1 < args.count else { die("--socket needs a path", 64) }
        socketFlag = args[i + 1]; i += 1
    case "--gain":
        guard i + 1 < args.count else { die("--gain needs a number of dB", 64) }
        gain = args[i + 1]; i += 1
    case "--session":
        guard i + 1 < args.count else { die("--session needs a name", 64) }
        sessionFlag = args[i + 1]; i += 1
    case "--app":
        guard i + 1 < args.count else { die("--app needs a name", 64) }
        appFlag = args[i + 1]; i += 1
    case "--quiet": quiet = true
    case "--json": json = true
    case "-h", "--help", "help": print(usage); exit(0)
    default:
        if a.hasPrefix("--socket=") { socketFlag = String(a.dropFirst(9)) }
        else if a.hasPrefix("--gain=") { gain = String(a.dropFirst(7)) }
        else if a.hasPrefix("--session=") { sessionFlag = String(a.dropFirst(10)) }
        else if a.hasPrefix("--app=") { appFlag = String(a.dropFirst(6)) }
        else { words.append(a) }
    }
    i += 1
}

guard let verb = words.first else { printErr(usage); exit(64) }

/// Reads a small file (a /proc entry) without Foundation.
func readSmallFile(_ path: String) -> String? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var buf = [UInt8](repeating: 0, count: 256)
    let n = read(fd, &buf, buf.count)
    return n > 0 ? String(decoding: buf[0..<n], as: UTF8.self) : nil
}

/// `config check [PATH]` runs `cued --check-config`, so cuectl itself stays
/// free of the TOML library (it starts on every cue).
if verb == "config" {
    guard words.count >= 2, words.count <= 3, words[1] == "check" else { printErr(usage); exit(64) }
    var path: String
    if words.count == 3 { path = words[2] } else {
        let base = getenv("XDG_CONFIG_HOME").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
            ?? ((getenv("HOME").map { String(cString: $0) } ?? "") + "/.config")
        path = base + "/cued/cued.toml"
    }
    var exe = [CChar](repeating: 0, count: 4096)
    let n = readlink("/proc/self/exe", &exe, exe.count - 1)
    let dir = n > 0 ? String(decoding: exe[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self).split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/") : ""
    let beside = dir + "/cued"
    let argv: [String] = [access(beside, X_OK) == 0 ? beside : "cued", "--check-config", path]
    let cargs = argv.map { strdup($0) } + [nil]
    execvp(cargs[0]!, cargs)
    die("cannot run cued to check the config: \(String(cString: strerror(errno)))", 69)
}

/// The app this cue is for: --app, else $CUED_APP, else the parent process's name.
func appName(_ flag: String?) -> String? {
    var name = flag ?? getenv("CUED_APP").map { String(cString: $0) }
    if name == nil || name!.isEmpty {
        name = readSmallFile("/proc/\(getppid())/comm")?.split(separator: "\n").first.map(String.init)
    }
    guard let raw = name, !raw.isEmpty else { return nil }
    // A label, never a path: anything but letters, digits, . _ - becomes '-'.
    let clean = String(raw.unicodeScalars.prefix(64).map { c -> Character in
        (c.isASCII && (c.properties.isAlphabetic || ("0"..."9").contains(c) || c == "." || c == "_" || c == "-")) ? Character(c) : "-"
    })
    return Label.isValid(clean) ? clean : nil
}

let line: String
switch (verb, words.count) {
case ("ping", 1), ("mute", 1), ("unmute", 1), ("cues", 1), ("status", 1), ("drop", 1), ("session", 1), ("reload", 1): line = verb
case ("mute", 3) where words[1] == "app", ("unmute", 3) where words[1] == "app": line = "\(verb) app \(words[2])"
case ("play", 2): line = gain.map { "play \(words[1]) \($0)" } ?? "play \(words[1])"
case ("state", 2): line = "state \(words[1])" + (quiet ? " quiet" : "")
case ("state", 3) where words[2] == "quiet": line = "state \(words[1]) quiet"
case ("drag", 2), ("threshold", 2), ("session", 2): line = "\(verb) \(words[1])"
default: printErr(usage); exit(64)
}

var env: [String: String] = [:]
for key in ["CUED_SOCKET", "XDG_RUNTIME_DIR"] { if let v = getenv(key) { env[key] = String(cString: v) } }
let path: String
switch SocketLocation.resolve(explicit: socketFlag, environment: env) {
case .success(let p): path = p
case .failure(let e): die(e.message, 64)
}

let reply: String
do {
    let client = try CueClient(path: path)
    // Preamble lines (app, session) go in the same write as the request.
    var preamble: [String] = []
    if let app = appName(appFlag) { preamble.append("app \(app)") }
    if let sessionFlag { preamble.append("session \(sessionFlag)") }
    try client.send(Array((preamble + [line]).map { $0 + "\n" }.joined().utf8))
    for p in preamble {
        let r = try client.readLine()
        if !r.hasPrefix("ok") { die("\(p): \(r)", 1) }
    }
    reply = try client.readLine()
} catch {
    if case .noDaemon = error {
        die("\(error)\n  start it with:  systemctl --user start cued.socket   (or run `cued` in a terminal)", 69)
    }
    die("\(error)", 69)
}

if reply.hasPrefix("err ") {
    let rest = reply.dropFirst(4)
    let code = rest.prefix { $0 != " " }
    let message = rest.dropFirst(code.count).drop { $0 == " " }
    die("\(code): \(message)", 1)
}
guard reply == "ok" || reply.hasPrefix("ok ") else { die("unexpected reply: \(reply)", 1) }
let payload = reply.count > 3 ? String(reply.dropFirst(3)) : ""

switch verb {
case "status" where !json:
    guard let s = try? JSON.parse(payload) else { print(payload); exit(0) }
    print(StatusTable.render(s))
case "play":
    if payload == "muted" { print("muted: cue not played") }
default:
    if !payload.isEmpty { print(payload) }
}
exit(0)
