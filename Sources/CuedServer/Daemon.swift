import CuedAudio
import CuedConfig
import CuedCore
import CuedProtocol
import Logging
import NIOCore
import NIOPosix
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A request's answer: now, later (the connection holds its next lines until
/// then), or a last line before the connection closes.
enum Response {
    case now(Reply)
    case later(EventLoopFuture<Reply>)
    case close(Reply)
}

/// The daemon's state and its answer to every request. Confined to the event
/// loop: every method runs there (the signal thread and the audio thread hop
/// onto it). Blocking work runs in lanes and completes back on the loop: reloads
/// on `reloads` (one at a time), decoding and listing the theme on `decoding` (a
/// share per client, a deadline), state saves on the saver's own thread; the
/// audio engine is fed through its queue and never waited on.
public final class Daemon: @unchecked Sendable {
    public let loop: any EventLoop
    public let engine: AudioEngine
    public let logger: Logger
    public let limits: Limits
    private var runtime: Runtime
    private(set) var muted: Bool
    /// Per-app mutes set at run time (`mute app NAME`); they override `[apps.NAME] muted`.
    private var appMutes: [String: Bool]
    /// Plays and drops per app, for `status` (bounded: app names come from clients).
    private var appCounts: [String: Status.App] = [:]
    static let maxTrackedApps = 256
    private var sessions: SessionRegistry
    private let saver: StateSaver?
    private let reloads: NIOThreadPool
    private let decoding: DecodeLane
    private let sounds: SoundLibrary
    /// Re-reads the config and cues (blocking; run on `reloads`).
    private let loadRuntime: @Sendable (_ cancelled: @escaping @Sendable () -> Bool) throws(LoadFailure) -> (Runtime, warnings: [String])
    /// Called when something `statusLine` shows changes, and around reloads (systemd's notify).
    private let notify: @Sendable (_ fields: [String]) -> Void

    // Counters shown by `status`.
    var clients = 0
    var rateLimited = 0
    var refusedBusy = 0
    var evictedIdle = 0

    /// Reloads run one at a time; requests made during one share the next.
    private var reloadRunning = false
    private var nextReload: EventLoopPromise<Reply>?
    /// Set at SIGTERM: a reload in progress gives up between files.
    let stopping = Atomic<Bool>(false)
    static let stoppingReason = "cued is stopping"

    /// Replies waiting on the audio thread: `play … wait` (by voice id) and `stop` (by ticket).
    private var nextTicket: UInt64 = 1
    private var nextVoiceID: UInt64 = 1
    private var waitingForVoices: [UInt64: EventLoopPromise<Reply>] = [:]
    private var waitingForStops: [UInt64: EventLoopPromise<Reply>] = [:]
    /// How to write an event line to each connection (registered while it is open).
    private var eventLines: [UInt64: (String) -> Void] = [:]

    /// Limits that keep one client from drowning the others.
    public struct Limits: Sendable {
        /// Cues a second per connection (token bucket, 1 s burst); 0: unlimited.
        public var playsPerSecond: Double = 200
        /// State changes (mute, unmute, mute app, unmute app, reload) a second per
        /// connection; each may write the state file. 0 when plays are unlimited.
        public var changesPerSecond: Double { playsPerSecond > 0 ? 20 : 0 }
        /// Connections at once; at the cap the longest idle one is closed.
        public var maxClients = 256
        public init() {}
    }

    public init(loop: any EventLoop, engine: AudioEngine, runtime: Runtime, saved: SavedState, muted: Bool,
                saver: StateSaver?, reloads: NIOThreadPool, decoding: DecodeLane, sounds: SoundLibrary,
                sessions: SessionRegistry = SessionRegistry(), limits: Limits = Limits(), logger: Logger,
                loadRuntime: @escaping @Sendable (_ cancelled: @escaping @Sendable () -> Bool) throws(LoadFailure) -> (Runtime, warnings: [String]),
                notify: @escaping @Sendable ([String]) -> Void = { _ in }) {
        self.loop = loop
        self.engine = engine
        self.runtime = runtime
        self.muted = muted
        self.appMutes = saved.appMutes
        self.saver = saver
        self.reloads = reloads
        self.decoding = decoding
        self.sounds = sounds
        self.sessions = sessions
        self.limits = limits
        self.logger = logger
        self.loadRuntime = loadRuntime
        self.notify = notify
    }

