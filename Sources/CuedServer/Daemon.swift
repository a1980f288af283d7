import CuedAudio
import CuedConfig
import CuedCore
import CuedProtocol
import Foundation
import Logging
import Synchronization

public enum CuedVersion {
    public static let string = "0.1.0"
}

/// The daemon's shared state and its answer to every request. Called from
/// the event loop; hands cues to the audio engine through its queue and never
/// waits on audio.
public final class Daemon: Sendable {
    public let engine: AudioEngine
    public let logger: Logger
    private let runtime: Mutex<Runtime>
    private let mutedFlag: Atomic<Bool>
    /// Per-app mutes set at run time (`mute app NAME`); they override `[apps.NAME] muted`.
    private let appMutes: Mutex<[String: Bool]>
    /// Plays per app, for `status` (bounded: app names come from clients).
    private let appPlays = Mutex<[String: Int]>([:])
    static let maxTrackedApps = 256
    private let store: StateStore?
    private let sessions: Mutex<SessionRegistry>
    /// Re-reads the config and cues (off the audio thread); set by the server.
    private let loadRuntime: @Sendable () throws(LoadFailure) -> Runtime
    public let clients = Atomic<Int>(0)
    /// Called when something `statusLine` shows changes (systemd's STATUS=).
    private let onStatusChange: @Sendable (String) -> Void

    public init(engine: AudioEngine, runtime: Runtime, muted: Bool, appMutes: [String: Bool] = [:],
                store: StateStore?, sessions: SessionRegistry = SessionRegistry(), limits: Limits = Limits(), logger: Logger,
                loadRuntime: @escaping @Sendable () throws(LoadFailure) -> Runtime,
                onStatusChange: @escaping @Sendable (String) -> Void = { _ in }) {
        self.engine = engine
        self.runtime = Mutex(runtime)
        self.mutedFlag = Atomic(muted)
        self.appMutes = Mutex(appMutes)
        self.store = store
        self.sessions = Mutex(sessions)
        self.limits = limits
        self.logger = logger
        self.loadRuntime = loadRuntime
        self.onStatusChange = onStatusChange
    }

    public var muted: Bool { mutedFlag.load(ordering: .relaxed) }
    public var current: Runtime { runtime.withLock { $0 } }
    public var cueBank: CueBank { current.bank }

    /// What a connection carries between requests.
    public struct ConnectionState: Sendable {
        public var privateSession = RefreshSession()
        public var sessionName: String?
        public var app: String?
        /// Cues this connection may still start (nil: no limit).
        public var plays: TokenBucket?
        public init(playsPerSecond: Double = 0, now: UInt64 = MonotonicClock.now()) {
            if playsPerSecond > 0 { plays = TokenBucket(rate: playsPerSecond, now: now) }
        }
    }

    /// Limits that keep one client from drowning the others.
    public struct Limits: Sendable {
        /// Cues a second per connection (token bucket, 1 s burst); 0: unlimited.
        public var playsPerSecond: Double = 200
        /// Connections at once; more get `err busy` and are closed.
        public var maxClients = 256
        public init() {}
    }

    public let limits: Limits
    public let rateLimited = Atomic<Int>(0)
    public let refusedBusy = Atomic<Int>(0)

    /// A token for one more cue on this connection, or the reply refusing it.
    private func allowPlay(_ conn: inout ConnectionState, _ now: UInt64) -> Reply? {
        guard conn.plays != nil, !conn.plays!.take(now: now) else { return nil }
        rateLimited.add(1, ordering: .relaxed)
        return .err(.rateLimited, "more than \(Request.number(limits.playsPerSecond)) cues a second on this connection")
    }

    // MARK: - Requests

