import CuedProtocol
@testable import CuedServer
import Testing

/// `status`'s apps: bounded at 256, in a stated order.
@Suite struct StatusReportTests {
    @Test func appsAreBoundedRunTimeMutesFirstThenTheConfigsThenThoseThatPlayed() {
        var mutes = MuteState(muted: false, configured: Dictionary(uniqueKeysWithValues: (0..<100).map { ("conf\(1000 + $0)", true) }))
        for i in 0..<200 { _ = mutes.setAppMuted("rt\(1000 + i)", true) }
        let configApps = (0..<100).map { "conf\(1000 + $0)" } + ["quiet-config-app"]
        var counts: [String: Status.App] = [:]
        for i in 0..<50 { counts["played\(1000 + i)"] = Status.App(played: 2, dropped: 1) }
        counts["rt1000"] = Status.App(played: 7)

        let apps = StatusReport.apps(mutes: mutes, configApps: configApps, counts: counts)
        #expect(apps.count == StatusReport.maxApps)
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
        let apps = StatusReport.apps(mutes: mutes, configApps: ["a", "b"], counts: ["a": Status.App(played: 1), "c": Status.App(played: 3, dropped: 1)])
        #expect(apps == ["a": Status.App(played: 1, muted: false), "b": Status.App(), "c": Status.App(played: 3, dropped: 1)])
    }

    @Test func appCountsKeepTheFirstAppsSeenAndDropsOnlyForThose() {
        var counts = AppCounts()
        for i in 0..<(StatusReport.maxApps + 44) { counts.played("app\(i)") }
        #expect(counts.apps.count == StatusReport.maxApps)
        #expect(counts.apps["app\(StatusReport.maxApps)"] == nil)
        counts.played("app0")
        counts.dropped("app0")
        counts.dropped("app\(StatusReport.maxApps)")  // never counted: nothing to move
        #expect(counts.apps["app0"] == Status.App(played: 1, dropped: 1))
        #expect(counts.apps.count == StatusReport.maxApps)
    }
}
