import CuedProtocol
import CuectlCommands
import Testing

/// `cuectl doctor`'s findings and exit status, from a status and a faked file system.
@Suite struct DoctorTests {
    let env = ["HOME": "/home/u", "XDG_RUNTIME_DIR": "/run/user/1"]

    func status(_ spec: String, state: String = "idle", error: String? = nil, why: String? = nil) -> Status {
        var s = Status()
        s.version = "9.9"
        s.pid = 42
        s.sink.spec = spec
        s.sink.state = state
        s.sink.error = error
        s.sink.why = why
        s.theme.name = "freedesktop"
        s.theme.chain = ["freedesktop"]
        return s
    }

    func doctor(_ s: Status?, files: Set<String> = [], card: Bool = false) -> Doctor.Report {
        Doctor.report(status: s, noDaemon: s == nil ? "no cued answers on /s (No such file or directory)" : nil, socket: "/s",
                      environment: env, soundCard: card, exists: { files.contains($0) })
    }

    /// `why pop` comes after the output's lines (only the units follow it); the output's own
    /// reason is said above it, not again, and its line does not read as if nothing held the cue back.
    @Test func whyLeavesTheOutputToTheLinesAboveIt() {
        var why = WhyReport(cue: "pop", app: "bash")
        let clear = Doctor.report(status: status("alsa:default"), noDaemon: nil, socket: "/s", environment: env, soundCard: true,
                                  exists: { _ in false }, why: why)
        #expect(clear.lines.last { $0.contains("why pop") } == "ok  why pop: nothing holds it back")
        why.reasons = [WhyReport.Reason("no-output", says: "cued plays to nothing", fix: "start a sound server")]
        let null = Doctor.report(status: status("null"), noDaemon: nil, socket: "/s", environment: env, soundCard: false,
                                 exists: { _ in false }, why: why)
        #expect(null.lines.last { $0.contains("why pop") } == "ok  why pop: nothing else holds it back (the output, above)", "\(null.lines)")
        #expect(null.lines.contains { $0.hasPrefix("!!  output null") } && null.exitCode != 0, "\(null.lines)")
    }

    @Test func heardOrRecordedIsZero() {
        let pw = doctor(status("alsa:default", state: "idle"), files: ["/run/user/1/pipewire-0"])
        #expect(pw.exitCode == 0, "\(pw.lines)")
        #expect(pw.lines.contains("ok  sound server: PipeWire (/run/user/1/pipewire-0)"))
        #expect(pw.lines.contains("ok  output alsa:default: idle"))
        let wav = doctor(status("wav:/tmp/c.wav", state: "closed"))
        #expect(wav.exitCode == 0)
        #expect(wav.lines.contains("ok  output wav:/tmp/c.wav: closed: cues are recorded to /tmp/c.wav"))
        // A card and no server: ALSA's default plays on it.
        #expect(doctor(status("alsa:default", state: "closed"), card: true).exitCode == 0)
    }

    /// The audio thread's scheduling: real time is fine; otherwise why, and its one-line fix by
    /// the reason status gives; cues are still heard, so the exit status stays 0.
    @Test(arguments: [
        ("normal: no rtkit: no system bus at /run/dbus/system_bus_socket", "start it (systemctl start dbus) with RTKit"),
        ("normal: no rtkit: MaxRealtimePriority: The name org.freedesktop.RealtimeKit1 was not provided by any .service files (org.freedesktop.DBus.Error.ServiceUnknown)",
         "install RTKit, which grants desktop apps real time (sudo apt install rtkit)"),
        ("normal: rtkit refused: Operation not permitted (org.freedesktop.DBus.Error.AccessDenied)", "polkit"),
        ("nice -11 (rtkit); rtkit refused real time: Operation not permitted (org.freedesktop.DBus.Error.AccessDenied)", "acquire-real-time"),
        ("normal: no rtkit: MaxRealtimePriority: no answer in time", "did not answer within 2 s"),
        ("normal: real time (rtkit) taken away", "its watchdog"),
    ])
    func aThreadThatIsNotRealtimeIsAProblemWithItsFix(thread: String, fix: String) {
        var s = status("alsa:default")
        s.audioThread = thread
        let r = doctor(s, card: true)
        #expect(r.exitCode == 0, "\(r.lines)")
        guard let i = r.lines.firstIndex(where: { $0.hasPrefix("!!  audio thread: \(thread)") }) else {
            Issue.record("no finding for \(thread): \(r.lines)"); return
        }
        #expect(r.lines[i + 1].hasPrefix("    fix: ") && Doctor.has(r.lines[i + 1], fix), "\(r.lines[i + 1])")
        s.audioThread = "realtime (rtkit)"
        #expect(doctor(s, card: true).lines.contains("ok  audio thread: realtime (rtkit)"))
        s.audioThread = "normal: asking rtkit"
        #expect(doctor(s, card: true).lines.contains("--  audio thread: normal: asking rtkit (cued asks the desktop for real time)"))
    }

