import CSndFile
@testable import CuedAudio
import CuedCore
import Foundation
import Testing
import TestSupport

/// Debian's sound-theme-freedesktop (`make test-deps` installs it), resolved and
/// decoded as cued would.
@Suite struct FreedesktopThemeTests {
    static let stereo = "/usr/share/sounds/freedesktop/stereo"
    let home = TempDir()

    /// The system's data dirs, an empty user dir, no locale.
    var theme: SoundTheme { SoundTheme(environment: ["XDG_DATA_HOME": home.path, "HOME": home.path]) }

    @Test func chainAndDirectories() throws {
        try #require(FileSystemCheck.isDirectory(Self.stereo), "sound-theme-freedesktop is not installed: run `make test-deps`")
        let t = theme
        #expect(t.chain == ["freedesktop"])
        #expect(t.baseDirectories == [home.path + "/sounds", "/usr/local/share/sounds", "/usr/share/sounds"])
        #expect(t.locales == ["C"])
        #expect(t.warnings.isEmpty, "\(t.warnings)")
    }

    @Test(arguments: [
        ("bell", "bell.oga"), ("complete", "complete.oga"), ("dialog-error", "dialog-error.oga"),
        ("message-new-instant", "message-new-instant.oga"),
        // Truncated at the last '-' until found: message-new-email → message-new → message.
        ("message-new-email", "message.oga"), ("dialog-error-serious", "dialog-error.oga"),
    ])
    func resolvesAndDecodes(name: String, file: String) throws {
        try #require(FileSystemCheck.isDirectory(Self.stereo), "sound-theme-freedesktop is not installed: run `make test-deps`")
        let found = theme.lookup(name)
        #expect(found == .file(Self.stereo + "/" + file))
        guard case .file(let path) = found else { return }
        let cue = try CueLoader().load(path: path, name: name)
        #expect(cue.frames > 2_000 && cue.frames <= 480_000)
        #expect(cue.samples.contains { abs($0) > 0.05 }, "decodes to silence")
    }

    @Test func unknownNamesAreNotFound() {
        #expect(theme.lookup("no-such-sound-anywhere") == .notFound)
        #expect(theme.lookup("../freedesktop/stereo/bell") == .notFound)
        #expect(theme.lookup("") == .notFound)
    }

    /// Every name the theme lists resolves and decodes; the whole theme fits
    /// the cache's default limit.
    @Test func everyNameDecodesWithinTheCacheLimit() throws {
        try #require(FileSystemCheck.isDirectory(Self.stereo), "sound-theme-freedesktop is not installed: run `make test-deps`")
        // One theme, as the daemon holds one per reload (a fresh one per name
        // would re-read index.theme each time and test the file system instead).
        let theme = self.theme
        #expect(theme.warnings.isEmpty, "\(theme.warnings)")
        let names = theme.names()
        let files = try FileManager.default.contentsOfDirectory(atPath: Self.stereo).filter { $0.hasSuffix(".oga") }
        #expect(Set(names).isSuperset(of: files.map { String($0.dropLast(4)) }))
        #expect(names.contains("bell") && names.contains("message") && names.contains("message-new-instant"))
        #expect(names == names.sorted() && Set(names).count == names.count)
        var cache = SoundCache<SoundKey>()
        for name in names {
            let found = theme.lookup(name)
            guard case .file(let path) = found else {
                Issue.record("\(name) does not resolve: \(found); chain \(theme.chain), a fresh theme finds \(self.theme.lookup(name)) (warnings \(self.theme.warnings))")
                continue
            }
            #expect(cache.insert(try CueLoader().load(path: path, name: name), for: .theme(theme: "freedesktop", sound: name)))
        }
        #expect(cache.count == names.count, "the whole theme (\(cache.bytes) bytes) fits \(cache.limitBytes)")
    }
}

enum FileSystemCheck {
    static func isDirectory(_ p: String) -> Bool {
        var isDir: ObjCBool = false
        return FileManager.default.fileExists(atPath: p, isDirectory: &isDir) && isDir.boolValue
    }
}

/// A small theme tree built for each test: a user dir and two system dirs.
final class ThemeTree: @unchecked Sendable {
    let dir = TempDir()
    var user: String { dir.file("user") }    // XDG_DATA_HOME
    var sys1: String { dir.file("sys1") }    // XDG_DATA_DIRS, first
    var sys2: String { dir.file("sys2") }    // XDG_DATA_DIRS, second

