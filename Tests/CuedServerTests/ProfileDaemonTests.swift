import CuedConfig
import CuedCore
import CuedProtocol
@testable import CuedServer
import Synchronization
import Testing

/// The loudest sample a sink was handed, for the audio thread to write and a test to read.
final class Peak: Sendable {
    private let value = Atomic<Int>(0)
    var level: Int { value.load(ordering: .relaxed) }
    func reset() { value.store(0, ordering: .relaxed) }
    func saw(_ sample: Int) {
        var seen = value.load(ordering: .relaxed)
        while sample > seen {
            let (done, now) = value.compareExchange(expected: seen, desired: sample, ordering: .relaxed)
            if done { return }
            seen = now
        }
    }
}

/// A null sink (clocked in real time) that keeps the peak of what it is handed.
final class PeakSink: Sink {
    let peak = Peak()
    private let inner = NullSink()
    var spec: String { inner.spec }
    func open() throws(SinkError) -> OpenedDevice { try inner.open() }
    func write(_ data: UnsafeRawPointer, frames: Int) throws(SinkError) -> SinkWrite {
        let samples = data.assumingMemoryBound(to: Int16.self)
        var loudest = 0
        for i in 0..<frames * 2 { loudest = max(loudest, abs(Int(samples[i]))) }
        peak.saw(loudest)
        return try inner.write(data, frames: frames)
    }
    func delayFrames(now: UInt64) -> Int { inner.delayFrames(now: now) }
    func stop() { inner.stop() }
    func close() { inner.close() }
}