    public var current: Runtime { runtime }
    /// Why `--sink auto` picked the sink it did (`status`'s sink.why); nil for a named sink.
    public var sinkWhy: String?

    /// What a connection carries between requests.
    public struct ConnectionState: Sendable {
        public var id: UInt64 = 0
        public var privateSession = RefreshSession()
        public var sessionName: String?
        public var app: String?
        /// Cues this connection may still start (nil: no limit).
        public var plays: TokenBucket?
        /// State changes this connection may still make (nil: no limit).
        public var changes: TokenBucket?
        /// `events on`: the voices it starts end with an `end ID REASON` line.
        public var events = false
        public init(limits: Limits = Limits(), now: UInt64 = MonotonicClock.now()) {
            if limits.playsPerSecond > 0 { plays = TokenBucket(rate: limits.playsPerSecond, now: now) }
            if limits.changesPerSecond > 0 { changes = TokenBucket(rate: limits.changesPerSecond, now: now) }
        }
        /// Whose voices `stop` silences: the app's, else this connection's.
        var owner: String { app ?? "#\(id)" }
    }

    // MARK: - Requests

    /// Parses one request line and answers it. `receivedAt` is when the line
    /// was read (monotonic ns).
    func respond(to line: [UInt8], connection: inout ConnectionState, receivedAt: UInt64) -> Response {
        let request: Request
        do {
            request = try RequestParser.parse(line)
        } catch {
            logger.debug("bad request", metadata: ["error.code": "\(error.code.rawValue)"])
            // A line over the limit closes the connection, however it arrived.
            return error.code == .lineTooLong ? .close(.err(.lineTooLong, error.message + "; closing")) : .now(error.reply)
        }
        logger.trace("request", metadata: ["request": "\(request.line)"])
        switch request {
        case .ping:
            return .now(.ok("pong"))
        case .play(let name, let options):
            if let cue = runtime.bank[name] {
                return start(cue, name: name, options, &connection, requestTime: receivedAt)
            }
            return playThemeSound(name, options, &connection)
        case .playFile(let path, let options):
            return playFile(path, options, &connection)
        case .stop(let target):
            return stop(target, owner: connection.owner)
        case .events(let on):
            connection.events = on
            return .now(.ok(on ? "events on" : "events off"))
        case .state(let target, let quiet):
            return .now(perform(withSession(&connection, now: receivedAt) { $0.set(target, quiet: quiet) }, &connection, receivedAt))
        case .drag(let points):
            return .now(perform(withSession(&connection, now: receivedAt) { $0.drag(points) }, &connection, receivedAt))
        case .drop:
            return .now(perform(withSession(&connection, now: receivedAt) { $0.drop() }, &connection, receivedAt))
        case .threshold(let points):
            withSession(&connection, now: receivedAt) { $0.threshold = points }
            return .now(.ok(Request.number(points)))
        case .session(let name):
            if let name { connection.sessionName = name }
            let s = withSession(&connection, now: receivedAt) { $0 }
            return .now(.ok("\(connection.sessionName ?? "-") \(s.state.rawValue) \(Request.number(s.threshold))"))
        case .mute, .unmute, .muteApp, .unmuteApp, .reload:
            if let refused = allowChange(&connection, receivedAt) { return .now(refused) }
            switch request {
            case .mute: setMuted(true); return .now(.ok("muted"))
            case .unmute: setMuted(false); return .now(.ok("unmuted"))
            case .muteApp(let name): return .now(setAppMuted(name, true))
            case .unmuteApp(let name): return .now(setAppMuted(name, false))
            default: return .later(reload())
            }
        case .app(let name):
            connection.app = name
            return .now(.ok(name))
        case .cues(let theme):
            guard theme else { return .now(.ok(runtime.bank.names.joined(separator: " "))) }
            let sounds = self.sounds
            return .later(decoding.submit(owner: connection.owner, on: loop) { sounds.themeNames() }.map { result in
                switch result {
                case .success(let names): return .ok(names.joined(separator: " "))
                case .failure(let refusal): return .err(.badFile, "the sound theme: " + Self.explain(refusal))
                }
            })
        case .status:
            return .now(.ok(status().json.encoded))
        }
    }