    func env(_ extra: [String: String] = [:]) -> [String: String] {
        ["XDG_DATA_HOME": user, "XDG_DATA_DIRS": "\(sys1):\(sys2)", "HOME": dir.path].merging(extra) { $1 }
    }

    /// A real sound (100 ms of a tone) at `base/sounds/rel`; the format follows the extension.
    @discardableResult
    func sound(_ base: String, _ rel: String, level: Float = 0.5) throws -> String {
        let path = base + "/sounds/" + rel
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        if rel.hasSuffix(".disabled") || rel.hasSuffix(".txt") {
            try Data().write(to: URL(fileURLWithPath: path))
            return path
        }
        let samples = (0..<4_800).map { level * Float(sin(2 * Double.pi * 440 * Double($0) / 48_000)) }
        let format = rel.hasSuffix(".wav") ? Int32(SF_FORMAT_WAV | SF_FORMAT_PCM_16) : Int32(SF_FORMAT_OGG | SF_FORMAT_VORBIS)
        try WAV.write(path, samples: samples, sampleRate: 48_000, channels: 1, format: format)
        return path
    }

    func index(_ base: String, _ theme: String, _ text: String) throws {
        let d = base + "/sounds/" + theme
        try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
        try text.write(toFile: d + "/index.theme", atomically: false, encoding: .utf8)
    }

    /// child (in sys1) inherits parent (in sys2), which inherits child back (a loop);
    /// freedesktop in sys2. Each has a stereo directory.
    init() throws {
        try index(sys1, "child", """
            # A theme with a surround directory it must not use, and comments.
            [Sound Theme]
            Name=Child
            Name[de]=Kind
            Inherits=parent
            Directories=stereo 5.1, plain

            [stereo]
            OutputProfile=stereo

            [5.1]
            OutputProfile=5.1
            """)
        try index(sys2, "parent", "[Sound Theme]\r\nName=Parent\r\nInherits = child, freedesktop\r\nDirectories=stereo\r\n\r\n[stereo]\r\nOutputProfile=stereo\r\n")
        try index(sys2, "freedesktop", "[Sound Theme]\nName=Default\nDirectories=stereo\n\n[stereo]\nOutputProfile=stereo\n")
    }
}

@Suite struct SoundThemeTests {
    @Test func chainFollowsInheritsOnceEachThenFreedesktop() throws {
        let t = try ThemeTree()
        let theme = SoundTheme(name: "child", environment: t.env())
        #expect(theme.chain == ["child", "parent", "freedesktop"])
        #expect(theme.warnings.isEmpty, "\(theme.warnings)")
        #expect(theme.baseDirectories == [t.user + "/sounds", t.sys1 + "/sounds", t.sys2 + "/sounds"])
    }

    @Test func eachThemeInTurnThenUnthemed() throws {
        let t = try ThemeTree()
        let own = try t.sound(t.sys1, "child/stereo/own.oga")
        let parents = try t.sound(t.sys2, "parent/stereo/from-parent.wav")
        let fd = try t.sound(t.sys2, "freedesktop/stereo/from-freedesktop.ogg")
        let unthemed = try t.sound(t.sys1, "unthemed.wav")
        // The same name lower in the chain loses.
        try t.sound(t.sys2, "parent/stereo/own.oga")
        try t.sound(t.sys2, "freedesktop/stereo/from-parent.wav")
        try t.sound(t.sys2, "unthemed-not.wav")
        let theme = SoundTheme(name: "child", environment: t.env())
        #expect(theme.lookup("own") == .file(own))
        #expect(theme.lookup("from-parent") == .file(parents))
        #expect(theme.lookup("from-freedesktop") == .file(fd))
        #expect(theme.lookup("unthemed") == .file(unthemed))
        #expect(theme.lookup("nothing") == .notFound)
        #expect(theme.names() == ["from-freedesktop", "from-parent", "own", "unthemed", "unthemed-not"])
    }

