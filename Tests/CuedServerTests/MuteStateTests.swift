import CuedConfig
import CuedProtocol
@testable import CuedServer
import Testing

/// How the global mute, run-time app mutes and the config's `[apps.NAME] muted` combine.
@Suite struct MuteStateTests {
    @Test func theGlobalMuteWinsOverEveryAppsOwn() {
        let m = MuteState(muted: true, appMutes: ["a": false], configured: ["b": false])
        #expect(m.isMuted(app: nil))
        #expect(m.isMuted(app: "a"))
        #expect(m.isMuted(app: "b"))
        #expect(!m.appMuted("a"))  // its own mute, regardless of the global one
    }

    @Test func aRunTimeAppMuteOverridesTheConfigsAndTheConfigsAppliesOtherwise() {
        let m = MuteState(muted: false, appMutes: ["a": false, "b": true], configured: ["a": true, "c": true])
        #expect(!m.isMuted(app: "a"))  // run-time unmute over the config's mute
        #expect(m.isMuted(app: "b"))
        #expect(m.isMuted(app: "c"))  // the config's
        #expect(!m.isMuted(app: "d"))
        #expect(!m.isMuted(app: nil))
    }

    @Test func onlyWhatDiffersFromTheConfigIsKeptAndSaved() {
        var m = MuteState(muted: false, configured: ["a": true])
        #expect(m.setAppMuted("a", true) == .unchanged)  // the config says so already
        #expect(m.appMutes.isEmpty)
        #expect(m.setAppMuted("a", false) == .changed)
        #expect(m.saved == SavedState(muted: false, appMutes: ["a": false]))
        #expect(m.setAppMuted("a", false) == .unchanged)
        #expect(m.setAppMuted("a", true) == .changed)  // back to the config's: forgotten
        #expect(m.saved == SavedState(muted: false, appMutes: [:]))
        #expect(m.setAppMuted("b", true) == .changed)
        #expect(m.saved.appMutes == ["b": true])
    }

    @Test func theGlobalMuteChangesOnlyWhenItDiffers() {
        var m = MuteState(muted: false)
        #expect(m.setMuted(false) == false)
        #expect(m.setMuted(true) == true)
        #expect(m.muted)
        #expect(m.setMuted(true) == false)
        #expect(m.saved.muted)
    }

    /// At most `SavedState.maxAppMutes` run-time app mutes; at the bound, those
    /// already kept still change, and one that equals the config's costs nothing.
    @Test func runTimeAppMutesAreBounded() {
        var m = MuteState(muted: false, configured: ["configured": true])
        for i in 0..<SavedState.maxAppMutes { #expect(m.setAppMuted("app\(i)", true) == .changed) }
        #expect(m.setAppMuted("one-more", true) == .tooMany)
        #expect(m.appMutes["one-more"] == nil)
        #expect(!m.isMuted(app: "one-more"))
        #expect(m.setAppMuted("one-more", false) == .unchanged)  // equals the config's: nothing kept
        #expect(m.setAppMuted("configured", true) == .unchanged)
        #expect(m.setAppMuted("configured", false) == .tooMany)  // would be a 257th
        #expect(m.setAppMuted("app0", false) == .changed)  // kept ones may change (back to the config's: gone)
        #expect(m.appMutes.count == SavedState.maxAppMutes - 1)
        #expect(m.setAppMuted("one-more", true) == .changed)  // room again
        #expect(m.saved.appMutes.count == SavedState.maxAppMutes)
    }

    @Test func aReloadTakesTheNewConfigsAppMutesAndKeepsRunTimeOnes() {
        var config = Config()
        config.apps["a"] = AppSetting(muted: true)
        config.apps["b"] = AppSetting(gainDB: -6)
        var m = MuteState(muted: false, saved: SavedState(muted: false, appMutes: ["c": true]), config: config)
        #expect(m.configured == ["a": true])
        #expect(m.isMuted(app: "a") && m.isMuted(app: "c") && !m.isMuted(app: "b"))
        var next = Config()
        next.apps["b"] = AppSetting(muted: true)
        m.configure(next)
        #expect(!m.isMuted(app: "a") && m.isMuted(app: "b") && m.isMuted(app: "c"))
    }

    /// The config's `muted` sets the global mute at a reload only if the reload changed it.
    @Test(arguments: [(nil, nil, nil), (nil, true, true), (true, true, nil), (true, false, false), (false, nil, nil)] as [(Bool?, Bool?, Bool?)])
    func theConfigsMuteAppliesAtAReloadOnlyWhenItChanged(old: Bool?, new: Bool?, expected: Bool?) {
        var a = Config(), b = Config()
        a.muted = old
        b.muted = new
        #expect(MuteState.mutedAfterReload(old: a, new: b) == expected)
    }
}
