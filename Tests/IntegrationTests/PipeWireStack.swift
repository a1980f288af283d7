import Foundation
import TestSupport

/// A private PipeWire desktop audio stack for tests: a session bus, pipewire
/// with a timer-clocked null sink (`nul`, from a drop-in config), wireplumber
/// and pipewire-pulse, all under a temp XDG_RUNTIME_DIR. Nothing outside the
/// temp dir is touched; every process is killed when the stack is released. Its programs run on
/// the test stack (`TestStack`: this machine's, or a Debian 13 root's).
final class PipeWireStack: @unchecked Sendable {
    static let tools = ["dbus-daemon", "pipewire", "wireplumber", "pipewire-pulse", "pactl", "parec", "pw-dump"]

    /// Why the stack cannot run here (no test stack, a missing tool), or nil.
    static var unavailableReason: String? {
        if let why = TestStack.unavailableReason { return "PipeWire tests skipped: \(why)" }
        let missing = tools.filter { !TestStack.hasProgram("/usr/bin/" + $0) }
        guard missing.isEmpty else {
            return "PipeWire tests skipped: \(missing.joined(separator: ", ")) not installed on \(TestStack.name) (make test-deps installs pipewire, pipewire-bin, pipewire-alsa, pipewire-pulse, wireplumber, dbus, pulseaudio-utils; Tests/stacks/debian13.packages the root's)"
        }
        return nil
    }

    let dir = TempDir()
    private var dbus: Subprocess?
    private var servers: [Subprocess] = []
    private(set) var recorders: [Subprocess] = []
    let environment: [String: String]
    /// Clients of another user (`DesktopUser`: cued as a user runs it) may connect.
    let forUser: Bool

