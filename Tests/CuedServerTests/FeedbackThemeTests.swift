import Foundation
import CuedConfig
import CuedCore
import CuedSystem
@testable import CuedServer
import Testing

/// feedbackd's theme files as cued reads them: sound feedbacks by level, the
/// search order, parents merged under their child, and broken files refused
/// with the file's name.
@Suite struct FeedbackThemeTests {
    static let base = """
        { "name": "default", "profiles": [
          { "name": "full", "feedbacks": [
            { "event-name": "message-new-instant", "type": "Sound", "effect": "message-new-instant" },
            { "event-name": "phone-incoming-call", "type": "Sound", "file-name": "/usr/share/ring.oga" },
            { "event-name": "button-pressed", "type": "VibraRumble", "duration": 10 } ] },
          { "name": "quiet", "feedbacks": [
            { "event-name": "phone-incoming-call", "type": "VibraPeriodic" },
            { "event-name": "alarm-clock-elapsed", "type": "Sound", "effect": "alarm-soft" } ] },
          { "name": "silent", "feedbacks": [
            { "event-name": "message-new-instant", "type": "Led", "color": "blue" } ] } ] }
        """

    static func load(_ files: [String: String], env: [String: String] = ["HOME": "/home/u", "XDG_DATA_DIRS": "/usr/share"],
                     name: String = "default") -> (FeedbackTheme, [String]) {
        FeedbackTheme.load(name: name, environment: env,
                           read: { p throws(FileError) in
                               guard let t = files[p] else { throw FileError(path: p, reason: "No such file or directory") }
                               return t
                           },
                           exists: { files[$0] != nil })
    }

    @Test func soundsAreLookedUpAtTheLevelOrBelowAndOtherFeedbacksOnlyMakeAnEventKnown() throws {
        let (theme, warnings) = Self.load(["/usr/share/feedbackd/themes/default.json": Self.base])
        #expect(warnings.isEmpty)
        #expect(theme.lookup("message-new-instant", at: .full) == .sound(.effect("message-new-instant")))
        #expect(theme.lookup("message-new-instant", at: .quiet) == .noSound)  // only an LED below full
        #expect(theme.lookup("phone-incoming-call", at: .full) == .sound(.file("/usr/share/ring.oga")))
        #expect(theme.lookup("alarm-clock-elapsed", at: .full) == .sound(.effect("alarm-soft")))  // from quiet, below full
        #expect(theme.lookup("alarm-clock-elapsed", at: .silent) == .noSound)
        #expect(theme.lookup("button-pressed", at: .full) == .noSound)  // known, no sound
        #expect(theme.lookup("no-such-event", at: .full) == .unknown)
    }

    @Test func theUsersThemeComesFirstAndItsParentIsMergedUnderIt() throws {
        let child = """
            { "name": "custom", "parent-name": "default", "profiles": [
              { "name": "full", "feedbacks": [ { "event-name": "message-new-instant", "type": "Sound", "effect": "pop" } ] } ] }
            """
        let files = ["/home/u/.config/feedbackd/themes/custom.json": child, "/usr/share/feedbackd/themes/default.json": Self.base]
        let (theme, warnings) = Self.load(files, name: "custom")
        #expect(warnings.isEmpty)
        #expect(theme.files == ["/home/u/.config/feedbackd/themes/custom.json", "/usr/share/feedbackd/themes/default.json"])
        #expect(theme.lookup("message-new-instant", at: .full) == .sound(.effect("pop")))  // the child wins
        #expect(theme.lookup("phone-incoming-call", at: .full) == .sound(.file("/usr/share/ring.oga")))  // the parent's
    }

    @Test func feedbackThemeNamesTheFileAndAMissingThemeFallsBackToTheDefault() throws {
        let files = ["/t/mine.json": Self.base.replacingOccurrences(of: "\"default\"", with: "\"mine\""),
                     "/usr/share/feedbackd/themes/default.json": "{}"]
        let (theme, warnings) = Self.load(files, env: ["HOME": "/h", "XDG_DATA_DIRS": "/usr/share", "FEEDBACK_THEME": "/t/mine.json"])
        #expect(warnings.isEmpty)
        #expect(theme.files == ["/t/mine.json"])
        // No user theme of that name: the default in the data dirs (as feedbackd).
        let (fallback, _) = Self.load(["/usr/share/feedbackd/themes/default.json": Self.base], name: "nosuch")
        #expect(fallback.files == ["/usr/share/feedbackd/themes/default.json"])
        // No theme anywhere: none, and no warning (events use cued's cues and the sound theme).
        let (none, noWarnings) = Self.load([:])
        #expect(none == FeedbackTheme() && noWarnings.isEmpty)
    }

