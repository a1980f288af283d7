import CuedClient
import CuedProtocol
import Foundation
import Testing
import TestSupport

/// The config file, reload and per-app mute, against the real daemon.
@Suite(.timeLimit(.minutes(2))) struct ConfigDaemonTests {
    @Test func configSetsTheSinkAndFlagsWin() throws {
        let d = try DaemonHarness(args: [], config: "sink = \"wav:%DIR%/capture.wav\"\nvoices = 3\n")
        #expect(try d.status().sink.spec == "wav:\(d.dir.path)/capture.wav")
        #expect(try d.status().config == d.configPath)
        let e = try DaemonHarness(args: ["--sink", "null"], config: "sink = \"wav:%DIR%/capture.wav\"\n")
        #expect(try e.status().sink.spec == "null")
    }

    @Test func customCueFromAnywhereWithGain() throws {
        let d0 = TempDir()
        let sent = Fixture.samples(seed: 11, frames: 1_200)
        try WAV.write(d0.file("sent.wav"), int16: sent, sampleRate: 48_000, channels: 1)
        let d = try DaemonHarness(args: ["--sink", "wav:%DIR%/capture.wav"], config: """
            [cues.sent]
            file = "\(d0.file("sent.wav"))"
            gain_db = -6.020599913
            """)
        #expect(try d.request("cues") == "ok pop psst1 psst2 sent")
        #expect(try d.request("play sent") == "ok")
        #expect(eventually { ((try? WAV.read(d.capturePath))?.frames ?? 0) >= sent.count })
        d.stop()
        let cap = try WAV.read(d.capturePath).samples
        for (i, v) in sent.enumerated() {
            // -6.02 dB halves: each sample within rounding of v/2.
            if abs(Int(cap[2 * i]) * 2 - Int(v)) > 2 { Issue.record("frame \(i): \(cap[2 * i]) vs \(v)/2"); break }
        }
    }

    @Test func transitionRemap() throws {
        let d = try DaemonHarness(args: ["--sink", "null"], config: """
            [transitions]
            "release->pull" = ""
            "idle->pull" = "pop"
            "loading->idle" = "psst1"
            """)
        let c = try d.client()
        #expect(try c.request("state pull") == "ok pop")
        #expect(try c.request("state release") == "ok psst1")
        #expect(try c.request("state pull") == "ok -")
        #expect(try c.request("state loading") == "ok psst2")
        #expect(try c.request("state idle") == "ok psst1")
        #expect(try c.request("drag 70") == "ok psst1")  // gestures use the same table
        #expect(try c.request("drag 10") == "ok -")
    }

    @Test func reloadSwapsOnlyWhenEverythingLoadsAndNeverCutsAVoice() throws {
        var cues = Fixture.standard
        let long = Fixture.samples(seed: 21, frames: 48_000)  // 1 s
        cues["long"] = long
        cues["quiet"] = Fixture.constant(0, frames: 480)  // remaps are checked with a silent cue: the capture stays `long`
        let d = try DaemonHarness(cues: cues, args: ["--sink", "wav:%DIR%/capture.wav"],
                                  config: "[transitions]\n\"idle->pull\" = \"quiet\"\n")
        let c = try d.client()
        #expect(try c.request("play long") == "ok")

        // A TOML syntax error: refused, old config kept.
        try d.writeConfig("[transitions\n")
        let r1 = try c.request("reload")
        #expect(r1.hasPrefix("err reload-failed \(d.configPath):1: TOML syntax"), "\(r1)")
        // A missing cue file.
        try d.writeConfig("[cues.extra]\nfile = \"%DIR%/missing.wav\"\n")
        let r2 = try c.request("reload")
        #expect(r2.hasPrefix("err reload-failed \(d.dir.path)/missing.wav: "), "\(r2)")
        #expect(r2.contains("cued.toml:2"))
        // A corrupt WAV.
        try Data("RIFF garbage".utf8).write(to: URL(fileURLWithPath: d.dir.file("corrupt.wav")))
        try d.writeConfig("[cues.extra]\nfile = \"%DIR%/corrupt.wav\"\n")
        let r3 = try c.request("reload")
        #expect(r3.hasPrefix("err reload-failed \(d.dir.path)/corrupt.wav: "), "\(r3)")
        // Still the old configuration.
        #expect(try c.request("cues") == "ok long pop psst1 psst2 quiet")
        #expect(try d.client().request("state pull") == "ok quiet")

        // A good config: swapped in.
        try WAV.write(d.dir.file("extra.wav"), int16: Fixture.constant(9, frames: 480), sampleRate: 48_000, channels: 1)
        try d.writeConfig("[cues.extra]\nfile = \"%DIR%/extra.wav\"\n")
        #expect(try c.request("reload") == "ok reloaded")
        #expect(try c.request("cues") == "ok extra long pop psst1 psst2 quiet")
        #expect(try d.client().request("state pull") == "ok -")

        // The long cue played through every reload, sample for sample.
        #expect(eventually { ((try? WAV.read(d.capturePath))?.frames ?? 0) >= long.count })
        d.stop()
        let cap = try WAV.read(d.capturePath).samples
        #expect(sampleDifference(Array(cap.prefix(long.count * 2)), long.stereo) == nil)
    }

    @Test func sighupAndCuectlReload() throws {
        let d = try DaemonHarness(args: ["--sink", "null"])
        try WAV.write(d.soundsDir + "/new.wav", int16: Fixture.constant(3, frames: 100), sampleRate: 48_000, channels: 1)
        let r = try runProcess(TestPaths.binary("cuectl"), ["--socket", d.socketPath, "reload"])
        #expect(r.status == 0 && r.out == "reloaded\n")
        #expect(try d.request("cues") == "ok new pop psst1 psst2")
        try d.writeConfig("voices = \"many\"\n")
        let bad = try runProcess(TestPaths.binary("cuectl"), ["--socket", d.socketPath, "reload"])
        #expect(bad.status == 1)
        #expect(bad.err.contains("reload-failed") && bad.err.contains("voices"))
    }

    /// A key read only at start, changed since: `cuectl reload` names each one that waits for a
    /// restart (as long as it differs from what cued started with), and only those (issue 47:
    /// `[notifications] enabled = true` was answered `reloaded` and nothing more).
    @Test func aReloadNamesEachChangedKeyThatWaitsForARestart() throws {
        let d = try DaemonHarness(args: ["--sink", "null"], config: "voices = 16\n[notifications]\nenabled = false\n")
        func reload() throws -> (status: Int32, out: String, err: String) {
            try runProcess(TestPaths.binary("cuectl"), ["--socket", d.socketPath, "reload"])
        }
        try d.writeConfig("master_gain_db = -3\nvoices = 16\n[notifications]\nenabled = false\n")
        #expect(try reload() == (0, "reloaded\n", ""))  // applied by the reload: nothing to say
        try d.writeConfig("voices = 8\n[notifications]\nenabled = true\n[dbus]\nreplace = true\n[stream]\n\"media.role\" = \"music\"\n")
        let r = try reload()
        #expect(r.status == 0 && r.out == "reloaded\n", "\(r)")
        let warning = "cuectl: warning: changed since cued started, but read only at start: voices, [stream], [dbus] replace, "
            + "[notifications] enabled (a restart applies them: systemctl --user restart cued, or stop cued and start it again)\n"
        #expect(r.err == warning, "\(r)")
        #expect(try reload().err == warning)  // still waiting: the same again
        #expect(try d.status().warnings.contains { $0.contains("[notifications] enabled") })
        // Sink and voices given on the command line win over the config: a change of them waits for nothing.
        try d.writeConfig("sink = \"alsa:default\"\n[notifications]\nenabled = false\n")
        #expect(try reload() == (0, "reloaded\n", ""))
    }

    @Test func appMuteVersusGlobalMute() throws {
        let d = try DaemonHarness(args: ["--sink", "null"], config: "[apps.dashboard]\nmuted = true\n")
        let dash = try d.client(), mail = try d.client()
        #expect(try dash.request("app dashboard") == "ok dashboard")
        #expect(try mail.request("app mutt") == "ok mutt")
        #expect(try dash.request("play pop") == "ok muted")       // muted by the config
        #expect(try dash.request("state release") == "ok muted")
        #expect(try mail.request("play pop") == "ok")
        #expect(try mail.request("mute app mutt") == "ok muted mutt")
        #expect(try mail.request("play pop") == "ok muted")
        #expect(try dash.request("unmute app dashboard") == "ok unmuted dashboard")  // run time overrides config
        #expect(try dash.request("play pop") == "ok")
        #expect(try dash.request("mute") == "ok muted")          // global mute wins over everything
        #expect(try dash.request("play pop") == "ok muted")
        #expect(try dash.request("unmute") == "ok unmuted")
        #expect(try dash.request("play pop") == "ok")
        let apps = try d.status().apps
        #expect(apps["dashboard"]?.played == 2)
        #expect(apps["mutt"]?.played == 1)
        #expect(apps["mutt"]?.muted == true)
        #expect(apps["dashboard"]?.muted == false)
        // Per-app mutes persist across a restart.
        d.stop()
        let again = try DaemonHarness(args: ["--sink", "null", "--socket", d.socketPath],
                                      extraEnv: ["XDG_STATE_HOME": d.dir.file("state")])
        let c = try again.client()
        #expect(try c.request("app mutt") == "ok mutt")
        #expect(try c.request("play pop") == "ok muted")
    }

    @Test func cuectlAppIdentity() throws {
        let d = try DaemonHarness(args: ["--sink", "null"])
        _ = try d.request("mute app feedr")
        var env = ProcessInfo.processInfo.environment
        env["CUED_APP"] = "feedr"
        let viaEnv = try runProcess(TestPaths.binary("cuectl"), ["--socket", d.socketPath, "play", "pop"], env: env)
        #expect(viaEnv.out == "muted: cue not played\n")
        let viaFlag = try runProcess(TestPaths.binary("cuectl"), ["--socket", d.socketPath, "--app", "feedr", "play", "pop"])
        #expect(viaFlag.out == "muted: cue not played\n")
        env.removeValue(forKey: "CUED_APP")
        // Without either, the parent process's name: here /bin/sh runs cuectl.
        let viaParent = try runProcess("/bin/sh", ["-c", "'\(TestPaths.binary("cuectl"))' --socket \(d.socketPath) play pop; true"], env: env)
        #expect(viaParent.status == 0)
        let apps = try d.status().apps
        #expect(apps["sh"]?.played == 1)
        let muteByCuectl = try runProcess(TestPaths.binary("cuectl"), ["--socket", d.socketPath, "mute", "app", "sh"])
        #expect(muteByCuectl.out == "muted sh\n")
    }

    @Test func configCheckWithoutADaemon() throws {
        let dir = TempDir()
        let good = TestPaths.repoRoot.appendingPathComponent("docs/cued.example.toml").path
        let ok = try runProcess(TestPaths.binary("cuectl"), ["config", "check", good])
        #expect(ok.status == 0)
        #expect(ok.out == "\(good): ok\n")
        try "voices = 0\n\n[apps.x]\nloud = 1\n".write(toFile: dir.file("bad.toml"), atomically: true, encoding: .utf8)
        let bad = try runProcess(TestPaths.binary("cuectl"), ["config", "check", dir.file("bad.toml")])
        #expect(bad.status == 78)
        #expect(bad.err == "\(dir.file("bad.toml")):1: voices: must be 1...256, got 0\n\(dir.file("bad.toml")):4: apps.x.loud: unknown key (expected one of: muted, gain_db, profile)\n")
    }

    @Test func badConfigAtStartExits78() throws {
        let d = try DaemonHarness(args: ["--sink", "null"], config: "latency_ms = 0\n", waitReady: false)
        #expect(d.waitForExit() == 78)
        #expect(d.readStderr().contains("cued.toml:1: latency_ms: must be 1...1000, got 0"))
        let e = try DaemonHarness(args: ["--sink", "null", "--config", "/nonexistent.toml"], waitReady: false)
        #expect(e.waitForExit() == 78)
        #expect(e.readStderr().contains("/nonexistent.toml"))
    }
}
