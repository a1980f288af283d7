import CuedCore
import CuedProtocol
import NIOCore
#if canImport(Glibc)
import Glibc
#endif

/// What `why CUE` answers: the report, or what a play of CUE fails with before any reason can
/// apply (no cue or theme sound of that name).
enum WhyOutcome: Sendable {
    case report(WhyReport)
    case failed(PlayFailure)
}

/// `why CUE`: every reason the next play of CUE by the asking client's app would not be heard, in
/// the order they apply. Admission's own rules first (the voice broker's ordered list, the same
/// `play` stops at the first of: mute, profiles, the rate limit, the cue's cooldown, the desktop's
/// switches), then what comes after admission: the memory budget, then the output (cued's stream on
/// the sound server, the desktop's System Sounds volume, the output's own volume, no real output,
/// a failing device). Worded at the edge (`WhyWording`); libcanberra's routing is cuectl's to add.
extension Daemon {
    /// `why CUE` of any name: a bank cue's report at once; a theme sound's once the theme is
    /// known to have it (looked up as a play looks it up, not decoded); else what `play` fails
    /// with, so that a name nothing plays is never said to be heard.
    func why(named cue: String, _ asking: Client) -> EventLoopFuture<WhyOutcome> {
        if current.bank.variants[cue] != nil { return loop.makeSucceededFuture(.report(why(cue, asking))) }
        return fetch.known(cue, theme: desktopTheme, owner: asking.owner, bankNames: current.bank.names).assumeIsolated().map { failure in
            failure.map(WhyOutcome.failed) ?? .report(self.why(cue, asking))
        }.nonisolated()
    }

    /// The reasons for a cue known to exist.
    func why(_ cue: String, _ asking: Client) -> WhyReport {
        var report = WhyReport(cue: cue, app: asking.app)
        var client = asking
        // The app as its sounds come: through libcanberra, or cued's own notification sounds.
        if let app = asking.app, broker.counts.apps[app]?.via.contains("libcanberra") == true {
            client.via = "libcanberra"
            report.canberraApp = true
        }
        if asking.app == FeedbackCenter.notificationsApp {
            var ours = Client(.cued, id: asking.id, limits: limits, now: MonotonicClock.now())
            ours.app = asking.app
            client = ours
        }
        var reasons = holds(.named(cue), PlayOptions(), client).map(WhyWording.reason)
        let admitted = reasons.firstIndex { WhyReport.outputReasons.contains($0.name) } ?? reasons.endIndex
        if let memory = memoryReason(cue) { reasons.insert(memory, at: admitted) }
        reasons += outputReasons()
        report.reasons = reasons
        return report
    }

    /// A theme sound not decoded yet while the budget is nearly full: its decode may be refused.
    private func memoryReason(_ cue: String) -> WhyReport.Reason? {
        guard current.bank[cue] == nil, fetch.cached(cue, theme: desktopTheme) == nil, let budget else { return nil }
        let room = budget.limit - budget.used
        guard room < WhyWording.roomForASound else { return nil }
        return WhyWording.memory(cue, used: budget.used, limit: budget.limit)
    }

    /// After admission: cued's stream, the role's and the output's kept volumes, the output itself.
    private func outputReasons() -> [WhyReport.Reason] {
        var out: [WhyReport.Reason] = []
        let spec = engine.sinkSpec, stats = engine.stats
        let p = streamProps.snapshot, role = wirePlumber?.notificationRole
        if spec.hasPrefix("pipewire") {
            if p.open && p.changes > 0 && p.silenced {
                out.append(StreamOrigin.matches(p, role) ? WhyWording.systemSounds(p.mute == true, live: true, wirePlumber!.notificationWhere)
                                                          : WhyWording.streamMuted(p))
            } else if !p.open, let role, role.silenced {
                out.append(WhyWording.systemSounds(role.mute == true, live: false, wirePlumber!.notificationWhere))
            }
        } else if spec == "alsa:pulse" || spec == "alsa:default" || spec.hasPrefix("alsa:pipewire"), let role, role.silenced {
            // Through pipewire-pulse, the plugin's `event` role is the Notification role; through
            // pipewire-alsa the stream says Notification itself (ALSASink.exportStreamProperties).
            out.append(WhyWording.systemSounds(role.mute == true, live: false, wirePlumber!.notificationWhere))
        }
        if let (name, kept) = outputSink, kept.silenced, let o = outputVolumeStatus { out.append(WhyWording.outputMuted(o, name: name)) }
        // A recording (wav:) is an output chosen on purpose: cuectl doctor counts it as heard, and so does why.
        // auto played to nothing, and a sound server answers now: the next cue picks it (doctor says so too).
        if spec == "null" && !(engine.sinkWhy != nil && SoundServer.answersNow()) { out.append(WhyWording.noOutput(why: engine.sinkWhy)) }
        if stats.sinkState == .failed || stats.sinkError != nil {
            out.append(WhyWording.deviceFailing(stats.sinkError))
        } else if spec != "null", let summary = broker.health.summary {
            out.append(WhyWording.notHeard(spec, summary, auto: engine.sinkWhy != nil))
        }
        return out
    }
}

/// A sound server's socket in cued's runtime directory (what `--sink auto` looks for first).
enum SoundServer {
    static func answersNow() -> Bool {
        guard let p = getenv("XDG_RUNTIME_DIR"), case let rt = String(cString: p), !rt.isEmpty else { return false }
        return access(rt + "/pipewire-0", F_OK) == 0 || access(rt + "/pulse/native", F_OK) == 0
    }
}
