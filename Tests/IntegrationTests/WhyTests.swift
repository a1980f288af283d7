import CuedProtocol
import Foundation
import Testing
import TestSupport

/// `cuectl why` against the real daemon: each reason caused for real and named, in the order
/// they apply, with its fix; and gone once the fix is applied. The desktop's reasons are caused
/// in DesktopSettingsTests (the portal's stand-in), cued's stream's and the output's on a
/// private PipeWire (SystemSoundsPipeWireTests).
@Suite(.timeLimit(.minutes(2)))
struct WhyTests {
    static func why(_ d: DaemonHarness, _ args: [String], env: [String: String]? = nil) throws -> (status: Int32, out: String, err: String) {
        try runProcess(TestPaths.binary("cuectl"), ["--socket", d.socketPath] + args, env: env)
    }

    /// The reasons' names, as cuectl prints them (`… [name]`).
    static func names(_ out: String) -> [String] {
        out.split(separator: "\n").compactMap { line in
            guard line.hasPrefix("  "), line.hasSuffix("]"), let open = line.lastIndex(of: "[") else { return nil }
            return String(line[line.index(after: open)..<line.index(before: line.endIndex)])
        }
    }

    @Test func everyReasonOfAdmissionAndTheOutputIsNamedInOrderWithItsFix() throws {
        // A cue big enough that the budget's 1 MiB has less room left than a theme sound needs:
        // 480 KB decoded (a mono file stays mono: 4 bytes a frame).
        let big = Fixture.samples(seed: 9, frames: 120_000)
        let d = try DaemonHarness(cues: Fixture.standard.merging(["big": big]) { $1 }, args: ["--sink", "null"],
                                  config: "sound_budget_mb = 1\n[cues.pop]\ncooldown_ms = 60000\n")
        let clean = try Self.why(d, ["--app", "mail", "why", "pop"])
        #expect(Self.names(clean.out) == ["no-output"], "\(clean)")
        #expect(clean.status == 1 && clean.out.contains("cued plays to nothing: its output is null"), "\(clean)")

        #expect(try d.request("play pop") == "ok")  // its cooldown starts
        _ = try d.request("mute")
        _ = try d.request("mute app mail")
        _ = try d.request("profile silent")
        _ = try d.request("profile app mail silent")
        let all = try Self.why(d, ["--app", "mail", "why", "pop"])
        #expect(Self.names(all.out) == ["muted", "app-muted", "profile", "app-profile", "cooldown", "no-output"], "\(all)")
        for fix in ["fix: cuectl unmute", "fix: cuectl unmute app mail", "fix: cuectl profile full", "fix: cuectl profile app mail default",
                    "cooldown_ms in cued.toml"] {
            #expect(all.out.contains(fix), "\(fix) not in \(all.out)")
        }
        #expect(all.out.hasPrefix("pop by mail would not be heard:\n  1. cued is muted [muted]\n     fix: cuectl unmute\n"), "\(all.out)")
        // A theme sound not decoded yet with the budget nearly full; a bank cue is decoded already.
        let theme = try Self.why(d, ["--app", "mail", "why", "bell"])
        #expect(Self.names(theme.out) == ["muted", "app-muted", "profile", "app-profile", "memory", "no-output"], "\(theme)")
        #expect(theme.out.contains("raise sound_budget_mb"))

        // Each fix applied, its reason goes (the cooldown is the config's: a reload forgets it).
        for fix in [["unmute"], ["unmute", "app", "mail"], ["profile", "full"], ["profile", "app", "mail", "default"]] {
            #expect(try Self.why(d, ["--app", "mail"] + fix).status == 0)
        }
        #expect(Self.names(try Self.why(d, ["--app", "mail", "why", "pop"]).out) == ["cooldown", "no-output"])
        // The protocol's own answer: JSON, the same reasons.
        let line = try d.request("why pop")
        let report = try #require(WhyReport.parse(String(line.dropFirst(3))))
        #expect(report.cue == "pop" && report.reasons.map(\.name) == ["cooldown", "no-output"], "\(line)")
        #expect(try d.request("why") .contains("\"cue\":\"pop\""))
        #expect(try d.request("why no/such").hasPrefix("err bad-argument "))
    }

    /// A name that is neither a cue nor a theme sound would never be heard, and `why` says so as
    /// `play` does: `err unknown-cue`, cuectl's exit 1 (issue 47: "nosuchcue would be heard").
    /// A theme sound, even one not decoded yet, gets its report.
    @Test func anUnknownCueIsAnErrorAsForPlay() throws {
        let d = try DaemonHarness(args: ["--sink", "wav:%DIR%/capture.wav"])
        let play = try d.request("play nosuchcue")
        #expect(play.hasPrefix("err unknown-cue no cue or theme sound named 'nosuchcue'"), "\(play)")
        #expect(try d.request("why nosuchcue") == play)
        let r = try Self.why(d, ["why", "nosuchcue"])
        #expect(r.status == 1 && r.out.isEmpty, "\(r)")
        #expect(r.err.hasPrefix("cuectl: unknown-cue: no cue or theme sound named 'nosuchcue'"), "\(r)")
        let bell = try Self.why(d, ["why", "bell"])  // the freedesktop theme's, never played here
        #expect(bell.status == 0 && bell.out.hasPrefix("bell by "), "\(bell)")
        #expect(try Self.why(d, ["why", "pop"]).status == 0)
    }

    @Test func aFailingDeviceIsNamed() throws {
        let d = try DaemonHarness(args: ["--sink", "fault:open-fail=1000000"])
        _ = try d.request("play pop")
        #expect(eventually { (try? d.status().sink.state) == "failed" })
        let r = try Self.why(d, ["why", "pop"])
        #expect(Self.names(r.out) == ["device-failing"] && r.out.contains("cuectl doctor"), "\(r)")
        // doctor shows the list for pop, but the output's reasons: it says those itself, with their detail.
        _ = try d.request("mute")
        let doctor = try runProcess(TestPaths.binary("cuectl"), ["--socket", d.socketPath, "doctor"])
        #expect(doctor.out.contains("!!  why pop: cued is muted [muted]\n    fix: cuectl unmute"), "\(doctor.out)")
        #expect(doctor.out.contains("!!  output fault:open-fail=1000000") && !doctor.out.contains("[device-failing]"), "\(doctor.out)")
        #expect(doctor.status == 1)
    }

    /// An app whose sounds came through libcanberra, with libcanberra's routing to cued off in
    /// the session cuectl runs in: its next sound never reaches cued (cuectl tells, not cued).
    @Test(.enabled(if: CanberraSandbox.systemDirectory != nil, "no libcanberra here"))
    func libcanberrasRoutingOffIsNamedForACanberraApp() throws {
        let d = try DaemonHarness(args: ["--sink", "wav:%DIR%/capture.wav"])
        let app = try d.client()
        #expect(try app.request("app gnome-shell via=libcanberra") == "ok gnome-shell")
        #expect(try app.request("play pop wait") == "ok")
        var env = d.environment
        env.removeValue(forKey: "CANBERRA_DRIVER")  // the switch file under its XDG_CONFIG_HOME is absent: off
        let r = try Self.why(d, ["--app", "gnome-shell", "why", "pop"], env: env)
        #expect(Self.names(r.out) == ["canberra-routing"], "\(r)")
        #expect(r.out.contains("fix: cuectl canberra on"), "\(r)")
        let other = try Self.why(d, ["--app", "mail", "why", "pop"], env: env)
        #expect(!Self.names(other.out).contains("canberra-routing"), "an app of the socket: \(other)")
    }
}
