import CuedCore
import CuedProtocol
import Logging
import NIOCore

/// Who asked for a voice, as the audio thread needs it.
struct Asker {
    var app: String?
    var via: String?
    var owner: String
    var connection: UInt64
    var events: Bool
    init(_ c: Daemon.ConnectionState) { app = c.app; via = c.via; owner = c.owner; connection = c.id; events = c.events }
}

/// Playing: admission (mute and profile, then the connection's rate limit), the audio
/// queue, sounds looked up and decoded in the decoding lane (a share per
/// client, a deadline), and each voice's one end mapped, in one place, to its
/// `wait` reply, its `end ID REASON` line, a log line and the per-app counts.
/// Loop-confined (not Sendable): the daemon owns it and calls it on `loop`.
final class PlayPolicy {
    /// A voice's total gain in dB (request, cue, app), from the config in
    /// force when it is submitted: a sound decoded off the loop is submitted
    /// after a reload may have replaced the config.
    typealias Gain = (_ requestDB: Double, _ cue: String, _ app: String?) -> Double

    let loop: any EventLoop
    let engine: AudioEngine
    let limits: Daemon.Limits
    private let sounds: SoundLibrary
    private let decoding: DecodeLane
    private let stopping: StopFlag
    private let logger: Logger

    /// Requests refused by a rate limit (cues and state changes), for `status`.
    private(set) var rateLimited = 0
    /// Cues played (queued, less those that never sounded), in all and per bank cue
    /// since the bank was loaded: counted on the loop only.
    private(set) var played = 0
    private(set) var playedByCue: [String: Int] = [:]
    private(set) var counts = AppCounts()

    /// Replies waiting on the audio thread: `play … wait` (by voice id) and `stop` (by ticket).
    private var nextTicket: UInt64 = 1
    private var nextVoiceID: UInt64 = 1
    private var waitingForVoices: [UInt64: EventLoopPromise<PlayResult>] = [:]
    private var waitingForStops: [UInt64: EventLoopPromise<Int>] = [:]
    /// `status wait`: the reply made once the audio thread has taken what was queued before it.
    private var waitingForSyncs: [UInt64: (promise: EventLoopPromise<Reply>, reply: () -> Reply)] = [:]
    /// How to write an event line to each connection (registered while it is open).
    private var eventLines: [UInt64: (String) -> Void] = [:]
    /// Voice ends for a client that is not a socket connection (the D-Bus face), by its connection id.
    private var endObservers: [UInt64: (VoiceEnd) -> Void] = [:]
    /// Open connections that started a loop without `detach`: their loops end when they close.
    private var loopingConnections: Set<UInt64> = []
    /// Each bank cue's variant order, and the last start of each cue with a cooldown
    /// (both bounded by the bank's names; reset when a reload replaces it).
    private var pickers: [String: VariantPicker] = [:]
    private var lastStarts: [String: UInt64] = [:]
    private var random = SystemRandomNumberGenerator()

    static let stoppingReason = "cued is stopping"

    init(loop: any EventLoop, engine: AudioEngine, sounds: SoundLibrary, decoding: DecodeLane, stopping: StopFlag,
         limits: Daemon.Limits, logger: Logger) {
        self.loop = loop
        self.engine = engine
        self.sounds = sounds
        self.decoding = decoding
        self.stopping = stopping
        self.limits = limits
        self.logger = logger
    }

    // MARK: - Admission

    /// Mute, profile and the rate limit: nil if a cue may start (the profile's
    /// gain then added to its options), else why not.
    func admit(_ admission: Admission, _ options: inout PlayOptions, _ conn: inout Daemon.ConnectionState, _ now: UInt64) -> PlayResult? {
        guard case .play(let gainDB) = admission else { return admission.reply.map(PlayResult.init) }
        options.gainDB += gainDB
        return allowPlay(&conn, now).map(PlayResult.init)
    }

