import CuedClient
import CuedProtocol
import Foundation
import Testing
import TestSupport

/// cuectl's play --wait, play-file, stop and cues --theme against the real
/// daemon, with the WAV capture sink.
@Suite(.timeLimit(.minutes(2))) struct CuectlPlaybackTests {
    static let long = Fixture.constant(1000, frames: 24_000)  // 500 ms

    func daemon() throws -> DaemonHarness {
        var cues = Fixture.standard
        cues["long"] = Self.long
        return try DaemonHarness(cues: cues, args: DaemonTests.wavSink)
    }

    func cuectl(_ d: DaemonHarness, _ args: [String]) throws -> (status: Int32, out: String, err: String) {
        try runProcess(TestPaths.binary("cuectl"), ["--socket", d.socketPath] + args, env: d.environment)
    }

    func capturedFrames(_ d: DaemonHarness) -> Int {
        ((try? WAV.read(d.capturePath))?.samples.filter { $0 != 0 }.count ?? 0) / 2
    }

    /// --wait returns once the cue has sounded: by then no voice plays and
    /// the capture holds all of it.
    @Test func playWaitReturnsOnceTheCueHasSounded() throws {
        let d = try daemon()
        #expect(try cuectl(d, ["play", "long", "--wait"]) == (0, "", ""))
        let s = try #require(Status.parse(String(try d.request("status").dropFirst(3))))
        #expect(s.voicesActive == 0 && s.cues["long"]?.played == 1)
        #expect(capturedFrames(d) >= Self.long.count)
    }

    /// `cuectl play` without `--wait` is answered once the cue is queued: when cued's
    /// output fails, cuectl says so on stderr (exit 0: cued took the cue, and the
    /// device is retried) — on the very cue whose open failed (its `status wait` is
    /// answered once the audio thread took the cue); on a working output, or a `null`
    /// sink named on purpose, it says nothing.
    @Test func playWithoutWaitWarnsWhenTheOutputHasFailed() throws {
        let failing = try DaemonHarness(args: ["--sink", "fault:open-fail=1000000"])
        #expect(try failing.status().sink.state == "closed")  // not tried yet: this cue is the first
        let r = try cuectl(failing, ["play", "pop"])
        #expect(r.status == 0 && r.out == "", "\(r)")
        #expect(r.err.hasPrefix("cuectl: warning: cued's output fault:open-fail=1000000 has failed ("), "\(r.err)")
        #expect(r.err.hasSuffix(": the cue sounds only if it reopens in time; cuectl doctor says how to fix it\n"), "\(r.err)")
        #expect(try cuectl(failing, ["play", "pop", "--wait"]).err.hasPrefix("cuectl: not-played"))
        let named = try DaemonHarness(args: ["--sink", "null"])
        #expect(try cuectl(named, ["play", "pop"]) == (0, "", ""))
        #expect(try cuectl(try daemon(), ["play", "pop"]) == (0, "", ""))
    }

    @Test func playFileTakesAPathRelativeToTheWorkingDirectory() throws {
        let d = try daemon()
        try FileManager.default.createDirectory(atPath: d.dir.file("my sounds"), withIntermediateDirectories: true)
        let tone = Fixture.constant(2000, frames: 4_800)
        try WAV.write(d.dir.file("my sounds/100% tone.wav"), int16: tone, sampleRate: 48_000, channels: 1)
        let script = "cd '\(d.dir.path)' && exec '\(TestPaths.binary("cuectl"))' --socket '\(d.socketPath)' play-file 'my sounds/100% tone.wav' --wait"
        let r = try runProcess("/bin/sh", ["-c", script], env: d.environment)
        #expect(r == (0, "", ""))
        #expect(capturedFrames(d) >= tone.count)
        let missing = try cuectl(d, ["play-file", d.dir.file("none.wav")])
        #expect(missing.status == 1)
        #expect(missing.err.hasPrefix("cuectl: bad-file: \(d.dir.file("none.wav")): "), "\(missing.err)")
    }

    @Test func stopSaysHowManyVoicesStopped() throws {
        let d = try daemon()
        #expect(try cuectl(d, ["--app", "tool", "play", "long"]).status == 0)
        // Not other's: and says whose voice plays instead (a loop a script started is not the terminal's).
        #expect(try cuectl(d, ["--app", "other", "stop"]) == (0, "0\n", "cuectl: 1 voice plays, none started by app 'other': "
            + "cuectl status lists the apps; cuectl --app NAME stop, stop ID or stop all stop them\n"))
        #expect(try cuectl(d, ["--app", "tool", "stop", "pop"]).out == "0\n")  // not that cue
        #expect(try cuectl(d, ["--app", "tool", "stop"]) == (0, "1\n", ""))
        #expect(try cuectl(d, ["play", "long"]).status == 0)
        #expect(try cuectl(d, ["stop", "all"]) == (0, "1\n", ""))
        #expect(try cuectl(d, ["--app", "tool", "stop"]) == (0, "0\n", ""))  // nothing plays: nothing to say
    }

    @Test func aWaitedCueThatIsStoppedSaysSo() throws {
        let d = try daemon()
        let out = d.dir.file("wait.out")
        let p = try Subprocess(TestPaths.binary("cuectl"), ["--socket", d.socketPath, "play", "long", "--wait"], stdout: out)
        #expect(eventually { capturedFrames(d) > 0 })
        #expect(try cuectl(d, ["stop", "all"]).status == 0)
        #expect(p.wait(timeout: 10) == 0)
        #expect(try String(contentsOfFile: out, encoding: .utf8) == "stopped before the end\n")
    }

    @Test func soundThemeNames() throws {
        let d = try daemon()
        let names = try cuectl(d, ["cues", "--theme"])
        #expect(names.status == 0)
        let words = names.out.split(whereSeparator: { $0 == " " || $0 == "\n" })
        #expect(words.contains("bell") && words.contains("message-new-instant"), "\(names)")
        #expect(try cuectl(d, ["play", "bell", "--wait"]) == (0, "", ""))
        #expect(capturedFrames(d) > 0)
    }

    /// What cuectl sends, and how long it waits, seen from a fake daemon.
    @Test func waitOutlastsTheUsualReplyTimeout() throws {
        let dir = TempDir()
        let fake = try FakeDaemon(path: dir.file("fake.sock"), delay: 6) { line in
            line.hasPrefix("play ") ? "ok stopped" : "ok"
        }
        let r = try runProcess(TestPaths.binary("cuectl"), ["--socket", fake.path, "--app", "t", "play", "pop", "--gain", "-3", "--wait"])
        #expect(r == (0, "stopped before the end\n", ""))
        #expect(fake.lines == ["app t", "play pop -3 wait"])
    }
}