    @Test func stereoProfileThenUnprofiledThenTheThemeDirectory() throws {
        let t = try ThemeTree()
        try t.sound(t.sys1, "child/5.1/surround.oga")            // another profile: never used
        let plain = try t.sound(t.sys1, "child/plain/both.oga")   // a directory with no profile
        let top = try t.sound(t.sys1, "child/top.oga")           // the theme's own directory
        let stereo = try t.sound(t.sys1, "child/stereo/both.oga")
        let theme = SoundTheme(name: "child", environment: t.env())
        #expect(theme.lookup("surround") == .notFound)
        #expect(theme.lookup("both") == .file(stereo))
        #expect(theme.lookup("top") == .file(top))
        #expect(FileManager.default.fileExists(atPath: plain))
        try FileManager.default.removeItem(atPath: stereo)
        #expect(theme.lookup("both") == .file(plain))   // lookups see the file system as it is now
    }

    @Test func truncationFindsTheThemesOwnGenericSoundFirst() throws {
        let t = try ThemeTree()
        let generic = try t.sound(t.sys1, "child/stereo/message.oga")
        try t.sound(t.sys2, "freedesktop/stereo/message-new-instant.oga")
        let theme = SoundTheme(name: "child", environment: t.env())
        #expect(theme.lookup("message-new-instant") == .file(generic))
        #expect(theme.lookup("message-new-email") == .file(generic))
        #expect(theme.lookup("message") == .file(generic))
        #expect(theme.lookup("messages") == .notFound)
        #expect(SoundTheme.truncations("message-new-instant") == ["message-new-instant", "message-new", "message"])
        #expect(SoundTheme.truncations("-x") == ["-x"])
        // In freedesktop alone, the specific one is found.
        #expect(SoundTheme(environment: t.env()).lookup("message-new-instant") == .file(t.sys2 + "/sounds/freedesktop/stereo/message-new-instant.oga"))
    }

    @Test(arguments: [
        (["LANG": "de_DE.UTF-8@euro"], "de_DE"),
        (["LANG": "de_AT.UTF-8"], "de"),
        (["LANG": "fr_FR.UTF-8"], "C"),
        (["LANG": "fr_FR.UTF-8", "LC_ALL": "de_DE.UTF-8"], "de_DE"),
        (["LANG": "de_DE.UTF-8", "LC_MESSAGES": "fr_FR"], "C"),
        ([:], "C"),
    ])
    func localeDirectoriesWithFallbacks(env: [String: String], expected: String) throws {
        let t = try ThemeTree()
        for l in ["de_DE", "de", "C"] { try t.sound(t.sys1, "child/stereo/\(l)/greet.oga") }
        try t.sound(t.sys1, "child/stereo/greet.oga")
        let theme = SoundTheme(name: "child", environment: t.env(env))
        #expect(theme.lookup("greet") == .file(t.sys1 + "/sounds/child/stereo/\(expected)/greet.oga"))
    }

    @Test func unlocalizedAfterTheLocales() throws {
        let t = try ThemeTree()
        let plain = try t.sound(t.sys1, "child/stereo/greet.oga")
        try t.sound(t.sys1, "child/stereo/fr/greet.oga")
        #expect(SoundTheme(name: "child", environment: t.env(["LANG": "de_DE.UTF-8"])).lookup("greet") == .file(plain))
        // An exact name without a locale beats a localized truncated one.
        try t.sound(t.sys1, "child/stereo/de/alert.oga")
        let exact = try t.sound(t.sys1, "child/stereo/alert-loud.oga")
        #expect(SoundTheme(name: "child", environment: t.env(["LANG": "de_DE.UTF-8"])).lookup("alert-loud") == .file(exact))
    }

    @Test(arguments: [
        ("de_DE.UTF-8@euro", ["de_DE@euro", "de_DE", "de@euro", "de", "C"]),
        ("de_DE.UTF-8", ["de_DE", "de", "C"]),
        ("sr@latin", ["sr@latin", "sr", "C"]),
        ("pt_BR", ["pt_BR", "pt", "C"]),
        ("C.UTF-8", ["C"]),
        ("POSIX", ["C"]),
        ("../../etc", ["C"]),
    ])
    func localeFallbacks(value: String, expected: [String]) {
        #expect(SoundTheme.locales(["LANG": value]) == expected)
    }

