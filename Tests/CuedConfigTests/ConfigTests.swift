import CuedConfig
import CuedProtocol
import Foundation
import Testing
import TestSupport

@Suite struct ConfigParseTests {
    func parse(_ text: String) throws(ConfigErrors) -> Config { try ConfigLoader.parse(text, file: "/etc/x/cued.toml") }

    /// The single issue a text produces.
    func issue(_ text: String) -> ConfigIssue? {
        do { _ = try parse(text); return nil } catch { return error.issues.count == 1 ? error.issues[0] : nil }
    }

    @Test func everyKey() throws {
        let c = try parse("""
            sink = "wav:/tmp/c.wav"
            latency_ms = 20
            voices = 4
            idle_close_s = 2.5
            master_gain_db = -3
            sounds = ["/a", "rel", "~/s"]
            muted = true

            [cues.pop]
            gain_db = -1.5
            [cues.sent]
            file = "sent.flac"

            [transitions]
            "release->pull" = ""
            "idle->pull" = "sent"

            [apps.mutt]
            muted = true
            gain_db = 2
            """)
        #expect(c.sink == "wav:/tmp/c.wav")
        #expect(c.latencyMs == 20)
        #expect(c.voices == 4)
        #expect(c.idleCloseS == 2.5)
        #expect(c.masterGainDB == -3)
        #expect(c.sounds == ["/a", "/etc/x/rel", NSHomeDirectory() + "/s"])
        #expect(c.muted == true)
        #expect(c.cues["pop"] == CueSetting(file: nil, gainDB: -1.5))
        #expect(c.cues["sent"] == CueSetting(file: "/etc/x/sent.flac", gainDB: 0))
        #expect(c.transitions[Transition(from: .release, to: .pull)] == "")
        #expect(c.transitions[Transition(from: .idle, to: .pull)] == "sent")
        #expect(c.apps["mutt"] == AppSetting(muted: true, gainDB: 2))
        #expect(c.path == "/etc/x/cued.toml")
    }

    @Test func profileKeys() throws {
        let c = try parse("""
            profile = "quiet"

            [profiles]
            quiet_gain_db = -20.5
            important_apps = ["alarm-clock", "phone", "phone"]

            [apps.backup]
            profile = "silent"
            [apps.mutt]
            muted = false
            """)
        #expect(c.profile == .quiet)
        #expect(c.profiles == ProfileSettings(quietGainDB: -20.5, importantApps: ["alarm-clock", "phone"]))
        #expect(c.apps["backup"] == AppSetting(profile: .silent))
        #expect(c.apps["mutt"]?.profile == nil)
        #expect(c.lines["profiles.quiet_gain_db"] == 4)
        // Unset: no global profile (the saved one or full applies), quiet at -12 dB, no one important.
        let d = try parse("")
        #expect(d.profile == nil)
        #expect(d.profiles == ProfileSettings(quietGainDB: -12, importantApps: []))
        #expect(c != d)
    }

    /// A cue's design and the pull you can hear.
    @Test func cueDesignAndPullKeys() throws {
        let c = try ConfigLoader.parse("""
            [cues.pop]
            files = ["pop.wav", "~/soft-pop.wav"]
            order = "sequence"
            pitch_jitter_cents = 50
            gain_jitter_db = 1.5
            max_voices = 4
            steal = "quietest"
            cooldown_ms = 40
            cooldown = "restart"
            [pull]
            detent_points = 10
            detent_gain_db = -18
            detent_pitch_cents = 700
            """, file: "/etc/x/cued.toml", home: "/home/u")
        let pop = try #require(c.cues["pop"])
        #expect(pop.files == ["/etc/x/pop.wav", "/home/u/soft-pop.wav"] && pop.file == nil)
        #expect(pop.order == .sequence && pop.pitchJitterCents == 50 && pop.gainJitterDB == 1.5)
        #expect(pop.maxVoices == 4 && pop.steal == .quietest && pop.cooldownMs == 40 && pop.cooldown == .restart)
        #expect(c.pull.detentPoints == 10 && c.pull.detentCue == "tick" && c.pull.detentGainDB == -18 && c.pull.detentPitchCents == 700)
        #expect(try parse("").pull == PullSetting())
    }

    @Test func emptyFileIsDefaults() throws {
        let c = try parse("# nothing\n")
        #expect(c.sink == nil && c.voices == nil && c.cues.isEmpty && c.masterGainDB == 0)
    }

