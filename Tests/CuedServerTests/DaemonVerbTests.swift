import CuedAudio
import CuedConfig
import CuedCore
import CuedProtocol
@testable import CuedServer
import Logging
import NIOCore
import NIOPosix
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A Daemon on a real event loop of its own, its audio engine on a NullSink that is
/// never started (commands queue up; the test plays the audio thread's part by
/// handing the daemon engine events), reloads in a thread of their own. Given a
/// `sink`, the engine runs on it instead and its events reach the daemon.
final class DaemonHarness: Sendable {
    let group: MultiThreadedEventLoopGroup
    let reloads = NIOThreadPool(numberOfThreads: 1)
    let engine: AudioEngine
    /// The engine runs (a sink was given).
    let running: Bool
    let stopping = StopFlag()
    let saver: StateSaver
    let statePath: String
    let daemon: NIOLoopBound<Daemon>
    /// How many times the config was loaded (reloads that ran).
    let loads = Locked(0)
    /// The config the next reload loads.
    let nextConfig = Locked(Config())
    /// Event lines sent to connections, as "ID: LINE".
    let events = Locked<[String]>([])

    static let quiet = Logger(label: "cued.test") { _ in SwiftLogNoOpLogHandler() }
    /// No theme: its directories do not exist.
    static let noTheme = SoundTheme(environment: ["HOME": "/nonexistent-cued-test", "XDG_DATA_HOME": "/nonexistent-cued-test",
                                                  "XDG_DATA_DIRS": "/nonexistent-cued-test"])

    static func runtime(_ config: Config = Config(), extraCues: [Cue] = []) -> Runtime {
        let bank = CueBank(["psst1", "psst2", "pop"].map { Cue(name: $0, stereo: [0, 0, 0, 0]) } + extraCues)
        return Runtime(bank: bank, config: config, theme: noTheme)
    }

    init(limits: Daemon.Limits = Daemon.Limits(), config: Config = Config(), muted: Bool = false, saved: SavedState = SavedState(),
         extraCues: [Cue] = [], sink: (any Sink)? = nil) throws {
        var template = Array("/tmp/cued-daemon-test.XXXXXX".utf8CString)
        let dir = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
        statePath = dir + "/state"
        reloads.start()
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        let box = NIOLoopBoundBox.makeEmptyBox(valueType: Daemon.self, eventLoop: loop)
        engine = AudioEngine(sink: sink ?? NullSink()) { event in loop.execute { box.value?.handle(event) } }
        running = sink != nil
        if running { engine.start() }
        saver = StateSaver(path: statePath, pool: reloads, loop: loop, logger: Self.quiet)
        let (engine, stopping, saver, reloads, loads, nextConfig) = (engine, stopping, saver, reloads, loads, nextConfig)
        daemon = try loop.submit {
            let d = Daemon(loop: loop, engine: engine, runtime: Self.runtime(config, extraCues: extraCues), saved: saved, muted: muted, saver: saver,
                           reloads: reloads, decoding: DecodeLane(), sounds: SoundLibrary(theme: Self.noTheme, cacheLimitBytes: 1 << 20),
                           limits: limits, stopping: stopping, logger: Self.quiet,
                           loadRuntime: { _, _ throws(LoadFailure) in
                               loads.withLock { $0 += 1 }
                               return (Self.runtime(nextConfig.withLock { $0 }), warnings: [])
                           })
            box.value = d
            return NIOLoopBound(d, eventLoop: loop)
        }.wait()
    }

    func shutdown() {
        if running { _ = engine.shutdown() }
        try? group.syncShutdownGracefully()
        try? reloads.syncShutdownGracefully()
    }

    func onLoop<T: Sendable>(_ body: @escaping @Sendable (Daemon) -> T) throws -> T {
        let daemon = self.daemon
        return try group.next().submit { body(daemon.value) }.wait()
    }

    func respond(_ line: String, _ conn: inout Client, at: UInt64 = MonotonicClock.now()) throws -> Response {
        let before = conn
        let (response, after) = try onLoop { d in
            var c = before
            return (VerbTable(d).respond(to: Array(line.utf8), client: &c, receivedAt: at), c)
        }
        conn = after
        return response
    }

    /// The reply, waited for if it comes later.
    func reply(_ line: String, _ conn: inout Client, at: UInt64 = MonotonicClock.now()) throws -> Reply {
        try Self.reply(respond(line, &conn, at: at))
    }