    /// A token for one more cue on this connection, or the reply refusing it.
    func allowPlay(_ conn: inout Daemon.ConnectionState, _ now: UInt64) -> Reply? {
        guard conn.plays != nil, !conn.plays!.take(now: now) else { return nil }
        rateLimited += 1
        return .err(.rateLimited, "more than \(Request.number(limits.playsPerSecond)) cues a second on this connection")
    }

    /// A token for one more state change (mute, reload…) on this connection, or the reply refusing it.
    func allowChange(_ conn: inout Daemon.ConnectionState, _ now: UInt64) -> Reply? {
        guard conn.changes != nil, !conn.changes!.take(now: now) else { return nil }
        rateLimited += 1
        return .err(.rateLimited, "more than \(Request.number(limits.changesPerSecond)) state changes a second on this connection")
    }

    // MARK: - Starting

    /// Starts a bank cue: mute and profile, rate limit, then its design (the next of its
    /// variants, its cooldown, pitch and gain jitter, its voice limit), the audio queue;
    /// with `wait`, the reply comes when it has sounded.
    func start(_ variants: [Cue], name: String, design: CueDesign, _ options: PlayOptions, _ conn: inout Daemon.ConnectionState,
               _ admission: Admission, requestTime: UInt64, gain: Gain) -> Play {
        var options = options
        if let refused = admit(admission, &options, &conn, requestTime) { return .now(refused) }
        guard !variants.isEmpty else { return .now(.refused(.internal, "cue '\(name)' has no sound")) }
        var limit = design.limit
        if design.cooldownNanoseconds > 0 {
            if let last = lastStarts[name], requestTime &- last < design.cooldownNanoseconds {
                guard design.cooldown == .restart else { return .now(.notPlayed(.cooldown)) }
                limit = CueVoiceLimit(maxVoices: 1, steal: .oldest)  // the playing one gives way
            }
            lastStarts[name] = requestTime
        }
        var picker = pickers[name].flatMap { $0.count == variants.count && $0.order == design.order ? $0 : nil }
            ?? VariantPicker(order: design.order, count: variants.count)
        let cue = variants[picker.next(using: &random)]
        pickers[name] = picker
        let (rate, db) = design.jitter(using: &random)
        options.gainDB += db
        return submit(cue, name: name, options, Asker(conn), requestTime: requestTime, gain: gain, rate: rate, limit: limit,
                      bankCue: true)
    }

    /// A reload replaced the bank: variant orders start afresh, cooldowns are forgotten,
    /// and the per-cue counts start again.
    func bankReplaced() {
        pickers = [:]
        lastStarts = [:]
        playedByCue = [:]
    }

    /// `play NAME` for a name the bank does not have: the sound theme. A
    /// sound decoded before plays at once; otherwise it is found and decoded
    /// off the loop, then played. Mute, profile and the rate limit apply first,
    /// so a muted, silent or flooding client costs no lookup.
    func playThemeSound(_ name: String, _ options: PlayOptions, _ conn: inout Daemon.ConnectionState,
                        _ admission: Admission, bankNames: [String], gain: @escaping Gain) -> Play {
        let now = MonotonicClock.now()
        var options = options
        if let refused = admit(admission, &options, &conn, now) { return .now(refused) }
        if let cue = sounds.cachedThemeSound(name, theme: options.theme) {
            return submit(cue, name: name, options, Asker(conn), requestTime: now, gain: gain)
        }
        return whenLoaded(lookUp(name, theme: options.theme, owner: conn.owner, bankNames: bankNames), name: name, options, conn, gain: gain)
    }