    /// `forUser`: the servers' sockets are opened to a client of another uid (cued run as a desktop
    /// user; the servers and the recorders stay root's), the directories on the way made searchable.
    init(forUser: Bool = false) throws {
        self.forUser = forUser
        let rt = dir.file("rt"), cfg = dir.file("cfg")
        try FileManager.default.createDirectory(atPath: rt, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        if forUser { DesktopUser.traverse(dir.path); DesktopUser.traverse(rt) }
        try FileManager.default.createDirectory(atPath: cfg + "/pipewire/pipewire.conf.d", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: dir.file("home"), withIntermediateDirectories: true)
        // A sink clocked by a timer, like a sound card; it outlives server restarts' clients.
        try """
            context.objects = [
              { factory = adapter args = { factory.name = support.null-audio-sink node.name = nul
                media.class = Audio/Sink object.linger = true audio.position = [ FL FR ] audio.rate = 48000
                priority.driver = 2000 priority.session = 2000 } }
            ]
            """.write(toFile: cfg + "/pipewire/pipewire.conf.d/10-nul.conf", atomically: true, encoding: .utf8)
        var env = ProcessInfo.processInfo.environment
        env["XDG_RUNTIME_DIR"] = rt
        env["PIPEWIRE_RUNTIME_DIR"] = rt
        env["XDG_CONFIG_HOME"] = cfg
        env["HOME"] = dir.file("home")
        env["DBUS_SESSION_BUS_ADDRESS"] = "unix:path=\(rt)/bus"
        env["PULSE_SERVER"] = "unix:\(rt)/pulse/native"
        for key in ["PIPEWIRE_ALSA", "PULSE_PROP", "ALSA_CONFIG_PATH", "PIPEWIRE_REMOTE", "DISPLAY", "WAYLAND_DISPLAY"] { env.removeValue(forKey: key) }
        environment = env
        dbus = try Subprocess(onStack: "/usr/bin/dbus-daemon", ["--session", "--address=unix:path=\(rt)/bus", "--nofork", "--nopidfile"],
                              env: env, stderr: dir.file("dbus.log"))
        try startServers()
    }

    /// pipewire, then wireplumber and pipewire-pulse; returns once `nul` is the default sink at full volume.
    func startServers() throws {
        try startPipeWire()
        try startSessionManager()
    }

    /// pipewire alone (no session manager: it answers, and links no stream), as at login before
    /// WirePlumber is up.
    func startPipeWire() throws {
        let rt = environment["XDG_RUNTIME_DIR"]!
        let pw = try Subprocess(onStack: "/usr/bin/pipewire", [], env: environment, stderr: dir.file("pipewire.log"))
        servers.append(pw)
        guard eventually(interval: 0.02, { FileManager.default.fileExists(atPath: rt + "/pipewire-0") }) else {
            throw HarnessError.timeout("pipewire did not start: \(log("pipewire.log"))")
        }
        if forUser { chmod(rt + "/pipewire-0", 0o666) }
    }

    /// wireplumber and pipewire-pulse, once pipewire runs; returns once `nul` is the default sink at full volume.
    func startSessionManager() throws {
        servers.append(try Subprocess(onStack: "/usr/bin/wireplumber", [], env: environment, stderr: dir.file("wireplumber.log")))
        servers.append(try Subprocess(onStack: "/usr/bin/pipewire-pulse", [], env: environment, stderr: dir.file("pipewire-pulse.log")))
        guard eventually(interval: 0.02, { (try? self.pactl(["get-default-sink"]))?.out == "nul\n" }) else {
            throw HarnessError.timeout("the null sink did not become the default: \(log("wireplumber.log")) \(log("pipewire-pulse.log"))")
        }
        if forUser {
            let rt = environment["XDG_RUNTIME_DIR"]!
            DesktopUser.traverse(rt + "/pulse")
            chmod(rt + "/pulse/native", 0o666)
        }
        // Unity gain end to end, so the monitor carries exactly the samples played.
        _ = try pactl(["set-sink-volume", "nul", "100%"])
        _ = try pactl(["set-sink-mute", "nul", "0"])
    }

    /// Stops the sound servers (the session bus stays), as a crash or an update would.
    func stopServers() {
        for p in servers.reversed() { p.stop(grace: 3) }
        servers.removeAll()
        let rt = environment["XDG_RUNTIME_DIR"]!
        try? FileManager.default.removeItem(atPath: rt + "/pipewire-0")
        try? FileManager.default.removeItem(atPath: rt + "/pipewire-0.lock")
    }

    func restart() throws {
        stopServers()
        try startServers()
    }

    /// SIGSTOP/SIGCONT the servers: a graph that stops pulling (a stalled device).
    func freeze(_ frozen: Bool) { for p in servers { p.signal(frozen ? SIGSTOP : SIGCONT) } }

    /// Records the null sink's monitor (S16_LE stereo 48 kHz, raw) into `path`.
    func record(to path: String, sink: String = "nul") throws -> Subprocess {
        // Realtime where allowed (chrt): with the whole suite loading both cores, a recorder at
        // normal priority fell behind and the recording showed gaps cued never had (no xrun).
        let parec = ["/usr/bin/parec", "-d", "\(sink).monitor", "--raw", "--format=s16le", "--rate=48000", "--channels=2", "--latency-msec=50"]
        let chrt = "/usr/bin/chrt"
        let rt = TestStack.hasProgram(chrt) && (try? runOnStack(chrt, ["-f", "10", "/bin/true"]))?.status == 0
        let p = try Subprocess(onStack: rt ? chrt : parec[0], rt ? ["-f", "10"] + parec : Array(parec.dropFirst()),
                               env: environment, stdout: path, stderr: dir.file("parec.log"))
        recorders.append(p)
        // Recording once the stream is linked: some audio (zeros) has arrived.
        _ = eventually(interval: 0.02) { ((try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0) > 0 }
        return p
    }

    /// A second recorder of the same monitor, independent of the first: PipeWire's own
    /// `pw-record` (a native stream, not through pipewire-pulse), into a WAV at `path`.
    func recordNatively(to path: String) throws -> Subprocess {
        let args = ["--target", "nul", "-P", "{ stream.capture.sink = true }", "--format", "s16", "--rate", "48000",
                    "--channels", "2", "--latency", "1024", path]
        let chrt = "/usr/bin/chrt"
        let rt = TestStack.hasProgram(chrt) && (try? runOnStack(chrt, ["-f", "10", "/bin/true"]))?.status == 0
        let p = try Subprocess(onStack: rt ? chrt : "/usr/bin/pw-record", rt ? ["-f", "10", "/usr/bin/pw-record"] + args : args,
                               env: environment, stderr: dir.file("pw-record.log"))
        recorders.append(p)
        _ = eventually { ((try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0) > 4_096 }
        return p
    }

    /// An ALSA PCM `pulsecap`: libasound2-plugins' `pulse` behind a `file` plugin that
    /// writes to `path` exactly the frames cued hands it (cued's own capture). With it
    /// in `ALSA_CONFIG_PATH`, the returned environment runs cued with `--sink alsa:pulsecap`.
    func captureEnvironment(to path: String) throws -> [String: String] {
        let conf = dir.file("capture.conf")
        try """
            pcm.pulsecap { type file slave.pcm "pulse" file "\(path)" format "raw" }
            """.write(toFile: conf, atomically: true, encoding: .utf8)
        var env = environment
        env["ALSA_CONFIG_PATH"] = "/usr/share/alsa/alsa.conf:" + conf
        return env
    }

    func pactl(_ args: [String]) throws -> (status: Int32, out: String, err: String) {
        try runOnStack("/usr/bin/pactl", args, env: environment, timeout: 10)
    }

    /// The playback streams in `pw-dump`: (state, props) per node.
    func outputStreams() throws -> [(state: String, props: [String: Any])] { try nodes("Stream/Output/Audio") }

    /// The names of the nodes the node named `name` is linked to (its output ports' links), from `pw-dump`.
    func links(from name: String) throws -> Set<String> {
        let r = try runOnStack("/usr/bin/pw-dump", [], env: environment, timeout: 10)
        guard let objects = try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [[String: Any]] else { return [] }
        var names: [Int: String] = [:]
        for o in objects where o["type"] as? String == "PipeWire:Interface:Node" {
            if let id = o["id"] as? Int, let props = (o["info"] as? [String: Any])?["props"] as? [String: Any] {
                names[id] = props["node.name"] as? String
            }
        }
        var out = Set<String>()
        for o in objects where o["type"] as? String == "PipeWire:Interface:Link" {
            guard let info = o["info"] as? [String: Any], let from = info["output-node-id"] as? Int,
                  let to = info["input-node-id"] as? Int, names[from] == name, let target = names[to] else { continue }
            out.insert(target)
        }
        return out
    }

    /// The nodes of a media class in `pw-dump`: (state, props) per node.
    func nodes(_ mediaClass: String) throws -> [(state: String, props: [String: Any])] {
        let r = try runOnStack("/usr/bin/pw-dump", [], env: environment, timeout: 10)
        guard let objects = try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [[String: Any]] else { return [] }
        return objects.compactMap { o in
            guard let info = o["info"] as? [String: Any], let props = info["props"] as? [String: Any],
                  props["media.class"] as? String == mediaClass else { return nil }
            return (info["state"] as? String ?? "?", props)
        }
    }

    func log(_ name: String) -> String { (try? String(contentsOfFile: dir.file(name), encoding: .utf8))?.suffix(400).description ?? "" }

    deinit {
        for p in recorders { p.signal(SIGKILL); p.wait(timeout: 5) }
        freeze(false)
        for p in servers { p.signal(SIGKILL); p.wait(timeout: 5) }
        dbus?.signal(SIGKILL)
        dbus?.wait(timeout: 5)
    }
}

/// A raw S16_LE stereo recording, cut into the sounds it holds.
struct Recording {
    let samples: [Int16]

    /// A WAV file's S16 samples (the "data" chunk; a size left unset by a killed writer is taken as "to the end").
    init(wav path: String) throws {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        var i = 12
        var data: ArraySlice<UInt8> = []
        while i + 8 <= bytes.count {
            let id = String(decoding: bytes[i..<(i + 4)], as: UTF8.self)
            let size = Int(bytes[i + 4]) | Int(bytes[i + 5]) << 8 | Int(bytes[i + 6]) << 16 | Int(bytes[i + 7]) << 24
            if id == "data" {
                let end = size == 0 || size == 0xFFFF_FFFF || i + 8 + size > bytes.count ? bytes.count : i + 8 + size
                data = bytes[(i + 8)..<end]
                break
            }
            i += 8 + size + (size & 1)
        }
        var out = [Int16](repeating: 0, count: data.count / 2)
        for k in out.indices { out[k] = Int16(bitPattern: UInt16(data[data.startIndex + 2 * k]) | UInt16(data[data.startIndex + 2 * k + 1]) << 8) }
        samples = out
    }

    init(path: String) throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        samples = data.withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
    }

    init(samples: [Int16]) { self.samples = samples }

    /// Runs of sound (left channel not zero), separated by at least `gap` silent frames:
    /// (first frame, frames) each.
    func sounds(gap: Int = 240) -> [(start: Int, frames: Int)] {
        var runs: [(Int, Int)] = []
        var start: Int?, lastLoud = 0
        let frames = samples.count / 2
        for f in 0..<frames where samples[2 * f] != 0 || samples[2 * f + 1] != 0 {
            if let s = start, f - lastLoud > gap { runs.append((s, lastLoud - s + 1)); start = nil }
            if start == nil { start = f }
            lastLoud = f
        }
        if let s = start { runs.append((s, lastLoud - s + 1)) }
        return runs
    }

    /// For a failure message: how the first sound that is not exactly `cue` differs.
    func firstMismatch(_ sounds: [(start: Int, frames: Int)], _ cue: [Int16]) -> String {
        for s in sounds {
            let got = Array(samples[(2 * s.start)..<min(samples.count, 2 * s.start + cue.count)])
            if got != cue {
                let i = zip(got, cue).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? got.count
                return "sound at frame \(s.start) (\(s.frames) frames): sample \(i) is \(i < got.count ? got[i] : 0), expected \(i < cue.count ? cue[i] : 0); "
                    + "got \(got.prefix(6)) expected \(cue.prefix(6))"
            }
        }
        return "every sound matches"
    }

    /// Where `cue` (stereo) occurs exactly, as first frames.
    func occurrences(of cue: [Int16]) -> [Int] {
        guard cue.count >= 4, samples.count >= cue.count else { return [] }
        var found: [Int] = []
        var i = 0
        while i + cue.count <= samples.count {
            if samples[i] == cue[0] && samples[i + 1] == cue[1] && samples[i + 2] == cue[2]
                && Array(samples[i..<(i + cue.count)]) == cue {
                found.append(i / 2)
                i += cue.count
            } else {
                i += 2
            }
        }
        return found
    }
}