    /// Runs `body` on the connection's current session (private or named).
    private func withSession<R>(_ conn: inout ConnectionState, now: UInt64, _ body: (inout RefreshSession) -> R) -> R {
        guard let name = conn.sessionName else { return body(&conn.privateSession) }
        return sessions.withSession(name, now: now, body)
    }

    /// Turns a session's outcome into sound and a reply: `ok CUE`, `ok -`, `ok muted`.
    private func perform(_ outcome: RefreshSession.Outcome, _ conn: inout ConnectionState, _ receivedAt: UInt64) -> Reply {
        let rt = runtime
        var cueName: String?
        if case .play(let name) = outcome.action { cueName = name }
        if let from = outcome.from, let to = outcome.to { cueName = rt.cue(from: from, to: to, default: cueName) }
        guard let name = cueName else {
            if outcome.prewarm && !isMuted(app: conn.app) { engine.submit(.prewarm) }
            return .ok("-")
        }
        guard let cue = rt.bank[name] else { return .err(.internal, "transition cue '\(name)' is not loaded") }
        switch start(cue, name: name, PlayOptions(), &conn, requestTime: receivedAt) {
        case .now(.ok(nil)): return .ok(name)
        case .now(let reply): return reply
        default: return .err(.internal, "unexpected deferred reply")
        }
    }

    // MARK: - Playing

    /// Starts a decoded sound (a bank cue, a theme sound or a file): mute,
    /// rate limit, the audio queue; with `wait`, the reply comes when it has
    /// sounded.
    private func start(_ cue: Cue, name: String, _ options: PlayOptions, _ conn: inout ConnectionState,
                       requestTime: UInt64) -> Response {
        if let refused = admit(&conn, requestTime) { return .now(refused) }
        return submit(cue, name: name, options, Asker(conn), requestTime: requestTime)
    }

    /// Who asked for a voice, as the audio thread needs it.
    struct Asker {
        var app: String?
        var owner: String
        var connection: UInt64
        var events: Bool
        init(_ c: ConnectionState) { app = c.app; owner = c.owner; connection = c.id; events = c.events }
    }

    /// Mute and the rate limit: nil if a cue may start, else the reply.
    private func admit(_ conn: inout ConnectionState, _ now: UInt64) -> Reply? {
        if isMuted(app: conn.app) { return .ok("muted") }
        return allowPlay(&conn, now)
    }

    private func submit(_ cue: Cue, name: String, _ options: PlayOptions, _ asker: Asker, requestTime: UInt64) -> Response {
        // SIGTERM's grace is for cues already playing; a new one would be cut off.
        if stopping.load(ordering: .relaxed) { return .now(.err(.notPlayed, Self.stoppingReason)) }
        let id = nextVoiceID
        nextVoiceID &+= 1
        var notify: VoiceNotify = []
        if options.wait { notify.insert(.wait) }
        if asker.events { notify.insert(.events) }
        let loops: VoiceLoop = switch options.loop {
        case .once: .once
        case .times(let n): .times(n)
        case .forever: .forever
        case .seconds(let t): .seconds(t)
        }
        let request = VoiceRequest(id: id, cue: cue, gain: decibelsToGain(runtime.gainDB(request: options.gainDB, cue: name, app: asker.app)),
                                   requestTime: requestTime, owner: asker.owner, connection: asker.connection,
                                   priority: options.priority, loop: loops, notify: notify)
        guard engine.submit(.play(request)) else {
            return .now(.err(.internal, "audio queue is full; try again"))
        }
        if let app = asker.app { count(app) { $0.played += 1 } }
        guard options.wait else { return .now(.ok(options.wantsID ? "\(id)" : nil)) }
        let promise = loop.makePromise(of: Reply.self)
        waitingForVoices[id] = promise
        return .later(promise.futureResult)
    }