    /// `preload NAME`: the theme sound decoded into the cache (found in the decoding lane,
    /// as a play would), answered once it is there. Costs a play of the rate limit.
    func preloadThemeSound(_ name: String, theme: ThemeChoice?, _ conn: inout Daemon.ConnectionState, _ now: UInt64,
                           bankNames: [String]) -> Response {
        if let refused = allowPlay(&conn, now) { return .now(refused) }
        if sounds.cachedThemeSound(name, theme: theme) != nil { return .now(.ok(nil)) }
        return .later(lookUp(name, theme: theme, owner: conn.owner, bankNames: bankNames).map { result in
            switch result {
            case .cue: return .ok(nil)
            case .disabled: return .ok("disabled")
            case .notFound: return .err(.unknownCue, "no sound named '\(name)'")
            case .failed(let reply): return reply
            }
        })
    }

    /// A theme sound found and decoded in the decoding lane, within the client's share.
    private func lookUp(_ name: String, theme: ThemeChoice?, owner: String, bankNames: [String]) -> EventLoopFuture<SoundLookup> {
        let sounds = self.sounds
        return decode(owner: owner, what: "theme sound '\(name)'") { c in
            switch sounds.themeSoundExpress(name, theme: theme, cancelled: { c.isCancelled }) {
            case .done(let lookup): return .done(lookup)
            case .slow: return .slow { c in sounds.themeSound(name, theme: theme, cancelled: { c.isCancelled }) }
            }
        }.map { result -> SoundLookup in
            guard case .notFound = result else { return result }
            return .failed(.err(.unknownCue, "no cue or theme sound named '\(name)' (cues: \(bankNames.joined(separator: " ")); theme sounds: `cues theme`, or cuectl cues --theme)"))
        }
    }

    func playFile(_ path: String, _ options: PlayOptions, _ conn: inout Daemon.ConnectionState,
                  _ admission: Admission, gain: @escaping Gain) -> Play {
        var options = options
        if let refused = admit(admission, &options, &conn, MonotonicClock.now()) { return .now(refused) }
        let sounds = self.sounds
        let lookup = decode(owner: conn.owner, what: path) { c in
            switch sounds.fileExpress(path, cancelled: { c.isCancelled }) {
            case .done(let lookup): return .done(lookup)
            case .slow: return .slow { c in sounds.file(path, cancelled: { c.isCancelled }) }
            }
        }
        return whenLoaded(lookup, name: path, options, conn, gain: gain)
    }

    /// `cues theme`: the theme's names, listed in the decoding lane (it reads directories).
    func themeNames(owner: String) -> EventLoopFuture<Reply> {
        let sounds = self.sounds
        return decoding.submit(owner: owner, on: loop) { sounds.themeNames() }.map { result in
            switch result {
            case .success(let names): return .ok(names.joined(separator: " "))
            case .failure(let refusal): return .badFile(refusal.problem, "the sound theme: " + Self.explain(refusal))
            }
        }
    }

    /// `rate`: the design's (jitter), times the request's `rate=` and `pitch=`.
    /// `bankCue`: counted per cue in `status` (a bank cue's variants together).
    private func submit(_ cue: Cue, name: String, _ options: PlayOptions, _ asker: Asker, requestTime: UInt64,
                        gain: Gain, rate: Double = 1, limit: CueVoiceLimit? = nil, bankCue: Bool = false) -> Play {
        // SIGTERM's grace is for cues already playing; a new one would be cut off.
        if stopping.load(ordering: .relaxed) { return .now(.refused(.notPlayed, EndReason.shutdown.rawValue + " " + Self.stoppingReason)) }
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
        var request = VoiceRequest(id: id, cue: cue, gain: decibelsToGain(gain(options.gainDB, name, asker.app)),
                                   requestTime: requestTime, owner: asker.owner, connection: asker.connection,
                                   priority: options.priority, important: options.important, loop: loops,
                                   detached: options.detach, notify: notify)
        request.rate = rate * options.rate * CueDesign.rate(cents: options.pitchCents)
        request.limit = limit
        guard engine.submit(.play(request)) else { return .now(.refused(.internal, "audio queue is full; try again")) }
        // Counted now, on the loop, so `status` right after the reply has it; taken off
        // again, here too, if the voice never sounds (`ended`). Only the loop counts.
        played += 1
        if bankCue { playedByCue[name, default: 0] += 1 }
        if let app = asker.app { counts.played(app, via: asker.via) }
        if loops != .once && !options.detach && eventLines[asker.connection] != nil { loopingConnections.insert(asker.connection) }
        guard options.wait else { return .now(.started(voice: id)) }
        let promise = loop.makePromise(of: PlayResult.self)
        waitingForVoices[id] = promise
        return .later(promise.futureResult)
    }

