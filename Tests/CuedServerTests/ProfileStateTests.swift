import CuedConfig
import CuedProtocol
@testable import CuedServer
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// How the global profile, run-time app profiles and the config's `[apps.NAME]
/// profile` combine, with mute and `important`; what is saved.
@Suite struct ProfileStateTests {
    static let settings = ProfileSettings(quietGainDB: -20, importantApps: ["clock"])

    /// The stricter of the global profile and the app's own, whichever is set where.
    @Test(arguments: [
        (Profile.full, nil, nil, Profile.full), (.quiet, nil, nil, .quiet), (.silent, nil, nil, .silent),
        (.full, .quiet, nil, .quiet), (.full, nil, .silent, .silent), (.quiet, .full, nil, .quiet),
        (.silent, .full, .full, .silent), (.full, .full, .silent, .full), (.full, .silent, .full, .silent),
        (.quiet, nil, .silent, .silent),
    ] as [(Profile, Profile?, Profile?, Profile)])
    func anAppGetsTheStricterOfTheGlobalAndItsOwn(global: Profile, runTime: Profile?, configured: Profile?, expected: Profile) {
        var runTimes: [String: Profile] = [:], configs: [String: Profile] = [:]
        runTimes["a"] = runTime
        configs["a"] = configured
        let p = ProfileState(global: global, appProfiles: runTimes, configured: configs)
        #expect(p.effective(app: "a") == expected)
        #expect(p.appProfile("a") == runTime ?? configured ?? .full)  // the run-time one wins over the config's
        #expect(p.effective(app: nil) == global)
        #expect(p.effective(app: "other") == global)
    }

    /// What admission makes of one play by `app`: played at a gain, or held back by its first reason.
    enum Decision: Equatable { case play(gainDB: Double), held(Hold) }

    static func decide(muted: Bool, _ profiles: ProfileState, app: String?, important: Bool) -> Decision {
        var client = Client(limits: Daemon.Limits(), now: 0)
        client.app = app
        var options = PlayOptions()
        options.important = important
        let ask = PlayAsk(options, client: client)
        let view = AdmissionView(mutes: MuteState(muted: muted), profiles: profiles, picker: CuePicker.Cooldowns(), stopping: false, now: 0)
        if let hold = Admission.first(ask, client, view) { return .held(hold) }
        return .play(gainDB: Admission.gainDB(ask, view))
    }

    @Test func whatEachProfileMakesOfAPlay() {
        let full = ProfileState(global: .full, settings: Self.settings)
        let quiet = ProfileState(global: .quiet, settings: Self.settings)
        let silent = ProfileState(global: .silent, settings: Self.settings)
        #expect(Self.decide(muted: false, full, app: "a", important: false) == .play(gainDB: 0))
        #expect(Self.decide(muted: false, quiet, app: "a", important: false) == .play(gainDB: -20))
        #expect(Self.decide(muted: false, silent, app: "a", important: false) == .held(.silent))
        #expect(Self.decide(muted: false, silent, app: nil, important: false) == .held(.silent))
        #expect(Replies.reply(.silent) == .ok("silent") && Replies.reply(.appSilent("a")) == .ok("silent"))
    }

    /// `important` passes quiet and silent (at full level, as feedbackd's allow-important)
    /// only for the apps the config lists; for the others it is ignored.
    @Test func importantPassesOnlyForTheAppsTheConfigAllows() {
        for global in [Profile.quiet, .silent] {
            let p = ProfileState(global: global, appProfiles: ["clock": .silent], settings: Self.settings)
            #expect(Self.decide(muted: false, p, app: "clock", important: true) == .play(gainDB: 0))
            // Its own profile (silent) holds it back, or the global one first when that is silent too.
            #expect(Self.decide(muted: false, p, app: "clock", important: false) == .held(global == .quiet ? .appSilent("clock") : .silent))
            let other = Self.decide(muted: false, p, app: "mail", important: true)
            #expect(other == (global == .quiet ? .play(gainDB: -20) : .held(.silent)))
            #expect(Self.decide(muted: false, p, app: nil, important: true) == other)
        }
    }

    /// Mute is the stronger switch: nothing passes it, important or not, in any profile.
    @Test(arguments: Profile.allCases)
    func muteWinsOverEveryProfileAndImportant(global: Profile) {
        let p = ProfileState(global: global, settings: Self.settings)
        #expect(Self.decide(muted: true, p, app: "clock", important: true) == .held(.muted))
        #expect(Self.decide(muted: true, p, app: "a", important: false) == .held(.muted))
        #expect(Replies.reply(.muted) == .ok("muted") && Replies.reply(.appMuted("a")) == .ok("muted"))
    }

    @Test func theGlobalProfileChangesOnlyWhenItDiffers() {
        var p = ProfileState()
        #expect(p.setGlobal(.full) == false)
        #expect(p.setGlobal(.quiet) == true)
        #expect(p.global == .quiet)
        #expect(p.setGlobal(.quiet) == false)
        #expect(p.recorded(in: SavedState(muted: true)) == SavedState(muted: true, profile: .quiet))
    }