    /// `play NAME` for a name the bank does not have: the sound theme. A
    /// sound decoded before plays at once; otherwise it is found and decoded
    /// off the loop, then played. Mute and the rate limit apply first, so a
    /// muted or flooding client costs no lookup.
    private func playThemeSound(_ name: String, _ options: PlayOptions, _ conn: inout ConnectionState) -> Response {
        let now = MonotonicClock.now()
        if let refused = admit(&conn, now) { return .now(refused) }
        if let cue = sounds.cachedThemeSound(name) {
            return submit(cue, name: name, options, Asker(conn), requestTime: now)
        }
        let sounds = self.sounds
        let bankNames = runtime.bank.names
        let lookup = decode(owner: conn.owner, what: "theme sound '\(name)'") { sounds.themeSound(name) }.map { result -> SoundLookup in
            guard case .notFound = result else { return result }
            return .failed(.err(.unknownCue, "no cue or theme sound named '\(name)' (cues: \(bankNames.joined(separator: " ")); theme sounds: `cues theme`, or cuectl cues --theme)"))
        }
        return whenLoaded(lookup, name: name, options, conn)
    }

    private func playFile(_ path: String, _ options: PlayOptions, _ conn: inout ConnectionState) -> Response {
        if let refused = admit(&conn, MonotonicClock.now()) { return .now(refused) }
        let sounds = self.sounds
        return whenLoaded(decode(owner: conn.owner, what: path) { sounds.file(path) }, name: path, options, conn)
    }

    /// A sound looked up and decoded in the decoding lane, within the client's share and the deadline.
    private func decode(owner: String, what: String, _ work: @escaping @Sendable () -> SoundLookup) -> EventLoopFuture<SoundLookup> {
        decoding.submit(owner: owner, on: loop, work).map { result in
            switch result {
            case .success(let lookup): return lookup
            case .failure(let refusal):
                if case .queueFull = refusal { return .failed(.err(.rateLimited, Self.explain(refusal))) }
                return .failed(.err(.badFile, "\(what): " + Self.explain(refusal)))
            }
        }
    }

    static func explain(_ refusal: DecodeLane.Refusal) -> String {
        switch refusal {
        case .timedOut(let s):
            return "timed out after \(Request.number(s)) s (a file system that does not answer, or a file too slow to decode)"
        case .stuck:
            return "not tried: earlier files are stuck on a file system that does not answer; try again later"
        case .queueFull:
            return "too many sounds waiting to be decoded for this client"
        }
    }

    /// When a sound lookup finishes (back on the loop), plays it or says why not.
    private func whenLoaded(_ lookup: EventLoopFuture<SoundLookup>, name: String, _ options: PlayOptions,
                            _ conn: ConnectionState) -> Response {
        let asker = Asker(conn)
        return .later(lookup.flatMap { result in
            switch result {
            case .cue(let cue):
                // Timed from now: the decode is not the audio path's latency, and
                // the 250 ms start deadline must not drop a sound that just loaded.
                switch self.submit(cue, name: name, options, asker, requestTime: MonotonicClock.now()) {
                case .now(let r), .close(let r): return self.loop.makeSucceededFuture(r)
                case .later(let f): return f
                }
            case .disabled: return self.loop.makeSucceededFuture(.ok("disabled"))
            case .notFound: return self.loop.makeSucceededFuture(.err(.unknownCue, "no sound named '\(name)'"))
            case .failed(let reply): return self.loop.makeSucceededFuture(reply)
            }
        })
    }

