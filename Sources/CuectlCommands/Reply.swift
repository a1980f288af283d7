import CuedProtocol

/// What cuectl prints and exits with for a reply.
public struct Outcome: Equatable, Sendable {
    public var stdout: String?
    public var stderr: String?
    public var exitCode: Int32

    public init(stdout: String? = nil, stderr: String? = nil, exitCode: Int32) {
        self.stdout = stdout; self.stderr = stderr; self.exitCode = exitCode
    }
}

public enum ExitCode {
    public static let ok: Int32 = 0
    /// An `err` reply.
    public static let errorReply: Int32 = 1
    public static let usage: Int32 = 64  // EX_USAGE
    public static let noDaemon: Int32 = 69  // EX_UNAVAILABLE
    /// `reload` still running when cuectl stopped waiting.
    public static let stillRunning: Int32 = 75  // EX_TEMPFAIL
    public static let config: Int32 = 78  // EX_CONFIG
}

/// How long cuectl waits for a reply, by request.
public enum ReplyTimeout {
    public static let defaultMilliseconds = 5_000
    /// A waited cue replies once it has sounded: up to 10 s of sound, plus the
    /// decoding of a theme sound or file on first use.
    public static let waitedMilliseconds = 30_000
    /// A reload re-reads the config, every cue file and the theme, one at a
    /// time: hostile or slow files made one take 28 s.
    public static let reloadMilliseconds = 300_000

    public static func milliseconds(for request: Request) -> Int {
        switch request {
        case .play(_, let o) where o.wait, .playFile(_, let o) where o.wait:
            switch o.loop {
            case .once: return waitedMilliseconds
            case .times(let n): return waitedMilliseconds * min(max(n, 1), 1_000)
            case .seconds(let t): return waitedMilliseconds + Int(min(t, 3_600) * 1000)
            case .forever: return Int(Int32.max)  // until something stops it
            }
        case .reload: return reloadMilliseconds
        case .preload: return waitedMilliseconds  // a decode, up to its 5 s deadline, behind others of the same app
        default: return defaultMilliseconds
        }
    }

    /// What cuectl says, and its exit status, when no reply came in time.
    public static func outcome(for request: Request) -> (message: String, exitCode: Int32) {
        let seconds = milliseconds(for: request) / 1000
        if case .reload = request {
            return ("cued is still reloading after \(seconds) s; the reload goes on (the old configuration serves until it is done, and cued's log says how it ended)",
                    ExitCode.stillRunning)
        }
        return ("cued did not reply in time (\(seconds) s)", ExitCode.noDaemon)
    }
}

public enum ReplyInterpreter {
    /// `reply` is the line (without LF) answering a request rendered as `render`.
    public static func outcome(_ reply: String, render: Invocation.Render) -> Outcome {
        if let e = ErrorReply(line: reply) {
            // The machine word (`err bad-file not-found …`) is for programs: a person reads the prose after it.
            return Outcome(stderr: e.message.isEmpty ? "cuectl: \(e.code)" : "cuectl: \(e.code): \(e.message)", exitCode: ExitCode.errorReply)
        }
        guard reply == "ok" || reply.hasPrefix("ok ") else {
            return Outcome(stderr: "cuectl: unexpected reply: \(reply)", exitCode: ExitCode.errorReply)
        }
        let payload = String(reply.dropFirst(3))
        switch render {
        case .payload:
            return Outcome(stdout: payload.isEmpty ? nil : payload, exitCode: ExitCode.ok)
        case .statusJSON:
            return Outcome(stdout: payload, exitCode: ExitCode.ok)
        case .statusTable:
            guard let status = Status.parse(payload) else { return Outcome(stdout: payload, exitCode: ExitCode.ok) }
            return Outcome(stdout: StatusTable.render(status), exitCode: ExitCode.ok)
        case .why:
            guard let report = WhyReport.parse(payload) else { return Outcome(stdout: payload, exitCode: ExitCode.ok) }
            return WhyRender.outcome(report, canberra: nil)
        case .play(let what):
            switch payload {
            case "": return Outcome(exitCode: ExitCode.ok)
            case "muted": return Outcome(stdout: "muted: cue not played", exitCode: ExitCode.ok)
            case "silent": return Outcome(stdout: "silent: cue not played (the profile is silent)", exitCode: ExitCode.ok)
            case "disabled": return Outcome(stdout: "disabled: the sound theme has no sound for \(what)", exitCode: ExitCode.ok)
            case "cooldown": return Outcome(stdout: "cooldown: \(what) played a moment ago; not played again (its cooldown_ms)", exitCode: ExitCode.ok)
            case "stopped": return Outcome(stdout: "stopped before the end", exitCode: ExitCode.ok)
            default: return Outcome(stdout: payload, exitCode: ExitCode.ok)
            }
        }
    }
}

