/// What `status` reports, as one type shared by cued (which fills and encodes
/// it), cuectl (which decodes and renders it) and the tests. Every JSON key is
/// spelled once, in `Key`.
public struct Status: Sendable, Equatable {
    public struct Sink: Sendable, Equatable {
        public var spec = ""
        /// running, idle, closed or failed.
        public var state = "closed"
        /// What the PCM is (hw, plugin…), once opened.
        public var kind: String?
        public var rate: Int?
        public var channels: Int?
        public var format: String?
        public var periodFrames: Int?
        public var bufferFrames: Int?
        /// Audio queued in the device ahead of what is heard (snd_pcm_delay), µs:
        /// add it to `latency_us` for the time from a request to its sound.
        public var delayUs: Int?
        public var error: String?
        /// Why `--sink auto` picked this sink; nil when the sink was named.
        public var why: String?
        /// The margin the device is given against the machine's stalls, in frames (nil: fixed by
        /// the device): the low water above a period, what a rewind leaves, or the native PipeWire
        /// stream's graph cycle. It grows after a miss (an xrun, a missed cycle) and shrinks after a
        /// quiet while (docs/AUDIO.md).
        public var marginFrames: Int?
        public var marginGrowths = 0
        public var marginShrinks = 0
        /// Misses it saw (an xrun, or graph cycles missed in one go), grown after or not (at its limit).
        public var marginMisses = 0
        /// cued's own stream as the sound server's graph sets it (StatusDesktop.swift).
        public var stream = StreamVolume()
        /// The volume the sound server keeps for the sink cued plays to, where cued can read it.
        public var outputVolume: StreamVolume?
        /// Since a cue was last heard whole through this output: its failures (stalls, lost
        /// devices, failed writes and opens), the cues it cut off or dropped, and the last
        /// failure in words. Any of them: the output is failing, whatever its `state` says.
        public var faultsSinceHeard = 0
        public var lostSinceHeard = 0
        public var lastFault: String?
        public var failing: Bool { faultsSinceHeard > 0 || lostSinceHeard > 0 }
        /// "failed twice and lost 3 cues since a cue was last heard whole (last: …)"; nil: not failing.
        public var failingWords: String? { Self.failingWords(faults: faultsSinceHeard, lost: lostSinceHeard, last: lastFault) }
        public static func failingWords(faults: Int, lost: Int, last: String?) -> String? {
            guard faults > 0 || lost > 0 else { return nil }
            var parts: [String] = []
            if faults > 0 { parts.append("failed " + (faults == 1 ? "once" : faults == 2 ? "twice" : "\(faults) times")) }
            if lost > 0 { parts.append("lost \(lost) cue\(lost == 1 ? "" : "s")") }
            return parts.joined(separator: " and ") + " since a cue was last heard whole" + (last.map { " (last: \($0))" } ?? "")
        }
        public init() {}
    }

    public struct Cue: Sendable, Equatable {
        /// The first variant's length.
        public var frames = 0
        /// Plays of all its variants.
        public var played = 0
        /// How many sounds it plays in turn (`pop.wav`, `pop-2.wav`…), and in what order.
        public var variants = 1
        public var order: String?
        public init(frames: Int = 0, played: Int = 0, variants: Int = 1, order: String? = nil) {
            self.frames = frames; self.played = played; self.variants = variants; self.order = order
        }
    }

    public struct App: Sendable, Equatable {
        public var played = 0
        public var dropped = 0
        public var muted = false
        /// Its own profile (run-time, else the config's); nil where neither sets one.
        public var profile: Profile?
        /// The bridges its cues came through (`app NAME via=KIND`: `libcanberra`), sorted.
        public var via: [String] = []
        public init(played: Int = 0, dropped: Int = 0, muted: Bool = false, profile: Profile? = nil, via: [String] = []) {
            self.played = played; self.dropped = dropped; self.muted = muted; self.profile = profile; self.via = via
        }
    }

    public struct Latency: Sendable, Equatable {
        public var p50: Int?
        public var p99: Int?
        public var max: Int?
        public init() {}
        /// What the figures measure (they are not time to sound: add `sink.device_delay_us`).
        public static let measures = "request read to first frame handed to the device"
    }