    private func stop(_ target: StopTarget, owner: String) -> Response {
        let id = ticket()
        let scope: StopScope
        switch target {
        case .mine: scope = .owner(owner)
        case .cue(let name): scope = .cue(name: name, owner: owner)
        case .id(let voice): scope = .id(voice)
        case .all: scope = .all
        }
        guard engine.submit(.stop(scope, ticket: id)) else { return .now(.err(.internal, "audio queue is full; try again")) }
        let promise = loop.makePromise(of: Reply.self)
        waitingForStops[id] = promise
        return .later(promise.futureResult)
    }

    private func ticket() -> UInt64 {
        defer { nextTicket &+= 1 }
        return nextTicket
    }

    /// A token for one more cue on this connection, or the reply refusing it.
    private func allowPlay(_ conn: inout ConnectionState, _ now: UInt64) -> Reply? {
        guard conn.plays != nil, !conn.plays!.take(now: now) else { return nil }
        rateLimited += 1
        return .err(.rateLimited, "more than \(Request.number(limits.playsPerSecond)) cues a second on this connection")
    }

    private func allowChange(_ conn: inout ConnectionState, _ now: UInt64) -> Reply? {
        guard conn.changes != nil, !conn.changes!.take(now: now) else { return nil }
        rateLimited += 1
        return .err(.rateLimited, "more than \(Request.number(limits.changesPerSecond)) state changes a second on this connection")
    }

    private func count(_ app: String, _ change: (inout Status.App) -> Void) {
        guard appCounts[app] != nil || appCounts.count < Self.maxTrackedApps else { return }
        change(&appCounts[app, default: Status.App()])
    }

    // MARK: - Audio thread events (hopped onto the loop)

    func handle(_ event: EngineEvent) {
        switch event {
        case .voiceEnded(let end):
            ended(end)
        case .stopped(let id, let n):
            waitingForStops.removeValue(forKey: id)?.succeed(.ok("\(n)"))
        default:
            break
        }
    }

    /// A voice's one end, mapped in this one place to all it means: a log line and
    /// the per-app counts for one that did not play, the `wait`er's reply, the
    /// connection's `end ID REASON` line.
    func ended(_ end: VoiceEnd) {
        let neverPlayed = end.reason == .late || end.reason == .cut || (end.reason == .shutdown && !end.started)
        if neverPlayed {
            if stopping.load(ordering: .relaxed) {
                logger.info("cue not played: cued is stopping", metadata: ["cue.name": "\(end.cue)"])
            } else if end.reason == .cut {
                logger.warning("cue cut off: the device failed while it played", metadata: ["cue.name": "\(end.cue)", "late_ms": "\(end.lateNs / 1_000_000)"])
            } else {
                logger.warning("cue dropped: could not start in time", metadata: ["cue.name": "\(end.cue)", "late_ms": "\(end.lateNs / 1_000_000)"])
            }
            if !end.owner.hasPrefix("#"), appCounts[end.owner] != nil {
                count(end.owner) { $0.played -= 1; $0.dropped += 1 }
            }
        }
        if end.notify.contains(.wait) {
            waitingForVoices.removeValue(forKey: end.id)?.succeed(reply(for: end))
        }
        if end.notify.contains(.events) {
            eventLines[end.connection]?("end \(end.id) \(end.reason.rawValue)")
        }
    }

    /// What `play … wait` answers for an end (protocol v1's replies).
    func reply(for end: VoiceEnd) -> Reply {
        let deviceError = engine.stats.sinkError.map { " (\($0))" } ?? ""
        switch end.reason {
        case .played: return .ok(nil)
        case .stoppedByID, .stoppedByOwner, .stoppedAll, .stolen, .muted: return .ok("stopped")
        case .shutdown where end.started: return .ok("stopped")
        case .shutdown: return .err(.notPlayed, Self.stoppingReason)
        case .late where stopping.load(ordering: .relaxed): return .err(.notPlayed, Self.stoppingReason)
        case .late: return .err(.notPlayed, "the device did not start it within 250 ms" + deviceError)
        case .cut: return .err(.notPlayed, "the device failed while it played; too late to start it again" + deviceError)
        case .busy: return .err(.notPlayed, "every voice is taken by a cue of a higher priority")
        }
    }