    /// Parses one request line and answers it. `receivedAt` is when the line
    /// was read (monotonic ns).
    public func respond(to line: [UInt8], connection: inout ConnectionState, receivedAt: UInt64) -> Reply {
        let request: Request
        do {
            request = try RequestParser.parse(line)
        } catch {
            logger.debug("bad request", metadata: ["error.code": "\(error.code.rawValue)"])
            return error.reply
        }
        logger.debug("request", metadata: ["request": "\(request.line)"])
        switch request {
        case .ping:
            return .ok("pong")
        case .play(let name, let gainDB):
            let rt = current
            guard let cue = rt.bank[name] else { return unknownCue(name, rt) }
            if isMuted(app: connection.app, rt) { return .ok("muted") }
            if let refused = allowPlay(&connection, receivedAt) { return refused }
            return submit(cue, gainDB: rt.gainDB(request: gainDB, cue: name, app: connection.app),
                          app: connection.app, receivedAt: receivedAt) ?? .ok(nil)
        case .state(let target, let quiet):
            return perform(withSession(&connection, now: receivedAt) { $0.set(target, quiet: quiet) }, &connection, receivedAt)
        case .drag(let points):
            return perform(withSession(&connection, now: receivedAt) { $0.drag(points) }, &connection, receivedAt)
        case .drop:
            return perform(withSession(&connection, now: receivedAt) { $0.drop() }, &connection, receivedAt)
        case .threshold(let points):
            withSession(&connection, now: receivedAt) { $0.threshold = points }
            return .ok(Request.number(points))
        case .session(let name):
            if let name { connection.sessionName = name }
            let s = withSession(&connection, now: receivedAt) { $0 }
            return .ok("\(connection.sessionName ?? "-") \(s.state.rawValue) \(Request.number(s.threshold))")
        case .mute:
            setMuted(true)
            return .ok("muted")
        case .unmute:
            setMuted(false)
            return .ok("unmuted")
        case .app(let name):
            connection.app = name
            return .ok(name)
        case .muteApp(let name):
            setAppMuted(name, true)
            return .ok("muted \(name)")
        case .unmuteApp(let name):
            setAppMuted(name, false)
            return .ok("unmuted \(name)")
        case .reload:
            return reload()
        case .cues:
            return .ok(cueBank.names.joined(separator: " "))
        case .status:
            return .ok(status().encoded)
        }
    }

    /// Runs `body` on the connection's current session (private or named).
    private func withSession<R: Sendable>(_ conn: inout ConnectionState, now: UInt64, _ body: (inout RefreshSession) -> R) -> R {
        guard let name = conn.sessionName else { return body(&conn.privateSession) }
        return sessions.withLock { $0.withSession(name, now: now, body) }
    }

    /// Turns a session's outcome into sound and a reply: `ok CUE`, `ok -`, `ok muted`.
    private func perform(_ outcome: RefreshSession.Outcome, _ conn: inout ConnectionState, _ receivedAt: UInt64) -> Reply {
        let rt = current
        var cueName: String?
        if case .play(let name) = outcome.action { cueName = name }
        if let from = outcome.from, let to = outcome.to { cueName = rt.cue(from: from, to: to, default: cueName) }
        guard let name = cueName else {
            if outcome.prewarm && !isMuted(app: conn.app, rt) { engine.submit(.prewarm) }
            return .ok("-")
        }
        if isMuted(app: conn.app, rt) { return .ok("muted") }
        guard let cue = rt.bank[name] else { return .err(.internal, "transition cue '\(name)' is not loaded") }
        if let refused = allowPlay(&conn, receivedAt) { return refused }  // the state has moved on regardless
        return submit(cue, gainDB: rt.gainDB(request: 0, cue: name, app: conn.app), app: conn.app, receivedAt: receivedAt) ?? .ok(name)
    }

    private func unknownCue(_ name: String, _ rt: Runtime) -> Reply {
        .err(.unknownCue, "no cue named '\(name)' (cues: \(rt.bank.names.joined(separator: " ")))")
    }

    /// Queues a cue; nil on success, an error reply if the audio queue is full.
    private func submit(_ cue: Cue, gainDB: Double, app: String?, receivedAt: UInt64) -> Reply? {
        guard engine.submit(.play(cue, gain: decibelsToGain(gainDB), requestTime: receivedAt, owner: app ?? "", waitID: 0)) else {
            return .err(.internal, "audio queue is full; try again")
        }
        if let app {
            appPlays.withLock { plays in
                if plays[app] != nil || plays.count < Self.maxTrackedApps { plays[app, default: 0] += 1 }
            }
        }
        return nil
    }

    // MARK: - Mute

    /// Global mute wins; then a run-time app mute; then the config's `[apps.NAME] muted`.
    func isMuted(app: String?, _ rt: Runtime) -> Bool {
        muted || app.map { appMuted($0, rt) } ?? false
    }

    /// The app's own mute, regardless of the global one.
    func appMuted(_ app: String, _ rt: Runtime) -> Bool {
        appMutes.withLock { $0[app] } ?? rt.config.apps[app]?.muted ?? false
    }

    public func setMuted(_ value: Bool) {
        let old = mutedFlag.exchange(value, ordering: .relaxed)
        if value { engine.submit(.fadeOutAll) }
        guard old != value else { return }
        logger.info(value ? "muted" : "unmuted")
        onStatusChange(statusLine())
        save()
    }

    public func setAppMuted(_ app: String, _ value: Bool) {
        let changed = appMutes.withLock { m in
            defer { m[app] = value }
            return m[app] != value
        }
        guard changed else { return }
        logger.info(value ? "app muted" : "app unmuted", metadata: ["app": "\(app)"])
        save()
    }