    /// A sound looked up and decoded in the decoding lane, within the client's share and the
    /// deadline: its express step (cached or small), else handed on to the slow pool.
    private func decode(owner: String, what: String,
                        _ express: @escaping @Sendable (DecodeLane.Cancellation) -> DecodeLane.Step<SoundLookup>) -> EventLoopFuture<SoundLookup> {
        decoding.submit(owner: owner, on: loop, express: express).map { result in
            switch result {
            case .success(let lookup): return lookup
            case .failure(let refusal):
                if case .queueFull = refusal { return .failed(.err(.rateLimited, Self.explain(refusal))) }
                return .failed(.badFile(refusal.problem, "\(what): " + Self.explain(refusal)))
            }
        }
    }

    static func explain(_ refusal: DecodeLane.Refusal) -> String {
        switch refusal {
        case .timedOut(let s):
            return "timed out after \(Request.number(s)) s (a file system that does not answer, or a file too slow to decode)"
        case .stuck:
            return "not tried: this client's earlier files are stuck on a file system that does not answer; try again later"
        case .queueFull:
            return "too many sounds waiting to be decoded for this client"
        }
    }

    /// When a sound lookup finishes (back on the loop), plays it or says why not.
    private func whenLoaded(_ lookup: EventLoopFuture<SoundLookup>, name: String, _ options: PlayOptions,
                            _ conn: Daemon.ConnectionState, gain: @escaping Gain) -> Play {
        let asker = Asker(conn)
        return .later(lookup.assumeIsolated().flatMap { result -> EventLoopFuture<PlayResult> in
            switch result {
            case .cue(let cue):
                // Timed from now: the decode is not the audio path's latency, and
                // the 250 ms start deadline must not drop a sound that just loaded.
                switch self.submit(cue, name: name, options, asker, requestTime: MonotonicClock.now(), gain: gain) {
                case .now(let r): return self.loop.makeSucceededFuture(r)
                case .later(let f): return f
                }
            case .disabled: return self.loop.makeSucceededFuture(.notPlayed(.disabled))
            case .notFound: return self.loop.makeSucceededFuture(.refused(.unknownCue, "no sound named '\(name)'"))
            case .failed(let reply): return self.loop.makeSucceededFuture(PlayResult(reply))
            }
        }.nonisolated())
    }

    /// Fades out what `target` names (for `owner`); the future has how many voices
    /// stopped, or fails if the audio queue is full.
    func stop(_ target: StopTarget, owner: String) -> EventLoopFuture<Int> {
        let id = ticket()
        let scope: StopScope
        switch target {
        case .mine: scope = .owner(owner)
        case .cue(let name): scope = .cue(name: name, owner: owner)
        case .id(let voice): scope = .id(voice)
        case .all: scope = .all
        }
        guard engine.submit(.stop(scope, ticket: id)) else { return loop.makeFailedFuture(QueueFull()) }
        let promise = loop.makePromise(of: Int.self)
        waitingForStops[id] = promise
        return promise.futureResult
    }

    struct QueueFull: Error, CustomStringConvertible { var description: String { "audio queue is full; try again" } }

