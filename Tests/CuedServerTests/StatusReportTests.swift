import CuedProtocol
@testable import CuedServer
import Testing

/// `status`'s apps: bounded at 256, in a stated order, saying how many are left out.
@Suite struct StatusReportTests {
    @Test func appsAreBoundedRunTimeMutesFirstThenTheConfigsThenThoseThatPlayed() {
        var mutes = MuteState(muted: false, configured: Dictionary(uniqueKeysWithValues: (0..<100).map { ("conf\(1000 + $0)", true) }))
        for i in 0..<200 { _ = mutes.setAppMuted("rt\(1000 + i)", true) }
        let configApps = (0..<100).map { "conf\(1000 + $0)" } + ["quiet-config-app"]
        var counts: [String: Status.App] = [:]
        for i in 0..<50 { counts["played\(1000 + i)"] = Status.App(played: 2, dropped: 1) }
        counts["rt1000"] = Status.App(played: 7)

        let (apps, unlisted, unlistedPlayed) = StatusReport.apps(mutes: mutes, configApps: configApps, counts: counts)
        #expect(apps.count == StatusReport.maxApps)
        // Left out: 44 of the config's apps, `quiet-config-app`, the 50 that only played (2 plays each).
        #expect(unlisted == 44 + 1 + 50)
        #expect(unlistedPlayed == 100)
        #expect((0..<200).allSatisfy { apps["rt\(1000 + $0)"]?.muted == true })
        #expect(apps["rt1000"] == Status.App(played: 7, dropped: 0, muted: true))  // counts merged in
        // 56 places left: the config's apps by name.
        #expect((0..<56).allSatisfy { apps["conf\(1000 + $0)"]?.muted == true })
        #expect(apps["conf1056"] == nil)
        #expect(apps["quiet-config-app"] == nil)
        #expect(!apps.keys.contains { $0.hasPrefix("played") })
    }

    @Test func underTheBoundEveryAppIsListedOnce() {
        var mutes = MuteState(muted: false, configured: ["a": true])
        _ = mutes.setAppMuted("a", false)
        let (apps, unlisted, unlistedPlayed) = StatusReport.apps(mutes: mutes, configApps: ["a", "b"], counts: ["a": Status.App(played: 1), "c": Status.App(played: 3, dropped: 1)])
        #expect(unlisted == 0 && unlistedPlayed == 0)
        #expect(apps == ["a": Status.App(played: 1, muted: false), "b": Status.App(), "c": Status.App(played: 3, dropped: 1)])
    }

    /// The first apps seen are counted by name; the others' plays together.
    @Test func appCountsKeepTheFirstAppsSeenAndCountTheOthersPlays() {
        var counts = AppCounts()
        for i in 0..<(StatusReport.maxApps + 44) { counts.played("app\(i)") }
        #expect(counts.apps.count == StatusReport.maxApps)
        #expect(counts.apps["app\(StatusReport.maxApps)"] == nil)
        #expect(counts.otherPlayed == 44)
        counts.played("app0")
        counts.dropped("app0")
        counts.dropped("app\(StatusReport.maxApps)")  // not counted by name: taken off the others' plays
        #expect(counts.apps["app0"] == Status.App(played: 1, dropped: 1))
        #expect(counts.apps.count == StatusReport.maxApps)
        #expect(counts.otherPlayed == 43)
    }
}
