import CuedClient
import CuedProtocol
import Foundation
import Testing
import TestSupport

/// Fixture cues written by the tests themselves (not the real cues), so the
/// tests don't depend on the cues' content: pseudo-random 16-bit samples whose
/// first sample is non-zero.
enum Fixture {
    static func samples(seed: UInt64, frames: Int, amplitude: Int16 = 8000) -> [Int16] {
        var s = seed
        return (0..<frames).map { i in
            s = s &* 6364136223846793005 &+ 1442695040888963407
            let v = Int16(truncatingIfNeeded: Int64(s >> 33) % Int64(amplitude))
            return i == 0 ? (v == 0 ? 1 : v) : v
        }
    }

    static func constant(_ value: Int16, frames: Int) -> [Int16] { [Int16](repeating: value, count: frames) }

    /// Writes psst1/psst2/pop (and any extras) as 48 kHz mono 16-bit WAVs.
    static func writeCues(into dir: String, _ cues: [String: [Int16]]) throws {
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        for (name, pcm) in cues { try WAV.write(dir + "/" + name + ".wav", int16: pcm, sampleRate: 48_000, channels: 1) }
    }

    static let standard: [String: [Int16]] = [
        "psst1": samples(seed: 1, frames: 4_800),
        "psst2": samples(seed: 2, frames: 7_200),
        "pop": samples(seed: 3, frames: 2_400),
    ]
}

/// A real `cued` process on a temp socket with a pinned environment. Killed
/// when released.
final class DaemonHarness: @unchecked Sendable {
    let dir = TempDir()
    private(set) var process: Subprocess!
    /// Where clients connect: cued's socket, or (cued run as a user) a proxy that the user runs.
    let socketPath: String
    let soundsDir: String
    /// cued run as a desktop user answers only that user's clients: the test's own (root's) reach
    /// it through `socat` run as the user, listening at `socketPath`.
    private var proxy: Subprocess?

    var environment: [String: String] {
        var env = ProcessInfo.processInfo.environment
        env["XDG_RUNTIME_DIR"] = dir.file("run")
        env["XDG_STATE_HOME"] = dir.file("state")
        env["XDG_DATA_HOME"] = dir.file("data")
        env["XDG_CONFIG_HOME"] = dir.file("config")
        env["HOME"] = dir.path
        env.removeValue(forKey: "CUED_SOCKET")
        env.removeValue(forKey: "JOURNAL_STREAM")
        // Never the tester's own session bus: cued would answer feedbackd's clients there.
        env.removeValue(forKey: "DBUS_SESSION_BUS_ADDRESS")
        // Nor the tester's sound server: a PipeWire or PulseAudio named by variable (a test's own
        // stack passes its variables in `extraEnv`).
        for key in env.keys where key.hasPrefix("PIPEWIRE_") || key.hasPrefix("PULSE_") { env.removeValue(forKey: key) }
        return env
    }