    public struct Theme: Sendable, Equatable {
        /// The theme asked for (config `theme`), and the chain searched.
        public var name = "freedesktop"
        public var chain: [String] = []
        /// Decoded sounds (theme and play-file) kept, and their size.
        public var cached = 0
        public var cacheBytes = 0
        public var cacheLimitBytes = 0
        public init() {}
    }

    /// The memory budget for decoded sound (config `sound_budget_mb`) and what holds it.
    public struct Memory: Sendable, Equatable {
        public var limitBytes = 0
        public var usedBytes = 0
        /// The config's cues (a file several cues name counted once).
        public var cuesBytes = 0
        /// The sound cache (theme sounds and played files).
        public var cacheBytes = 0
        /// Sounds only playing voices hold (a file dropped from the cache, a replaced config's cues).
        public var playingBytes = 0
        /// Decodes in flight (their buffers, and an estimate of the decoding libraries' state).
        public var decodingBytes = 0
        /// Requests and reloads refused because the budget had no room, since start.
        public var refused = 0
        public init() {}
    }

    /// cued on the session bus (the D-Bus face).
    public struct Bus: Sendable, Equatable {
        /// off, absent (no session bus: retried) or connected.
        public var connection = "off"
        /// org.sigxcpu.Feedback: owner, queued (another process has it) or none.
        public var feedback = "none"
        /// Notify calls: off, watching, or why not.
        public var notifications = "off"
        /// Feedbacks (TriggerFeedback ids) not ended yet.
        public var live = 0
        /// Notify calls cued has read, sounded or not (suppressed, silent, over the burst limit).
        public var notificationsSeen = 0
        public var error: String?
        public init() {}
    }

    public var version = ""
    public var protocolVersion = 0
    public var pid = 0
    public var muted = false
    /// The global profile.
    public var profile = Profile.full
    /// False while the mute state could not be written (a full disk…): cued retries.
    public var stateSaved = true
    /// Why the last save failed, while `stateSaved` is false.
    public var stateError: String?
    public var config: String?
    /// What the last (re)load skipped or could not read, one line each (at most `maxWarnings`).
    public var warnings: [String] = []
    public static let maxWarnings = 8
    public var sink = Sink()
    public var cues: [String: Cue] = [:]
    public var played = 0
    public var voicesActive = 0
    public var voicesStolen = 0
    public var clippedSamples = 0
    public var xruns = 0
    /// Cues that arrived mid-stream and were mixed into audio the device gave back (a
    /// rewind), so they started at the first frame it had not committed.
    public var rewinds = 0
    /// Graph cycles the sound server played without cued's audio, inside a sounding
    /// stream, that no xrun reported (the native PipeWire stream): a hole heard.
    public var missedCycles = 0
    /// Devices that stopped taking audio and were reopened.
    public var stalls = 0
    /// Devices whose recovery made no progress (e.g. the sound server restarted) and were reopened.
    public var devicesLost = 0
    /// Events the audio thread could not hand out, its outbox full (its relay thread starved): never waited for.
    public var eventsLost = 0
    /// How the audio thread is scheduled: realtime, nice or normal.
    public var audioThread = "normal"
    public var dropped = 0
    /// Decoders written off, asleep on a file system that does not answer (a hung mount).
    public var decodersStuck = 0
    public var clients = 0
    public var rateLimited = 0
    public var refusedBusy = 0
    /// Connections closed to make room for new ones (the longest idle first).
    public var evictedIdle = 0
    /// The connection cap in force (`--max-clients`, lowered to fit the descriptor limit).
    public var maxClients = 0
    /// Connections closed at the cap to make room for a process holding fewer (taken
    /// from the process holding the most).
    public var evictedShare = 0
    /// Connections closed because their unread output reached its bound (a client that does not read).
    public var closedUnread = 0
    /// Processes with a connection now (by peer pid), and the one holding the most (nil: none).
    public var clientProcesses = 0
    public var busiestPid: Int?
    public var busiestClients = 0
    /// Replies and event lines queued for the clients' sockets and not yet taken, all connections.
    public var clientOutputBytes = 0
    /// The bound of one connection's unsent output (past it, its event lines close it).
    public var clientOutputLimitBytes = 0
    public var sessions = 0
    public var apps: [String: App] = [:]
    /// Apps cued knows (muted, given a profile, configured or counted) that `apps` leaves out,
    /// and the plays of apps it does not list (counted or not).
    public var appsUnlisted = 0
    public var appsUnlistedPlayed = 0
    public var latencyUs = Latency()
    public var theme = Theme()
    public var memory = Memory()
    public var bus = Bus()
    /// The desktop's sound settings in force (StatusDesktop.swift).
    public var desktop = Desktop()