    /// `--config /dev/null`, the usual "no config", is the defaults; any other device is refused.
    @Test func devNullIsDefaultsOtherDevicesAreRefused() throws {
        let c = try ConfigLoader.load(path: "/dev/null", home: "/home/user")
        #expect(c.sink == nil && c.voices == nil && c.cues.isEmpty && c.masterGainDB == 0)
        #expect(throws: ConfigErrors.self) { try ConfigLoader.load(path: "/dev/zero", home: "/home/user") }
    }

    @Test(arguments: [
        // (text, line, key, words in the message)
        ("sink = 5", 1, "sink", "expected a string"),
        ("sink = \"pulse\"", 1, "sink", "unknown sink"),
        ("\n\nlatency_ms = 0", 3, "latency_ms", "1...1000"),
        ("latency_ms = 2.5", 1, "latency_ms", "expected an integer"),
        ("voices = 257", 1, "voices", "1...256"),
        ("voices = \"8\"", 1, "voices", "expected an integer"),
        ("idle_close_s = -1", 1, "idle_close_s", "0...86400"),
        ("idle_close_s = true", 1, "idle_close_s", "expected a number"),
        ("master_gain_db = 13", 1, "master_gain_db", "-60...12"),
        ("muted = \"yes\"", 1, "muted", "expected true or false"),
        ("sounds = \"/a\"", 1, "sounds", "array of directories"),
        ("sounds = [\"/a\", 3]", 1, "sounds[1]", "expected a string"),
        ("colour = \"blue\"", 1, "colour", "unknown key"),
        ("[cues.pop]\nvolume = 3", 2, "cues.pop.volume", "unknown key"),
        ("[cues.pop]\ngain_db = -61", 2, "cues.pop.gain_db", "-60...12"),
        ("[cues.pop]\nfile = 7", 2, "cues.pop.file", "expected a string"),
        ("[cues.\"a/b\"]\ngain_db = 1", 1, "cues.\"a/b\"", "not a cue name"),
        ("cues = 3", 1, "cues", "expected a table"),
        ("[transitions]\n\"up->down\" = \"pop\"", 2, "transitions.\"up->down\"", "not a transition"),
        ("[transitions]\n\"idle->idle\" = \"pop\"", 2, "transitions.\"idle->idle\"", "not a transition"),
        ("[transitions]\n\"idle->pull\" = 1", 2, "transitions.\"idle->pull\"", "expected a string"),
        ("[transitions]\n\"idle->pull\" = \"../x\"", 2, "transitions.\"idle->pull\"", "not a cue name"),
        ("[apps.mutt]\nmute = true", 2, "apps.mutt.mute", "unknown key"),
        ("[apps.mutt]\nmuted = 1", 2, "apps.mutt.muted", "expected true or false"),
        ("[apps.mutt]\ngain_db = 99", 2, "apps.mutt.gain_db", "-60...12"),
        ("profile = \"loud\"", 1, "profile", "expected full, quiet or silent, got 'loud'"),
        ("profile = true", 1, "profile", "expected a string"),
        ("[apps.mutt]\nprofile = \"Quiet\"", 2, "apps.mutt.profile", "expected full, quiet or silent"),
        ("profiles = 1", 1, "profiles", "expected a table"),
        ("[profiles]\nquiet_gain_db = 3", 2, "profiles.quiet_gain_db", "-60...0"),
        ("[profiles]\nquiet_gain_db = \"-6\"", 2, "profiles.quiet_gain_db", "expected a number"),
        ("[profiles]\nimportant_apps = \"clock\"", 2, "profiles.important_apps", "expected an array of app names"),
        ("[profiles]\nimportant_apps = [\"clock\", 3]", 2, "profiles.important_apps[1]", "expected a string"),
        ("[profiles]\n\n\nimportant_apps = [\"my clock\"]", 4, "profiles.important_apps[0]", "is not a name"),
        ("[profiles]\nquiet = true", 2, "profiles.quiet", "unknown key (expected one of: quiet_gain_db, important_apps)"),
        ("[cues.pop]\norder = \"loud\"", 2, "cues.pop.order", "expected shuffle, random, sequence, got 'loud'"),
        ("[cues.pop]\npitch_jitter_cents = 1300", 2, "cues.pop.pitch_jitter_cents", "0...1200"),
        ("[cues.pop]\ngain_jitter_db = -1", 2, "cues.pop.gain_jitter_db", "0...24"),
        ("[cues.pop]\nmax_voices = 0", 2, "cues.pop.max_voices", "1...256"),
        ("[cues.pop]\nsteal = \"newest\"", 2, "cues.pop.steal", "expected oldest, quietest"),
        ("[cues.pop]\ncooldown_ms = 60001", 2, "cues.pop.cooldown_ms", "0...60000"),
        ("[cues.pop]\ncooldown = \"skip\"", 2, "cues.pop.cooldown", "expected drop, restart"),
        ("[cues.pop]\nfiles = []", 2, "cues.pop.files", "1...64 files"),
        ("[cues.pop]\nfiles = \"a.wav\"", 2, "cues.pop.files", "expected an array of file paths"),
        ("[cues.pop]\nfile = \"a.wav\"\nfiles = [\"b.wav\"]", 3, "cues.pop.files", "give file or files, not both"),
        ("[pull]\ndetent_points = -1", 2, "pull.detent_points", "0...1000"),
        ("[pull]\ndetent_cue = \"a b\"", 2, "pull.detent_cue", "is not a name"),
        ("[pull]\nticks = 3", 2, "pull.ticks", "unknown key (expected one of: detent_points, detent_cue, detent_gain_db, detent_pitch_cents)"),
    ])
    func errorsNameLineAndKey(text: String, line: Int, key: String, words: String) {
        guard let i = issue(text) else { Issue.record("no single issue for \(text.debugDescription)"); return }
        #expect(i.file == "/etc/x/cued.toml")
        #expect(i.line == line, "\(i)")
        #expect(i.key == key, "\(i)")
        #expect(i.message.contains(words), "\(i)")
        #expect(i.description.hasPrefix("/etc/x/cued.toml:\(line): \(key): "))
    }