    @Test(arguments: [
        ("not json", "not valid JSON"),
        ("[1]", "not a JSON object"),
        (#"{"profiles": []}"#, "no \"name\""),
        (#"{"name": "x"}"#, "no \"profiles\" array"),
        (#"{"name": "x", "profiles": [{"name": "loud", "feedbacks": []}]}"#, "profile \"loud\" is not one of full, quiet, silent"),
        (#"{"name": "default", "parent-name": "other", "profiles": []}"#, "the default theme cannot have a parent"),
    ])
    func aBrokenThemeIsAWarningThatNamesTheFileAndNoTheme(text: String, why: String) {
        let (theme, warnings) = Self.load(["/usr/share/feedbackd/themes/default.json": text])
        #expect(theme == FeedbackTheme())
        #expect(warnings.count == 1)
        #expect(warnings.first?.contains("/usr/share/feedbackd/themes/default.json: \(why)") == true, "\(warnings)")
    }

    /// 100,000 `[` (100 KB) crashed cued at start: a warning, and no theme.
    @Test func aDeeplyNestedThemeIsAWarning() {
        let (theme, warnings) = Self.load(["/usr/share/feedbackd/themes/default.json": String(repeating: "[", count: 100_000)])
        #expect(theme == FeedbackTheme())
        #expect(warnings.count == 1 && warnings[0].contains("default.json: arrays and objects nested deeper than 64 levels"),
                "\(warnings.map { $0.prefix(200) })")
    }

    @Test func aParentLoopStopsAtTenDeep() {
        let loop = #"{"name": "a", "parent-name": "a", "profiles": []}"#
        let (theme, warnings) = Self.load(["/home/u/.config/feedbackd/themes/a.json": loop], name: "a")
        #expect(theme == FeedbackTheme())
        #expect(warnings.first?.contains("more than 10 parents") == true, "\(warnings)")
    }
}

/// Which sound a notification makes, and the burst limit, on a fake clock.
@Suite struct NotificationPolicyTests {
    static let second: UInt64 = 1_000_000_000

    @Test func hintsComeFirstThenTheAppThenTheUrgency() {
        var p = NotificationPolicy(now: 0)
        var s = NotificationSetting()
        s.apps = ["mail": "psst1", "muted-app": ""]
        var t: UInt64 = 0
        func decide(_ n: NotificationSeen, silent: Bool = false) -> NotificationPolicy.Decision {
            t += 2 * Self.second  // spaced: the burst limit stays out of it
            return p.decide(n, setting: s, silent: silent, now: t)
        }
        #expect(decide(NotificationSeen(appName: "x", soundFile: "file:///tmp/a.wav")) == .play("/tmp/a.wav", critical: false))
        #expect(decide(NotificationSeen(appName: "x", soundName: "bell")) == .play("bell", critical: false))
        #expect(decide(NotificationSeen(appName: "mail")) == .play("psst1", critical: false))
        #expect(decide(NotificationSeen(appName: "x", desktopEntry: "mail")) == .play("psst1", critical: false))
        #expect(decide(NotificationSeen(appName: "x")) == .play("message-new-instant", critical: false))
        #expect(decide(NotificationSeen(appName: "x", urgency: 2)) == .play("dialog-warning", critical: true))
        #expect(decide(NotificationSeen(appName: "x", urgency: 0)) == .none("no sound for this urgency"))
        #expect(decide(NotificationSeen(appName: "x", soundName: "bell", suppressSound: true)) == .none("suppress-sound"))
        #expect(decide(NotificationSeen(appName: "muted-app", soundName: "bell")) == .none("the app's sound is \"\" in [notifications.apps]"))
        // Silent lets only critical ones through, and only while critical_in_silent holds.
        #expect(decide(NotificationSeen(appName: "x"), silent: true) == .none("the profile is silent"))
        #expect(decide(NotificationSeen(appName: "x", urgency: 2), silent: true) == .play("dialog-warning", critical: true))
        s.criticalInSilent = false
        #expect(decide(NotificationSeen(appName: "x", urgency: 2), silent: true) == .none("the profile is silent"))
    }

    @Test func soundFileURIsBecomePaths() {
        #expect(NotificationPolicy.path(fromURI: "file:///tmp/a%20b.wav") == "/tmp/a b.wav")
        #expect(NotificationPolicy.path(fromURI: "file://localhost/tmp/x%C3%A9.oga") == "/tmp/xé.oga")
        #expect(NotificationPolicy.path(fromURI: "/tmp/plain%20name.wav") == "/tmp/plain%20name.wav")  // a path is a path
        #expect(NotificationPolicy.path(fromURI: "file://otherhost/tmp/a.wav") == "file://otherhost/tmp/a.wav")  // refused later
        #expect(NotificationPolicy.path(fromURI: "file:///tmp/bad%zz") == "/tmp/bad%zz")
    }

    @Test func fiftyNotificationsInASecondMakeFourSounds() {
        var p = NotificationPolicy(now: 0)
        let s = NotificationSetting()
        var played = 0
        for i in 0..<50 {
            let now = UInt64(i) * Self.second / 50
            if case .play = p.decide(NotificationSeen(appName: "x"), setting: s, silent: false, now: now) { played += 1 }
        }
        #expect(played == 3)  // the burst; the next token comes at 1 s
        if case .play = p.decide(NotificationSeen(appName: "x"), setting: s, silent: false, now: Self.second) { played += 1 }
        #expect(played == 4)
        // A suppressed or silent one costs no token.
        var q = NotificationPolicy(now: 0)
        for _ in 0..<10 { _ = q.decide(NotificationSeen(appName: "x", suppressSound: true), setting: s, silent: false, now: 0) }
        #expect(q.decide(NotificationSeen(appName: "x"), setting: s, silent: false, now: 0) == .play("message-new-instant", critical: false))
    }

    @Test func voiceEndsMapToFeedbackdsReasons() {
        #expect(FeedbackCenter.reason(.played, timeout: -1) == .natural)
        #expect(FeedbackCenter.reason(.played, timeout: 3) == .expired)
        #expect(FeedbackCenter.reason(.stoppedByID, timeout: 0) == .explicit)
        #expect(FeedbackCenter.reason(.muted, timeout: 0) == .explicit)
        #expect(FeedbackCenter.reason(.busy, timeout: -1) == .notFound)
        #expect(FeedbackCenter.reason(.late, timeout: -1) == .notFound)
        #expect(FeedbackCenter.reason(.cut, timeout: -1) == .natural)
        #expect(FeedbackCenter.reason(.stolen, timeout: 0) == .explicit)  // cued ended it
        #expect(FeedbackEndReason.notFound.rawValue == -1 && UInt32(bitPattern: FeedbackEndReason.notFound.rawValue) == 4_294_967_295)
    }
}