    public init() {}

    /// The JSON keys, spelled once.
    enum Key: String {
        case version, `protocol`, pid, muted, profile, stateSaved = "state_saved", stateError = "state_error", config, warnings, sink, cues, played, voicesActive = "voices_active"
        case voicesStolen = "voices_stolen", clippedSamples = "clipped_samples", xruns, rewinds, stalls, dropped, clients
        case decodersStuck = "decoders_stuck"
        case rateLimited = "rate_limited", refusedBusy = "refused_busy", evictedIdle = "evicted_idle", sessions, apps
        case maxClients = "max_clients", evictedShare = "evicted_share", closedUnread = "closed_unread"
        case clientProcesses = "client_processes", busiestPid = "busiest_pid", busiestClients = "busiest_clients"
        case clientOutputBytes = "client_output_bytes", clientOutputLimitBytes = "client_output_limit_bytes"
        case appsUnlisted = "apps_unlisted", appsUnlistedPlayed = "apps_unlisted_played"
        case latencyUs = "latency_us", theme, devicesLost = "devices_lost", audioThread = "audio_thread"
        case missedCycles = "missed_cycles", eventsLost = "events_lost"
        // sink
        case spec, state, kind, rate, channels, format, periodFrames = "period_frames", bufferFrames = "buffer_frames"
        case delayUs = "device_delay_us", error, why
        case marginFrames = "margin_frames", marginGrowths = "margin_growths", marginShrinks = "margin_shrinks", marginMisses = "margin_misses"
        case stream, outputVolume = "output_volume"
        case faultsSinceHeard = "faults_since_heard", lostSinceHeard = "lost_since_heard", lastFault = "last_fault"
        // cue, app
        case frames, via, variants, order
        // latency
        case p50, p99, max, measures
        // theme
        case name, chain, cached, cacheBytes = "cache_bytes", cacheLimitBytes = "cache_limit_bytes"
        // memory
        case memory, limitBytes = "limit_bytes", usedBytes = "used_bytes", cuesBytes = "cues_bytes"
        case playingBytes = "playing_bytes", decodingBytes = "decoding_bytes", refused
        // bus
        case bus, connection, feedback, notifications, live, notificationsSeen = "notifications_seen"
        case desktop
    }

