import CuedCore
import CuedProtocol
#if canImport(Glibc)
import Glibc
#endif

/// Plays and drops per app, for `status`. Bounded: app names come from
/// clients, so at most `StatusReport.maxApps` are counted (the first seen);
/// the plays of the others are counted together, without their names.
struct AppCounts {
    private(set) var apps: [String: Status.App] = [:]
    /// Plays of apps past the bound (dropped ones taken off).
    private(set) var otherPlayed = 0

    /// Bridges remembered per app at most (`via` comes from clients too).
    static let maxVia = 4

    mutating func played(_ app: String, via: String? = nil) {
        guard apps[app] != nil || apps.count < StatusReport.maxApps else {
            otherPlayed += 1
            return
        }
        apps[app, default: Status.App()].played += 1
        if let via, !apps[app]!.via.contains(via), apps[app]!.via.count < Self.maxVia {
            apps[app]!.via = (apps[app]!.via + [via]).sorted()
        }
    }

    /// A voice counted as played that never sounded.
    mutating func dropped(_ app: String) {
        guard apps[app] != nil else {
            otherPlayed = max(0, otherPlayed - 1)
            return
        }
        apps[app]!.played -= 1
        apps[app]!.dropped += 1
    }
}

/// What `status` and systemd's STATUS= line show, assembled from the
/// daemon's parts at the moment they are asked for.
struct StatusReport {
    /// Apps `status` lists at most (RELIABILITY.md's bound).
    static let maxApps = 256

    var engine: AudioEngine
    var runtime: Runtime
    var mutes: MuteState
    var profiles = ProfileState()
    var stateSaved = true
    var stateError: String?
    var sinkWhy: String?
    var connections = ClientFigures()
    var rateLimited = 0
    var sessions = 0
    var decodersStuck = 0
    var counts: [String: Status.App] = [:]
    /// Cues played in all, and per bank cue since the bank was loaded (counted on the loop).
    var played = 0
    var playedByCue: [String: Int] = [:]
    /// Plays of apps `counts` has no room for.
    var unlistedPlays = 0
    var theme = Status.Theme()
    var memory = Status.Memory()
    var bus = Status.Bus()
    var desktop = Status.Desktop()
    var stream = Status.StreamVolume()
    var outputVolume: Status.StreamVolume?
    var health = OutputHealth()

    /// One line for systemd's STATUS=: cues, sink state, mute, and the profile unless it is `full`.
    static func line(cues: Int, engine: AudioEngine, muted: Bool, profile: Profile = .full) -> String {
        let s = engine.stats
        return "\(cues) cues, sink \(engine.sinkSpec) \(s.sinkState.rawValue)"
            + (s.sinkError.map { " (\($0))" } ?? "") + (muted ? ", muted" : ", unmuted")
            + (profile == .full ? "" : ", profile \(profile.rawValue)")
    }

    /// At most `maxApps` apps: the run-time mutes first, then the run-time
    /// profiles, then the config's apps, then those that only played, each group
    /// by name; with how many known apps are left out, and their plays.
    static func apps(mutes: MuteState, profiles: ProfileState = ProfileState(), configApps: some Sequence<String>,
                     counts: [String: Status.App]) -> (listed: [String: Status.App], unlisted: Int, unlistedPlayed: Int) {
        var apps: [String: Status.App] = [:]
        var left: Set<String> = []
        let groups = [mutes.appMutes.keys.sorted(), profiles.appProfiles.keys.sorted(), configApps.sorted(), counts.keys.sorted()]
        for name in groups.joined() where apps[name] == nil {
            guard apps.count < maxApps else {
                left.insert(name)
                continue
            }
            var a = counts[name] ?? Status.App()
            a.muted = mutes.appMuted(name)
            a.profile = profiles.appProfileIfSet(name)
            apps[name] = a
        }
        return (apps, left.count, left.reduce(0) { $0 + (counts[$1]?.played ?? 0) })
    }

    /// The budget and what holds it: the cues, the cache, decodes in flight, and the
    /// rest, sounds that only voices still hold (played files dropped from the cache,
    /// a replaced config's cues still playing).
    static func memory(_ budget: SoundBudget?, cues: Int, cache: Int) -> Status.Memory {
        var m = Status.Memory()
        guard let budget else { return m }
        m.limitBytes = budget.limit
        m.usedBytes = budget.used
        m.cuesBytes = cues
        m.cacheBytes = cache
        m.decodingBytes = budget.decoding
        m.playingBytes = max(0, m.usedBytes - m.cuesBytes - m.cacheBytes - m.decodingBytes)
        m.refused = budget.refused
        return m
    }

    var status: Status {
        let s = engine.stats
        var out = Status()
        out.version = CuedVersion.string
        out.protocolVersion = ProtocolLimits.version
        out.pid = Int(getpid())
        out.muted = mutes.muted
        out.profile = profiles.global
        out.stateSaved = stateSaved
        out.stateError = stateError
        out.config = runtime.config.path
        out.warnings = runtime.warnings
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
        out.sink.stream = stream
        out.sink.outputVolume = outputVolume
        out.sink.delayUs = s.deviceDelayMicroseconds
        let margin = s.marginFrames.load(ordering: .relaxed)
        out.sink.marginFrames = margin > 0 ? margin : nil
        out.sink.marginGrowths = s.marginGrowths.load(ordering: .relaxed)
        out.sink.marginShrinks = s.marginShrinks.load(ordering: .relaxed)
        out.sink.marginMisses = s.marginMisses.load(ordering: .relaxed)
        out.sink.faultsSinceHeard = health.faults
        out.sink.lostSinceHeard = health.lost
        out.sink.lastFault = health.lastFault
        for name in runtime.bank.names {
            let variants = runtime.bank.variants[name] ?? []
            out.cues[name] = Status.Cue(frames: variants.first?.frames ?? 0,
                                        played: playedByCue[name] ?? 0,
                                        variants: variants.count,
                                        order: variants.count > 1 ? runtime.design(name).order.rawValue : nil)
        }
        out.played = played
        out.voicesActive = s.voicesActive.load(ordering: .relaxed)
        out.voicesStolen = s.stolen.load(ordering: .relaxed)
        out.clippedSamples = s.clipped.load(ordering: .relaxed)
        out.xruns = s.xruns.load(ordering: .relaxed)
        out.missedCycles = s.missedCycles.load(ordering: .relaxed)
        out.stalls = s.stalls.load(ordering: .relaxed)
        out.rewinds = s.rewinds.load(ordering: .relaxed)
        out.devicesLost = s.lost.load(ordering: .relaxed)
        out.eventsLost = s.eventsLost.load(ordering: .relaxed)
        out.audioThread = s.audioThreadStatus()
        out.dropped = s.dropped.load(ordering: .relaxed)
        out.decodersStuck = decodersStuck
        connections.fill(&out)
        out.rateLimited = rateLimited
        out.sessions = sessions
        let apps = Self.apps(mutes: mutes, profiles: profiles, configApps: runtime.config.apps.keys, counts: counts)
        out.apps = apps.listed
        out.appsUnlisted = apps.unlisted
        out.appsUnlistedPlayed = apps.unlistedPlayed + unlistedPlays
        if let l = s.latencyPercentiles() {
            out.latencyUs.p50 = Int(l.p50)
            out.latencyUs.p99 = Int(l.p99)
            out.latencyUs.max = Int(l.max)
        }
        out.theme = theme
        out.memory = memory
        out.bus = bus
        out.desktop = desktop
        return out
    }
}