/// What cuectl says when no daemon answers: how to start one that would. The
/// systemd route only where cued's units are installed (`make install`, the
/// package); else how to run cued in a terminal.
public enum NoDaemonHint {
    /// Where systemd looks for user units (systemd.unit(5)), the ones a user or a
    /// package puts them in.
    public static func unitDirectories(environment: [String: String]) -> [String] {
        let home = environment["HOME"] ?? ""
        func xdg(_ key: String, _ fallback: String) -> String {
            if let v = environment[key], !v.isEmpty { return v }
            return home + "/" + fallback
        }
        return [xdg("XDG_CONFIG_HOME", ".config") + "/systemd/user", "/etc/systemd/user",
                xdg("XDG_DATA_HOME", ".local/share") + "/systemd/user",
                "/usr/local/share/systemd/user", "/usr/share/systemd/user",
                "/usr/local/lib/systemd/user", "/usr/lib/systemd/user"]
    }

    public static func text(unitsInstalled: Bool) -> String {
        (unitsInstalled
            ? "  start it with:  systemctl --user start cued.socket   (or run `cued` in a terminal)"
            : "  start it in a terminal:  cued   (from a checkout: make run; its systemd user units are not installed: make install or the cued package puts them in place)")
            + "\n  without a sound card: cued --sink null, or cued --sink wav:FILE"
    }
}

/// What `cuectl play` / `play-file` adds after cued answered `ok`: without `--wait` cued
/// answers as soon as the cue is queued, before its output plays it, and with `--wait`
/// a cue `auto` played to nothing (no output answered) ends `ok` too, so a cue that
/// cannot be heard would pass in silence. cuectl asks for `status wait` after the reply
/// (the status once cued's audio thread has taken the cue: its output picked and opened,
/// or failed; the cue is already on its way, no delay to the sound) and warns on stderr
/// when that output failed, or plays to nothing because no output answered (`auto`);
/// the exit status stays 0 (cued took the cue, and a failed device is retried: the cue
/// still sounds if it reopens in time). A named `null` sink is a choice, not a problem.
public enum PlayWarning {
    public static func text(_ status: Status) -> String? {
        let s = status.sink
        if s.state == "failed" {
            return "cuectl: warning: cued's output \(s.spec) has failed" + (s.error.map { " (\($0))" } ?? "")
                + ": the cue sounds only if it reopens in time; cuectl doctor says how to fix it"
        }
        if s.spec == "null", let why = s.why {
            return "cuectl: warning: not heard: \(why)"
        }
        return nil
    }
}

/// A `stop` of this app's voices that stopped none while other apps' voices play: an app is
/// the parent program's name unless given, so a loop a script started is not the terminal's.
public enum StopHint {
    public static func text(reply: String, request: Request, app: String?, voicesActive: Int) -> String? {
        guard reply == "ok 0", voicesActive > 0 else { return nil }
        switch request {
        case .stop(.mine), .stop(.cue): break
        default: return nil
        }
        let voices = voicesActive == 1 ? "1 voice plays" : "\(voicesActive) voices play"
        return "cuectl: \(voices), none started by \(app.map { "app '\($0)'" } ?? "this connection"): "
            + "cuectl status lists the apps; cuectl --app NAME stop, stop ID or stop all stop them"
    }
}

extension Request {
    /// A play or play-file: whose `ok` is followed by `PlayWarning`'s check.
    public var playsACue: Bool {
        switch self {
        case .play, .playFile: return true
        default: return false
        }
    }
}
