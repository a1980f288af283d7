// cuectl: talks to cued. Plain Swift + Glibc (no Foundation, no
// ArgumentParser): it runs on a tool's critical path, so start-up is kept lean.
// What the command line means is decided in CuectlCommands (tested without a
// daemon); this file does the I/O.
import CuedClient
import CuedProtocol
import CuectlCommands
#if canImport(Glibc)
import Glibc
#endif

func printErr(_ s: String) {
    let line = s + "\n"
    _ = line.withCString { write(2, $0, strlen($0)) }
}

func die(_ message: String, _ code: Int32) -> Never {
    printErr("cuectl: " + message)
    exit(code)
}

func environment(_ key: String) -> String? {
    guard let v = getenv(key) else { return nil }
    let s = String(cString: v)
    return s.isEmpty ? nil : s
}

/// Reads a small file (a /proc entry) without Foundation.
func readSmallFile(_ path: String) -> String? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var buf = [UInt8](repeating: 0, count: 256)
    let n = read(fd, &buf, buf.count)
    return n > 0 ? String(decoding: buf[0..<n], as: UTF8.self) : nil
}

/// This executable's own path (for `config check`'s cued beside it and shell-init's snippet).
func executablePath() -> String? {
    var exe = [CChar](repeating: 0, count: 4096)
    let n = readlink("/proc/self/exe", &exe, exe.count - 1)
    guard n > 0 else { return nil }
    return String(decoding: exe[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

func currentDirectory() -> String {
    var buf = [UInt8](repeating: 0, count: 4096)
    let ok = buf.withUnsafeMutableBufferPointer { p in
        p.withMemoryRebound(to: CChar.self) { getcwd($0.baseAddress, $0.count) != nil }
    }
    guard ok, let end = buf.firstIndex(of: 0) else { return environment("PWD") ?? "/" }
    return String(decoding: buf[..<end], as: UTF8.self)
}

let invocation: Invocation
do {
    invocation = try CommandParser.parse(Array(CommandLine.arguments.dropFirst()), cwd: currentDirectory())
} catch {
    die("\(error.message) (see cuectl --help)", ExitCode.usage)
}

/// The app the cues are for: --app (typed on this command line: refused if not
/// a label), else $CUED_APP, else a name derived from `fallback`; the last two
/// sanitized, as a label set long ago must never block the command it labels.
func appName(fallback: String?) -> String? {
    if let app = invocation.app { return app }
    return CommandParser.appName(environment: environment("CUED_APP"), fallback: fallback)
}

func socketPath() -> Result<String, SocketLocationError> {
    var env: [String: String] = [:]
    for key in ["CUED_SOCKET", "XDG_RUNTIME_DIR"] { env[key] = environment(key) }
    return SocketLocation.resolve(explicit: invocation.socket, environment: env)
}

/// `app NAME` and `session NAME`, sent before the request on the same connection.
func preamble(app: String?) -> [String] {
    var lines: [String] = []
    if let app { lines.append(Request.app(app).line) }
    if let session = invocation.session { lines.append(Request.session(session).line) }
    return lines
}

switch invocation.action {
case .help:
    print(CuectlHelp.text)
    exit(0)

case .version:
    print("cuectl \(CuectlHelp.version)")
    exit(0)

case .shellInit(let shell):
    // A relative --socket is made absolute: the shell's directory changes.
    let socket = invocation.socket.map { $0.hasPrefix("/") ? $0 : currentDirectory() + "/" + $0 }
    print(ShellInit.snippet(shell, cuectl: executablePath() ?? "cuectl", socket: socket, app: invocation.app), terminator: "")
    exit(0)

case .canberra(let on):
    var env: [String: String] = [:]
    for key in ["HOME", "XDG_CONFIG_HOME", "CANBERRA_DRIVER"] { env[key] = environment(key) }
    Canberra.run(on, environment: env, socket: try? socketPath().get())

case .doctor:
    var env: [String: String] = [:]
    for key in ["HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_RUNTIME_DIR", "CANBERRA_DRIVER"] { env[key] = environment(key) }
    var status: Status?
    var why: String?
    var whyPop: WhyReport?
    var path: String?
    switch socketPath() {
    case .failure(let e): why = e.message
    case .success(let p):
        path = p
        do {
            let client = try CueClient(path: p)
            client.setTimeout(milliseconds: 5000)
            let reply = try client.request("status wait")
            if reply.hasPrefix("ok ") { status = Status.parse(String(reply.dropFirst(3))) } else { why = reply }
            if status != nil, let r = try? client.request("why \(WhyReport.defaultCue)"), r.hasPrefix("ok ") {
                whyPop = WhyReport.parse(String(r.dropFirst(3)))
            }
        } catch {
            why = "\(error)"
        }
    }
    var card = false
    if let dir = opendir("/dev/snd") {
        while let e = readdir(dir) {
            let name = withUnsafeBytes(of: e.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name.hasPrefix("pcmC") && name.hasSuffix("p") { card = true }
        }
        closedir(dir)
    }
    let report = Doctor.report(status: status, noDaemon: why, socket: path, environment: env, soundCard: card,
                               exists: { access($0, F_OK) == 0 }, canberra: Canberra.facts(environment: env, status: status), why: whyPop)
    print(report.lines.joined(separator: "\n"))
    exit(report.exitCode)

case .configCheck(let explicit):
    // `cued --check-config` does the checking, so cuectl itself stays free of
    // the TOML library (it starts on every cue).
    let path: String
    if let explicit { path = explicit } else {
        let base = environment("XDG_CONFIG_HOME") ?? ((environment("HOME") ?? "") + "/.config")
        path = base + "/cued/cued.toml"
        if access(path, F_OK) != 0 {
            print("no config file at \(path): the config is optional, cued runs on its defaults")
            exit(0)
        }
    }
    let dir = executablePath().map { String($0[..<($0.lastIndex(of: "/") ?? $0.startIndex)]) } ?? ""
    let beside = dir + "/cued"
    let argv: [String] = [access(beside, X_OK) == 0 ? beside : "cued", "--check-config", path]
    let cargs = argv.map { strdup($0) } + [nil]
    execvp(cargs[0]!, cargs)
    die("cannot run cued to check the config: \(String(cString: strerror(errno)))", ExitCode.noDaemon)

case .run(let command):
    let path = try? socketPath().get()
    Run.run(command, socketPath: path, preamble: preamble(app: appName(fallback: command[0])),
            namedSession: invocation.session != nil)

case .request(let request, let render):
    let path: String
    switch socketPath() {
    case .success(let p): path = p
    case .failure(let e): die(e.message, ExitCode.usage)
    }
    let parent = readSmallFile("/proc/\(getppid())/comm")?.split(separator: "\n").first.map(String.init)
    let app = appName(fallback: parent)
    let lines = preamble(app: app)
    let reply: String
    do {
        let client = try CueClient(path: path)
        client.setTimeout(milliseconds: ReplyTimeout.milliseconds(for: request))
        // Preamble lines (app, session) go in the same write as the request.
        try client.send(Array((lines + [request.line]).map { $0 + "\n" }.joined().utf8))
        for p in lines {
            let r = try client.readLine()
            if !r.hasPrefix("ok") { die("\(p): \(r)", ExitCode.errorReply) }
        }
        reply = try client.readLine()
        if reply == "ok", request.playsACue, let status = client.status("status wait"), let warning = PlayWarning.text(status) {
            printErr(warning)
        }
        if reply == "ok reloaded", case .reload = request, let status = client.status() {
            for w in status.warnings { printErr("cuectl: warning: \(w)") }
        }
        if reply == "ok 0", case .stop = request, let status = client.status(),
           let hint = StopHint.text(reply: reply, request: request, app: app, voicesActive: status.voicesActive) {
            printErr(hint)
        }
    } catch {
        if case .noDaemon = error {
            var env: [String: String] = [:]
            for key in ["HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME"] { env[key] = environment(key) }
            let installed = NoDaemonHint.unitDirectories(environment: env).contains { access($0 + "/cued.socket", F_OK) == 0 }
            die("\(error)\n" + NoDaemonHint.text(unitsInstalled: installed), ExitCode.noDaemon)
        }
        if case .timedOut = error {
            let (message, code) = ReplyTimeout.outcome(for: request)
            die(message, code)
        }
        die("\(error)", ExitCode.noDaemon)
    }
    var outcome = ReplyInterpreter.outcome(reply, render: render)
    if render == .why, reply.hasPrefix("ok "), let report = WhyReport.parse(String(reply.dropFirst(3))) {
        // libcanberra's routing is the session's, which cuectl sees and cued does not.
        var env: [String: String] = [:]
        for key in ["HOME", "XDG_CONFIG_HOME", "CANBERRA_DRIVER"] { env[key] = environment(key) }
        outcome = WhyRender.outcome(report, canberra: Canberra.facts(environment: env, status: nil))
    }
    if let out = outcome.stdout { print(out) }
    if let err = outcome.stderr { printErr(err) }
    exit(outcome.exitCode)
}
