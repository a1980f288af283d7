import CuedClient
import CuedProtocol
import Foundation
import Testing
import TestSupport

/// Profiles against the real daemon: what reaches a WAV sink in each, `important`,
/// cuectl's `profile`, and the profiles kept across a restart.
@Suite(.timeLimit(.minutes(2))) struct ProfileTests {
    func cuectl(_ d: DaemonHarness, _ args: [String]) throws -> (status: Int32, out: String, err: String) {
        try runProcess(TestPaths.binary("cuectl"), ["--socket", d.socketPath] + args)
    }

    /// `full` plays the cue as it is, `quiet` 12 dB lower (the default), `silent`
    /// nothing; the capture holds exactly the first two.
    @Test func eachProfileAtTheSink() throws {
        var cues = Fixture.standard
        cues["tone"] = Fixture.constant(8000, frames: 2_400)
        let d = try DaemonHarness(cues: cues, args: ["--sink", "wav:%DIR%/capture.wav"])
        let c = try d.client()
        #expect(try c.request("play tone wait") == "ok")
        #expect(try c.request("profile quiet") == "ok quiet")
        #expect(try c.request("play tone wait") == "ok")
        #expect(try c.request("profile silent") == "ok silent")
        #expect(try c.request("play tone wait") == "ok silent")
        #expect(try c.request("state release") == "ok silent")
        #expect(try d.status().played == 2)
        #expect(d.stop() == 0)
        let samples = try WAV.read(d.capturePath).samples
        let sounding = stride(from: 0, to: samples.count, by: 2).map { Int(samples[$0]) }.filter { $0 != 0 }
        // -12 dB: 8000 × 10^(-12/20) ≈ 2009.
        #expect(sounding.filter { (7_990...8_010).contains($0) }.count == 2_400, "full")
        #expect(sounding.filter { (2_000...2_020).contains($0) }.count == 2_400, "quiet")
        #expect(sounding.count == 4_800, "something else reached the sink")
    }

    /// `cuectl profile …` end to end; the profiles survive a restart, and the saved
    /// global profile wins over the config's at start.
    @Test func cuectlProfileAndPersistence() throws {
        let config = "profile = \"silent\"\n[profiles]\nimportant_apps = [\"clock\"]\n"
        let d = try DaemonHarness(args: ["--sink", "null"], config: config)
        #expect(try cuectl(d, ["profile"]) == (0, "silent\n", ""))  // the config's, with no saved state
        #expect(try cuectl(d, ["--app", "clock", "play", "pop", "--important"]) == (0, "", ""))
        #expect(try cuectl(d, ["--app", "mail", "play", "pop", "--important"])
                == (0, "silent: cue not played (the profile is silent)\n", ""))
        #expect(try cuectl(d, ["profile", "quiet"]) == (0, "quiet\n", ""))
        #expect(try cuectl(d, ["profile", "app", "mutt", "silent"]) == (0, "mutt silent\n", ""))
        #expect(try cuectl(d, ["profile", "app", "feedr"]) == (0, "feedr quiet\n", ""))
        #expect(try cuectl(d, ["--app", "mutt", "play", "pop"]).out == "silent: cue not played (the profile is silent)\n")
        #expect(try cuectl(d, ["--app", "feedr", "play", "pop"]) == (0, "", ""))
        #expect(try cuectl(d, ["profile", "loud"]).status == 64)
        let table = try cuectl(d, ["status"]).out
        #expect(table.split(separator: "\n").contains { $0.hasPrefix("profile ") && $0.hasSuffix(" quiet") }, "\(table)")
        #expect(table.contains("mutt: played 0, profile silent"), "\(table)")
        let s = try d.status()
        #expect(s.profile == .quiet && s.apps["mutt"]?.profile == .silent)
        #expect(d.stop() == 0)

        let state = try String(contentsOfFile: d.dir.file("state/cued/state"), encoding: .utf8)
        #expect(state.contains("profile=quiet\n") && state.contains("app.mutt.profile=silent\n"), "\(state)")
        // The same config (profile = "silent") and the saved state: the saved profile wins.
        let again = try DaemonHarness(args: ["--sink", "null", "--socket", d.socketPath],
                                      extraEnv: ["XDG_STATE_HOME": d.dir.file("state"), "XDG_CONFIG_HOME": d.dir.file("config")])
        #expect(try again.request("profile") == "ok quiet")
        // The start-up line says the profile it restored, beside the mute (issue 47: only muted=false).
        let listening = again.readStderr().split(separator: "\n").first { $0.contains(" listening") }
        #expect(listening?.contains("muted=false profile=quiet ") == true, "\(again.readStderr())")
        #expect(try again.request("profile app mutt") == "ok mutt silent")
        #expect(try cuectl(again, ["profile", "app", "mutt", "default"]) == (0, "mutt quiet\n", ""))
        // A reload that changes the config's profile applies it (as `muted`).
        try d.writeConfig("profile = \"full\"\n")  // the file `again` reads
        #expect(try again.request("reload") == "ok reloaded")
        #expect(try again.request("profile") == "ok full")
    }
}
