import CuedCore
import CuedProtocol
import Logging
import NIOCore

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

/// The socket's edge: protocol v1's verbs, each to its one handler, which asks the
/// daemon's typed calls and parts and words the answer (`Replies`). A state change (it
/// may write the state file) first passes the client's rate limit of changes.
/// Loop-confined, as the daemon.
final class VerbTable: ConnectionHost {
    let daemon: Daemon

    init(_ daemon: Daemon) { self.daemon = daemon }

    var logger: Logger { daemon.logger }
    var limits: Daemon.Limits { daemon.limits }
    var clients: ClientTable { daemon.clients }

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

    func respond(to request: Request, client c: inout Client, receivedAt at: UInt64) -> Response {
        let d = daemon
        switch request {
        case .ping: return .now(.ok("pong"))
        case .play(let name, let options): return Self.response(d.play(.named(name), options, &c, at: at), options)
        case .playFile(let path, let options): return Self.response(d.play(.file(path), options, &c, at: at), options)
        case .stop(let target): return .later(d.stop(target, &c).map(Replies.reply).flatMapErrorThrowing { .err(.internal, "\($0)") })
        case .events(let on):
            c.events = on
            return .now(.ok(on ? "events on" : "events off"))
        case .state(let target, let quiet): return .now(refresh(&c, at) { $0.set(target, quiet: quiet) })
        case .drag(let points):
            let every = d.current.config.pull.detentPoints
            return .now(refresh(&c, at) { $0.drag(points, detentEvery: every) })
        case .drop: return .now(refresh(&c, at) { $0.drop() })
        case .threshold(let points):
            d.desk.withSession(&c, now: at) { $0.threshold = points }
            return .now(.ok(Request.number(points)))
        case .detent(let choice):
            let every = d.desk.detent(choice, &c, now: at, configured: d.current.config.pull.detentPoints)
            return .now(.ok(every > 0 ? "detent " + Request.number(every) : "detent off"))
        case .session(let name):
            if let name { c.sessionName = name }
            let s = d.desk.withSession(&c, now: at) { $0 }
            return .now(.ok("\(c.sessionName ?? "-") \(s.state.rawValue) \(Request.number(s.threshold))"))
        case .app(let name, let via):
            (c.app, c.via) = (name, via)
            return .now(.ok(name))
        case .mute: return change(&c, at) { d.setMuted(true); return .now(.ok("muted")) }
        case .unmute: return change(&c, at) { d.setMuted(false); return .now(.ok("unmuted")) }
        case .muteApp(let name): return change(&c, at) { .now(setAppMuted(name, true)) }
        case .unmuteApp(let name): return change(&c, at) { .now(setAppMuted(name, false)) }
        case .profile(nil): return .now(.ok(d.switches.profile.rawValue))
        case .profile(let p?): return change(&c, at) { d.setProfile(p); return .now(.ok(p.rawValue)) }
        case .profileApp(let name, nil): return .now(.ok("\(name) \(d.switches.effectiveProfile(app: name).rawValue)"))
        case .profileApp(let name, let choice?): return change(&c, at) { .now(setAppProfile(name, choice)) }
        case .reload: return change(&c, at) { .later(d.reload().map(Replies.reply)) }
        case .cues(let theme, let variants): return cues(theme: theme, variants: variants, &c)
        case .preload(let name, let theme): return preload(name, theme: theme, &c, at)
        case .status: return .now(.ok(d.status().json.encoded))
        case .statusWait:
            guard let synced = d.broker.tickets.afterQueued() else { return .now(.ok(d.status().json.encoded)) }
            let render = NIOLoopBound({ Reply.ok(d.status().json.encoded) }, eventLoop: d.loop)
            return .whenReady(synced, cost: VerbCost.of(verb: "status"), render: render)
        case .why(let cue): return .later(d.why(named: cue, c).map(Replies.reply))
        }
    }

    private func change(_ client: inout Client, _ at: UInt64, _ handler: () -> Response) -> Response {
        if let limit = daemon.broker.allowChange(&client, at) { return .now(Replies.changeRefused(perSecond: limit)) }
        return handler()
    }

    /// A play's answer as protocol v1 says it.
    static func response(_ play: Play, _ options: PlayOptions) -> Response {
        switch play {
        case .now(let r): return .now(Replies.reply(r, options))
        case .later(let f): return .later(f.map { Replies.reply($0, options) })
        }
    }

    /// A move of the client's refresh session: `ok CUE` for the cue it started, `ok -`
    /// for none, else why the cue did not start (`ok muted`, …).
    private func refresh(_ client: inout Client, _ at: UInt64, _ event: (inout RefreshSession) -> RefreshSession.Outcome) -> Reply {
        switch daemon.refresh(&client, at: at, event) {
        case .nothing: return .ok("-")
        case .played(let name, .now(.started)): return .ok(name)
        case .played(_, .now(let r)): return Replies.reply(r, PlayOptions())
        case .played(_, .later): return .err(.internal, "unexpected deferred reply")
        }
    }

    private func setAppMuted(_ app: String, _ value: Bool) -> Reply {
        if daemon.switches.setAppMuted(app, value) == .tooMany { return Replies.tooManyAppMutes }
        return .ok("\(value ? "muted" : "unmuted") \(app)")
    }

    /// `profile app NAME LEVEL|default`: the reply says the profile the app's plays get now.
    private func setAppProfile(_ app: String, _ choice: ProfileChoice) -> Reply {
        let value: Profile? = if case .profile(let p) = choice { p } else { nil }
        if daemon.switches.setAppProfile(app, value) == .tooMany { return Replies.tooManyAppProfiles }
        return .ok("\(app) \(daemon.switches.effectiveProfile(app: app).rawValue)")
    }

    private func cues(theme: Bool, variants: Bool, _ client: inout Client) -> Response {
        let bank = daemon.current.bank
        if variants { return .now(.ok(bank.names.map { "\($0):\(bank.variants[$0]?.count ?? 1)" }.joined(separator: " "))) }
        guard theme else { return .now(.ok(bank.names.joined(separator: " "))) }
        return .later(daemon.fetch.themeNames(owner: client.owner).map { result in
            switch result {
            case .success(let names): return .ok(names.joined(separator: " "))
            case .failure(let refusal): return .badFile(refusal.problem, "the sound theme: " + Replies.explain(refusal))
            }
        })
    }

    /// `preload NAME`: a bank cue is decoded already; a theme sound is decoded into the
    /// cache now (found in the decoding lane, as a play would), answered once it is
    /// there. Costs a play of the rate limit.
    private func preload(_ name: String, theme: ThemeChoice?, _ client: inout Client, _ at: UInt64) -> Response {
        let d = daemon
        let theme = theme ?? d.desktopTheme
        if d.current.bank[name] != nil { return .now(.ok(nil)) }
        if let hold = d.broker.allowWork(&client, at) { return .now(Replies.reply(hold)) }
        if d.fetch.cached(name, theme: theme) != nil { return .now(.ok(nil)) }
        return .later(d.fetch.themeSound(name, theme: theme, owner: client.owner, bankNames: d.current.bank.names).map { fetched in
            switch fetched {
            case .cue: return .ok(nil)
            case .disabled: return .ok(NotSounded.disabled.rawValue)
            case .failed(let failure): return Replies.reply(failure)
            }
        })
    }
}