    /// While a connection is open: how to send it an event line (on the loop).
    func registerEvents(connection: UInt64, send: @escaping (String) -> Void) { eventLines[connection] = send }
    func unregisterEvents(connection: UInt64) { eventLines.removeValue(forKey: connection) }

    // MARK: - Mute

    /// Global mute wins; then a run-time app mute; then the config's `[apps.NAME] muted`.
    func isMuted(app: String?) -> Bool {
        muted || app.map { appMuted($0) } ?? false
    }

    /// The app's own mute, regardless of the global one.
    func appMuted(_ app: String) -> Bool {
        appMutes[app] ?? runtime.config.apps[app]?.muted ?? false
    }

    public func setMuted(_ value: Bool) {
        let old = muted
        muted = value
        if value { engine.submit(.fadeOutAll) }
        guard old != value else { return }
        logger.info(value ? "muted" : "unmuted")
        notify(["STATUS=" + statusLine()])
        save()
    }

    func setAppMuted(_ app: String, _ value: Bool) -> Reply {
        let configMuted = runtime.config.apps[app]?.muted ?? false
        // Only what differs from the config is kept (and saved).
        let keep: Bool? = value == configMuted ? nil : value
        if keep != nil, appMutes[app] == nil, appMutes.count >= SavedState.maxAppMutes {
            return .err(.tooMany, "at most \(SavedState.maxAppMutes) apps can be muted or unmuted at run time; unmute one first")
        }
        let old = appMutes[app]
        appMutes[app] = keep
        if old != keep {
            logger.info(value ? "app muted" : "app unmuted", metadata: ["app": "\(app)"])
            save()
        }
        return .ok("\(value ? "muted" : "unmuted") \(app)")
    }

    private func save() {
        saver?.save(SavedState(muted: muted, appMutes: appMutes))
    }

    // MARK: - Reload

    /// Re-reads the config and every cue off the loop and swaps them in only
    /// if all load; otherwise the old ones stay. Voices already playing are
    /// untouched. Reloads asked for while one runs share the next one.
    public func reload() -> EventLoopFuture<Reply> {
        if reloadRunning {
            if nextReload == nil { nextReload = loop.makePromise() }
            return nextReload!.futureResult
        }
        let promise = loop.makePromise(of: Reply.self)
        startReload(promise)
        return promise.futureResult
    }

    private func startReload(_ promise: EventLoopPromise<Reply>) {
        reloadRunning = true
        notify(["RELOADING=1", "MONOTONIC_USEC=\(SystemdNotifier.monotonicMicroseconds())"])
        let load = loadRuntime
        let isCancelled: @Sendable () -> Bool = { [self] in self.stopping.load(ordering: .relaxed) }
        reloads.runIfActive(eventLoop: loop) { () throws -> (Runtime, [String]) in try load(isCancelled) }.assumeIsolated().whenComplete { result in
            let reply: Reply
            switch result {
            case .success(let (new, warnings)): reply = self.apply(new, warnings: warnings)
            case .failure(let error):
                let message = (error as? LoadFailure)?.oneLine ?? "\(error)"
                self.logger.error("reload failed; keeping the old configuration", metadata: ["error": "\(message)"])
                reply = .err(.reloadFailed, message)
            }
            self.notify(["READY=1", "STATUS=" + self.statusLine()])
            promise.succeed(reply)
            self.reloadRunning = false
            if let next = self.nextReload {
                self.nextReload = nil
                self.startReload(next)
            }
        }
    }