    /// A near-miss names the spec it probably meant; anything else only the grammar.
    @Test(arguments: [
        ("pulse", "alsa:pulse"), ("PipeWire", "pipewire"), ("default", "alsa:default"), ("dmix", "alsa:dmix"),
        ("hw:0,0", "alsa:hw:0,0"), ("plughw:1", "alsa:plughw:1"), ("/tmp/c.wav", "wav:/tmp/c.wav"), ("wav", "wav:/tmp/cued.wav"),
    ])
    func sinkNearMissesSuggestTheSpec(given: String, meant: String) {
        #expect(SinkSyntax.problem(given) == "unknown sink '\(given)': did you mean \(meant)? (\(SinkSyntax.summary))")
        #expect(SinkSyntax.problem(meant) == nil)
    }

    @Test func otherUnknownSinksNameTheGrammar() {
        #expect(SinkSyntax.problem("speakers") == "unknown sink 'speakers' (\(SinkSyntax.summary))")
    }

    @Test func syntaxErrorsHaveALine() {
        guard let i = issue("sink = \"null\"\nvoices = 4\n[cues\n") else { Issue.record("accepted"); return }
        #expect(i.line == 3)
        #expect(i.message.hasPrefix("TOML syntax"))
        #expect(issue("a = = 1")?.line == 1)
    }

    @Test func allIssuesAreReportedInLineOrder() {
        do {
            _ = try parse("voices = 0\nsink = 1\n[apps.a]\nx = 1\n")
            Issue.record("accepted")
        } catch {
            #expect(error.issues.map(\.line) == [1, 2, 4])
        }
    }

    @Test func exampleConfigIsValid() throws {
        let path = TestPaths.repoRoot.appendingPathComponent("docs/cued.example.toml").path
        let c = try ConfigLoader.load(path: path, home: "/home/me")
        #expect(c.sink == nil)  // commented out: auto, as without a config
        #expect(c.transitions[Transition(from: .release, to: .pull)] == "")
        #expect(c.apps["dashboard"]?.muted == true)
        #expect(c.profiles.importantApps == ["alarm-clock"])
    }

    @Test func missingFileIsAnIssue() {
        do { _ = try ConfigLoader.load(path: "/nonexistent/cued.toml", home: "/h"); Issue.record("loaded") } catch {
            #expect(error.description.contains("/nonexistent/cued.toml"))
            #expect(error.description.contains("no such file"))
        }
    }

    @Test func homeIsTheGivenHome() throws {
        let c = try ConfigLoader.parse("sounds = [\"~/s\", \"~\"]\n", file: "/etc/x/cued.toml", home: "/custom/home")
        #expect(c.sounds == ["/custom/home/s", "/custom/home"])
    }

    @Test func newKeys() throws {
        let c = try ConfigLoader.parse("""
            theme = "ocean"
            theme_cache_mb = 4.5
            [stream]
            "media.role" = "notification"
            "application.name" = "My cues"
            """, file: "/c.toml", home: "/h")
        #expect(c.theme == "ocean")
        #expect(c.themeCacheMB == 4.5)
        #expect(c.stream == ["media.role": "notification", "application.name": "My cues"])
    }