    /// Starts cued with `args` (plus --socket and --sounds unless given) and waits until it answers.
    /// `config`: the text of `$XDG_CONFIG_HOME/cued/cued.toml` (%DIR% replaced), if any.
    /// `launcher`: a command cued is run under (e.g. `prlimit --nofile=32`).
    /// `asUser`: cued runs as a desktop user (`DesktopUser`: no privilege, its own directories).
    init(cues: [String: [Int16]] = Fixture.standard, args: [String], extraEnv: [String: String] = [:],
         config: String? = nil, waitReady: Bool = true, launcher: [String] = [], stderrPath: String? = nil,
         asUser: Bool = false) throws {
        // Tests not run as root are a user's already: cued runs as that user.
        let asUser = asUser && getuid() == 0
        let cuedSocket: String
        if let i = args.firstIndex(of: "--socket"), i + 1 < args.count { cuedSocket = args[i + 1] }
        else { cuedSocket = dir.file("run/cued/cued.sock") }
        socketPath = asUser ? dir.file("user.sock") : cuedSocket
        soundsDir = dir.file("sounds")
        // What a login manager makes: XDG_RUNTIME_DIR, 0700 (cued creates only its cued/ in it).
        mkdir(dir.file("run"), 0o700)
        try Fixture.writeCues(into: soundsDir, cues)
        if let config { try writeConfig(config) }
        // %DIR% in an argument stands for this harness's temp directory.
        var full = args.map { $0.replacingOccurrences(of: "%DIR%", with: dir.path) }
        if !args.contains("--socket") { full += ["--socket", cuedSocket] }
        if !args.contains("--sounds") { full += ["--sounds", soundsDir] }
        var command = launcher + [TestPaths.binary("cued")] + full
        if asUser {
            for sub in ["state", "data", "config"] { mkdir(dir.file(sub), 0o755) }
            DesktopUser.own(dir.path)
            chmod(dir.path, 0o755)
            // `launcher` runs first, as root (what sets up the user's world), then the user's.
            command = launcher + DesktopUser.launcher + [try DesktopUser.binary("cued")] + full
            proxy = try Subprocess(onStack: DesktopUser.launcher[0], Array(DesktopUser.launcher.dropFirst())
                                   + ["/usr/bin/socat", "UNIX-LISTEN:\(socketPath),fork,mode=600", "UNIX-CONNECT:\(cuedSocket)"],
                                   stderr: dir.file("proxy.log"))
        }
        // On a Debian 13 test stack, cued (and its launcher) runs inside the root, on its libraries.
        process = try Subprocess(onStack: command[0], Array(command.dropFirst()), env: environment.merging(extraEnv) { $1 },
                                 stderr: stderrPath ?? dir.file("stderr.log"))
        if waitReady { try waitUntilAnswering() }
    }

    func waitUntilAnswering(timeout: Double = 15) throws {
        let up = eventually(timeout: timeout, interval: 0.02) {
            guard process.isRunning else { return true }
            guard let c = try? CueClient(path: socketPath, timeoutSeconds: 2) else { return false }
            return (try? c.request("ping")) == "ok pong"
        }
        if !process.isRunning { throw HarnessError.exited(process.terminationStatus, readStderr()) }
        if !up { throw HarnessError.timeout("cued did not answer on \(socketPath)") }
    }

    var capturePath: String { dir.file("capture.wav") }
    var configPath: String { dir.file("config/cued/cued.toml") }

    func writeConfig(_ text: String) throws {
        try FileManager.default.createDirectory(atPath: dir.file("config/cued"), withIntermediateDirectories: true)
        try text.replacingOccurrences(of: "%DIR%", with: dir.path).write(toFile: configPath, atomically: true, encoding: .utf8)
    }

    /// `status`, read back into the one Status type cued encodes it with.
    func status() throws -> Status {
        let reply = try request("status")
        guard reply.hasPrefix("ok "), let s = Status.parse(String(reply.dropFirst(3))) else { throw HarnessError.badStatus(reply) }
        return s
    }

    func client() throws -> CueClient { try CueClient(path: socketPath, timeoutSeconds: 10) }

    /// A client cued counts as its only one: the connections before it (the harness's
    /// ping, other requests) are gone on cued's side too. For tests that fill the slots.
    func onlyClient() throws -> CueClient {
        let c = try client()
        let alone = eventually {
            guard let reply = try? c.request("status"), let s = Status.parse(String(reply.dropFirst(3))) else { return false }
            return s.clients == 1
        }
        if !alone { throw HarnessError.timeout("cued still counts other clients: \(try status().clients)") }
        return c
    }

    /// Waits until what was asked has started (`status wait`: the audio thread took it)
    /// and every voice has ended. True once quiet; false at the deadline.
    @discardableResult
    func quiet(timeout: Double = 10) throws -> Bool {
        _ = try request("status wait")
        return eventually(timeout: timeout) { (try? status().voicesActive) == 0 }
    }

    /// One request on a fresh connection.
    /// One request on a new connection. Unanswered (cued's client gives up after 10 s), the
    /// error says where each of cued's threads was blocked and the end of its log: a daemon
    /// that did not answer is the bug to find, not the test's.
    func request(_ line: String) throws -> String {
        do {
            return try client().request(line)
        } catch {
            throw HarnessError.timeout("\(line): \(error); cued's threads: \(threadStates()); its log: \(readStderr().suffix(2500))")
        }
    }

