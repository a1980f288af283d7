import CuedProtocol
import Foundation
import Testing
import TestSupport

/// cued's own stream as a private PipeWire's graph sets it (see `PipeWireStack`), and `cuectl
/// why` naming what silences it: the desktop's System Sounds volume muted and zeroed the way
/// pipewire-pulse stores GNOME's slider (the Notification role's entry in WirePlumber's
/// `route-settings` metadata, written with pw-metadata, which WirePlumber saves and restores
/// onto cued's next stream), cued's stream muted and zeroed with wpctl, the output muted with
/// pactl. What is heard is recorded from the null sink's monitor, sample-exact.
@Suite(.serialized, .timeLimit(.minutes(3)),
       .enabled(if: PipeWireStack.unavailableReason == nil, Comment(rawValue: PipeWireStack.unavailableReason ?? "")))
struct SystemSoundsPipeWireTests {
    static let key = "restore.stream.Output/Audio.media.role:Notification"

    /// The Notification role's entry as pipewire-pulse writes it for GNOME's System Sounds slider.
    static func setRole(_ stack: PipeWireStack, mute: Bool, volume: Double) throws {
        let json = "{\"mute\":\(mute),\"volumes\":[\(volume),\(volume)],\"channels\":[\"FL\",\"FR\"]}"
        let r = try runOnStack("/usr/bin/pw-metadata", ["-n", "route-settings", "0", key, json, "Spa:String:JSON"], env: stack.environment)
        #expect(r.status == 0, "\(r)")
    }

    static func wpctl(_ stack: PipeWireStack, _ args: [String]) throws {
        let r = try runOnStack("/usr/bin/wpctl", args, env: stack.environment)
        #expect(r.status == 0, "\(r)")
    }

    static func why(_ d: DaemonHarness) throws -> (status: Int32, out: String, err: String) {
        try runOnStack(TestPaths.binary("cuectl"), ["--socket", d.socketPath, "why", "pop"])
    }

    static func stereo(_ cue: [Int16]) -> [Int16] { cue.flatMap { [$0, $0] } }

    @Test func theSystemSoundsVolumeAndCuedsStreamAreSeenAndNamedByWhy() throws {
        let stack = try PipeWireStack()
        // WirePlumber keeps its state under the stack's HOME; cued reads it there.
        let state = stack.environment["HOME"]! + "/.local/state"
        let env = stack.environment.merging(["XDG_STATE_HOME": state]) { $1 }
        let first = try DaemonHarness(args: ["--sink", "pipewire"], extraEnv: env)
        let capture = stack.dir.file("monitor.raw")
        _ = try stack.record(to: capture)
        let pop = Self.stereo(Fixture.standard["pop"]!), psst1 = Self.stereo(Fixture.standard["psst1"]!)
        // Heard: its first 97 frames sample-exact (a claim on the volume and the mute, not on the
        // graph's cycles: a hole the machine makes later in the cue does not unhear it).
        func heard(_ cue: [Int16]) -> Int { ((try? Recording(path: capture))?.occurrences(of: Array(cue.prefix(2 * 97))).count) ?? 0 }

        #expect(try first.request("play pop wait") == "ok")
        #expect(eventually { heard(pop) == 1 }, "the first pop is not in the monitor")
        var st = try first.status()
        #expect(st.sink.stream.open && st.sink.stream.mute == false && st.sink.stream.nodeID != nil, "\(st.sink.stream)")

        // GNOME's System Sounds slider muted: pipewire-pulse's entry, which WirePlumber saves about a second later.
        let t0 = Date()
        try Self.setRole(stack, mute: true, volume: 1)
        #expect(eventually { (try? first.status().desktop.systemSounds?.mute) == true }, "\((try? first.status().desktop) ?? Status.Desktop())")
        print("SystemSoundsPipeWireTests: the role's mute reached status in \(Int(Date().timeIntervalSince(t0) * 1000)) ms (WirePlumber saves its state 1 s after a change)")
        // A cued whose stream is not open yet (its next open gets the role's volume).
        first.stop()
        let d = try DaemonHarness(args: ["--sink", "pipewire"], extraEnv: env)
        #expect(eventually { (try? d.status().desktop.systemSounds?.mute) == true })
        #expect(try d.status().sink.stream.open == false)
        var why = try Self.why(d)
        #expect(why.status == 1 && WhyTests.names(why.out) == ["system-sounds"], "\(why)")
        #expect(why.out.contains("the desktop's System Sounds volume is muted") && why.out.contains("fix: raise System Sounds"), "\(why.out)")

        // The next stream gets it: the pop is played and not heard.
        #expect(try d.request("play pop wait") == "ok")
        st = try d.status()
        #expect(st.sink.stream.mute == true && st.sink.stream.from?.hasPrefix("WirePlumber's kept volume for the role") == true, "\(st.sink.stream)")
        why = try Self.why(d)
        #expect(WhyTests.names(why.out) == ["system-sounds"] && why.out.contains("cued's stream is muted on the sound server"), "\(why.out)")
        // The fix on the role applies to the next stream, not this one: its own fix then.
        try Self.setRole(stack, mute: false, volume: 1)
        #expect(eventually { (try? d.status().desktop.systemSounds?.mute) == false })
        why = try Self.why(d)
        let node = try #require(st.sink.stream.nodeID)
        #expect(WhyTests.names(why.out) == ["stream-muted"] && why.out.contains("fix: wpctl set-mute \(node) 0"), "\(why.out)")
        try Self.wpctl(stack, ["set-mute", "\(node)", "0"])
        #expect(eventually { (try? Self.why(d).status) == 0 }, "\((try? Self.why(d).out) ?? "")")
        // Heard again, and the muted pop never was (psst1 marks where the monitor has got to).
        #expect(try d.request("play psst1 wait") == "ok")
        #expect(eventually { heard(psst1) == 1 }, "psst1 is not in the monitor")
        #expect(heard(pop) == 1, "the pop played while muted was heard")

        // cued's stream at 0 with wpctl, then the output muted with pactl.
        try Self.wpctl(stack, ["set-volume", "\(node)", "0"])
        #expect(eventually { (try? Self.why(d).out).map { WhyTests.names($0) == ["stream-muted"] && $0.contains("is at 0") } ?? false })
        try Self.wpctl(stack, ["set-volume", "\(node)", "1"])
        _ = try stack.pactl(["set-sink-mute", "nul", "1"])
        #expect(eventually { (try? Self.why(d).out).map { WhyTests.names($0) == ["output-muted"] } ?? false },
                "\((try? Self.why(d).out) ?? "")")
        _ = try stack.pactl(["set-sink-mute", "nul", "0"])
        #expect(eventually { (try? Self.why(d).status) == 0 })
    }
}