    @Test(arguments: [
        ("theme = \"a/b\"", "theme"),
        ("theme_cache_mb = 5000", "theme_cache_mb"),
        ("[stream]\n\"media role\" = \"x\"", "stream.\"media role\""),
        ("[stream]\n\"media.role\" = \"a\\\"b\"", "stream.\"media.role\""),
        ("[stream]\n\"media.role\" = 3", "stream.\"media.role\""),
        ("sink = \"wav:relative.wav\"", "sink"),
        ("sink = \"alsa:\"", "sink"),
    ])
    func newKeyErrors(text: String, key: String) {
        do { _ = try ConfigLoader.parse(text, file: "/c.toml", home: "/h"); Issue.record("accepted: \(text)") } catch {
            #expect(error.issues.first?.key == key, "\(error)")
        }
    }
}

/// `--sink auto`'s order, with the file system and ALSA faked.
@Suite struct AutoSinkChoiceTests {
    func choose(files: Set<String>, opening: Set<String>, runtime: String? = "/run/user/1") -> (spec: String, why: String) {
        var env: [String: String] = [:]
        env["XDG_RUNTIME_DIR"] = runtime
        return AutoSink.choose(environment: env, exists: { files.contains($0) },
                               opens: { opening.contains($0) ? nil : "cannot open PCM '\($0)': Host is down" })
    }

    @Test func pipeWireFirstThenPulseThenDefaultThenNull() {
        let both: Set = ["/run/user/1/pipewire-0", "/run/user/1/pulse/native"]
        #expect(choose(files: both, opening: ["pipewire", "alsa:default", "alsa:pulse"])
                == ("pipewire", "auto: PipeWire answers at /run/user/1/pipewire-0: its own stream"))
        // PipeWire's own stream does not open (for another reason than a link): its ALSA plugin, and why.
        #expect(choose(files: both, opening: ["alsa:default", "alsa:pulse"])
                == ("alsa:default", "auto: PipeWire answers at /run/user/1/pipewire-0 and ALSA's default PCM opens "
                    + "(its own stream did not: cannot open PCM 'pipewire': Host is down)"))
        // A PipeWire socket left by a dead server: neither opens, pulse is next.
        #expect(choose(files: both, opening: ["alsa:pulse"]).spec == "alsa:pulse")
        #expect(choose(files: both, opening: ["alsa:pulse"]).why == "auto: a PulseAudio server answers at /run/user/1/pulse/native")
        // No server socket: ALSA's default (a card) if it opens; the pulse PCM alone is not a server,
        // and the native stream is not tried without PipeWire's socket.
        #expect(choose(files: [], opening: ["pipewire", "alsa:default", "alsa:pulse"]) == ("alsa:default", "auto: ALSA's default PCM opens (no sound server found)"))
        let none = choose(files: both, opening: [])
        #expect(none.spec == "null")
        #expect(none.why == "auto: no sound server answers and ALSA's default PCM does not open (cannot open PCM 'alsa:default': Host is down); "
                + "cues are played to nothing: to record them instead, --sink wav:FILE")
    }

    /// PipeWire answers but links no stream (WirePlumber not up yet: the login race): its plugins
    /// would wait for the same link, so none is tried and the cue plays to nothing; the next picks again.
    @Test func pipeWireThatLinksNoStreamIsNotSwappedForItsPlugin() {
        var tried: [String] = []
        let notLinked = "PipeWire: the stream was not linked to an output within 2000 ms (state paused, no format yet): is a session manager such as WirePlumber running?"
        let c = AutoSink.choose(environment: ["XDG_RUNTIME_DIR": "/run/user/1"], exists: { $0 == "/run/user/1/pipewire-0" },
                                opens: { tried.append($0); return $0 == "pipewire" ? notLinked : nil })
        #expect(tried == ["pipewire"])
        #expect(c == ("null", "auto: PipeWire answers at /run/user/1/pipewire-0 but its stream was not linked to an output (\(notLinked)); "
                      + "cues are played to nothing, and the next cue tries again"))
    }

    @Test func withoutARuntimeDirectoryOnlyALSADefault() {
        #expect(choose(files: ["/pipewire-0"], opening: ["pipewire", "alsa:default"], runtime: nil).spec == "alsa:default")
        #expect(choose(files: ["/pipewire-0"], opening: [], runtime: "").spec == "null")
    }

    @Test func autoIsASinkSpec() {
        #expect(SinkSyntax.problem("auto") == nil)
    }
}