    private func apply(_ new: Runtime, warnings: [String]) -> Reply {
        for w in warnings { logger.warning("\(w)") }
        let old = runtime
        runtime = new
        if let m = new.config.muted, m != old.config.muted { setMuted(m) }
        if new.settings.restartOnly() != old.settings.restartOnly() {
            logger.warning("sink, latency_ms, voices, idle_close_s and [stream] take effect at the next start")
        }
        sounds.reconfigure(theme: new.theme, cacheLimitBytes: new.settings.themeCacheBytes)
        logger.info("reloaded", metadata: ["cues": "\(new.bank.names.joined(separator: " "))", "config": "\(new.config.path ?? "none")"])
        return .ok("reloaded")
    }

    // MARK: - Status

    /// One line for systemd's STATUS=: cues, sink state, mute.
    public func statusLine() -> String {
        let s = engine.stats
        return "\(runtime.bank.names.count) cues, sink \(engine.sinkSpec) \(s.sinkState.rawValue)"
            + (s.sinkError.map { " (\($0))" } ?? "") + (muted ? ", muted" : ", unmuted")
    }

    /// At most `maxTrackedApps` apps (RELIABILITY.md's bound): the run-time
    /// mutes first, then the config's apps, then those that only played, each
    /// group by name.
    func statusApps() -> [String: Status.App] {
        var apps: [String: Status.App] = [:]
        let groups = [appMutes.keys.sorted(), runtime.config.apps.keys.sorted(), appCounts.keys.sorted()]
        for name in groups.joined() where apps[name] == nil {
            guard apps.count < Self.maxTrackedApps else { break }
            var a = appCounts[name] ?? Status.App()
            a.muted = appMuted(name)
            apps[name] = a
        }
        return apps
    }

    public func status() -> Status {
        let s = engine.stats
        var out = Status()
        out.version = CuedVersion.string
        out.protocolVersion = ProtocolLimits.version
        out.pid = Int(getpid())
        out.muted = muted
        out.stateSaved = saver?.saved ?? true
        out.stateError = saver?.error
        out.config = runtime.config.path
        out.sink.spec = engine.sinkSpec
        out.sink.why = sinkWhy
        out.sink.state = s.sinkState.rawValue
        if let f = s.sinkFormat {
            out.sink.rate = f.rate
            out.sink.channels = f.channels
            out.sink.format = f.sampleFormat.rawValue
            out.sink.periodFrames = f.periodFrames
            out.sink.bufferFrames = f.bufferFrames
        }
        out.sink.error = s.sinkError
        out.sink.kind = s.sinkKind
        out.sink.delayUs = s.deviceDelayMicroseconds
        for name in runtime.bank.names {
            let c = runtime.bank[name]!
            out.cues[name] = Status.Cue(frames: c.frames, played: c.played.load(ordering: .relaxed))
        }
        out.played = s.played.load(ordering: .relaxed)
        out.voicesActive = s.voicesActive.load(ordering: .relaxed)
        out.voicesStolen = s.stolen.load(ordering: .relaxed)
        out.clippedSamples = s.clipped.load(ordering: .relaxed)
        out.xruns = s.xruns.load(ordering: .relaxed)
        out.stalls = s.stalls.load(ordering: .relaxed)
        out.rewinds = s.rewinds.load(ordering: .relaxed)
        out.devicesLost = s.lost.load(ordering: .relaxed)
        out.audioThread = s.threadPriorityName
        out.dropped = s.dropped.load(ordering: .relaxed)
        out.clients = clients
        out.rateLimited = rateLimited
        out.refusedBusy = refusedBusy
        out.evictedIdle = evictedIdle
        out.sessions = sessions.count(now: MonotonicClock.now())
        out.apps = statusApps()
        if let l = s.latencyPercentiles() {
            out.latencyUs.p50 = Int(l.p50)
            out.latencyUs.p99 = Int(l.p99)
            out.latencyUs.max = Int(l.max)
        }
        out.theme = sounds.status()
        return out
    }
}