    static func reply(_ response: Response) throws -> Reply {
        switch response {
        case .now(let r), .close(let r): return r
        case .later(let f): return try f.wait()
        case .whenReady(let ready, _, let render):
            try ready.wait()
            return try ready.eventLoop.submit { render.value() }.wait()
        }
    }

    func handle(_ event: EngineEvent) throws { try onLoop { $0.handle(event) } }

    /// A socket client admitted into the daemon's client table, its end lines going into
    /// `events` as "ID: LINE"; the client as admitted.
    func connect() throws -> Client {
        try onLoop { [events] d in
            let id = d.clients.admit(.socket, pid: 0, now: MonotonicClock.now(), limits: d.limits, letGo: { _ in }, ends: { end in
                events.withLock { $0.append("\(end.connection): \(Replies.endLine(end))") }
            })!
            return d.clients[id]!
        }
    }
}

/// A value shared between the test's thread and the loop.
final class Locked<T: Sendable>: Sendable {
    private let mutex: Mutex<T>
    init(_ value: T) { mutex = Mutex(value) }
    func withLock<R: Sendable>(_ body: (inout sending T) -> sending R) -> R { mutex.withLock(body) }
    var value: T { withLock { $0 } }
}

/// The verb table: every request reaches its own handler, with the replies cued gives.
@Suite(.timeLimit(.minutes(1))) struct DaemonVerbTests {
    /// One line a verb; the switch is exhaustive, so a new verb does not
    /// compile here until its expected reply is written down.
    @Test func everyVerbGetsItsHandler() throws {
        let h = try DaemonHarness()
        defer { h.shutdown() }
        var conn = try h.connect()
        let lines = ["ping", "play pop", "play no-such-sound", "play-file /nonexistent-cued-test/a.wav", "stop", "events on",
                     "state pull", "drag 70", "drop", "threshold 50", "detent 10", "session", "session work", "app tests",
                     "mute", "unmute", "mute app other", "unmute app other",
                     "profile", "profile quiet", "profile app other silent", "profile app other", "profile app other default", "profile full",
                     "reload", "cues", "cues theme", "cues variants", "preload pop", "status", "status wait", "why pop"]
        let profileReplies = ["profile": "full", "profile quiet": "quiet", "profile app other silent": "other silent",
                              "profile app other": "other silent", "profile app other default": "other quiet", "profile full": "full"]
        var seen: Set<String> = []
        for line in lines {
            let request = try RequestParser.parse(line)
            let response = try h.respond(line, &conn)
            if case .later = response, case .stop = request {
                try h.handle(.stopped(ticket: 1, count: 0))
            }
            if case .later = response, case .statusWait = request {
                try h.handle(.synced(ticket: 2))  // the audio thread took what came before (tickets: the stop's was 1)
            }
            let reply = try DaemonHarness.reply(response)
            let verb: String
            switch request {
            case .ping:
                verb = "ping"; #expect(reply == .ok("pong"))
            case .play(let cue, _):
                verb = "play"
                if cue == "pop" { #expect(reply == .ok(nil)) } else {
                    #expect(reply == .err(.unknownCue, "no cue or theme sound named 'no-such-sound' (cues: pop psst1 psst2; theme sounds: `cues theme`, or cuectl cues --theme)"))
                }
            case .playFile:
                verb = "play-file"
                guard case .err(.badFile, let m) = reply else { Issue.record("play-file: \(reply)"); continue }
                #expect(m.hasPrefix("not-found ") && m.contains("/nonexistent-cued-test/a.wav"), "\(m)")
            case .stop:
                verb = "stop"; #expect(reply == .ok("0"))
            case .events:
                verb = "events"; #expect(reply == .ok("events on"))
            case .state:
                verb = "state"; #expect(reply == .ok("-"))
            case .drag:
                verb = "drag"; #expect(reply == .ok("psst1"))  // past the threshold: release
            case .drop:
                verb = "drop"; #expect(reply == .ok("psst2"))  // released: loading
            case .threshold:
                verb = "threshold"; #expect(reply == .ok("50"))
            case .detent:
                verb = "detent"; #expect(reply == .ok("detent 10"))
            case .session(let name):
                verb = "session"; #expect(reply == .ok(name == nil ? "- loading 50" : "work idle 65"))
            case .app:
                verb = "app"; #expect(reply == .ok("tests")); #expect(conn.app == "tests")
            case .mute:
                verb = "mute"; #expect(reply == .ok("muted"))
            case .unmute:
                verb = "unmute"; #expect(reply == .ok("unmuted"))
            case .muteApp:
                verb = "mute app"; #expect(reply == .ok("muted other"))
            case .unmuteApp:
                verb = "unmute app"; #expect(reply == .ok("unmuted other"))
            case .profile:
                verb = "profile"; #expect(reply == .ok(profileReplies[line]))
            case .profileApp:
                verb = "profile app"; #expect(reply == .ok(profileReplies[line]))
            case .reload:
                verb = "reload"; #expect(reply == .ok("reloaded"))
            case .cues(let theme, let variants):
                verb = "cues"; #expect(reply == .ok(theme ? "" : variants ? "pop:1 psst1:1 psst2:1" : "pop psst1 psst2"))
            case .preload:
                verb = "preload"; #expect(reply == .ok(nil))  // a bank cue: decoded already
            case .status:
                verb = "status"
                guard case .ok(let json?) = reply, let status = Status.parse(json) else { Issue.record("status: \(reply)"); continue }
                #expect(status.cues.count == 3)
            case .statusWait:
                verb = "status wait"
                guard case .whenReady = response else { Issue.record("status wait answered before the audio thread: \(reply)"); continue }
                guard case .ok(let json?) = reply, let status = Status.parse(json) else { Issue.record("status wait: \(reply)"); continue }
                #expect(status.cues.count == 3)
            case .why(let cue):
                verb = "why"
                guard case .ok(let json?) = reply, let report = WhyReport.parse(json) else { Issue.record("why: \(reply)"); continue }
                // The harness's null output is not a real one; muted and profiles were set back above.
                #expect(report.cue == cue && report.app == "tests" && report.reasons.map(\.name) == ["no-output"], "\(report)")
            }
            seen.insert(verb)
        }
        #expect(seen.count == 24)
        // Every verb of the table is among those lines: a new one fails here until it is.
        #expect(Set(VerbSpec.all.map(\.name)).subtracting(lines.map { String($0.split(separator: " ")[0]) }).isEmpty)
        // Only `reload` reloads (no state change falls through to it).
        #expect(h.loads.value == 1)
    }

    /// A name that is neither a cue nor a theme sound: `why` answers what `play` does, not a
    /// report that it would be heard (issue 47).
    @Test func whyOfAnUnknownNameIsAnsweredAsPlayIs() throws {
        let h = try DaemonHarness()
        defer { h.shutdown() }
        var conn = try h.connect()
        let unknown = try h.reply("play nosuchcue", &conn)
        #expect(unknown == .err(.unknownCue, "no cue or theme sound named 'nosuchcue' (cues: pop psst1 psst2; theme sounds: `cues theme`, or cuectl cues --theme)"))
        #expect(try h.reply("why nosuchcue", &conn) == unknown)
    }

    @Test func stateChangesShareTheirOwnRateLimitAndAreCounted() throws {
        let h = try DaemonHarness()
        defer { h.shutdown() }
        let t: UInt64 = 1_000_000_000
        var conn = Client(limits: Daemon.Limits(), now: t)
        for i in 0..<20 { #expect(try h.reply(i % 2 == 0 ? "mute app a" : "unmute app a", &conn, at: t) != .err(.rateLimited, "")) }
        #expect(try h.reply("reload", &conn, at: t) == .err(.rateLimited, "more than 20 state changes a second on this connection"))
        #expect(try h.reply("mute", &conn, at: t) == .err(.rateLimited, "more than 20 state changes a second on this connection"))
        #expect(try h.reply("profile quiet", &conn, at: t) == .err(.rateLimited, "more than 20 state changes a second on this connection"))
        #expect(try h.reply("profile app a quiet", &conn, at: t) == .err(.rateLimited, "more than 20 state changes a second on this connection"))
        #expect(try h.reply("profile", &conn, at: t) == .ok("full"))  // asking changes nothing
        #expect(try h.reply("profile app a", &conn, at: t) == .ok("a full"))
        #expect(try h.reply("ping", &conn, at: t) == .ok("pong"))
        #expect(try h.reply("play pop", &conn, at: t) == .ok(nil))  // cues have a bucket of their own
        #expect(h.loads.value == 0)
        #expect(try h.onLoop { $0.status().rateLimited } == 4)
        #expect(try h.onLoop { $0.switches.muted } == false)
    }

    @Test func muteGlobalAppOrConfiguredHoldsBackPlaysButNotTheRest() throws {
        var config = Config()
        config.apps["quiet"] = AppSetting(muted: true)
        let h = try DaemonHarness(config: config)
        defer { h.shutdown() }
        var conn = Client(limits: Daemon.Limits(), now: MonotonicClock.now())
        #expect(try h.reply("app quiet", &conn) == .ok("quiet"))
        #expect(try h.reply("play pop", &conn) == .ok("muted"))
        #expect(try h.reply("play-file /nonexistent-cued-test/a.wav", &conn) == .ok("muted"))  // no lookup at all
        #expect(try h.reply("unmute app quiet", &conn) == .ok("unmuted quiet"))
        #expect(try h.reply("play pop", &conn) == .ok(nil))
        #expect(try h.reply("mute", &conn) == .ok("muted"))
        #expect(try h.reply("play pop", &conn) == .ok("muted"))
        #expect(try h.reply("state pull", &conn) == .ok("-"))
        let status = try h.onLoop { $0.status() }
        #expect(status.muted)
        #expect(status.apps["quiet"] == Status.App(played: 1, dropped: 0, muted: false))
        #expect(try h.onLoop { $0.statusLine() } == "3 cues, sink null closed, muted")
        // The saves: what differs from the config, and the global mute.
        h.saver.flush()
        #expect(try StateFile.load(h.statePath) == SavedState(muted: true, appMutes: ["quiet": false], profile: .full))
    }

    /// `play … wait` answers at the voice's end; `events on` gets the end line; one that
    /// never sounded is logged and counted as dropped for its app.
    @Test func aVoicesEndAnswersItsWaiterItsConnectionAndTheCounts() throws {
        let h = try DaemonHarness()
        defer { h.shutdown() }
        var conn = try h.connect()
        let id = conn.id
        _ = try h.reply("app player", &conn)
        _ = try h.reply("events on", &conn)
        let waited = try h.respond("play pop wait", &conn)
        guard case .later(let reply) = waited else { Issue.record("not deferred: \(waited)"); return }
        #expect(try h.reply("play pop id", &conn) == .ok("2"))
        try h.handle(.voiceEnded(VoiceEnd(id: 1, cue: "pop", owner: "player", connection: id, notify: [.wait, .events], reason: .played, started: true)))
        #expect(try reply.wait() == .ok(nil))
        try h.handle(.voiceEnded(VoiceEnd(id: 2, cue: "pop", owner: "player", connection: id, notify: [.events], reason: .late, started: false, lateNs: 300_000_000)))
        #expect(h.events.value == ["\(id): end 1 played", "\(id): end 2 late"])
        #expect(try h.onLoop { $0.status().apps["player"] } == Status.App(played: 1, dropped: 1, muted: false))
        try h.onLoop { _ = $0.clients.remove(id) != nil }
        try h.handle(.voiceEnded(VoiceEnd(id: 9, cue: "pop", owner: "player", connection: id, notify: [.events], reason: .played, started: true)))
        #expect(h.events.withLock { $0.count } == 2)
    }

    @Test func stopAnswersWithTheEnginesCountForItsTicket() throws {
        let h = try DaemonHarness()
        defer { h.shutdown() }
        var conn = Client(limits: Daemon.Limits(), now: MonotonicClock.now())
        let first = try h.respond("stop all", &conn)
        let second = try h.respond("stop", &conn)
        try h.handle(.stopped(ticket: 2, count: 0))
        try h.handle(.stopped(ticket: 1, count: 4))
        #expect(try DaemonHarness.reply(first) == .ok("4"))
        #expect(try DaemonHarness.reply(second) == .ok("0"))
    }

    /// `stop` of a name that is neither a cue nor a theme sound is refused, with what `stop`
    /// takes, instead of a count of nothing (issue 47: `stop everything`, a misspelt `all`).
    @Test func stopRefusesANameThatIsNoCueNorThemeSound() throws {
        let h = try DaemonHarness()
        defer { h.shutdown() }
        var conn = try h.connect()
        var stops: [Reply] = []
        for line in ["stop everything", "stop 7", "stop pop"] {
            let response = try h.respond(line, &conn)
            // A stop the daemon takes waits for the audio thread's count, which the test gives.
            for ticket: UInt64 in 1...3 { try h.handle(.stopped(ticket: ticket, count: 0)) }
            stops.append(try DaemonHarness.reply(response))
        }
        #expect(stops == [.err(.unknownCue, "no cue or theme sound named 'everything' to stop (cues: pop psst1 psst2); "
                               + "stop alone stops this app's voices, stop all every voice, stop id ID one voice"),
                          .err(.unknownCue, "no cue or theme sound named '7' to stop (cues: pop psst1 psst2); a voice by its id: stop id 7"),
                          .ok("0")])
    }

    @Test func onceStoppingNoCueStarts() throws {
        let h = try DaemonHarness()
        defer { h.shutdown() }
        var conn = Client(limits: Daemon.Limits(), now: MonotonicClock.now())
        h.stopping.store(true, ordering: .relaxed)
        #expect(try h.reply("play pop", &conn) == .notPlayed(.shutdown, "cued is stopping"))
        #expect(try h.reply("ping", &conn) == .ok("pong"))
    }

    /// A reload swaps the config in: its app mutes, and its `muted` when that changed.
    @Test func aReloadAppliesTheNewConfig() throws {
        let h = try DaemonHarness()
        defer { h.shutdown() }
        var conn = Client(limits: Daemon.Limits(), now: MonotonicClock.now())
        _ = try h.reply("app a", &conn)
        #expect(try h.reply("play pop", &conn) == .ok(nil))
        var next = Config()
        next.apps["a"] = AppSetting(muted: true)
        h.nextConfig.withLock { $0 = next }
        #expect(try h.reply("reload", &conn) == .ok("reloaded"))
        #expect(try h.reply("play pop", &conn) == .ok("muted"))
        #expect(try h.onLoop { $0.switches.muted } == false)
        next.muted = true
        h.nextConfig.withLock { $0 = next }
        #expect(try h.reply("reload", &conn) == .ok("reloaded"))
        #expect(try h.onLoop { $0.switches.muted } == true)
        #expect(try h.onLoop { $0.current.config.muted } == true)
        #expect(h.loads.value == 2)
    }

    /// A reload names each key only a start applies that it changed since the start, first in
    /// status's warnings (cuectl reload prints them), until the start's value is back;
    /// `[desktop] follow` only turned on (turned off, the reload applies it: the rules stop following).
    @Test func aReloadNamesTheKeysThatWaitForTheNextStart() throws {
        var start = Config()
        start.desktop.follow = false
        let h = try DaemonHarness(config: start)
        defer { h.shutdown() }
        var conn = try h.connect()
        var next = start
        next.notifications.enabled = true
        next.desktop.follow = true
        next.dbus.feedbackTheme = "other"  // a reload applies it
        h.nextConfig.withLock { $0 = next }
        #expect(try h.reply("reload", &conn) == .ok("reloaded"))
        #expect(try h.onLoop { $0.status().warnings } == [
            "changed since cued started, but read only at start: [notifications] enabled, [desktop] follow "
                + "(a restart applies them: systemctl --user restart cued, or stop cued and start it again)"])
        h.nextConfig.withLock { $0 = start }
        #expect(try h.reply("reload", &conn) == .ok("reloaded"))
        #expect(try h.onLoop { $0.status().warnings } == [])

        let following = try DaemonHarness()
        defer { following.shutdown() }
        var other = try following.connect()
        var off = Config()
        off.desktop.follow = false
        following.nextConfig.withLock { $0 = off }
        #expect(try following.reply("reload", &other) == .ok("reloaded"))
        #expect(try following.onLoop { $0.status().warnings } == [])
    }

    @Test func aLineTooLongClosesTheConnectionAndABadOneIsAnswered() throws {
        let h = try DaemonHarness()
        defer { h.shutdown() }
        var conn = Client(limits: Daemon.Limits(), now: MonotonicClock.now())
        guard case .close(.err(.lineTooLong, _)) = try h.respond(String(repeating: "x", count: ProtocolLimits.maxLineBytes + 10), &conn) else {
            Issue.record("not closed"); return
        }
        guard case .now(.err(let code, _)) = try h.respond("frobnicate", &conn) else { Issue.record("not answered"); return }
        #expect(code != .lineTooLong)
    }
}