/// Profiles through a real Daemon: what each plays, `important`, per-app
/// profiles, how they meet mute, and what is saved, reloaded and told.
@Suite(.timeLimit(.minutes(1))) struct ProfileDaemonTests {
    static func config(quietGainDB: Double = -20) -> Config {
        var c = Config()
        c.profiles = ProfileSettings(quietGainDB: quietGainDB, importantApps: ["clock"])
        return c
    }

    static func connection(app: String?, _ h: DaemonHarness) throws -> Client {
        var c = Client(limits: Daemon.Limits(), now: MonotonicClock.now())
        if let app { #expect(try h.reply("app \(app)", &c) == .ok(app)) }
        return c
    }

    /// `silent` plays nothing, cues, files and refresh transitions alike, and
    /// costs no lookup; the state still moves; mute still answers `muted`.
    @Test func silentPlaysNothing() throws {
        let h = try DaemonHarness(config: Self.config())
        defer { h.shutdown() }
        var mail = try Self.connection(app: "mail", h)
        #expect(try h.reply("profile silent", &mail) == .ok("silent"))
        #expect(try h.reply("play pop", &mail) == .ok("silent"))
        #expect(try h.reply("play pop wait", &mail) == .ok("silent"))
        #expect(try h.reply("play no-such-sound", &mail) == .ok("silent"))
        #expect(try h.reply("play-file /nonexistent-cued-test/a.wav", &mail) == .ok("silent"))
        #expect(try h.reply("drag 70", &mail) == .ok("silent"))  // release: psst1, not played
        #expect(try h.reply("drop", &mail) == .ok("silent"))
        #expect(try h.reply("session", &mail) == .ok("- loading 65"))
        #expect(try h.reply("mute", &mail) == .ok("muted"))
        #expect(try h.reply("play pop", &mail) == .ok("muted"))  // mute is the stronger switch
        #expect(try h.reply("unmute", &mail) == .ok("unmuted"))
        #expect(try h.onLoop { $0.status().apps["mail"]?.played } == nil)  // nothing submitted
        #expect(try h.reply("profile full", &mail) == .ok("full"))
        #expect(try h.reply("play pop", &mail) == .ok(nil))
        #expect(try h.onLoop { $0.status().apps["mail"]?.played } == 1)
    }

    /// `quiet` plays every cue `quiet_gain_db` lower: the level the sink is handed.
    @Test func quietPlaysQuieterByTheConfiguredGain() throws {
        let sink = PeakSink()
        let tone = Cue(name: "tone", stereo: [Float](repeating: 0.5, count: 2 * 2_400))
        let h = try DaemonHarness(config: Self.config(quietGainDB: -20), extraCues: [tone], sink: sink)
        defer { h.shutdown() }
        var mail = try Self.connection(app: "mail", h)
        func level(_ line: String, _ conn: inout Client) throws -> Int {
            sink.peak.reset()
            #expect(try h.reply(line, &conn) == .ok(nil))  // `wait`: every frame has been handed over
            return sink.peak.level
        }
        let full = try level("play tone wait", &mail)
        #expect(full > 16_000 && full < 16_500, "\(full)")  // 0.5 of full scale
        #expect(try h.reply("profile quiet", &mail) == .ok("quiet"))
        let quiet = try level("play tone wait", &mail)
        let expected = Double(full) * 0.1  // -20 dB
        #expect(abs(Double(quiet) - expected) <= expected * 0.01, "\(quiet) against \(expected)")
        // The app's own profile cannot raise the global one…
        #expect(try h.reply("profile app mail full", &mail) == .ok("mail quiet"))
        #expect(try level("play tone wait", &mail) == quiet)
        // …and the global full with the app's quiet is quiet too.
        #expect(try h.reply("profile full", &mail) == .ok("full"))
        #expect(try h.reply("profile app mail quiet", &mail) == .ok("mail quiet"))
        #expect(try level("play tone wait", &mail) == quiet)
        // An important cue of an allowed app plays at full level in quiet.
        var clock = try Self.connection(app: "clock", h)
        #expect(try h.reply("profile quiet", &clock) == .ok("quiet"))
        #expect(try level("play tone wait important", &clock) == full)
        #expect(try level("play tone wait", &clock) == quiet)
    }

    /// `important` gets through `silent` only for an app the config allows; for
    /// any other it is ignored, silently; it never passes mute.
    @Test func importantPassesSilentOnlyForAllowedApps() throws {
        let h = try DaemonHarness(config: Self.config())
        defer { h.shutdown() }
        var clock = try Self.connection(app: "clock", h)
        var mail = try Self.connection(app: "mail", h)
        var anonymous = try Self.connection(app: nil, h)
        #expect(try h.reply("profile silent", &clock) == .ok("silent"))
        #expect(try h.reply("play pop important", &clock) == .ok(nil))
        #expect(try h.reply("play pop important id", &clock) == .ok("2"))
        #expect(try h.reply("play pop", &clock) == .ok("silent"))
        #expect(try h.reply("play pop important", &mail) == .ok("silent"))
        #expect(try h.reply("play pop important", &anonymous) == .ok("silent"))
        #expect(try h.reply("state release", &clock) == .ok("silent"))  // a transition's cue is not important
        // Its own silent profile does not hold an important cue back either.
        #expect(try h.reply("profile full", &clock) == .ok("full"))
        #expect(try h.reply("profile app clock silent", &clock) == .ok("clock silent"))
        #expect(try h.reply("play pop", &clock) == .ok("silent"))
        #expect(try h.reply("play pop important", &clock) == .ok(nil))
        #expect(try h.reply("mute app clock", &clock) == .ok("muted clock"))
        #expect(try h.reply("play pop important", &clock) == .ok("muted"))
        #expect(try h.onLoop { $0.status().apps["clock"]?.played } == 3)
    }

    /// Per-app profiles: set, asked, forgotten back to the config's; shown by `status`.
    @Test func appProfilesSetAskForgetAndShow() throws {
        var config = Self.config()
        config.apps["backup"] = AppSetting(profile: .silent)
        let h = try DaemonHarness(config: config)
        defer { h.shutdown() }
        var backup = try Self.connection(app: "backup", h)
        var mail = try Self.connection(app: "mail", h)
        #expect(try h.reply("profile app backup", &mail) == .ok("backup silent"))  // the config's
        #expect(try h.reply("play pop", &backup) == .ok("silent"))
        #expect(try h.reply("profile app backup full", &mail) == .ok("backup full"))  // run time over the config
        #expect(try h.reply("play pop", &backup) == .ok(nil))
        #expect(try h.reply("profile app mail quiet", &mail) == .ok("mail quiet"))
        #expect(try h.reply("profile", &mail) == .ok("full"))
        let status = try h.onLoop { $0.status() }
        #expect(status.profile == .full)
        #expect(status.apps["mail"]?.profile == .quiet)
        #expect(status.apps["backup"]?.profile == .full)
        #expect(try h.reply("profile app backup default", &mail) == .ok("backup silent"))
        #expect(try h.onLoop { $0.status().apps["backup"]?.profile } == .silent)
        #expect(try h.reply("profile app never default", &mail) == .ok("never full"))
        #expect(try h.onLoop { $0.status().apps["never"] } == nil)
        #expect(try h.reply("profile silent", &mail) == .ok("silent"))
        #expect(try h.reply("profile app mail", &mail) == .ok("mail silent"))  // what its plays get
        #expect(try h.onLoop { $0.statusLine() } == "3 cues, sink null closed, unmuted, profile silent")
    }

    /// The Daemon's face for other front ends (D-Bus): `profile`, `setProfile`,
    /// `effectiveProfile`, and `onProfileChange` told of a change from any source, once.
    @Test func changesFromEverySourceAreToldAndSaved() throws {
        let h = try DaemonHarness(config: Self.config())
        defer { h.shutdown() }
        let told = Locked<[Profile]>([])
        try h.onLoop { d in d.switches.onProfileChange = { p in told.withLock { $0.append(p) } } }
        var mail = try Self.connection(app: "mail", h)
        #expect(try h.reply("profile quiet", &mail) == .ok("quiet"))
        #expect(try h.reply("profile quiet", &mail) == .ok("quiet"))  // no change: not told again
        try h.onLoop { $0.setProfile(.silent) }
        #expect(try h.onLoop { $0.switches.profile } == .silent)
        #expect(try h.reply("profile", &mail) == .ok("silent"))
        #expect(try h.reply("profile app mail quiet", &mail) == .ok("mail silent"))  // an app's own: not told
        #expect(try h.onLoop { ($0.switches.effectiveProfile(app: "mail"), $0.switches.effectiveProfile(app: nil)) } == (.silent, .silent))
        // A reload applies the config's profile only when the reload changed it.
        var next = Self.config()
        next.profile = .full
        h.nextConfig.withLock { $0 = next }
        #expect(try h.reply("reload", &mail) == .ok("reloaded"))
        #expect(try h.onLoop { $0.switches.profile } == .full)
        try h.onLoop { $0.setProfile(.quiet) }
        #expect(try h.reply("reload", &mail) == .ok("reloaded"))  // the same config: the run-time profile stays
        #expect(try h.onLoop { $0.switches.profile } == .quiet)
        #expect(told.value == [.quiet, .silent, .full, .quiet])
        h.saver.flush()
        #expect(try StateFile.load(h.statePath) == SavedState(profile: .quiet, appProfiles: ["mail": .quiet]))
    }

    /// A daemon started from a saved state has its profiles; without one, the config's.
    @Test func theSavedProfileWinsAtStartOverTheConfigs() throws {
        var config = Self.config()
        config.profile = .silent
        let fromConfig = try DaemonHarness(config: config)
        defer { fromConfig.shutdown() }
        #expect(try fromConfig.onLoop { $0.switches.profile } == .silent)
        let fromSaved = try DaemonHarness(config: config, saved: SavedState(profile: .quiet, appProfiles: ["mail": .silent]))
        defer { fromSaved.shutdown() }
        var mail = try Self.connection(app: "mail", fromSaved)
        #expect(try fromSaved.reply("profile", &mail) == .ok("quiet"))
        #expect(try fromSaved.reply("play pop", &mail) == .ok("silent"))
    }

    /// At most 256 apps have a profile set at run time; forgetting one makes room.
    @Test func runTimeAppProfilesAreBounded() throws {
        var limits = Daemon.Limits()
        limits.playsPerSecond = 0
        let h = try DaemonHarness(limits: limits)
        defer { h.shutdown() }
        var c = Client(limits: limits)
        for i in 0..<SavedState.maxAppProfiles { #expect(try h.reply("profile app a\(i) quiet", &c) == .ok("a\(i) quiet")) }
        #expect(try h.reply("profile app one-more quiet", &c)
                == .err(.tooMany, "at most 256 apps can have a profile set at run time; set one back to default first"))
        #expect(try h.reply("profile app a0 default", &c) == .ok("a0 full"))
        #expect(try h.reply("profile app one-more quiet", &c) == .ok("one-more quiet"))
    }
}