    /// `reply()` once the audio thread has taken every command queued before this one
    /// (a cue just queued has started, or the open of its device was tried), so that what
    /// it says follows from them; at most `limit` later (a stuck audio thread, or an open
    /// slower than the native stream's 2 s), then as it is.
    func afterQueued(limit: TimeAmount = .seconds(3), _ reply: @escaping () -> Reply) -> Response {
        let id = ticket()
        guard engine.submit(.sync(ticket: id)) else { return .now(reply()) }
        let promise = loop.makePromise(of: Reply.self)
        waitingForSyncs[id] = (promise, reply)
        loop.assumeIsolated().scheduleTask(in: limit) { self.synced(id) }
        return .later(promise.futureResult)
    }

    private func synced(_ id: UInt64) {
        guard let w = waitingForSyncs.removeValue(forKey: id) else { return }
        w.promise.succeed(w.reply())
    }

    private func ticket() -> UInt64 {
        defer { nextTicket &+= 1 }
        return nextTicket
    }

    // MARK: - Audio thread events (hopped onto the loop)

    func handle(_ event: EngineEvent) {
        switch event {
        case .voiceEnded(let end):
            ended(end)
        case .stopped(let id, let n):
            waitingForStops.removeValue(forKey: id)?.succeed(n)
        case .synced(let id):
            synced(id)
        case .opened, .openFailed, .writeFailed, .stalled, .lost, .streamStopped, .closed:
            break  // the device's own news: DeviceLog's
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
            if !end.owner.hasPrefix("#") { counts.dropped(end.owner) }
        }
        if !end.started {  // counted when it was queued
            played -= 1
            if let n = playedByCue[end.cue], n > 0 { playedByCue[end.cue] = n - 1 }
        }
        if end.notify.contains(.wait) {
            waitingForVoices.removeValue(forKey: end.id)?.succeed(
                .ended(end, EndContext(deviceError: engine.stats.sinkError, stopping: stopping.load(ordering: .relaxed))))
        }
        if end.notify.contains(.events) {
            if let observe = endObservers[end.connection] { observe(end) } else {
                eventLines[end.connection]?("end \(end.id) \(end.reason.rawValue)")
            }
        }
    }

    /// What was true when a voice ended, that `play … wait`'s reply says.
    struct EndContext: Equatable, Sendable {
        var deviceError: String?
        var stopping = false
    }

    /// What `play … wait` answers for an end (protocol v1's replies).
    static func reply(for end: VoiceEnd, _ context: EndContext) -> Reply {
        // The device's own error, said apart: its timeouts (an open that waited 2 s) are not the cue's.
        let deviceError = context.deviceError.map { "; the device's error: \($0)" } ?? ""
        switch end.reason {
        case .played: return .ok(nil)
        case .stoppedByID, .stoppedByOwner, .stoppedAll, .stolen, .muted, .disconnected: return .ok("stopped")
        case .shutdown where end.started: return .ok("stopped")
        case .shutdown: return .notPlayed(.shutdown, Self.stoppingReason)
        case .late where context.stopping: return .notPlayed(.shutdown, Self.stoppingReason)
        case .late: return .notPlayed(.late, "the device did not start it within 250 ms of the request" + deviceError)
        case .cut: return .notPlayed(.cut, "the device failed while it played; too late to start it again" + deviceError)
        case .busy: return .notPlayed(.busy, "every voice is taken by a cue of a higher priority")
        }
    }

    /// While a connection is open: how to send it an event line (on the loop).
    func registerEvents(connection: UInt64, send: @escaping (String) -> Void) { eventLines[connection] = send }
    /// A connection closed: it gets no more lines, and the loops it started end (but those it detached).
    func connectionClosed(_ connection: UInt64) {
        eventLines.removeValue(forKey: connection)
        guard loopingConnections.remove(connection) != nil else { return }
        // Nobody waits for the answer: the ends are reported as usual (logged, counted).
        _ = engine.submit(.stop(.loopsOf(connection: connection), ticket: ticket()))
    }
    /// Every end of the voices a non-socket client starts with events on (on the loop).
    func observeEnds(connection: UInt64, _ observe: ((VoiceEnd) -> Void)?) { endObservers[connection] = observe }
}
