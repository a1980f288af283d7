import CSndFile
import CuedClient
import CuedProtocol
import Foundation
import Testing
import TestSupport

/// Issue 14: `play NAME` falls back to the desktop's sound theme, and
/// `play-file PATH` plays any file; both decoded once, off the event loop,
/// and cached. Checked against the real daemon with the WAV capture sink.
@Suite(.timeLimit(.minutes(2))) struct ThemeDaemonTests {
    static let wavSink = ["--sink", "wav:%DIR%/capture.wav"]

    func status(_ d: DaemonHarness) throws -> Status {
        try #require(Status.parse(String(try d.request("status").dropFirst(3))))
    }

    /// A theme in the harness's XDG_DATA_HOME: `ocean` inherits `freedesktop`
    /// (Debian's, in /usr/share/sounds) and overrides `bell`; `dialog-warning` is disabled.
    func makeTheme(_ d: DaemonHarness, bell: [Int16]) throws {
        let base = d.dir.file("data/sounds/ocean")
        try FileManager.default.createDirectory(atPath: base + "/stereo", withIntermediateDirectories: true)
        try "[Sound Theme]\nName=Ocean\nInherits=freedesktop\nDirectories=stereo\n\n[stereo]\nOutputProfile=stereo\n"
            .write(toFile: base + "/index.theme", atomically: true, encoding: .utf8)
        try WAV.write(base + "/stereo/bell.wav", int16: bell, sampleRate: 48_000, channels: 1)
        try "".write(toFile: base + "/stereo/dialog-warning.disabled", atomically: true, encoding: .utf8)
    }

    func capture(_ d: DaemonHarness) throws -> [Int16] { try WAV.read(d.capturePath).samples }

    @Test func debiansFreedesktopThemePlays() throws {
        let d = try DaemonHarness(args: Self.wavSink, extraEnv: ["XDG_DATA_DIRS": "/usr/share"])
        #expect(try d.request("play bell") == "ok")
        #expect(try d.request("play message-new-email") == "ok")  // truncated to `message`
        #expect(try d.request("play no-such-event-anywhere").hasPrefix("err unknown-cue no cue or theme sound named"))
        let names = try d.request("cues theme")
        #expect(names.hasPrefix("ok "))
        for n in ["bell", "complete", "dialog-error", "message-new-instant"] { #expect(names.split(separator: " ").contains(Substring(n)), "\(n)") }
        let s = try status(d)
        #expect(s.theme.name == "freedesktop")
        #expect(s.theme.chain == ["freedesktop"])
        #expect(s.theme.cached == 2)
        #expect(s.theme.cacheBytes > 0 && s.theme.cacheBytes <= s.theme.cacheLimitBytes)
        #expect(s.theme.cacheLimitBytes == 16 << 20)
        // The bell is in the capture: Debian's bell.oga decoded the same way by libsndfile.
        d.stop()
        #expect(try capture(d).contains { $0 != 0 })
    }

    /// `theme=NAME` looks a sound up in that theme for one request (the config's stays the
    /// default), cached apart; `preload` decodes one ahead, answered once it is in the cache.
    @Test func aThemeNamedPerRequestAndPreloadedAhead() throws {
        let bell = Fixture.samples(seed: 42, frames: 2_400)
        let d = try DaemonHarness(args: Self.wavSink, extraEnv: ["XDG_DATA_DIRS": "/usr/share"])
        try makeTheme(d, bell: bell)
        #expect(try d.request("preload bell theme=ocean") == "ok")
        #expect(try status(d).theme.cached == 1)
        #expect(try d.request("preload dialog-warning theme=ocean") == "ok disabled")
        #expect(try d.request("play dialog-warning theme=ocean") == "ok disabled")
        #expect(try d.request("preload dialog-warning") == "ok")  // freedesktop's own: the default theme is still the config's
        #expect(try d.request("preload no-such-sound-anywhere theme=ocean").hasPrefix("err unknown-cue"))
        #expect(try d.request("preload pop") == "ok")  // a cue of the bank: decoded already
        #expect(try status(d).theme.cached == 2)  // ocean's bell, freedesktop's dialog-warning
        // Preloaded: the play finds it decoded (answered at once, not after a decode), and it is ocean's bell.
        let c = try d.client()
        #expect(try c.request("play bell theme=ocean") == "ok")
        #expect(eventually { DesktopBusTests.find(bell, in: (try? DesktopBusTests.left(d)) ?? []) != nil })
        #expect(try status(d).theme.cached == 2)
        // The themes a request names are bounded; a theme of another output profile is another.
        for i in 0..<12 { _ = try d.request("preload bell theme=t\(i):stereo") }
        #expect(try d.request("play bell theme=ocean:5.1") == "ok")
        #expect(try d.request("stop all").hasPrefix("ok"))
    }

    @Test func aConfiguredThemeWithInheritanceAndDisabledSounds() throws {
        let bell = Fixture.samples(seed: 41, frames: 2_400)
        let d = try DaemonHarness(args: Self.wavSink, extraEnv: ["XDG_DATA_DIRS": "/usr/share"],
                                  config: "theme = \"ocean\"\ntheme_cache_mb = 1\n")
        try makeTheme(d, bell: bell)
        #expect(try d.request("reload") == "ok reloaded")  // the theme was made after the start: reload reads it
        #expect(try status(d).theme.chain == ["ocean", "freedesktop"])
        #expect(try d.request("play dialog-warning") == "ok disabled")  // no sound, and no fallback to freedesktop's
        #expect(try d.request("play bell") == "ok")                     // ocean's own
        #expect(try d.quiet())  // the bell has played out
        #expect(try d.request("play complete") == "ok")                 // inherited from freedesktop
        #expect(try status(d).theme.cacheLimitBytes == 1 << 20)
        d.stop()
        // ocean's bell, sample-exact, first; then freedesktop's `complete`.
        let cap = try capture(d)
        let left = stride(from: 0, to: cap.count, by: 2).map { cap[$0] }
        #expect(Array(left.prefix(bell.count)) == bell)
        #expect(left.dropFirst(bell.count + 4_800).contains { $0 != 0 })
    }

    @Test func aCachedThemeSoundIsNotDecodedAgain() throws {
        let bell = Fixture.samples(seed: 42, frames: 2_400)
        let d = try DaemonHarness(args: ["--sink", "null"], config: "theme = \"ocean\"\n")
        try makeTheme(d, bell: bell)
        #expect(try d.request("reload") == "ok reloaded")
        #expect(try d.request("play bell") == "ok")
        // Break the file: a second play still sounds (from the cache, no decode, no file access).
        try "garbage".write(toFile: d.dir.file("data/sounds/ocean/stereo/bell.wav"), atomically: true, encoding: .utf8)
        #expect(try d.request("play bell") == "ok")
        #expect(try status(d).theme.cached == 1)
        // A reload with the same theme keeps it cached; the broken file only shows once it is evicted or the theme changes.
        #expect(try d.request("reload") == "ok reloaded")
        #expect(try d.request("play bell") == "ok")
    }

    /// A miss is remembered until the next reload (a search can stat thousands
    /// of paths): a sound added meanwhile is found from the reload on.
    @Test func aThemeMissIsCachedUntilReload() throws {
        let d = try DaemonHarness(args: ["--sink", "null"], config: "theme = \"ocean\"\n")
        try makeTheme(d, bell: Fixture.samples(seed: 44, frames: 100))
        #expect(try d.request("reload") == "ok reloaded")
        #expect(try d.request("play gong").hasPrefix("err unknown-cue no cue or theme sound named 'gong'"))
        try WAV.write(d.dir.file("data/sounds/ocean/stereo/gong.wav"), int16: Fixture.samples(seed: 45, frames: 100), sampleRate: 48_000, channels: 1)
        #expect(try d.request("play gong").hasPrefix("err unknown-cue "))  // not searched again
        #expect(try d.request("reload") == "ok reloaded")
        #expect(try d.request("play gong") == "ok")
    }

    @Test func aBrokenThemeFileIsAnErrorNamingIt() throws {
        let d = try DaemonHarness(args: ["--sink", "null"], config: "theme = \"ocean\"\n")
        try makeTheme(d, bell: Fixture.samples(seed: 43, frames: 100))
        try "garbage".write(toFile: d.dir.file("data/sounds/ocean/stereo/bell.wav"), atomically: true, encoding: .utf8)
        #expect(try d.request("reload") == "ok reloaded")
        let r = try d.request("play bell")
        #expect(r.hasPrefix("err bad-file unreadable theme sound 'bell': \(d.dir.file("data/sounds/ocean/stereo/bell.wav")): "), "\(r)")
        #expect(try d.request("ping") == "ok pong")
    }

    @Test func playFileByPathIsSampleExactAndCachedByIdentity() throws {
        let first = Fixture.samples(seed: 51, frames: 1_200)
        let second = Fixture.samples(seed: 52, frames: 1_200)
        let d = try DaemonHarness(args: Self.wavSink)
        let path = d.dir.file("my sound%.wav")
        try WAV.write(path, int16: first, sampleRate: 48_000, channels: 1)
        let c = try d.client()
        #expect(try c.request("play-file \(FilePath.encode(path))") == "ok")
        #expect(try status(d).theme.cached == 1)
        #expect(try c.request("stop all").hasPrefix("ok"))
        #expect(try c.request("play-file \(FilePath.encode(path))") == "ok")
        #expect(try status(d).theme.cached == 1)  // the same file: from the cache
        #expect(try d.quiet())  // both plays have sounded
        // Replaced by a different file: a new identity, decoded anew.
        try WAV.write(path + ".new", int16: second, sampleRate: 48_000, channels: 1)
        rename(path + ".new", path)
        let before = try WAV.read(d.capturePath).frames
        #expect(try c.request("play-file \(FilePath.encode(path))") == "ok")
        #expect(try status(d).theme.cached == 2)
        #expect(eventually { ((try? WAV.read(d.capturePath))?.frames ?? 0) >= before + second.count })
        d.stop()
        let cap = try capture(d)
        let left = stride(from: 0, to: cap.count, by: 2).map { cap[$0] }
        func find(_ x: [Int16]) -> Bool { left.indices.contains { i in i + x.count <= left.count && Array(left[i..<(i + x.count)]) == x } }
        #expect(find(second))
    }

    @Test(arguments: [
        ("relative.wav", "err bad-argument path 'relative.wav' is not absolute"),
        ("/nonexistent/x.wav", "err bad-file not-found /nonexistent/x.wav: no such file"),
        ("/dev/zero", "err bad-file not-regular /dev/zero: is a character device, not a regular file"),
        ("/etc", "err bad-file not-regular /etc: is a directory, not a regular file"),
    ])
    func playFileRefusesWhatIsNotASoundFile(path: String, reply: String) throws {
        let d = try DaemonHarness(args: ["--sink", "null"])
        #expect(try d.request("play-file \(path)") == reply)
    }

    @Test func playFileFromAFIFONeverBlocks() throws {
        let d = try DaemonHarness(args: ["--sink", "null"])
        let fifo = d.dir.file("f.wav")
        mkfifo(fifo, 0o600)
        #expect(try d.request("play-file \(fifo)") == "err bad-file not-regular \(fifo): is a FIFO, not a regular file")
    }

    @Test func mutedAndRateLimitedBeforeAnyLookup() throws {
        let d = try DaemonHarness(args: ["--sink", "null"])
        #expect(try d.request("mute") == "ok muted")
        #expect(try d.request("play bell") == "ok muted")
        #expect(try d.request("play-file /nonexistent.wav") == "ok muted")
    }
}