    /// SIGTERM and wait (up to 10 s, then SIGKILL); returns the exit status.
    @discardableResult
    func stop() -> Int32 { process.stop() }

    /// Waits for the process to exit by itself.
    func waitForExit(timeout: Double = 15) -> Int32? { process.wait(timeout: timeout) }

    /// After a SIGTERM: cued exits 0 having run its whole stop ("stopped"), not
    /// ended by its exit deadline, and it left the audio thread behind only if
    /// `leavesAudioThread`. How long that takes is for `make bench`. Returns the log.
    @discardableResult
    func expectStopsByItself(leavesAudioThread: Bool = false, sourceLocation: SourceLocation = #_sourceLocation) -> String {
        #expect(waitForExit(timeout: 60) == 0, sourceLocation: sourceLocation)
        let log = readStderr()
        #expect(log.contains("info cued: stopped"), "\(log)", sourceLocation: sourceLocation)
        #expect(!log.contains("stopping took longer"), "\(log)", sourceLocation: sourceLocation)
        #expect(log.contains("the audio thread did not stop in time (a stuck device?); exiting without it") == leavesAudioThread,
                "\(log)", sourceLocation: sourceLocation)
        return log
    }

    var pid: pid_t { process.pid }

    func readStderr() -> String { (try? String(contentsOfFile: dir.file("stderr.log"), encoding: .utf8)) ?? "" }

    /// Each thread of cued as "name: wchan (syscall nr args…)", for a failure's message: where a
    /// daemon that did not answer was blocked.
    func threadStates() -> String {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.sorted().map { tid in
            let task = "/proc/\(pid)/task/\(tid)/"
            func read(_ f: String) -> String {
                ((try? String(contentsOfFile: task + f, encoding: .utf8)) ?? "?").trimmingCharacters(in: .whitespacesAndNewlines)
            }
            return "\(read("comm")): \(read("wchan")) (\(read("syscall").split(separator: " ").prefix(3).joined(separator: " ")))"
        }.joined(separator: "; ") + stacks()
    }

    /// Each thread's call stack (gdb, where the machine has it: a daemon that stopped answering
    /// is caught in the act), one line per thread: its name and the functions, innermost first.
    func stacks() -> String {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/gdb"),
              let r = try? runProcess("/usr/bin/gdb", ["-p", "\(pid)", "-batch", "-nx", "-ex", "set pagination off",
                                                    "-ex", "thread apply all bt 14"], timeout: 60) else { return "" }
        var threads: [String] = []
        for line in r.out.split(separator: "\n") {
            if line.hasPrefix("Thread ") {
                threads.append(String(line.split(separator: "\"").dropFirst().first ?? "?") + ":")
            } else if line.hasPrefix("#"), !threads.isEmpty {
                // "#3  0x... in name (args) at dir/file:line" or "#0  name (args) at …": a C function
                // by its name, a Swift one (mangled) by its file and line.
                var f = line.drop { $0 != " " }.drop { $0 == " " }
                if f.hasPrefix("0x"), let r = f.range(of: " in ") { f = f[r.upperBound...] }
                let name = f.prefix { $0 != " " && $0 != "(" }
                let place = f.range(of: ") at ", options: .backwards).map { f[$0.upperBound...].split(separator: "/").last ?? "" }
                threads[threads.count - 1] += " " + (name.hasPrefix("$s") ? String(place ?? name.prefix(40)) : String(name) + (place.map { "@\($0)" } ?? ""))
            }
        }
        return threads.isEmpty ? "" : "; its stacks: " + threads.joined(separator: " | ")
    }

    deinit {
        process?.stop()
        proxy?.signal(SIGKILL)
        proxy?.wait(timeout: 5)
    }
}

enum HarnessError: Error {
    case exited(Int32, String)
    case timeout(String)
    case badStatus(String)
}

extension Array where Element == Int16 {
    /// Mono → interleaved stereo, as cued plays it.
    var stereo: [Int16] { flatMap { [$0, $0] } }
}