    public var json: JSON {
        func n(_ v: Int) -> JSON { .number(Double(v)) }
        func n(_ v: Int?) -> JSON { v.map { .number(Double($0)) } ?? .null }
        func s(_ v: String?) -> JSON { v.map(JSON.string) ?? .null }
        func obj(_ pairs: [(Key, JSON)]) -> JSON { .object(pairs.map { ($0.0.rawValue, $0.1) }) }
        let sinkJSON = obj([(.spec, .string(sink.spec)), (.state, .string(sink.state)), (.kind, s(sink.kind)),
                            (.rate, n(sink.rate)), (.channels, n(sink.channels)), (.format, s(sink.format)),
                            (.periodFrames, n(sink.periodFrames)), (.bufferFrames, n(sink.bufferFrames)),
                            (.delayUs, n(sink.delayUs)), (.error, s(sink.error)), (.why, s(sink.why)),
                            (.marginFrames, n(sink.marginFrames)), (.marginGrowths, n(sink.marginGrowths)),
                            (.marginShrinks, n(sink.marginShrinks)), (.marginMisses, n(sink.marginMisses)), (.stream, sink.stream.json),
                            (.outputVolume, sink.outputVolume?.keptJSON ?? .null),
                            (.faultsSinceHeard, n(sink.faultsSinceHeard)), (.lostSinceHeard, n(sink.lostSinceHeard)),
                            (.lastFault, s(sink.lastFault))])
        let cuesJSON = JSON.object(cues.keys.sorted().map { name in
            let c = cues[name]!
            return (name, obj([(.frames, n(c.frames)), (.played, n(c.played)), (.variants, n(c.variants)), (.order, s(c.order))]))
        })
        let appsJSON = JSON.object(apps.keys.sorted().map { name in
            let a = apps[name]!
            return (name, obj([(.played, n(a.played)), (.dropped, n(a.dropped)), (.muted, .bool(a.muted)),
                               (.profile, s(a.profile?.rawValue)), (.via, .array(a.via.map(JSON.string)))]))
        })
        let latencyJSON = obj([(.p50, n(latencyUs.p50)), (.p99, n(latencyUs.p99)), (.max, n(latencyUs.max)),
                               (.measures, .string(Latency.measures))])
        let themeJSON = obj([(.name, .string(theme.name)), (.chain, .array(theme.chain.map(JSON.string))),
                             (.cached, n(theme.cached)), (.cacheBytes, n(theme.cacheBytes)),
                             (.cacheLimitBytes, n(theme.cacheLimitBytes))])
        let memoryJSON = obj([(.limitBytes, n(memory.limitBytes)), (.usedBytes, n(memory.usedBytes)),
                              (.cuesBytes, n(memory.cuesBytes)), (.cacheBytes, n(memory.cacheBytes)),
                              (.playingBytes, n(memory.playingBytes)), (.decodingBytes, n(memory.decodingBytes)),
                              (.refused, n(memory.refused))])
        let busJSON = obj([(.connection, .string(bus.connection)), (.feedback, .string(bus.feedback)),
                           (.notifications, .string(bus.notifications)), (.live, n(bus.live)),
                           (.notificationsSeen, n(bus.notificationsSeen)), (.error, s(bus.error))])
        return obj([
            (.version, .string(version)), (.protocol, n(protocolVersion)), (.pid, n(pid)), (.muted, .bool(muted)),
            (.profile, .string(profile.rawValue)),
            (.stateSaved, .bool(stateSaved)), (.stateError, s(stateError)), (.config, s(config)), (.warnings, .array(warnings.map(JSON.string))), (.sink, sinkJSON), (.cues, cuesJSON), (.played, n(played)),
            (.voicesActive, n(voicesActive)), (.voicesStolen, n(voicesStolen)), (.clippedSamples, n(clippedSamples)),
            (.xruns, n(xruns)), (.missedCycles, n(missedCycles)), (.rewinds, n(rewinds)), (.stalls, n(stalls)), (.devicesLost, n(devicesLost)), (.eventsLost, n(eventsLost)), (.audioThread, .string(audioThread)),
            (.dropped, n(dropped)), (.decodersStuck, n(decodersStuck)), (.clients, n(clients)),
            (.maxClients, n(maxClients)), (.rateLimited, n(rateLimited)), (.refusedBusy, n(refusedBusy)), (.evictedIdle, n(evictedIdle)),
            (.evictedShare, n(evictedShare)), (.closedUnread, n(closedUnread)), (.clientProcesses, n(clientProcesses)),
            (.busiestPid, n(busiestPid)), (.busiestClients, n(busiestClients)), (.clientOutputBytes, n(clientOutputBytes)),
            (.clientOutputLimitBytes, n(clientOutputLimitBytes)),
            (.sessions, n(sessions)), (.apps, appsJSON), (.appsUnlisted, n(appsUnlisted)), (.appsUnlistedPlayed, n(appsUnlistedPlayed)),
            (.latencyUs, latencyJSON), (.theme, themeJSON),
            (.memory, memoryJSON), (.bus, busJSON), (.desktop, desktop.json),
        ])
    }

