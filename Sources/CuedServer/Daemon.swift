import CuedAudio
import CuedConfig
import CuedCore
import CuedProtocol
import CuedSystem
import Logging
import NIOCore
import NIOPosix

/// A request's answer: now, later (the connection holds its next lines until
/// then), or a last line before the connection closes.
enum Response: Sendable {
    case now(Reply)
    case later(EventLoopFuture<Reply>)
    /// Later, built by `render` (on the loop) once `ready` completes, in the
    /// connection's turn and charged `cost` there (`status wait`: many ready at
    /// once are not all built in one loop tick).
    case whenReady(EventLoopFuture<Void>, cost: Int, render: NIOLoopBound<() -> Reply>)
    case close(Reply)
}

/// The daemon's state and its answer to every request: a verb table (one
/// handler per verb) over parts of its own — its clients (`ClientTable`), who gets a
/// voice (`VoiceBroker`), which sound a cue plays (`CuePicker`), sounds fetched from
/// the theme and files (`SoundFetch`), mute (`MuteState`), profiles (`ProfileState`,
/// Daemon+Profiles.swift), reloads (`Reloader`), status (`StatusReport`).
///
/// Confined to the event loop, in its type: not Sendable, it stays where it is
/// made (on the loop); other threads hold it only in a `NIOLoopBound` or
/// `NIOLoopBoundBox`, which checks the loop at each use, and hop onto the loop.
/// Blocking work runs in lanes and completes back on the loop: reloads on
/// `reloads` (one at a time), decoding and listing the theme on `decoding` (a
/// share per client, a deadline), state saves on the saver's own thread; the
/// audio engine is fed through its queue and never waited on.
public final class Daemon {
    public let loop: any EventLoop
    public let engine: AudioEngine
    public let logger: Logger
    public let limits: Limits
    /// Set at SIGTERM (from the main thread): a reload in progress gives up
    /// between files, and no new cue starts.
    public let stopping: StopFlag
    private var runtime: Runtime {
        didSet { mutes.configure(runtime.config); profiles.configure(runtime.config) }
    }
    private var mutes: MuteState
    var profiles: ProfileState
    /// Told of every change of the global profile (a request, a reload, `setProfile`), on the loop.
    public var onProfileChange: ((Profile) -> Void)?
    private var sessions: SessionRegistry
    /// Every client, socket and bus alike, under one cap.
    let clients: ClientTable
    let broker: VoiceBroker
    private var picker = CuePicker()
    private let fetch: SoundFetch
    private let saver: StateSaver?
    private let reloads: NIOThreadPool
    private let sounds: SoundLibrary
    /// Re-reads the config and cues (blocking; run on `reloads`), taking the files of
    /// `reuse` (the bank in force) that did not change as they are.
    public typealias LoadRuntime = @Sendable (_ reuse: [FileIdentity: SoundBuffer], _ cancelled: @escaping @Sendable () -> Bool)
        throws(LoadFailure) -> (Runtime, warnings: [String])
    private let loadRuntime: LoadRuntime
    /// The memory budget for decoded sound (status), if any.
    private let budget: SoundBudget?
    /// Called when something `statusLine` shows changes, and around reloads (systemd's notify).
    let notify: @Sendable (_ fields: [String]) -> Void
    private lazy var reloader = Reloader(loop: loop) { [unowned self] in self.reloadOnce() }