    @Test func nothingHeardIsOneWithAFix() {
        let null = doctor(status("null", why: "auto: no sound server answers"))
        #expect(null.exitCode == 1)
        #expect(null.lines.contains("--  auto: no sound server answers"))
        #expect(null.lines.contains("!!  output null: nothing is heard (cued plays to nothing)"))
        #expect(null.lines.contains { $0.hasPrefix("    fix: ") && Doctor.has($0, "--sink wav:FILE") })
        // ALSA's words for "PipeWire is not running", turned into the fix.
        let down = doctor(status("alsa:default", state: "failed", error: "cannot open PCM 'default': Host is down"),
                          files: ["/run/user/1/pipewire-0"])
        #expect(down.exitCode == 1)
        #expect(down.lines.contains("    fix: the sound server is not running: systemctl --user start pipewire pipewire-pulse"))
        // Not opened yet, but nothing it could open: no server, no card.
        let nowhere = doctor(status("alsa:default", state: "closed"))
        #expect(nowhere.exitCode == 1, "\(nowhere.lines)")
        var muted = status("alsa:default")
        muted.muted = true
        #expect(doctor(muted, card: true).lines.contains("    fix: cuectl unmute"))
        #expect(doctor(muted, card: true).exitCode == 1)
        var silent = status("alsa:default")
        silent.profile = .silent
        #expect(doctor(silent, card: true).lines.contains("    fix: cuectl profile full"))
        #expect(doctor(silent, card: true).exitCode == 1)
        var quiet = status("alsa:default")
        quiet.profile = .quiet
        #expect(doctor(quiet, card: true).exitCode == 0)
    }

