import CuedCore
import CuedProtocol
#if canImport(Glibc)
import Glibc
#endif

/// Plays and drops per app, for `status`. Bounded: app names come from
/// clients, so at most `StatusReport.maxApps` are counted (the first seen).
struct AppCounts {
    private(set) var apps: [String: Status.App] = [:]

    mutating func played(_ app: String) {
        guard apps[app] != nil || apps.count < StatusReport.maxApps else { return }
        apps[app, default: Status.App()].played += 1
    }

    /// A voice counted as played that never sounded (only for an app counted already).
    mutating func dropped(_ app: String) {
        guard apps[app] != nil else { return }
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
    var clients = 0
    var rateLimited = 0
    var refusedBusy = 0
    var evictedIdle = 0
    var sessions = 0
    var counts: [String: Status.App] = [:]
    var theme = Status.Theme()
    var bus = Status.Bus()

    /// One line for systemd's STATUS=: cues, sink state, mute, and the profile unless it is `full`.
    static func line(cues: Int, engine: AudioEngine, muted: Bool, profile: Profile = .full) -> String {
        let s = engine.stats
        return "\(cues) cues, sink \(engine.sinkSpec) \(s.sinkState.rawValue)"
            + (s.sinkError.map { " (\($0))" } ?? "") + (muted ? ", muted" : ", unmuted")
            + (profile == .full ? "" : ", profile \(profile.rawValue)")
    }

    /// At most `maxApps` apps: the run-time mutes first, then the run-time
    /// profiles, then the config's apps, then those that only played, each group by name.
    static func apps(mutes: MuteState, profiles: ProfileState = ProfileState(), configApps: some Sequence<String>,
                     counts: [String: Status.App]) -> [String: Status.App] {
        var apps: [String: Status.App] = [:]
        let groups = [mutes.appMutes.keys.sorted(), profiles.appProfiles.keys.sorted(), configApps.sorted(), counts.keys.sorted()]
        for name in groups.joined() where apps[name] == nil {
            guard apps.count < maxApps else { break }
            var a = counts[name] ?? Status.App()
            a.muted = mutes.appMuted(name)
            a.profile = profiles.appProfileIfSet(name)
            apps[name] = a
        }
        return apps
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
        let margin = s.marginFrames.load(ordering: .relaxed)
        out.sink.marginFrames = margin > 0 ? margin : nil
        out.sink.marginGrowths = s.marginGrowths.load(ordering: .relaxed)
        out.sink.marginShrinks = s.marginShrinks.load(ordering: .relaxed)
        out.sink.marginMisses = s.marginMisses.load(ordering: .relaxed)
        for name in runtime.bank.names {
            let c = runtime.bank[name]!
            out.cues[name] = Status.Cue(frames: c.frames, played: c.played.load(ordering: .relaxed))
        }
        out.played = s.played.load(ordering: .relaxed)
        out.voicesActive = s.voicesActive.load(ordering: .relaxed)
        out.voicesStolen = s.stolen.load(ordering: .relaxed)
        out.clippedSamples = s.clipped.load(ordering: .relaxed)
        out.xruns = s.xruns.load(ordering: .relaxed)
        out.missedCycles = s.missedCycles.load(ordering: .relaxed)
        out.stalls = s.stalls.load(ordering: .relaxed)
        out.rewinds = s.rewinds.load(ordering: .relaxed)
        out.devicesLost = s.lost.load(ordering: .relaxed)
        out.audioThread = s.threadPriorityName
        out.dropped = s.dropped.load(ordering: .relaxed)
        out.clients = clients
        out.rateLimited = rateLimited
        out.refusedBusy = refusedBusy
        out.evictedIdle = evictedIdle
        out.sessions = sessions
        out.apps = Self.apps(mutes: mutes, profiles: profiles, configApps: runtime.config.apps.keys, counts: counts)
        if let l = s.latencyPercentiles() {
            out.latencyUs.p50 = Int(l.p50)
            out.latencyUs.p99 = Int(l.p99)
            out.latencyUs.max = Int(l.max)
        }
        out.theme = theme
        out.bus = bus
        return out
    }
}