    private func save() {
        guard let store else { return }
        let state = StateStore.Saved(muted: muted, appMutes: appMutes.withLock { $0 })
        do {
            try store.save(state)
        } catch {
            logger.error("cannot save state", metadata: ["file": "\(store.path)", "error": "\(error)"])
        }
    }

    // MARK: - Reload

    /// Re-reads the config and every cue and swaps them in only if all load;
    /// otherwise the old ones stay. Voices already playing are untouched.
    public func reload() -> Reply {
        do {
            let new = try loadRuntime()
            let old = runtime.withLock { rt in defer { rt = new }; return rt }
            if let m = new.config.muted, m != old.config.muted { setMuted(m) }
            logger.info("reloaded", metadata: ["cues": "\(new.bank.names.joined(separator: " "))",
                                                "config": "\(new.config.path ?? "none")"])
            onStatusChange(statusLine())
            return .ok("reloaded")
        } catch {
            logger.error("reload failed; keeping the old configuration", metadata: ["error": "\(error)"])
            return .err(.reloadFailed, error.description)
        }
    }

    // MARK: - Status

    /// One line for systemd's STATUS=: cues, sink state, mute.
    public func statusLine() -> String {
        let s = engine.stats
        return "\(cueBank.names.count) cues, sink \(engine.sinkSpec) \(s.sinkState.rawValue)"
            + (s.sinkError.map { " (\($0))" } ?? "") + (muted ? ", muted" : ", unmuted")
    }

    public func status() -> JSON {
        let s = engine.stats
        func n(_ v: Int) -> JSON { .number(Double(v)) }
        func count(_ a: borrowing Atomic<Int>) -> JSON { n(a.load(ordering: .relaxed)) }
        let f = s.sinkFormat
        var sink: [(String, JSON)] = [("spec", .string(engine.sinkSpec)), ("state", .string(s.sinkState.rawValue))]
        sink.append(("rate", f.map { n($0.rate) } ?? .null))
        sink.append(("channels", f.map { n($0.channels) } ?? .null))
        sink.append(("format", f.map { .string($0.sampleFormat.rawValue) } ?? .null))
        sink.append(("period_frames", f.map { n($0.periodFrames) } ?? .null))
        sink.append(("buffer_frames", f.map { n($0.bufferFrames) } ?? .null))
        sink.append(("error", s.sinkError.map(JSON.string) ?? .null))
        sink.append(("kind", s.sinkKind.map(JSON.string) ?? .null))
        sink.append(("device_delay_us", s.deviceDelayMicroseconds.map(n) ?? .null))

        let rt = current
        var cues: [(String, JSON)] = []
        for name in rt.bank.names {
            let c = rt.bank[name]!
            cues.append((name, .object([("frames", n(c.frames)), ("played", count(c.played))])))
        }

        let plays = appPlays.withLock { $0 }
        var appNames = Set(plays.keys).union(rt.config.apps.keys)
        appNames.formUnion(appMutes.withLock { Array($0.keys) })
        let apps: [(String, JSON)] = appNames.sorted().map { name in
            (name, .object([("played", n(plays[name] ?? 0)), ("muted", .bool(appMuted(name, rt)))]))
        }

        var latency: [(String, JSON)] = [("p50", .null), ("p99", .null), ("max", .null)]
        if let l = s.latencyPercentiles() {
            latency = [("p50", n(Int(l.p50))), ("p99", n(Int(l.p99))), ("max", n(Int(l.max)))]
        }
        latency.append(("measures", .string(EngineStats.latencyMeasures)))

        var out: [(String, JSON)] = [("version", .string(CuedVersion.string)), ("protocol", n(ProtocolLimits.version))]
        out.append(("pid", n(Int(getpid()))))
        out.append(("muted", .bool(muted)))
        out.append(("config", rt.config.path.map(JSON.string) ?? .null))
        out.append(("sink", .object(sink)))
        out.append(("cues", .object(cues)))
        out.append(("played", count(s.played)))
        out.append(("voices_active", count(s.voicesActive)))
        out.append(("voices_stolen", count(s.stolen)))
        out.append(("clipped_samples", count(s.clipped)))
        out.append(("xruns", count(s.xruns)))
        out.append(("dropped", count(s.dropped)))
        out.append(("stalls", count(s.stalls)))
        out.append(("devices_lost", count(s.lost)))
        out.append(("audio_thread", .string(s.threadPriorityName)))
        out.append(("clients", count(clients)))
        out.append(("rate_limited", count(rateLimited)))
        out.append(("refused_busy", count(refusedBusy)))
        let now = MonotonicClock.now()
        out.append(("sessions", n(sessions.withLock { $0.count(now: now) })))
        out.append(("apps", .object(apps)))
        out.append(("latency_us", .object(latency)))
        return .object(out)
    }
}
