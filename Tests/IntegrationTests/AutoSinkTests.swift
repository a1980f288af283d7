import CuedProtocol
import Foundation
import Testing
import TestSupport

/// `cued --sink auto` on this machine as it is: with no sound server in its
/// runtime directory it plays on ALSA's default if that opens (a card), else on
/// null, with one warning that says why and how to record; `status` says which
/// and why. (Through a real PipeWire: PipeWireTests.autoPicksPipeWireWhileItAnswers;
/// the order of the choice: ConfigTests' AutoSinkChoiceTests.)
@Suite(.timeLimit(.minutes(2))) struct AutoSinkTests {
    @Test func autoWithoutASoundServer() throws {
        let d = try DaemonHarness(args: ["--sink", "auto"])
        let s = try d.status()
        // Whether ALSA's default opens for cued: probed where cued looked, in its environment (its own
        // runtime directory, no sound server's variables), not the session the tests run in, whose
        // PipeWire the default PCM reaches through pipewire-alsa.
        let aplay = try runProcess("/usr/bin/aplay", ["-q", "-D", "default", "-t", "raw", "-f", "S16_LE", "-r", "48000", "-c", "2", "/dev/null"],
                                   env: d.environment)
        let log = d.readStderr()
        if aplay.status == 0 {
            #expect(s.sink.spec == "alsa:default", "\(s.sink)")
            #expect(s.sink.why == "auto: ALSA's default PCM opens (no sound server found)")
        } else {
            #expect(s.sink.spec == "null", "\(s.sink)")
            #expect(s.sink.why?.hasPrefix("auto: no sound server answers and ALSA's default PCM does not open (cannot open PCM 'default': ") == true, "\(s.sink)")
            #expect(s.sink.why?.hasSuffix("cues are played to nothing: to record them instead, --sink wav:FILE") == true)
            let warnings = log.split(separator: "\n").filter { $0.contains(" warning ") }
            #expect(warnings.count == 1 && warnings[0].contains("sink null: auto: "), "\(log)")
        }
        #expect(try d.request("play pop wait") == "ok")
        // cuectl status shows the why under the sink.
        let table = try runProcess(TestPaths.binary("cuectl"), ["--socket", d.socketPath, "status"])
        #expect(table.out.contains(s.sink.why ?? "-"), "\(table.out)")
    }

    /// auto played to nothing, and a sound server answers now (its socket appeared): doctor and why
    /// tell one truth, that the next cue picks it, and neither asks for a restart auto does not need.
    @Test func doctorAndWhyAgreeWhenAutoWillPickAgain() throws {
        let dir = TempDir()
        // No ALSA default that opens, whatever the machine has: auto takes null.
        try "pcm.!default { type hw card 99 }\n".write(toFile: dir.file("asound.conf"), atomically: true, encoding: .utf8)
        let d = try DaemonHarness(args: ["--sink", "auto"], extraEnv: ["ALSA_CONFIG_PATH": "/usr/share/alsa/alsa.conf:" + dir.file("asound.conf")])
        #expect(try d.status().sink.spec == "null")
        let env = d.environment
        func cuectl(_ args: [String]) throws -> (status: Int32, out: String, err: String) {
            try runProcess(TestPaths.binary("cuectl"), ["--socket", d.socketPath] + args, env: env)
        }
        var why = try cuectl(["why", "pop"]), doctor = try cuectl(["doctor"])
        #expect(why.status == 1 && why.out.contains("[no-output]"), "\(why)")
        #expect(why.out.contains("auto picks it at the next cue, no restart needed") && !why.out.contains("restart cued"), "\(why.out)")
        #expect(doctor.status == 1, "\(doctor.out)")
        // A sound server's socket appears (a server started after cued).
        try FileManager.default.createDirectory(atPath: env["XDG_RUNTIME_DIR"]! + "/pulse", withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: env["XDG_RUNTIME_DIR"]! + "/pulse/native", contents: nil)
        why = try cuectl(["why", "pop"]); doctor = try cuectl(["doctor"])
        #expect(doctor.out.contains("ok  output null until the next cue"), "\(doctor.out)")
        #expect(why.status == doctor.status, "why: \(why.out)\ndoctor: \(doctor.out)")
        #expect(why.status == 0 && !why.out.contains("restart"), "\(why.out)")
    }

    /// A named sink has no why.
    @Test func namedSinkHasNoWhy() throws {
        let d = try DaemonHarness(args: ["--sink", "null"])
        #expect(try d.status().sink.why == nil)
    }
}