    /// Reads a status back; fields it does not know or that are missing keep their defaults.
    public init(json: JSON) {
        // The top level's 60-odd keys by name, read once (a lookup in the pairs is a scan).
        var top: [String: JSON] = [:]
        if case .object(let pairs) = json { for (k, value) in pairs where top[k] == nil { top[k] = value } }
        func field(_ k: Key) -> JSON? { top[k.rawValue] }
        func v(_ j: JSON?, _ k: Key) -> JSON? { j?[k.rawValue] }
        func int(_ j: JSON?) -> Int? { if case .number(let d)? = j, d.isFinite, abs(d) < 1e15 { return Int(d) }; return nil }
        func str(_ j: JSON?) -> String? { if case .string(let s)? = j { return s }; return nil }
        func bool(_ j: JSON?) -> Bool? { if case .bool(let b)? = j { return b }; return nil }
        func pairs(_ j: JSON?) -> [(String, JSON)] { if case .object(let p)? = j { return p }; return [] }
        version = str(field(.version)) ?? ""
        protocolVersion = int(field(.protocol)) ?? 0
        pid = int(field(.pid)) ?? 0
        muted = bool(field(.muted)) ?? false
        profile = str(field(.profile)).flatMap(Profile.init(rawValue:)) ?? .full
        stateSaved = bool(field(.stateSaved)) ?? true
        stateError = str(field(.stateError))
        config = str(field(.config))
        if case .array(let items)? = field(.warnings) { warnings = items.compactMap { str($0) } }
        let sk = field(.sink)
        sink.spec = str(v(sk, .spec)) ?? ""
        sink.state = str(v(sk, .state)) ?? "closed"
        sink.kind = str(v(sk, .kind))
        sink.rate = int(v(sk, .rate))
        sink.channels = int(v(sk, .channels))
        sink.format = str(v(sk, .format))
        sink.periodFrames = int(v(sk, .periodFrames))
        sink.bufferFrames = int(v(sk, .bufferFrames))
        sink.delayUs = int(v(sk, .delayUs))
        sink.error = str(v(sk, .error))
        sink.why = str(v(sk, .why))
        sink.marginFrames = int(v(sk, .marginFrames))
        sink.marginGrowths = int(v(sk, .marginGrowths)) ?? 0
        sink.marginShrinks = int(v(sk, .marginShrinks)) ?? 0
        sink.marginMisses = int(v(sk, .marginMisses)) ?? 0
        sink.stream = StreamVolume(json: v(sk, .stream))
        if let o = v(sk, .outputVolume), o != .null { sink.outputVolume = StreamVolume(json: o) }
        sink.faultsSinceHeard = int(v(sk, .faultsSinceHeard)) ?? 0
        sink.lostSinceHeard = int(v(sk, .lostSinceHeard)) ?? 0
        sink.lastFault = str(v(sk, .lastFault))
        for (name, c) in pairs(field(.cues)) {
            cues[name] = Cue(frames: int(v(c, .frames)) ?? 0, played: int(v(c, .played)) ?? 0, variants: int(v(c, .variants)) ?? 1,
                             order: str(v(c, .order)))
        }
        played = int(field(.played)) ?? 0
        voicesActive = int(field(.voicesActive)) ?? 0
        voicesStolen = int(field(.voicesStolen)) ?? 0
        clippedSamples = int(field(.clippedSamples)) ?? 0
        xruns = int(field(.xruns)) ?? 0
        missedCycles = int(field(.missedCycles)) ?? 0
        rewinds = int(field(.rewinds)) ?? 0
        stalls = int(field(.stalls)) ?? 0
        devicesLost = int(field(.devicesLost)) ?? 0
        eventsLost = int(field(.eventsLost)) ?? 0
        audioThread = str(field(.audioThread)) ?? "normal"
        dropped = int(field(.dropped)) ?? 0
        decodersStuck = int(field(.decodersStuck)) ?? 0
        clients = int(field(.clients)) ?? 0
        rateLimited = int(field(.rateLimited)) ?? 0
        refusedBusy = int(field(.refusedBusy)) ?? 0
        evictedIdle = int(field(.evictedIdle)) ?? 0
        maxClients = int(field(.maxClients)) ?? 0
        evictedShare = int(field(.evictedShare)) ?? 0
        closedUnread = int(field(.closedUnread)) ?? 0
        clientProcesses = int(field(.clientProcesses)) ?? 0
        busiestPid = int(field(.busiestPid))
        busiestClients = int(field(.busiestClients)) ?? 0
        clientOutputBytes = int(field(.clientOutputBytes)) ?? 0
        clientOutputLimitBytes = int(field(.clientOutputLimitBytes)) ?? 0
        sessions = int(field(.sessions)) ?? 0
        for (name, a) in pairs(field(.apps)) {
            var via: [String] = []
            if case .array(let items)? = v(a, .via) { via = items.compactMap { str($0) } }
            apps[name] = App(played: int(v(a, .played)) ?? 0, dropped: int(v(a, .dropped)) ?? 0, muted: bool(v(a, .muted)) ?? false,
                             profile: str(v(a, .profile)).flatMap(Profile.init(rawValue:)), via: via)
        }
        appsUnlisted = int(field(.appsUnlisted)) ?? 0
        appsUnlistedPlayed = int(field(.appsUnlistedPlayed)) ?? 0
        let l = field(.latencyUs)
        latencyUs.p50 = int(v(l, .p50))
        latencyUs.p99 = int(v(l, .p99))
        latencyUs.max = int(v(l, .max))
        let t = field(.theme)
        theme.name = str(v(t, .name)) ?? "freedesktop"
        if case .array(let items)? = v(t, .chain) { theme.chain = items.compactMap { str($0) } }
        theme.cached = int(v(t, .cached)) ?? 0
        theme.cacheBytes = int(v(t, .cacheBytes)) ?? 0
        theme.cacheLimitBytes = int(v(t, .cacheLimitBytes)) ?? 0
        let m = field(.memory)
        memory.limitBytes = int(v(m, .limitBytes)) ?? 0
        memory.usedBytes = int(v(m, .usedBytes)) ?? 0
        memory.cuesBytes = int(v(m, .cuesBytes)) ?? 0
        memory.cacheBytes = int(v(m, .cacheBytes)) ?? 0
        memory.playingBytes = int(v(m, .playingBytes)) ?? 0
        memory.decodingBytes = int(v(m, .decodingBytes)) ?? 0
        memory.refused = int(v(m, .refused)) ?? 0
        let b = field(.bus)
        bus.connection = str(v(b, .connection)) ?? "off"
        bus.feedback = str(v(b, .feedback)) ?? "none"
        bus.notifications = str(v(b, .notifications)) ?? "off"
        bus.live = int(v(b, .live)) ?? 0
        bus.notificationsSeen = int(v(b, .notificationsSeen)) ?? 0
        bus.error = str(v(b, .error))
        desktop = Desktop(json: field(.desktop))
    }

    /// Parses a `status` reply's payload (the JSON after `ok `).
    public static func parse(_ payload: String) -> Status? {
        guard let j = try? JSON.parse(payload) else { return nil }
        return Status(json: j)
    }

    /// Every key path the JSON has (`sink.state`, `latency_us.p50`…), for docs checks;
    /// the names under `cues` and `apps` are the cue's and app's own, shown as `NAME`.
    public static var fieldPaths: [String] {
        var s = Status()
        s.cues = ["NAME": Cue()]
        s.apps = ["NAME": App()]
        var out: [String] = []
        func walk(_ j: JSON, _ prefix: String) {
            guard case .object(let pairs) = j else { return }
            for (k, v) in pairs {
                let path = prefix.isEmpty ? k : prefix + "." + k
                out.append(path)
                walk(v, path)
            }
        }
        walk(s.json, "")
        return out
    }
}

/// Words an output failure carries that cued's clients act on (the `auto` pick, `cuectl doctor`).
public enum OutputFailure {
    /// PipeWire answered but did not link cued's stream to an output: no session manager
    /// (WirePlumber) runs yet, or it links nothing. Every PipeWire path (the native stream, the
    /// ALSA and pulse plugins) waits for the same link.
    public static let notLinked = "not linked to an output"
}