    /// auto picks again at the next open of the device: null with a server answering
    /// now is heard at the next cue; the bus is explained when there is one.
    @Test func autoOnNullWithAServerNowIsHeardAtTheNextCue() {
        let later = doctor(status("null", why: "auto: no sound server answers"), files: ["/run/user/1/pipewire-0"])
        #expect(later.exitCode == 0, "\(later.lines)")
        #expect(later.lines.contains("ok  output null until the next cue: auto picks again then, and a sound server answers now"))
        var bus = status("alsa:default")
        bus.bus.connection = "connected"
        bus.bus.feedback = "queued"
        bus.bus.notifications = "watching"
        #expect(doctor(bus, card: true).lines.contains(
            "--  D-Bus: org.sigxcpu.Feedback owned by another process (feedbackd?); cued takes it when that one stops; notifications watching"))
    }

    @Test func noDaemonIs69AndTheUnitsDecideTheFix() {
        let none = doctor(nil)
        #expect(none.exitCode == 69)
        #expect(none.lines.first == "!!  no cued answers on /s (No such file or directory)")
        #expect(none.lines.contains("    fix: run cued in a terminal (its units are not installed: make install or the cued package)"))
        let installed = doctor(nil, files: ["/usr/lib/systemd/user/cued.socket", "/home/u/.config/systemd/user/sockets.target.wants/cued.socket"])
        #expect(installed.lines.contains("    fix: systemctl --user start cued.socket"))
        #expect(installed.lines.contains("--  units installed in /usr/lib/systemd/user, cued.socket enabled"))
    }

    /// PipeWire answers but links no stream (no session manager): nothing is heard, whatever socket
    /// exists, and the fix is the session manager, not the server.
    @Test func pipeWireThatLinksNothingIsAProblemWithItsFix() {
        let s = status("null", why: "auto: PipeWire answers at /run/user/1/pipewire-0 but its stream was not linked to an output (…); cues are played to nothing, and the next cue tries again")
        let r = doctor(s, files: ["/run/user/1/pipewire-0"])
        #expect(r.exitCode == 1)
        #expect(r.lines.contains("!!  output null: PipeWire answers but links no stream to an output, so nothing is heard"), "\(r.lines)")
        #expect(r.lines.contains("    fix: start PipeWire's session manager: systemctl --user start wireplumber (auto picks PipeWire at the next cue)"))
        // A forced native stream that failed so: the same fix; another native failure: PipeWire's tools, not aplay.
        let forced = doctor(status("pipewire", state: "failed", error: "PipeWire: the stream was not linked to an output within 2000 ms"), files: ["/run/user/1/pipewire-0"])
        #expect(forced.lines.contains("    fix: start PipeWire's session manager: systemctl --user start wireplumber"), "\(forced.lines)")
        let target = doctor(status("pipewire:nosuch", state: "failed", error: "PipeWire stream error: no target node"), files: ["/run/user/1/pipewire-0"])
        #expect(target.lines.contains { $0.hasPrefix("    fix: check PipeWire's outputs (wpctl status") }, "\(target.lines)")
    }

    /// No socket path at all (XDG_RUNTIME_DIR unset: a container, `su`): the fix is a path, not the units.
    @Test func noSocketPathSaysWhereToPutOne() {
        let r = Doctor.report(status: nil, noDaemon: "XDG_RUNTIME_DIR is not set, so there is no default socket path; pass --socket PATH (or set CUED_SOCKET)",
                              socket: nil, environment: ["HOME": "/home/u"], soundCard: false,
                              exists: { $0 == "/usr/lib/systemd/user/cued.socket" })
        #expect(r.exitCode == 69)
        #expect(r.lines.prefix(2) == ["!!  XDG_RUNTIME_DIR is not set, so there is no default socket path; pass --socket PATH (or set CUED_SOCKET)",
                                      "    fix: export CUED_SOCKET=/home/u/.cued.sock (where `make run` puts cued's socket then), or pass --socket PATH"])
    }

    /// The memory budget for decoded sound: shown; refusals are a problem with the fix,
    /// which does not change whether a cue is heard.
    @Test func theMemoryBudgetIsShownAndItsRefusalsAreAProblem() {
        var s = status("alsa:default", state: "idle")
        s.memory.limitBytes = 64 << 20
        s.memory.usedBytes = 20 << 20
        s.memory.cacheBytes = 16 << 20
        s.memory.cuesBytes = 4 << 20
        let fine = doctor(s, files: ["/run/user/1/pipewire-0"])
        #expect(fine.lines.contains("--  memory for decoded sound: 20.0 of 64.0 MiB (cues 4.0, cache 16.0, playing 0.0, decoding 0.0), 0 refused"),
                "\(fine.lines)")
        s.memory.refused = 3
        let refused = doctor(s, files: ["/run/user/1/pipewire-0"])
        #expect(refused.exitCode == 0)
        let i = refused.lines.firstIndex { $0.hasPrefix("!!  3 sounds or reloads were refused: over the memory budget for decoded sound") }
        #expect(i != nil, "\(refused.lines)")
        if let i { #expect(refused.lines[i + 1].hasPrefix("    fix: raise sound_budget_mb in cued.toml and cuectl reload")) }
        // An older cued says nothing of a budget: nothing is shown.
        #expect(!doctor(status("alsa:default"), files: []).lines.contains { $0.contains("memory") })
    }

    // MARK: libcanberra

    func facts(on: Bool = true, plugin: Bool = true, hook: Bool = true, shell: String? = nil, manager: String?? = .some("cued"),
               apps: [String]? = []) -> CanberraRouting.Facts {
        var f = CanberraRouting.Facts()
        f.on = on
        f.pluginDirectory = "/usr/lib/x86_64-linux-gnu/libcanberra-0.30"
        f.pluginInstalled = plugin
        f.generator = hook ? "/usr/lib/systemd/user-environment-generators/60-cued-canberra" : nil
        f.shellValue = shell
        f.managerValue = manager
        f.apps = apps
        return f
    }

    func lines(_ f: CanberraRouting.Facts) -> [String] {
        Doctor.report(status: status("pipewire"), noDaemon: nil, socket: "/s", environment: env, soundCard: false,
                      exists: { _ in false }, canberra: f).lines.filter { $0.contains("libcanberra") || $0.contains("CANBERRA") || $0.hasPrefix("    fix: cuectl canberra") || $0.contains("plug-in") }
    }

    @Test func libcanberraThroughCuedOnOffAndBroken() {
        #expect(lines(facts(apps: ["Mutter", "feedbackd"])) == ["ok  libcanberra's sounds go through cued; apps through it: Mutter, feedbackd"])
        #expect(lines(facts(manager: .some(nil))) == ["ok  libcanberra's sounds go through cued (from your next login: your session does not set CANBERRA_DRIVER=cued yet); no app has played through it yet"])
        #expect(lines(facts(on: false, manager: .some(nil))) == ["--  libcanberra's sounds (GNOME Shell, KDE and GTK apps, feedbackd) do not go through cued; to make them: cuectl canberra on"])
        let missing = lines(facts(plugin: false, manager: .some(nil)))
        #expect(missing.first == "!!  libcanberra through cued is on, but cued's plug-in is not in /usr/lib/x86_64-linux-gnu/libcanberra-0.30, the one directory libcanberra loads drivers from: its sounds go their own way", "\(missing)")
        // The session names cued's driver and libcanberra cannot load it: silence, said first.
        let silent = lines(facts(on: false, plugin: false, shell: "cued", manager: .some(nil)))
        #expect(silent == ["!!  CANBERRA_DRIVER=cued but cued's plug-in is not in /usr/lib/x86_64-linux-gnu/libcanberra-0.30: every libcanberra sound of this session is silent",
                           "    fix: cuectl canberra off and unset CANBERRA_DRIVER (then log in again), or install the plug-in (the cued package, or sudo make install-canberra)"], "\(silent)")
        // No libcanberra on the machine: nothing to say.
        var none = facts()
        none.pluginDirectory = nil
        #expect(lines(none).isEmpty)
        // The findings about libcanberra never change whether a cue of cued's would be heard.
        let r = Doctor.report(status: status("pipewire"), noDaemon: nil, socket: "/s", environment: env, soundCard: false,
                              exists: { _ in false }, canberra: facts(on: false, plugin: false, shell: "cued"))
        #expect(r.exitCode == 0)
    }

    @Test func canberraReportAndSwitch() {
        let f = facts(shell: "cued", apps: ["Mutter"])
        #expect(CanberraRouting.report(f) == [
            "libcanberra through cued: on",
            "plug-in: /usr/lib/x86_64-linux-gnu/libcanberra-0.30/libcanberra-cued.so installed",
            "login hook: /usr/lib/systemd/user-environment-generators/60-cued-canberra",
            "this shell: CANBERRA_DRIVER=cued",
            "your session (systemd --user): CANBERRA_DRIVER=cued",
            "apps through it: Mutter",
        ])
        #expect(CanberraRouting.missing(f) == nil)
        #expect(CanberraRouting.missing(facts(hook: false))?.problem.hasPrefix("the login hook 60-cued-canberra is not in") == true)
        #expect(CanberraRouting.report(facts(plugin: false, shell: "cued", manager: nil)).last
                == "warning: CANBERRA_DRIVER=cued without the plug-in: libcanberra's sounds are silent; cuectl canberra off, and unset CANBERRA_DRIVER")
        #expect(CanberraRouting.switched(true, managerChanged: false)[0].contains("after your next login"))
        #expect(CanberraRouting.switchPath(environment: ["HOME": "/home/u"]) == "/home/u/.config/cued/libcanberra")
        #expect(CanberraRouting.switchPath(environment: ["HOME": "/home/u", "XDG_CONFIG_HOME": "/c"]) == "/c/cued/libcanberra")
        #expect(CanberraRouting.isCued("cued") && CanberraRouting.isCued("cued,alsa") && !CanberraRouting.isCued("cuedx") && !CanberraRouting.isCued(nil))
    }

    /// The plug-in directory is the one compiled into libcanberra: read from its bytes.
    @Test func pluginDirectoryIsReadFromTheLibrary() {
        func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }
        let lib = [0x7F, 0x45] + bytes("junk\0/usr/lib/x86_64-linux-gnu/libcanberra-0.30/libcanberra-%s\0more") + [0xFF]
        #expect(CanberraRouting.pluginDirectory(inLibrary: lib) == "/usr/lib/x86_64-linux-gnu/libcanberra-0.30")
        #expect(CanberraRouting.pluginDirectory(inLibrary: bytes("x\0relative/libcanberra-%s\0")) == nil)
        #expect(CanberraRouting.pluginDirectory(inLibrary: []) == nil)
        #expect(CanberraRouting.libraryCandidates(machine: "x86_64").first == "/usr/lib/x86_64-linux-gnu/libcanberra.so.0")
    }
}
