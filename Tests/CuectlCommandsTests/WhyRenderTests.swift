import CuectlCommands
import CuedProtocol
import Testing

/// `cuectl why`'s lines, and libcanberra's routing put where it applies.
@Suite struct WhyRenderTests {
    static func report(canberra: Bool, _ names: [String]) -> WhyReport {
        var r = WhyReport(cue: "bell", app: "gnome-shell")
        r.canberraApp = canberra
        r.reasons = names.map { WhyReport.Reason($0, says: "\($0) says", fix: "\($0) fix") }
        return r
    }

    static func facts(on: Bool) -> CanberraRouting.Facts {
        var f = CanberraRouting.Facts()
        f.pluginDirectory = "/usr/lib/x86_64-linux-gnu/libcanberra-0.30"
        f.pluginInstalled = true
        f.on = on
        return f
    }

    @Test func routingOffComesBeforeTheDesktopsAndTheOutputsReasons() {
        let r = Self.report(canberra: true, ["muted", "cooldown", "event-sounds", "no-output"])
        #expect(WhyRender.reasons(r, canberra: Self.facts(on: false)).map(\.name) == ["muted", "cooldown", "canberra-routing", "event-sounds", "no-output"])
        #expect(WhyRender.reasons(r, canberra: Self.facts(on: true)).map(\.name) == ["muted", "cooldown", "event-sounds", "no-output"])
        #expect(WhyRender.reasons(Self.report(canberra: false, []), canberra: Self.facts(on: false)).isEmpty, "not a libcanberra app")
        #expect(WhyRender.reasons(r, canberra: nil).count == 4, "not looked at")
    }

    @Test func linesAndExitStatus() {
        let none = WhyRender.outcome(Self.report(canberra: false, []), canberra: nil)
        #expect(none.stdout == "bell by gnome-shell would be heard: nothing holds it back" && none.exitCode == 0)
        let some = WhyRender.outcome(Self.report(canberra: false, ["muted"]), canberra: nil)
        #expect(some.stdout == "bell by gnome-shell would not be heard:\n  1. muted says [muted]\n     fix: muted fix" && some.exitCode == 1)
        var json = Self.report(canberra: true, ["profile"])
        json.app = nil
        #expect(WhyReport.parse(json.json.encoded) == json)
    }
}