    /// Run-time app profiles are kept as set (`default` forgets one), at most 256;
    /// at the bound those already kept still change and forgetting costs nothing.
    @Test func runTimeAppProfilesAreKeptAsSetAndBounded() {
        var p = ProfileState(configured: ["configured": .quiet])
        #expect(p.setApp("configured", .quiet) == .changed)  // kept as set, though the config says so too
        #expect(p.setApp("configured", .quiet) == .unchanged)
        #expect(p.setApp("configured", nil) == .changed)
        #expect(p.appProfile("configured") == .quiet)  // the config's again
        #expect(p.setApp("never", nil) == .unchanged)
        for i in 0..<SavedState.maxAppProfiles { #expect(p.setApp("app\(i)", .silent) == .changed) }
        #expect(p.setApp("one-more", .quiet) == .tooMany)
        #expect(p.appProfile("one-more") == .full)
        #expect(p.setApp("one-more", nil) == .unchanged)
        #expect(p.setApp("app0", .full) == .changed)  // kept ones may change
        #expect(p.setApp("app1", nil) == .changed)  // and be forgotten: room again
        #expect(p.setApp("one-more", .quiet) == .changed)
        let saved = p.recorded(in: SavedState())
        #expect(saved.appProfiles.count == SavedState.maxAppProfiles)
        #expect(saved.appProfiles["app0"] == .full && saved.appProfiles["one-more"] == .quiet && saved.appProfiles["app1"] == nil)
    }

    /// At start: the saved global profile, else the config's, else full; the run-time app profiles saved.
    @Test func atStartTheSavedProfileWinsOverTheConfigs() {
        var config = Config()
        config.profile = .quiet
        config.apps["backup"] = AppSetting(profile: .silent)
        config.profiles = Self.settings
        let fromConfig = ProfileState(saved: SavedState(), config: config)
        #expect(fromConfig.global == .quiet)
        #expect(fromConfig.configured == ["backup": .silent])
        #expect(fromConfig.settings == Self.settings)
        let fromSaved = ProfileState(saved: SavedState(profile: .full, appProfiles: ["mail": .quiet]), config: config)
        #expect(fromSaved.global == .full)
        #expect(fromSaved.effective(app: "mail") == .quiet)
        #expect(ProfileState(saved: SavedState(), config: Config()).global == .full)
    }

    @Test func aReloadTakesTheNewConfigsAppProfilesAndSettingsAndKeepsRunTimeOnes() {
        var config = Config()
        config.apps["a"] = AppSetting(profile: .silent)
        var p = ProfileState(saved: SavedState(appProfiles: ["c": .quiet]), config: config)
        var next = Config()
        next.apps["b"] = AppSetting(profile: .quiet)
        next.profiles = Self.settings
        p.configure(next)
        #expect(p.appProfile("a") == .full && p.appProfile("b") == .quiet && p.appProfile("c") == .quiet)
        #expect(p.settings.quietGainDB == -20)
        #expect(p.global == .full)  // the global one is the daemon's to set (profileAfterReload)
    }

    /// The config's `profile` sets the global one at a reload only if the reload changed it (as `muted`).
    @Test(arguments: [(nil, nil, nil), (nil, .quiet, .quiet), (.quiet, .quiet, nil), (.quiet, .silent, .silent), (.silent, nil, nil)]
          as [(Profile?, Profile?, Profile?)])
    func theConfigsProfileAppliesAtAReloadOnlyWhenItChanged(old: Profile?, new: Profile?, expected: Profile?) {
        var a = Config(), b = Config()
        a.profile = old
        b.profile = new
        #expect(ProfileState.profileAfterReload(old: a, new: b) == expected)
    }
}

/// The state file's profile lines: written, read back, and untrusted.
@Suite struct ProfileStateFileTests {
    func tempFile() -> String {
        var template = Array("/tmp/cued-profile-test.XXXXXX".utf8CString)
        let dir = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
        return dir + "/state"
    }

    @Test func profilesRoundTripWithTheMutes() throws {
        let path = tempFile()
        let s = SavedState(muted: true, appMutes: ["mutt": true], profile: .quiet, appProfiles: ["backup": .silent, "clock": .full])
        try StateFile.save(s, to: path)
        let text = try #require(String(validating: try PlainFile.bytes(path), as: UTF8.self))
        #expect(text == "# cued state; written by cued\nmuted=true\nprofile=quiet\napp.mutt.muted=true\napp.backup.profile=silent\napp.clock.profile=full\n")
        #expect(try StateFile.load(path) == s)
    }

    /// A file from before profiles has none: the config's (or full) applies.
    @Test func unknownProfilesAndNamesAreSkippedAndAppsBounded() throws {
        let path = tempFile()
        var text = "muted=false\nprofile=loud\napp.a/b.profile=quiet\napp.x.profile=Quiet\napp..profile=quiet\napp.profile=quiet\napp.ok.profile=silent\n"
        for i in 0..<300 { text += "app.p\(i).profile=quiet\n" }
        try PlainFile.write(text, to: path)
        let s = try #require(try StateFile.load(path))
        #expect(s.profile == nil)
        #expect(s.appProfiles.count == SavedState.maxAppProfiles)
        #expect(s.appProfiles["ok"] == .silent)
        #expect(s.appProfiles["x"] == nil && s.appProfiles["a/b"] == nil)
        try PlainFile.write("muted=true\n", to: path)
        #expect(try StateFile.load(path) == SavedState(muted: true))
    }
}

/// Plain file reads and writes for the tests above.
enum PlainFile {
    static func bytes(_ path: String) throws -> [UInt8] {
        guard let f = fopen(path, "rb") else { throw Failure(path: path) }
        defer { fclose(f) }
        var out: [UInt8] = [], buf = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = fread(&buf, 1, buf.count, f)
            if n == 0 { return out }
            out += buf[..<n]
        }
    }

    static func write(_ text: String, to path: String) throws {
        guard let f = fopen(path, "wb") else { throw Failure(path: path) }
        defer { fclose(f) }
        _ = Array(text.utf8).withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, f) }
    }

    struct Failure: Error { let path: String }
}