    /// Cues and state changes refused by a client's rate limit.
    var rateLimited: Int { broker.rateLimited }

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
                sessions: SessionRegistry = SessionRegistry(), limits: Limits = Limits(), stopping: StopFlag = StopFlag(),
                budget: SoundBudget? = nil, logger: Logger, loadRuntime: @escaping LoadRuntime,
                notify: @escaping @Sendable ([String]) -> Void = { _ in }) {
        self.loop = loop
        self.engine = engine
        self.runtime = runtime
        self.mutes = MuteState(muted: muted, saved: saved, config: runtime.config)
        self.profiles = ProfileState(saved: saved, config: runtime.config)
        self.saver = saver
        self.reloads = reloads
        self.sounds = sounds
        self.sessions = sessions
        self.limits = limits
        self.stopping = stopping
        self.logger = logger
        self.loadRuntime = loadRuntime
        self.budget = budget
        self.notify = notify
        clients = ClientTable(capacity: limits.maxClients)
        broker = VoiceBroker(loop: loop, engine: engine, clients: clients, stopping: stopping, logger: logger)
        fetch = SoundFetch(loop: loop, sounds: sounds, decoding: decoding)
        clients.onRemove = { [unowned self] gone in clientRemoved(gone) }
    }

    public var current: Runtime { runtime }
    var muted: Bool { mutes.muted }
    /// The D-Bus face's loop side, when the bus is on (`status`'s bus).
    var desktop: FeedbackCenter?

    // MARK: - The verb table

    /// Parses one request line and answers it. `receivedAt` is when the line
    /// was read (monotonic ns).
    func respond(to line: [UInt8], client: inout Client, receivedAt: UInt64) -> Response {
        let request: Request
        do {
            request = try RequestParser.parse(line)
        } catch {
            logger.debug("bad request", metadata: ["error.code": "\(error.code.rawValue)"])
            // A line over the limit closes the connection, however it arrived.
            return error.code == .lineTooLong ? .close(.err(.lineTooLong, error.message + "; closing")) : .now(error.reply)
        }
        logger.trace("request", metadata: ["request": "\(request.line)"])
        return respond(to: request, client: &client, receivedAt: receivedAt)
    }

    /// One entry a verb, each with its one handler; a state change (it may
    /// write the state file) first passes the client's rate limit of changes.
    func respond(to request: Request, client c: inout Client, receivedAt at: UInt64) -> Response {
        switch request {
        case .ping: return .now(.ok("pong"))
        case .play(let name, let options): return Self.response(play(.named(name), options, &c, at: at), options)
        case .playFile(let path, let options): return Self.response(play(.file(path), options, &c, at: at), options)
        case .stop(let target): return .later(stop(target, &c).map { .ok("\($0)") }.flatMapErrorThrowing { .err(.internal, "\($0)") })
        case .events(let on): return events(on, &c)
        case .state(let target, let quiet): return .now(refresh(&c, at) { $0.set(target, quiet: quiet) })
        case .drag(let points):
            let every = runtime.config.pull.detentPoints
            return .now(refresh(&c, at) { $0.drag(points, detentEvery: every) })
        case .drop: return .now(refresh(&c, at) { $0.drop() })
        case .threshold(let points): return threshold(points, &c, at)
        case .detent(let choice): return detent(choice, &c, at)
        case .session(let name): return session(name, &c, at)
        case .app(let name, let via): return app(name, via: via, &c)
        case .mute: return change(&c, at) { mute() }
        case .unmute: return change(&c, at) { unmute() }
        case .muteApp(let name): return change(&c, at) { .now(setAppMuted(name, true)) }
        case .unmuteApp(let name): return change(&c, at) { .now(setAppMuted(name, false)) }
        case .profile(nil): return .now(.ok(profile.rawValue))
        case .profile(let p?): return change(&c, at) { setProfile(p); return .now(.ok(p.rawValue)) }
        case .profileApp(let name, nil): return .now(.ok("\(name) \(effectiveProfile(app: name).rawValue)"))
        case .profileApp(let name, let choice?): return change(&c, at) { .now(setAppProfile(name, choice)) }
        case .reload: return change(&c, at) { .later(reload()) }
        case .cues(let theme, let variants): return cues(theme: theme, variants: variants, &c)
        case .preload(let name, let theme): return preload(name, theme: theme, &c, at)
        case .status: return .now(.ok(status().json.encoded))
        case .statusWait:
            guard let synced = broker.tickets.afterQueued() else { return .now(.ok(status().json.encoded)) }
            return .whenReady(synced, cost: VerbCost.status,
                              render: NIOLoopBound({ [self] in .ok(status().json.encoded) }, eventLoop: loop))
        }
    }

    /// Sets the global profile for `client`, within its limit on state changes: the typed
    /// call behind `profile LEVEL` and the D-Bus face's Profile property. The limit a
    /// second if it was refused.
    func setProfile(_ p: Profile, _ client: inout Client, at: UInt64) -> Double? {
        if let limit = broker.allowChange(&client, at) { return limit }
        setProfile(p)
        return nil
    }

    private func change(_ client: inout Client, _ at: UInt64, _ handler: () -> Response) -> Response {
        if let limit = broker.allowChange(&client, at) { return .now(Replies.changeRefused(perSecond: limit)) }
        return handler()
    }

    // MARK: - Typed calls: what every client asks (the socket, the bus, notifications)

    /// What a client asks to sound.
    enum Sound: Equatable, Sendable {
        /// A cue of the bank (its next variant), else a sound of the theme.
        case named(String)
        /// A sound file by absolute path.
        case file(String)
    }

    /// What admission looks at now.
    func admissionView(now: UInt64) -> AdmissionView {
        AdmissionView(mutes: mutes, profiles: profiles, picker: picker.cooldowns, stopping: broker.isStopping, now: now)
    }

    /// Plays `sound` for `client`: admission (mute, profiles, its rate limit, a cue's
    /// cooldown), the cue's pick, or the sound fetched from the theme or a file, then the
    /// audio queue. The one way into playing, for every client.
    func play(_ sound: Sound, _ options: PlayOptions, _ client: inout Client, at: UInt64) -> Play {
        var options = options
        switch sound {
        case .named(let name):
            if let variants = runtime.bank.variants[name] {
                return playCue(name, variants, options, &client, at: at)
            }
            let ask = PlayAsk(options, client: client)
            let view = admissionView(now: MonotonicClock.now())
            if let hold = broker.admit(ask, &client, view) { return .now(.held(hold)) }
            options.gainDB += Admission.gainDB(ask, view)
            options.important = Admission.passesProfiles(ask, view)
            if let cue = fetch.cached(name, theme: options.theme) {
                return broker.submit(cue, name: name, options, for: client, requestTime: view.now, gain: gain)
            }
            return whenFetched(fetch.themeSound(name, theme: options.theme, owner: client.owner, bankNames: runtime.bank.names),
                               name: name, options, client)
        case .file(let path):
            let ask = PlayAsk(options, client: client)
            let view = admissionView(now: MonotonicClock.now())
            if let hold = broker.admit(ask, &client, view) { return .now(.held(hold)) }
            options.gainDB += Admission.gainDB(ask, view)
            options.important = Admission.passesProfiles(ask, view)
            return whenFetched(fetch.file(path, owner: client.owner), name: path, options, client)
        }
    }

    /// A bank cue: admission, then its pick (variant, jitter, cooldown), then the queue.
    private func playCue(_ name: String, _ variants: [Cue], _ options: PlayOptions, _ client: inout Client, at: UInt64) -> Play {
        let design = runtime.design(name)
        let ask = PlayAsk(options, client: client, cue: name, design: design)
        let view = admissionView(now: at)
        if let hold = broker.admit(ask, &client, view) { return .now(.held(hold)) }
        guard !variants.isEmpty else { return .now(.failed(.noSound(cue: name))) }
        let pick = picker.pick(name, variants, design, now: at)
        var options = options
        options.gainDB += Admission.gainDB(ask, view) + pick.gainDB
        options.important = Admission.passesProfiles(ask, view)
        return broker.submit(pick.cue, name: name, options, for: client, requestTime: at, gain: gain, rate: pick.rate,
                             limit: pick.limit, bankCue: true)
    }

    /// When a fetch finishes (back on the loop), plays what it found or says why not.
    private func whenFetched(_ fetched: EventLoopFuture<SoundFetch.Fetched>, name: String, _ options: PlayOptions,
                             _ client: Client) -> Play {
        .later(fetched.assumeIsolated().flatMap { result -> EventLoopFuture<PlayResult> in
            switch result {
            case .cue(let cue):
                // Timed from now: the decode is not the audio path's latency, and
                // the 250 ms start deadline must not drop a sound that just loaded.
                switch self.broker.submit(cue, name: name, options, for: client, requestTime: MonotonicClock.now(), gain: self.gain) {
                case .now(let r): return self.loop.makeSucceededFuture(r)
                case .later(let f): return f
                }
            case .disabled: return self.loop.makeSucceededFuture(.disabled)
            case .failed(let failure): return self.loop.makeSucceededFuture(.failed(failure))
            }
        }.nonisolated())
    }

    /// Every reason a play of `sound` by `client` would be held back now, in order (`why`).
    func holds(_ sound: Sound, _ options: PlayOptions, _ client: Client) -> [Hold] {
        let now = MonotonicClock.now()
        var ask = PlayAsk(options, client: client)
        if case .named(let name) = sound, runtime.bank.variants[name] != nil {
            ask = PlayAsk(options, client: client, cue: name, design: runtime.design(name))
        }
        return Admission.all(ask, client, admissionView(now: now))
    }

    /// Fades out what `target` names, of `client`'s app (or its own): how many voices stopped.
    func stop(_ target: StopTarget, _ client: inout Client) -> EventLoopFuture<Int> {
        broker.stop(target, owner: client.owner)
    }

    /// Fades out one voice, whoever started it (the D-Bus face's EndFeedback).
    func stopVoice(_ voice: UInt64) { _ = broker.stop(.id(voice), owner: "") }

    /// A play's answer as protocol v1 says it.
    static func response(_ play: Play, _ options: PlayOptions) -> Response {
        switch play {
        case .now(let r): return .now(Replies.reply(r, options))
        case .later(let f): return .later(f.map { Replies.reply($0, options) })
        }
    }

    /// The gain of a voice from the config in force when it is submitted.
    private var gain: VoiceBroker.Gain {
        { [self] request, cue, app in runtime.gainDB(request: request, cue: cue, app: app) }
    }

    private func events(_ on: Bool, _ client: inout Client) -> Response {
        client.events = on
        return .now(.ok(on ? "events on" : "events off"))
    }

    private func threshold(_ points: Double, _ client: inout Client, _ at: UInt64) -> Response {
        withSession(&client, now: at) { $0.threshold = points }
        return .now(.ok(Request.number(points)))
    }

    /// `detent [N|off|config]`: the session's detent ticks; the answer is what is in force.
    private func detent(_ choice: DetentChoice?, _ client: inout Client, _ at: UInt64) -> Response {
        let configured = runtime.config.pull.detentPoints
        let every = withSession(&client, now: at) { s -> Double in
            switch choice {
            case .every(let n)?: s.detentOverride = n
            case .config?: s.detentOverride = nil
            case nil: break
            }
            return s.detentOverride ?? configured
        }
        return .now(.ok(every > 0 ? "detent " + Request.number(every) : "detent off"))
    }

    private func session(_ name: String?, _ client: inout Client, _ at: UInt64) -> Response {
        if let name { client.sessionName = name }
        let s = withSession(&client, now: at) { $0 }
        return .now(.ok("\(client.sessionName ?? "-") \(s.state.rawValue) \(Request.number(s.threshold))"))
    }

    private func app(_ name: String, via: String?, _ client: inout Client) -> Response {
        client.app = name
        client.via = via
        return .now(.ok(name))
    }

    /// `preload NAME`: a bank cue is decoded already; a theme sound is decoded into the
    /// cache now (found in the decoding lane, as a play would), answered once it is
    /// there. Costs a play of the rate limit.
    private func preload(_ name: String, theme: ThemeChoice?, _ client: inout Client, _ at: UInt64) -> Response {
        if runtime.bank[name] != nil { return .now(.ok(nil)) }
        if let hold = broker.allowWork(&client, at) { return .now(Replies.reply(hold)) }
        if fetch.cached(name, theme: theme) != nil { return .now(.ok(nil)) }
        return .later(fetch.themeSound(name, theme: theme, owner: client.owner, bankNames: runtime.bank.names).map { fetched in
            switch fetched {
            case .cue: return .ok(nil)
            case .disabled: return .ok(NotSounded.disabled.rawValue)
            case .failed(let failure): return Replies.reply(failure)
            }
        })
    }

    private func mute() -> Response {
        setMuted(true)
        return .now(.ok("muted"))
    }

    private func unmute() -> Response {
        setMuted(false)
        return .now(.ok("unmuted"))
    }

    private func cues(theme: Bool, variants: Bool, _ client: inout Client) -> Response {
        if variants {
            let bank = runtime.bank
            return .now(.ok(bank.names.map { "\($0):\(bank.variants[$0]?.count ?? 1)" }.joined(separator: " ")))
        }
        guard theme else { return .now(.ok(runtime.bank.names.joined(separator: " "))) }
        return .later(fetch.themeNames(owner: client.owner).map { result in
            switch result {
            case .success(let names): return .ok(names.joined(separator: " "))
            case .failure(let refusal): return .badFile(refusal.problem, "the sound theme: " + Replies.explain(refusal))
            }
        })
    }

    // MARK: - Refresh sessions

    /// Runs `body` on the client's current session (private or named).
    private func withSession<R>(_ client: inout Client, now: UInt64, _ body: (inout RefreshSession) -> R) -> R {
        guard let name = client.sessionName else { return body(&client.privateSession) }
        return sessions.withSession(name, now: now, body)
    }

    /// Moves the client's session, then turns its outcome into sound and
    /// a reply: `ok CUE`, `ok -`, `ok muted`.
    private func refresh(_ client: inout Client, _ at: UInt64,
                         _ event: (inout RefreshSession) -> RefreshSession.Outcome) -> Reply {
        let outcome = withSession(&client, now: at, event)
        let rt = runtime
        var cueName: String?
        if case .play(let name) = outcome.action { cueName = name }
        if let from = outcome.from, let to = outcome.to { cueName = rt.cue(from: from, to: to, default: cueName) }
        var options = PlayOptions()
        if cueName == nil, let toward = outcome.tick {
            // A detent of the pull: its tick, rising towards the threshold as [pull] says.
            cueName = rt.config.pull.detentCue
            options.gainDB = rt.config.pull.detentGainDB
            options.pitchCents = toward * rt.config.pull.detentPitchCents
        }
        guard let name = cueName else {
            if outcome.prewarm && !isMuted(app: client.app) && profiles.effective(app: client.app) != .silent {
                engine.submit(.prewarm)
            }
            return .ok("-")
        }
        guard let variants = rt.bank.variants[name] else { return Replies.reply(.transitionCueMissing(name)) }
        switch playCue(name, variants, options, &client, at: at) {
        case .now(.started): return .ok(name)
        case .now(let r): return Replies.reply(r, options)
        case .later: return .err(.internal, "unexpected deferred reply")
        }
    }

    // MARK: - Clients and the audio thread's events (hopped onto the loop)

    func handle(_ event: EngineEvent) { broker.handle(event) }

    /// A client left the table (closed, let go at the cap, done leaving): the loops it
    /// started end.
    private func clientRemoved(_ gone: ClientTable.Entry) {
        if gone.loops { broker.stopLoops(of: gone.client.id) }
        logger.debug("client left", metadata: ["client.id": "\(gone.client.id)", "client.played": "\(gone.client.granted)",
                                               "client.refused": "\(gone.client.refused)"])
    }

    // MARK: - Mute

    func isMuted(app: String?) -> Bool { mutes.isMuted(app: app) }

    public func setMuted(_ value: Bool) {
        let changed = mutes.setMuted(value)
        if value { engine.submit(.fadeOutAll) }
        guard changed else { return }
        logger.info(value ? "muted" : "unmuted")
        notify(["STATUS=" + statusLine()])
        save()
    }

    func setAppMuted(_ app: String, _ value: Bool) -> Reply {
        switch mutes.setAppMuted(app, value) {
        case .tooMany:
            return Replies.tooManyAppMutes
        case .changed:
            logger.info(value ? "app muted" : "app unmuted", metadata: ["app": "\(app)"])
            save()
        case .unchanged:
            break
        }
        return .ok("\(value ? "muted" : "unmuted") \(app)")
    }

    func save() {
        saver?.save(profiles.recorded(in: mutes.saved))
    }

    // MARK: - Reload

    /// Re-reads the config and every cue off the loop and swaps them in only
    /// if all load; otherwise the old ones stay. Voices already playing are
    /// untouched. Reloads asked for while one runs share the next.
    public func reload() -> EventLoopFuture<Reply> { reloader.reload() }

    /// One reload, in the `reloads` lane; its reply once it is applied.
    private func reloadOnce() -> EventLoopFuture<Reply> {
        notify(["RELOADING=1", "MONOTONIC_USEC=\(SystemdNotifier.monotonicMicroseconds())"])
        let load = loadRuntime
        let stopping = self.stopping
        let isCancelled: @Sendable () -> Bool = { stopping.load(ordering: .relaxed) }
        let done = loop.makePromise(of: Reply.self)
        let reuse = runtime.sounds
        reloads.runIfActive(eventLoop: loop) { () throws -> (Runtime, [String]) in try load(reuse, isCancelled) }.assumeIsolated().whenComplete { result in
            let reply: Reply
            switch result {
            case .success(let (new, warnings)): reply = self.apply(new, warnings: warnings)
            case .failure(let error):
                let message = (error as? LoadFailure)?.oneLine ?? "\(error)"
                self.logger.error("reload failed; keeping the old configuration", metadata: ["error": "\(message)"])
                reply = .err(.reloadFailed, message)
            }
            self.notify(["READY=1", "STATUS=" + self.statusLine()])
            done.succeed(reply)
        }
        return done.futureResult
    }

    private func apply(_ new: Runtime, warnings: [String]) -> Reply {
        for w in warnings { logger.warning("\(w)") }
        var old = new
        swap(&old, &runtime)
        if let m = MuteState.mutedAfterReload(old: old.config, new: new.config) { setMuted(m) }
        if let p = ProfileState.profileAfterReload(old: old.config, new: new.config) { setProfile(p) }
        if new.settings.restartOnly() != old.settings.restartOnly() {
            logger.warning("sink, latency_ms, voices, idle_close_s and [stream] take effect at the next start")
        }
        sounds.reconfigure(theme: new.theme, cacheLimitBytes: new.settings.themeCacheBytes)
        picker.bankReplaced()
        broker.bankReplaced()
        logger.info("reloaded", metadata: ["cues": "\(new.bank.names.joined(separator: " "))", "config": "\(new.config.path ?? "none")"])
        // The old cues are freed in the reload lane, not here: unmapping a bank of
        // hundreds of MiB is not event-loop work. Then what malloc keeps of their small
        // parts (names, tables) goes back to the system.
        let retired = Retired(consume old)
        reloads.submit { state in
            retired.free()
            if state == .active { MemoryTrim.now() }
        }
        return .ok("reloaded")
    }

    /// A replaced runtime on its way to the reload lane, which frees it (`free`): whichever
    /// of the loop and the lane lets go of this box last, the runtime is freed there.
    private final class Retired: @unchecked Sendable {  // `runtime` is touched by `free` only, once handed over
        private var runtime: Runtime?
        init(_ runtime: consuming Runtime) { self.runtime = runtime }
        func free() { runtime = nil }
    }

    // MARK: - Status

    /// One line for systemd's STATUS=: cues, sink state, mute.
    public func statusLine() -> String {
        StatusReport.line(cues: runtime.bank.names.count, engine: engine, muted: mutes.muted, profile: profiles.global)
    }

    public func status() -> Status {
        StatusReport(engine: engine, runtime: runtime, mutes: mutes, profiles: profiles, stateSaved: saver?.saved ?? true, stateError: saver?.error,
                     sinkWhy: engine.sinkWhy, connections: clients.figures, rateLimited: rateLimited,
                     sessions: sessions.count(now: MonotonicClock.now()),
                     counts: broker.counts.apps, played: broker.played, playedByCue: broker.playedByCue,
                     unlistedPlays: broker.counts.otherPlayed, theme: sounds.status(), memory: memoryStatus(),
                     bus: desktop?.busStatus ?? Status.Bus()).status
    }

    /// The budget and what holds it: the cues, the cache, decodes in flight, and the
    /// rest, sounds that only voices still hold (played files dropped from the cache,
    /// a replaced config's cues still playing).
    func memoryStatus() -> Status.Memory {
        var m = Status.Memory()
        guard let budget else { return m }
        m.limitBytes = budget.limit
        m.usedBytes = budget.used
        m.cuesBytes = runtime.bank.bytes
        m.cacheBytes = sounds.cachedBytes
        m.decodingBytes = budget.decoding
        m.playingBytes = max(0, m.usedBytes - m.cuesBytes - m.cacheBytes - m.decodingBytes)
        m.refused = budget.refused
        return m
    }
}