    @Test func disabledMeansNoSoundAndNoFallback() throws {
        let t = try ThemeTree()
        let off = try t.sound(t.sys1, "child/stereo/bell.disabled")
        try t.sound(t.sys2, "freedesktop/stereo/bell.oga")
        try t.sound(t.sys1, "child/stereo/bell.oga")   // .disabled wins in the same place, too
        let theme = SoundTheme(name: "child", environment: t.env())
        #expect(theme.lookup("bell") == .disabled(off))
        #expect(theme.lookup("bell-ringing") == .disabled(off))
        #expect(!theme.names().contains("bell"))
        // In freedesktop alone it plays.
        #expect(SoundTheme(environment: t.env()).lookup("bell") == .file(t.sys2 + "/sounds/freedesktop/stereo/bell.oga"))
    }

    @Test func aBrokenFileIsFoundAndItsDecodeErrorNamesIt() throws {
        let t = try ThemeTree()
        let broken = t.sys1 + "/sounds/child/stereo/broken.oga"
        try t.sound(t.sys1, "child/stereo/placeholder.txt")
        try Data("OggS garbage, not a stream".utf8).write(to: URL(fileURLWithPath: broken))
        try t.sound(t.sys2, "freedesktop/stereo/broken.oga")   // no silent fallback past a broken file
        let theme = SoundTheme(name: "child", environment: t.env())
        #expect(theme.lookup("broken") == .file(broken))
        let error = #expect(throws: SndFileError.self) { try CueLoader().load(path: broken, name: "broken") }
        #expect(error?.path == broken)
        // A FIFO in a theme is found, and refused without blocking.
        let fifo = t.sys1 + "/sounds/child/stereo/fifo.oga"
        #expect(mkfifo(fifo, 0o600) == 0)
        #expect(theme.lookup("fifo") == .file(fifo))
        let refused = #expect(throws: SndFileError.self) { try CueLoader().load(path: fifo, name: "fifo") }
        #expect(refused?.description == "\(fifo): is a FIFO, not a regular file")
    }

    @Test func theUsersCopyOverridesTheSystems() throws {
        let t = try ThemeTree()
        try t.sound(t.sys2, "freedesktop/stereo/bell.oga")
        let mine = try t.sound(t.user, "freedesktop/stereo/bell.oga")
        #expect(SoundTheme(environment: t.env()).lookup("bell") == .file(mine))
        // A user's own index.theme is read first: here it adds a parent.
        try t.index(t.user, "freedesktop", "[Sound Theme]\nInherits=extra\nDirectories=stereo\n[stereo]\nOutputProfile=stereo\n")
        try t.index(t.sys1, "extra", "[Sound Theme]\nDirectories=stereo\n[stereo]\nOutputProfile=stereo\n")
        let extra = try t.sound(t.sys1, "extra/stereo/only-extra.wav")
        let theme = SoundTheme(environment: t.env())
        #expect(theme.chain == ["freedesktop", "extra"])
        #expect(theme.lookup("only-extra") == .file(extra))
        #expect(try CueLoader().load(path: extra, name: "x").frames == 4_800)
    }

    @Test func missingAndBadThemesAreWarnedAndPassedOver() throws {
        let t = try ThemeTree()
        try t.index(t.sys1, "orphan", "[Sound Theme]\nInherits=ghost,../../etc\nDirectories=stereo,/etc,../up,a/../b\n[stereo]\nOutputProfile=stereo\n")
        let theme = SoundTheme(name: "orphan", environment: t.env())
        #expect(theme.chain == ["orphan", "freedesktop"])
        // One warning for orphan's index, naming both.
        #expect(theme.warnings.count == 1, "\(theme.warnings)")
        #expect(theme.warnings.first?.hasPrefix("sound theme 'orphan' inherits themes that are passed over: 'ghost' not found in ") == true)
        #expect(theme.warnings.first?.hasSuffix("; '../../etc' is not a valid theme name") == true, "\(theme.warnings)")
        #expect(theme.themes[0].directories == ["stereo", ""])
        let none = SoundTheme(name: "nope", environment: t.env())
        #expect(none.chain == ["freedesktop"])
        #expect(none.warnings == ["sound theme 'nope' not found in \(t.user)/sounds, \(t.sys1)/sounds, \(t.sys2)/sounds"])
    }

