import CuedProtocol

/// `cuectl doctor`: a first-run check, one line a finding (`ok`, `--` for
/// information, `!!` for a problem, each problem with a one-line fix). Exit 0
/// only when a cue would be heard or is being recorded, 1 when cued runs but
/// nothing would be heard, 69 when no cued answers. Pure: the caller asks cued
/// for its status and says which files exist.
public enum Doctor {
    public struct Report: Equatable, Sendable {
        public var lines: [String] = []
        public var exitCode: Int32 = 0
    }

    /// `status`: cued's, or nil with `noDaemon` (why it did not answer);
    /// `soundCard`: whether /dev/snd has a playback device.
    /// `socket`: nil when no path could be made (neither --socket, CUED_SOCKET nor XDG_RUNTIME_DIR).
    /// `canberra`: libcanberra's routing through cued (`CanberraRouting`), if looked at.
    /// `why`: cued's `why pop`, whose reasons are the report's last problems (mute and the
    /// profiles among them, then not said apart; the output's own, above).
    public static func report(status: Status?, noDaemon: String?, socket: String?, environment: [String: String],
                              soundCard: Bool, exists: (String) -> Bool, canberra: CanberraRouting.Facts? = nil,
                              why: WhyReport? = nil) -> Report {
        var r = Report()
        func ok(_ s: String) { r.lines.append("ok  " + s) }
        func info(_ s: String) { r.lines.append("--  " + s) }
        func problem(_ s: String, fix: String) { r.lines.append("!!  " + s); r.lines.append("    fix: " + fix) }

        let units = NoDaemonHint.unitDirectories(environment: environment).first { exists($0 + "/cued.socket") }
        let configHome = environment["XDG_CONFIG_HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? ((environment["HOME"] ?? "") + "/.config")
        let enabled = [configHome + "/systemd/user", "/etc/systemd/user"].contains { exists($0 + "/sockets.target.wants/cued.socket") }

        if let status {
            ok("cued \(status.version) answers at \(socket ?? "?") (pid \(status.pid))")
        } else if socket == nil {
            // No session runtime directory (a container, `su`): the user units cannot run either.
            let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? "$HOME"
            problem(noDaemon ?? "no socket path", fix: "export CUED_SOCKET=\(home)/.cued.sock (where `make run` puts cued's socket then), or pass --socket PATH")
        } else {
            problem(noDaemon ?? "no cued answers at \(socket!)",
                    fix: units != nil ? "systemctl --user start cued.socket" : "run cued in a terminal (its units are not installed: make install or the cued package)")
        }

        // The desktop's sound server: its sockets in $XDG_RUNTIME_DIR.
        let rt = environment["XDG_RUNTIME_DIR"].flatMap { $0.isEmpty ? nil : $0 }
        let pipewire = rt.map { exists($0 + "/pipewire-0") } ?? false
        let pulse = rt.map { exists($0 + "/pulse/native") } ?? false
        if pipewire { ok("sound server: PipeWire (\(rt!)/pipewire-0)") }
        else if pulse { ok("sound server: PulseAudio (\(rt!)/pulse/native)") }
        else { info("no sound server socket in \(rt ?? "$XDG_RUNTIME_DIR (unset)") (on a desktop: systemctl --user start pipewire pipewire-pulse)") }

        var heard = false
        if let status {
            let s = status.sink
            var where_ = "\(s.spec): \(s.state)" + (s.kind.map { " (\($0))" } ?? "")
            if let d = s.delayUs { where_ += ", device delay \(d) µs" }
            if let why = s.why { info(why) }
            if s.spec.hasPrefix("wav:") {
                ok("output \(where_): cues are recorded to \(s.spec.dropFirst(4))")
                heard = true
            } else if s.spec == "null", let why = s.why, has(why, OutputFailure.notLinked) {
                // PipeWire answers but links no stream: its session manager is missing (yet).
                problem("output null: PipeWire answers but links no stream to an output, so nothing is heard",
                        fix: "start PipeWire's session manager: systemctl --user start wireplumber (auto picks PipeWire at the next cue)")
            } else if s.spec == "null" && s.why != nil && (pipewire || pulse) {
                // auto picks again at the next open of the device: the server that answers now gets the next cue.
                ok("output null until the next cue: auto picks again then, and a sound server answers now")
                heard = true
            } else if s.spec == "null" {
                problem("output null: nothing is heard (cued plays to nothing)",
                        fix: s.why != nil ? "start a sound server (systemctl --user start pipewire pipewire-pulse) or plug a card: auto picks it at the next cue; to record instead: --sink wav:FILE"
                                          : "restart cued with --sink auto (the default) or alsa:default")
            } else if let e = s.error, s.state == "failed" || s.state == "closed" {
                let serverDown = has(e, "Host is down") || has(e, "Connection refused")
                let fix: String
                if serverDown { fix = "the sound server is not running: systemctl --user start pipewire pipewire-pulse" }
                else if has(e, OutputFailure.notLinked) { fix = "start PipeWire's session manager: systemctl --user start wireplumber" }
                else if s.spec.hasPrefix("pipewire") {
                    fix = "check PipeWire's outputs (wpctl status; pw-cli ls Node names a TARGET for pipewire:TARGET); cuectl status shows what cued sees"
                } else { fix = "check the device (aplay -L lists the PCMs); cuectl status shows what cued sees" }
                problem("output \(where_): \(e)", fix: fix)
            } else if s.spec.hasPrefix("alsa:") && s.state == "closed" && !pipewire && !pulse && !soundCard {
                problem("output \(where_): no sound server answers and there is no sound card: nothing would be heard",
                        fix: "systemctl --user start pipewire pipewire-pulse (a desktop), or restart cued with --sink wav:FILE to record")
            } else if let words = s.failingWords {
                // It opens and takes cues, and they are not heard: never an "ok".
                problem("output \(s.spec) (\(s.state)) takes cues and plays nothing: it \(words)",
                        fix: s.why != nil ? "auto takes its next output after two failures in a row (play a cue, then cuectl doctor again); to choose one: cued --sink alsa:default"
                                          : "restart cued with --sink auto (the default) or another output; cuectl status shows what cued sees")
            } else {
                ok("output \(where_)" + (s.state == "closed" ? " (opened on the first cue)" : ""))
                heard = true
            }
            info("sound theme \(status.theme.name): " + (status.theme.chain.isEmpty ? "not found (only the bank's cues play)"
                 : status.theme.chain == [status.theme.name] ? "found" : status.theme.chain.joined(separator: " → ")))
            info("config: " + (status.config ?? "none (defaults); cuectl config check validates one"))
            for w in status.warnings { info("skipped at the last load: " + w) }
            let m = status.memory
            if m.limitBytes > 0 {
                if m.refused > 0 {
                    problem("\(m.refused) sound\(m.refused == 1 ? " or reload was" : "s or reloads were") refused: over the memory budget for decoded sound (now \(StatusTable.memoryLine(m)))",
                            fix: "raise sound_budget_mb in cued.toml and cuectl reload (or start cued with --sound-budget-mb MB); cuectl status shows what holds it")
                } else {
                    info("memory for decoded sound: " + StatusTable.memoryLine(m))
                }
            }
            if let (line, fix) = audioThreadProblem(status.audioThread) {
                if let fix { problem(line, fix: fix) } else { info(line) }
            } else {
                ok("audio thread: \(status.audioThread)")
            }
            switch status.bus.connection {
            case "connected":
                info("D-Bus: org.sigxcpu.Feedback " + (status.bus.feedback == "owner" ? "answered by cued" : status.bus.feedback == "queued"
                     ? "owned by another process (feedbackd?); cued takes it when that one stops" : "not asked for")
                     + "; notifications " + status.bus.notifications)
            case "absent": info("D-Bus: no session bus (feedbackd's clients and notification sounds need one)")
            default: break
            }
            if status.muted && why == nil { problem("cued is muted: nothing is heard", fix: "cuectl unmute") ; heard = false }
            switch status.profile {
            case .full: break
            case .quiet: info("profile quiet: every cue plays softer (cuectl profile full for the full level)")
            case .silent where why == nil:
                problem("the profile is silent: nothing is heard but the important cues of the apps the config allows",
                        fix: "cuectl profile full")
                heard = false
            case .silent: break  // in why's list
            }
        }
        if let f = canberra { canberraLines(f, ok: ok, info: info, problem: problem) }
        if let why {
            // The output itself (null, a failing device) is said above, with more of its detail.
            let all = WhyRender.reasons(why, canberra: canberra)
            let reasons = all.filter { $0.name != "no-output" && $0.name != "device-failing" }
            if reasons.isEmpty {
                ok("why \(why.cue): " + (all.isEmpty ? "nothing holds it back" : "nothing else holds it back (the output, above)"))
            }
            for reason in reasons { problem("why \(why.cue): \(reason.says) [\(reason.name)]", fix: reason.fix) }
            if !reasons.isEmpty { heard = false }
        }
        if let units {
            info("units installed in \(units)" + (enabled ? ", cued.socket enabled" : "; enable with: systemctl --user enable --now cued.socket"))
        } else {
            info("units not installed (make install or the cued package puts them in place)")
        }
        r.exitCode = status == nil ? ExitCode.noDaemon : heard ? 0 : 1
        return r
    }

    /// A non-real-time audio thread (status's `audio_thread`: how it runs, and why not better):
    /// the finding and its one-line fix (nil: nothing to fix yet), or nil when it is real-time.
    /// Cues are still heard, but a busy machine can then starve the thread (clicks, and a
    /// margin grown to a longer latency), so it is a problem, not a failure.
    static func audioThreadProblem(_ thread: String) -> (String, String?)? {
        guard !thread.hasPrefix("realtime") else { return nil }
        let line = "audio thread: \(thread): a busy machine can starve it (clicks, longer latency)"
        func has(_ s: String) -> Bool { Self.has(thread, s) }
        if has("asking ") { return ("audio thread: \(thread) (cued asks the desktop for real time)", nil) }
        let again = "cued asks again when it next opens its output"
        if has("no rtkit: no system bus") || has("the system bus:") {
            return (line, "no system D-Bus answers: start it (systemctl start dbus) with RTKit (sudo apt install rtkit); \(again)")
        }
        if has("ServiceUnknown") || has("NameHasNoOwner") {
            return (line, has("no portal") ? "install xdg-desktop-portal, whose Realtime portal grants real time to sandboxed apps; \(again)"
                                           : "install RTKit, which grants desktop apps real time (sudo apt install rtkit); \(again)")
        }
        if has("no answer in time") { return (line, "the bus or RTKit did not answer within 2 s (systemctl status rtkit-daemon); \(again)") }
        if has("resource busy") { return (line, "RTKit's limit of requests per user was reached (25 in 20 s by default); \(again)") }
        if has("refused") {
            return (line, "RTKit grants real time to an active local session (polkit): log in at the machine's own seat, or allow org.freedesktop.RealtimeKit1.acquire-real-time for your user in a rule in /etc/polkit-1/rules.d")
        }
        if has("taken away") { return (line, "RTKit took it away (its watchdog: the machine starved for seconds); \(again)") }
        if has("real-time budget") { return (line, "cued's audio thread spun, which is cued's bug: report it with the output of cuectl status") }
        return (line, "cued asks RTKit for real time at start and when it opens its output: install RTKit (sudo apt install rtkit)")
    }

    /// libcanberra's event sounds: through cued or not, and a session left silent by a
    /// CANBERRA_DRIVER=cued whose plug-in is gone.
    static func canberraLines(_ f: CanberraRouting.Facts, ok: (String) -> Void, info: (String) -> Void,
                              problem: (String, String) -> Void) {
        guard f.pluginDirectory != nil else { return }  // no libcanberra here: nothing plays through it
        if CanberraRouting.silencing(f) {
            problem("CANBERRA_DRIVER=cued but cued's plug-in is not in \(f.pluginDirectory!): every libcanberra sound of this session is silent",
                    "cuectl canberra off and unset CANBERRA_DRIVER (then log in again), or install the plug-in (the cued package, or sudo make install-canberra)")
            return
        }
        guard f.on else {
            info("libcanberra's sounds (GNOME Shell, KDE and GTK apps, feedbackd) do not go through cued; to make them: cuectl canberra on")
            return
        }
        if let (what, fix) = CanberraRouting.missing(f) {
            problem("libcanberra through cued is on, but " + what + ": its sounds go their own way", fix)
            return
        }
        let apps = f.apps.map { $0.isEmpty ? "; no app has played through it yet" : "; apps through it: " + $0.joined(separator: ", ") } ?? ""
        var session = ""
        if case .some(let v) = f.managerValue, !CanberraRouting.isCued(v) {
            session = " (from your next login: your session does not set CANBERRA_DRIVER=cued yet)"
        }
        ok("libcanberra's sounds go through cued" + session + apps)
    }

    /// Whether `text` contains `part` (this module does without the regex library's `contains`).
    public static func has(_ text: String, _ part: String) -> Bool {
        let t = Array(text.utf8), p = Array(part.utf8)
        guard !p.isEmpty, t.count >= p.count else { return p.isEmpty }
        return (0...(t.count - p.count)).contains { i in t[i..<(i + p.count)].elementsEqual(p) }
    }
}
