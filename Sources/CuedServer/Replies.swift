import CuedCore
import CuedProtocol

/// Protocol v1's words for what the daemon's typed calls answer: the socket's edge, and
/// the one place replies are worded. Inside, a play is a `PlayResult`, a refusal a `Hold`
/// or a `PlayFailure`, a client let go a `ClientTable.LetGo`; the verb table and the
/// connection handler turn them into lines here, and nothing inside reads a line back.
enum Replies {
    static let stopping = "cued is stopping"
    static let stoppingReply = Reply.notPlayed(.shutdown, stopping)

    /// A play's answer: `ok [ID]`, `ok WORD` for what plays nothing by design, `err …`.
    static func reply(_ r: PlayResult, _ options: PlayOptions) -> Reply {
        switch r {
        case .started(let voice): return .ok(options.wantsID ? "\(voice)" : nil)
        case .ended(let end, let context): return reply(for: end, context)
        case .held(let hold): return reply(hold)
        case .disabled: return .ok(NotSounded.disabled.rawValue)
        case .failed(let failure): return reply(failure)
        }
    }

    static func reply(_ hold: Hold) -> Reply {
        switch hold {
        case .muted, .appMuted: return .ok(NotSounded.muted.rawValue)
        case .silent, .appSilent: return .ok(NotSounded.silent.rawValue)
        case .cooldown: return .ok(NotSounded.cooldown.rawValue)
        // As libcanberra's own `canberra.enable` off: CA_ERROR_DISABLED for the app.
        case .eventSoundsOff, .inputFeedbackOff: return .ok(NotSounded.disabled.rawValue)
        case .doNotDisturb: return .ok(NotSounded.silent.rawValue)
        case .rateLimited(let n): return .err(.rateLimited, "more than \(Request.number(n)) cues a second on this connection")
        case .stopping: return stoppingReply
        }
    }

    static func reply(_ failure: PlayFailure) -> Reply {
        switch failure {
        case .unknownSound(let name, let bank):
            return .err(.unknownCue, "no cue or theme sound named '\(name)' (cues: \(bank.joined(separator: " ")); "
                        + "theme sounds: `cues theme`, or cuectl cues --theme)")
        case .noSuchSound(let name): return .err(.unknownCue, "no sound named '\(name)'")
        case .badSound(let failure): return .badFile(failure.problem, failure.description)
        case .decoding(_, .queueFull): return .err(.rateLimited, explain(.queueFull))
        case .decoding(let what, let refusal): return .badFile(refusal.problem, "\(what): " + explain(refusal))
        case .queueFull: return .err(.internal, queueFull)
        case .noSound(let cue): return .err(.internal, "cue '\(cue)' has no sound")
        case .transitionCueMissing(let cue): return .err(.internal, "transition cue '\(cue)' is not loaded")
        case .lost: return .err(.internal, "lost")
        }
    }

    static let queueFull = "audio queue is full; try again"

    /// `stop`'s answer: how many voices faded out, or a name it cannot stop and what it takes.
    static func reply(_ outcome: Daemon.StopOutcome) -> Reply {
        switch outcome {
        case .stopped(let n): return .ok("\(n)")
        case .unknownCue(let name, let bank):
            let instead = RequestParser.voiceID(Substring(name)) != nil ? "a voice by its id: stop id \(name)"
                : "stop alone stops this app's voices, stop all every voice, stop id ID one voice"
            return .err(.unknownCue, "no cue or theme sound named '\(name)' to stop (cues: \(bank.joined(separator: " "))); \(instead)")
        }
    }

    /// Why the decoding lane gave up on a client's sound.
    static func explain(_ refusal: DecodeLane.Refusal) -> String {
        switch refusal {
        case .timedOut(let s):
            return "timed out after \(Request.number(s)) s (a file system that does not answer, or a file too slow to decode)"
        case .stuck:
            return "not tried: this client's earlier files are stuck on a file system that does not answer; try again later"
        case .queueFull:
            return "too many sounds waiting to be decoded for this client"
        }
    }

    /// What `play … wait` answers for an end.
    static func reply(for end: VoiceEnd, _ context: EndContext) -> Reply {
        // The device's own error, said apart: its timeouts (an open that waited 2 s) are not the cue's.
        let deviceError = context.deviceError.map { "; the device's error: \($0)" } ?? ""
        switch end.reason {
        case .played: return .ok(nil)
        case .stoppedByID, .stoppedByOwner, .stoppedAll, .stolen, .muted, .disconnected: return .ok("stopped")
        case .shutdown where end.started: return .ok("stopped")
        case .shutdown: return stoppingReply
        case .late where context.stopping: return stoppingReply
        case .late: return .notPlayed(.late, "the device did not start it within 250 ms of the request" + deviceError)
        case .cut: return .notPlayed(.cut, "the device failed while it played; too late to start it again" + deviceError)
        case .busy: return .notPlayed(.busy, "every voice is taken by a cue of a higher priority")
        }
    }

    /// A voice's end as an event line, for a connection with `events on`.
    static func endLine(_ end: VoiceEnd) -> String { "end \(end.id) \(end.reason.rawValue)" }

    /// What a reload made of the config and cues.
    static func reply(_ outcome: ReloadOutcome) -> Reply {
        switch outcome {
        case .reloaded: return .ok("reloaded")
        case .failed(let why): return .err(.reloadFailed, why)
        }
    }

    /// `why`'s answer: the report as JSON, or what a play of the cue fails with.
    static func reply(_ outcome: WhyOutcome) -> Reply {
        switch outcome {
        case .report(let report): return .ok(report.json.encoded)
        case .failed(let failure): return reply(failure)
        }
    }

    /// A state change over the client's limit.
    static func changeRefused(perSecond n: Double) -> Reply {
        .err(.rateLimited, "more than \(Request.number(n)) state changes a second on this connection")
    }

    /// `mute app` / `unmute app` past the table's bound.
    static let tooManyAppMutes = Reply.err(.tooMany, "at most \(SavedState.maxAppMutes) apps can be muted or unmuted at run time; unmute one first")
    static let tooManyAppProfiles = Reply.err(.tooMany, "at most \(SavedState.maxAppProfiles) apps can have a profile set at run time; "
                                              + "set one back to default first")

    // MARK: - Connections at the cap

    /// The last line of a connection let go to make room.
    static func reply(_ letGo: ClientTable.LetGo) -> Reply {
        switch letGo {
        case .idle(let seconds, let capacity):
            return .err(.busy, "closing this connection, idle for \(Request.number(seconds)) s, to make room for a new one (\(capacity) at most)")
        case .share(let pid, let held, let capacity):
            let holder = pid.map { "process \($0)" } ?? "the bus"
            return .err(.busy, "closing this connection: \(holder) holds \(held) of the \(capacity) connections, the most; "
                        + "making room for another process")
        }
    }

    /// The one line of a newcomer refused at the cap.
    static func refusedAtCap(capacity: Int) -> Reply {
        .err(.busy, "too many connections (\(capacity)), none of them idle and none to take from a process holding more; try again later")
    }
}