    /// A theme inheriting 5,000 themes: only the first `maxChain` names are looked for (each
    /// costs a search of every base directory: the whole list took seconds); one warning says
    /// how many were listed, one names those passed over, not one per name.
    @Test func aThemeInheritingThousandsWarnsOnce() throws {
        let t = try ThemeTree()
        for i in 0..<20 { try t.index(t.sys1, "real\(i)", "[Sound Theme]\nDirectories=stereo\n") }
        let inherits = (0..<10).map { "ghost\($0)" } + (0..<2).map { "bad/\($0)" } + (0..<20).map { "real\($0)" }
            + (10..<4_978).map { "ghost\($0)" }
        try t.index(t.sys2, "many", "[Sound Theme]\nInherits=" + inherits.joined(separator: ",") + "\nDirectories=stereo\n")
        let theme = SoundTheme(name: "many", environment: t.env())
        #expect(theme.chain == ["many", "real0", "real1", "real2", "real3", "freedesktop"])
        #expect(theme.warnings.count == 2, "\(theme.warnings.prefix(3))")
        #expect(theme.warnings.contains("sound theme 'many' inherits 5000 themes; the first 16 are used"))
        let w = try #require(theme.warnings.first { $0.hasPrefix("sound theme 'many' inherits themes that are passed over: ") })
        #expect(w.contains("'ghost0', 'ghost1', 'ghost2', 'ghost3', 'ghost4' and 5 more not found in"), "\(w)")
        #expect(w.contains("'bad/0', 'bad/1' are not a valid theme name"), "\(w)")
        #expect(w.utf8.count < 1_000)
    }

    @Test func anIndexThatIsNotAFileIsPassedOver() throws {
        let t = try ThemeTree()
        let d = t.user + "/sounds/child"
        try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
        #expect(mkfifo(d + "/index.theme", 0o600) == 0)   // must not block; sys1's index is used instead
        let theme = SoundTheme(name: "child", environment: t.env())
        #expect(theme.chain == ["child", "parent", "freedesktop"])
        #expect(theme.warnings == ["sound theme index \(d)/index.theme: is a FIFO, not a regular file (passed over)"])
        // Too big: passed over the same way.
        try t.index(t.sys2, "huge", String(repeating: "# padding\n", count: 7_000))
        #expect(SoundTheme(name: "huge", environment: t.env()).warnings.first?.contains("at most 65536 are read") == true)
    }

    @Test func parsesIndexFiles() {
        let index = SoundTheme.parseIndex("""
            [Sound Theme]
            Name=Birch
            Comment[fr]=Theme utilisant des instruments en bois
            Inherits=wood,default
            Directories=stereo 5.1
              # indented comment
            [stereo]
            OutputProfile = stereo
            [5.1]
            OutputProfile=5.1
            [Unrelated]
            Directories=ignored
            """)
        #expect(index.inherits == ["wood", "default"])
        #expect(index.directories.map(\.name) == ["stereo", "5.1"])
        #expect(index.directories.map(\.profile) == ["stereo", "5.1"])
        #expect(index.directories(for: "stereo") == ["stereo", ""])
        #expect(index.directories(for: "5.1") == ["5.1", "stereo", ""])
        #expect(SoundTheme.parseIndex("garbage\u{0}\n[[[\n=\n").directories.isEmpty)
    }

    /// The index is flat (groups and keys, no nesting), so its work is its size; but each
    /// inherited name costs a search of every base directory: a 64 KiB index listing 30,000
    /// names is read, and only the first `maxChain` are looked for.
    @Test func aHugeInheritsListIsCutAtTheChainLimit() throws {
        let names = (0..<30_000).map { "t\($0)" }
        let index = SoundTheme.parseIndex("[Sound Theme]\nInherits=" + names.joined(separator: ",") + "\n")
        #expect(index.inherits == Array(names.prefix(SoundTheme.maxChain)))
        #expect(index.inheritsPassedOver == 30_000 - SoundTheme.maxChain)
    }

    @Test func environmentDefaults() {
        #expect(SoundTheme.baseDirectories(["HOME": "/home/u"]) == ["/home/u/.local/share/sounds", "/usr/local/share/sounds", "/usr/share/sounds"])
        #expect(SoundTheme.baseDirectories(["HOME": "/h", "XDG_DATA_HOME": "relative", "XDG_DATA_DIRS": "/a:rel:/b/:/a"])
                == ["/h/.local/share/sounds", "/a/sounds", "/b/sounds"])
    }
}
