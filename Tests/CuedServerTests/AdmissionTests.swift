import CuedConfig
import CuedCore
import CuedProtocol
@testable import CuedServer
import Testing

/// The voice broker's admission: named reasons in one order, one pure function that
/// `play` asks for the first and `why` for all.
@Suite struct AdmissionTests {
    static let settings = ProfileSettings(quietGainDB: -20, importantApps: ["clock"])
    static let second: UInt64 = 1_000_000_000

    /// A client of `app` whose rate limit allows `rate` cues a second, its bucket emptied at `now` if `spent`.
    static func client(app: String?, rate: Double = 2, spent: Bool = false, now: UInt64 = second) -> Client {
        var limits = Daemon.Limits()
        limits.playsPerSecond = rate
        var c = Client(limits: limits, now: now)
        c.app = app
        if spent { while c.plays!.take(now: now) {} }
        return c
    }

    static func view(muted: Bool = false, appMutes: [String: Bool] = [:], global: Profile = .full, apps: [String: Profile] = [:],
                     cooldowns: CuePicker.Cooldowns = CuePicker.Cooldowns(), stopping: Bool = false, now: UInt64 = second) -> AdmissionView {
        AdmissionView(mutes: MuteState(muted: muted, appMutes: appMutes), profiles: ProfileState(global: global, appProfiles: apps, settings: settings),
                      picker: cooldowns, stopping: stopping, now: now)
    }

    /// A cue with a 100 ms `drop` cooldown, started at `second` by the picker.
    static func cooling() -> (CueDesign, CuePicker.Cooldowns) {
        var design = CueDesign()
        design.cooldownNanoseconds = 100_000_000
        var picker = CuePicker()
        _ = picker.pick("pop", [Cue(name: "pop", stereo: [0, 0])], design, now: second)
        return (design, picker.cooldowns)
    }

    /// Every reason at once: `why` lists them all in the rules' order, `play` gets the first.
    @Test func everyReasonIsListedInOrderAndPlayGetsTheFirst() {
        let (design, cooldowns) = Self.cooling()
        var client = Self.client(app: "mail", spent: true)
        client.via = "libcanberra"  // the desktop's switches govern it
        let ask = PlayAsk(PlayOptions(), client: client, cue: "pop", design: design, sound: "menu-click")
        var view = Self.view(muted: true, appMutes: ["mail": true], global: .silent, apps: ["mail": .silent], cooldowns: cooldowns,
                             stopping: true, now: Self.second + 40_000_000)
        var off = DesktopSound()
        off.eventSounds = Said(false, from: "portal")
        off.inputFeedbackSounds = Said(false, from: "portal")
        off.doNotDisturb = Said(true, from: "portal")
        view.desktop = DesktopRules(said: off, config: Config())
        let all = Admission.all(ask, client, view)
        #expect(all == [.muted, .appMuted("mail"), .silent, .appSilent("mail"), .rateLimited(perSecond: 2),
                        .cooldown(cue: "pop", leftNs: 60_000_000), .eventSoundsOff(from: "portal"),
                        .inputFeedbackOff(sound: "menu-click", from: "portal"), .stopping])
        // Do Not Disturb governs the desktop's own sources (a bus client), not a libcanberra app's.
        #expect(all.map(\.name) == Admission.rules.map(\.name).filter { $0 != "do-not-disturb" })
        #expect(Admission.first(ask, client, view) == .muted)
    }

    /// Taking the reasons away one at a time from the front: `first` is always what `all` lists first.
    @Test func theFirstIsAlwaysTheHeadOfAll() {
        let (design, cooldowns) = Self.cooling()
        let spent = Self.client(app: "mail", spent: true)
        let fresh = Self.client(app: "mail")
        let t = Self.second + 40_000_000
        let cases: [(AdmissionView, Client, Hold?)] = [
            (Self.view(muted: true, appMutes: ["mail": true], cooldowns: cooldowns, now: t), spent, .muted),
            (Self.view(appMutes: ["mail": true], global: .silent, cooldowns: cooldowns, now: t), spent, .appMuted("mail")),
            (Self.view(global: .silent, apps: ["mail": .silent], cooldowns: cooldowns, now: t), spent, .silent),
            (Self.view(global: .quiet, apps: ["mail": .silent], cooldowns: cooldowns, now: t), spent, .appSilent("mail")),
            (Self.view(global: .quiet, cooldowns: cooldowns, now: t), spent, .rateLimited(perSecond: 2)),
            (Self.view(cooldowns: cooldowns, stopping: true, now: t), fresh, .cooldown(cue: "pop", leftNs: 60_000_000)),
            (Self.view(cooldowns: cooldowns, stopping: true, now: Self.second + 100_000_000), fresh, .stopping),
            (Self.view(cooldowns: cooldowns, now: Self.second + 100_000_000), fresh, nil),
        ]
        for (view, client, expected) in cases {
            let ask = PlayAsk(PlayOptions(), client: client, cue: "pop", design: design)
            #expect(Admission.first(ask, client, view) == expected)
            #expect(Admission.all(ask, client, view).first == expected)
        }
    }

    /// Admission only looks: a client's rate limit is spent by the broker when a play is let
    /// through, not by asking (`why` costs nothing), and not by a play held back.
    @Test func askingSpendsNoToken() {
        var client = Self.client(app: "mail", rate: 1)
        let ask = PlayAsk(PlayOptions(), client: client)
        for _ in 0..<5 { #expect(Admission.all(ask, client, Self.view()).isEmpty) }
        let took = client.plays!.take(now: Self.second)
        #expect(took)
        #expect(Admission.first(ask, client, Self.view()) == .rateLimited(perSecond: 1))
        #expect(Admission.first(ask, client, Self.view(now: 2 * Self.second)) == nil)
    }

    /// An `important` play of an allow-listed app, or cued's own, passes the profiles at
    /// full level; never the mute.
    @Test func importantPassesTheProfilesNotTheMute() {
        var options = PlayOptions()
        options.important = true
        let clock = Self.client(app: "clock")
        let ask = PlayAsk(options, client: clock)
        let silent = Self.view(global: .silent, apps: ["clock": .silent])
        #expect(Admission.all(ask, clock, silent).isEmpty)
        #expect(Admission.gainDB(ask, Self.view(global: .quiet)) == 0)
        #expect(Admission.all(ask, clock, Self.view(muted: true, global: .silent)) == [.muted])
        let mail = Self.client(app: "mail")
        #expect(Admission.all(PlayAsk(options, client: mail), mail, silent) == [.silent])
        #expect(Admission.gainDB(PlayAsk(options, client: mail), Self.view(global: .quiet)) == -20)
    }

    /// A `restart` cooldown holds nothing back: the picker makes the playing voice give way.
    @Test func aRestartCooldownIsNoReason() {
        var (design, cooldowns) = Self.cooling()
        design.cooldown = .restart
        let client = Self.client(app: nil)
        let ask = PlayAsk(PlayOptions(), client: client, cue: "pop", design: design)
        #expect(Admission.all(ask, client, Self.view(cooldowns: cooldowns, now: Self.second + 1)).isEmpty)
        var picker = CuePicker()
        let cue = Cue(name: "pop", stereo: [0, 0])
        #expect(picker.pick("pop", [cue], design, now: Self.second).limit == nil)
        #expect(picker.pick("pop", [cue], design, now: Self.second + 1).limit == CueVoiceLimit(maxVoices: 1, steal: .oldest))
        #expect(picker.pick("pop", [cue], design, now: Self.second + 200_000_000).limit == nil)
    }
}