/// A socket that answers each line with `reply(line)` (nil: never answers),
/// the first `play` after `delay` seconds, recording what it was sent. One connection.
final class FakeDaemon: @unchecked Sendable {
    let path: String
    private let fd: Int32
    private let done = DispatchSemaphore(value: 0)
    private let lock = NSLock()
    private var received: [String] = []

    var lines: [String] {
        _ = done.wait(timeout: .now() + 15)
        return lock.withLock { received }
    }

    init(path: String, delay: Double = 0, reply: @escaping @Sendable (String) -> String?) throws {
        self.path = path
        fd = try boundUnixSocket(path, type: Int32(SOCK_STREAM.rawValue))
        guard listen(fd, 1) == 0 else { throw POSIXError(.EADDRINUSE) }
        let listener = fd
        Thread.detachNewThread { [self] in
            defer { done.signal() }
            let c = accept(listener, nil, nil)
            guard c >= 0 else { return }
            defer { close(c) }
            var pending: [UInt8] = []
            var first = true
            var buf = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = read(c, &buf, buf.count)
                if n <= 0 { return }
                pending += buf[0..<n]
                while let lf = pending.firstIndex(of: 0x0A) {
                    let line = String(decoding: pending[..<lf], as: UTF8.self)
                    pending.removeSubrange(...lf)
                    lock.withLock { received.append(line) }
                    // A daemon slow to answer is the stimulus: it takes `delay` before its first play's reply.
                    if first && line.hasPrefix("play") { usleep(UInt32(delay * 1_000_000)); first = false }
                    guard let answer = reply(line) else { continue }
                    let out = Array((answer + "\n").utf8)
                    _ = out.withUnsafeBytes { write(c, $0.baseAddress, $0.count) }
                }
            }
        }
    }

    deinit {
        shutdown(fd, Int32(SHUT_RDWR))
        close(fd)
    }
}
