import CuedProtocol
import CuectlCommands
import Testing

@Suite struct CommandParserTests {
    func parse(_ args: [String], cwd: String = "/home/me") throws(UsageError) -> Invocation {
        try CommandParser.parse(args, cwd: cwd)
    }

    func line(_ args: [String], cwd: String = "/home/me") throws -> String {
        guard case .request(let r, _) = try parse(args, cwd: cwd).action else {
            Issue.record("not a request: \(args)"); return ""
        }
        // What cuectl sends is what cued's parser reads back.
        #expect(try RequestParser.parse(r.line) == r)
        return r.line
    }

    func usage(_ args: [String]) -> String? {
        do { _ = try parse(args); return nil } catch { return error.message }
    }

    @Test(arguments: [
        (["ping"], "ping"),
        (["play", "pop"], "play pop"),
        (["play", "pop", "--gain", "-6"], "play pop -6"),
        (["play", "--gain=-6.5", "pop", "--wait"], "play pop -6.5 wait"),
        (["play", "bell", "--wait"], "play bell wait"),
        (["play-file", "/x/a.ogg"], "play-file /x/a.ogg"),
        (["play-file", "sounds/my bell.ogg", "--wait", "--gain", "3"], "play-file /home/me/sounds/my%20bell.ogg 3 wait"),
        (["play-file", "100%.wav"], "play-file /home/me/100%25.wav"),
        (["stop"], "stop"),
        (["stop", "pop"], "stop pop"),
        (["stop", "all"], "stop all"),
        (["stop", "id", "7"], "stop id 7"),
        (["play", "ring", "--id", "--loop"], "play ring id loop detach"),
        (["play", "pop", "--rate", "1.5", "--pitch=-200"], "play pop rate=1.5 pitch=-200"),
        (["detent", "10"], "detent 10"),
        (["detent"], "detent"),
        (["cues", "--variants"], "cues variants"),
        (["play", "ring", "--loop=3", "--wait"], "play ring wait loop=3"),
        (["play", "--priority", "10", "ring", "--loop=2.5s", "--gain=-3"], "play ring -3 loop=2.5s detach priority=10"),
        (["play-file", "/x/a.ogg", "--priority=-5", "--id"], "play-file /x/a.ogg id priority=-5"),
        (["state", "loading"], "state loading"),
        (["state", "loading", "--quiet"], "state loading quiet"),
        (["state", "idle", "quiet"], "state idle quiet"),
        (["drag", "64.5"], "drag 64.5"),
        (["drop"], "drop"),
        (["threshold", "80"], "threshold 80"),
        (["session"], "session"),
        (["session", "mail"], "session mail"),
        (["mute"], "mute"),
        (["mute", "app", "mutt"], "mute app mutt"),
        (["unmute", "app", "mutt"], "unmute app mutt"),
        (["reload"], "reload"),
        (["cues"], "cues"),
        (["cues", "--theme"], "cues theme"),
        (["status"], "status"),
        (["--socket", "/s", "--app", "tool", "play", "pop"], "play pop"),
        (["profile"], "profile"),
        (["profile", "quiet"], "profile quiet"),
        (["profile", "app", "mutt"], "profile app mutt"),
        (["profile", "app", "mutt", "silent"], "profile app mutt silent"),
        (["profile", "app", "mutt", "default"], "profile app mutt default"),
        (["play", "alarm", "--important", "--wait"], "play alarm wait important"),
        (["play-file", "/x/a.ogg", "--important"], "play-file /x/a.ogg important"),
        (["play", "bell", "--theme=Yaru"], "play bell theme=Yaru"),
        (["play", "bell", "--theme=freedesktop:5.1", "--gain", "-3", "--id"], "play bell -3 id theme=freedesktop:5.1"),
        (["preload", "bell"], "preload bell"),
        (["preload", "--theme=ocean", "bell"], "preload bell theme=ocean"),
    ])
    func requestLines(args: [String], expected: String) throws {
        #expect(try line(args) == expected)
    }

    @Test func relativePathsAreMadeAbsoluteAgainstTheWorkingDirectory() throws {
        #expect(try line(["play-file", "a.wav"], cwd: "/") == "play-file /a.wav")
        #expect(try line(["play-file", "../b.wav"], cwd: "/w/x") == "play-file /w/x/../b.wav")
        #expect(try line(["play-file", "/abs.wav"], cwd: "/w") == "play-file /abs.wav")
        guard case .request(.playFile(let path, _), let render) = try parse(["play-file", "a b.wav"], cwd: "/w").action else {
            Issue.record("not play-file"); return
        }
        #expect(path == "/w/a b.wav")
        #expect(render == .play(what: "/w/a b.wav"))
    }

    @Test func globalOptions() throws {
        let inv = try parse(["--socket=/tmp/s", "--session", "mail", "--app=mutt", "state", "loading"])
        #expect(inv.socket == "/tmp/s")
        #expect(inv.session == "mail")
        #expect(inv.app == "mutt")
        #expect(try parse(["status", "--json"]).action == .request(.status, render: .statusJSON))
        #expect(try parse(["status"]).action == .request(.status, render: .statusTable))
        #expect(try parse(["why", "bell"]).action == .request(.why(cue: "bell"), render: .why))
        #expect(try parse(["session"]).action == .request(.session(nil), render: .payload))
        #expect(try parse(["--help"]).action == .help)
        #expect(try parse(["play", "pop", "-h"]).action == .help)
        #expect(try parse(["--version"]).action == .version)
        #expect(try parse(["shell-init", "fish"]).action == .shellInit(.fish))
        #expect(try parse(["config", "check"]).action == .configCheck(path: nil))
        #expect(try parse(["config", "check", "x.toml"]).action == .configCheck(path: "x.toml"))
    }

    @Test func canberraSwitchesOrAsks() throws {
        #expect(try parse(["canberra"]).action == .canberra(nil))
        #expect(try parse(["canberra", "on"]).action == .canberra(true))
        #expect(try parse(["canberra", "off"]).action == .canberra(false))
        #expect(usage(["canberra", "maybe"]) == "usage: cuectl canberra [on|off]")
        #expect(usage(["canberra", "on", "now"]) == "usage: cuectl canberra [on|off]")
        #expect(usage(["canberra", "--wait"]) == "--wait does not go with canberra")
        // `--theme=NAME` goes with play and preload; bare `--theme` is cues' switch.
        #expect(usage(["play-file", "/a.wav", "--theme=x"]) == "--theme= does not go with play-file")
        #expect(usage(["cues", "--theme=x"]) == "--theme= does not go with cues")
        #expect(usage(["preload", "bell", "--wait"]) == "--wait does not go with preload")
        #expect(usage(["play", "bell", "--theme=a/b"]) == Label.problem("a/b", what: "theme"))
    }

    @Test func runTakesEverythingAfterItsOptions() throws {
        #expect(try parse(["run", "--", "make", "-j2", "--app", "x"]).action == .run(["make", "-j2", "--app", "x"]))
        let inv = try parse(["run", "--session", "build", "--app", "make", "--", "make", "--", "-k"])
        #expect(inv.action == .run(["make", "--", "-k"]))
        #expect(inv.session == "build")
        #expect(inv.app == "make")
        // Without `--`, the first word that is not an option starts the command.
        #expect(try parse(["--app", "x", "run", "sh", "-c", "exit 3"]).action == .run(["sh", "-c", "exit 3"]))
    }

    /// Names are refused with the label rule's own words, never rewritten.
    @Test func invalidNamesAreRefusedNotRewritten() {
        #expect(usage(["--app", "My Tool", "play", "pop"]) == Label.problem("My Tool", what: "app name"))
        #expect(usage(["--session", "a b", "state", "idle"]) == Label.problem("a b", what: "session name"))
        #expect(usage(["mute", "app", "My Tool"]) == Label.problem("My Tool", what: "app name"))
        #expect(usage(["unmute", "app", "../x"]) == Label.problem("../x", what: "app name"))
        #expect(usage(["profile", "app", "My Tool", "quiet"]) == Label.problem("My Tool", what: "app name"))
        #expect(usage(["play", "../../etc/passwd"]) == Label.problem("../../etc/passwd", what: "cue name"))
        #expect(usage(["play", "pop", "--id", "--wait"])?.hasPrefix("ask for wait or id, not both") == true)
        #expect(usage(["play", "pop", "--loop=0"])?.hasPrefix("loop '0' is not a count") == true)
        #expect(usage(["play", "pop", "--priority", "1000"])?.hasPrefix("priority '1000'") == true)
        #expect(usage(["stop", "--loop", "pop"]) == "--loop does not go with stop")
        #expect(usage(["stop", "x", "7"]) == "usage: cuectl stop [CUE|all|id ID]")
        #expect(usage(["stop", "id", "x"])?.hasPrefix("voice id 'x'") == true)
        #expect(usage(["session", "a/b"]) == Label.problem("a/b", what: "session name"))
        #expect(usage(["stop", "a b"]) == Label.problem("a b", what: "cue name"))
        #expect(usage(["run", "--app", "x y", "--", "true"]) == Label.problem("x y", what: "app name"))
    }

    @Test func usageErrorsAreOneLine() {
        let cases: [([String], String)] = [
            ([], "no command given"),
            (["--app", "x"], "no command given, only options"),
            (["dance"], "unknown command 'dance'"),
            (["play"], "usage: cuectl play CUE [--gain DB] [--wait] [--id] [--loop[=N|=SECONDSs]] [--priority P] [--important] [--rate R] [--pitch CENTS] [--theme=NAME[:PROFILE]]"),
            (["play", "a", "b"], "usage: cuectl play CUE [--gain DB] [--wait] [--id] [--loop[=N|=SECONDSs]] [--priority P] [--important] [--rate R] [--pitch CENTS] [--theme=NAME[:PROFILE]]"),
            (["play", "pop", "--gain"], "--gain needs a value"),
            (["play", "pop", "--gain", "loud"], "gain 'loud' is not a number of dB"),
            (["play", "pop", "--gain", "20"], "gain 20 dB is outside -60...12"),
            (["play", "pop", "--json"], "--json does not go with play"),
            (["status", "--wait"], "--wait does not go with status"),
            (["ping", "--frobnicate"], "unknown option '--frobnicate'"),
            (["drag", "far"], "pull distance 'far' is not a number of points"),
            (["threshold", "0"], "threshold 0 is outside 1...10000"),
            (["state", "sleeping"], "unknown state 'sleeping' (pull, release, loading or idle)"),
            (["mute", "everything"], "usage: cuectl mute [app NAME]"),
            (["run"], "run needs a command: cuectl run -- COMMAND [ARGS…]"),
            (["run", "--"], "run needs a command: cuectl run -- COMMAND [ARGS…]"),
            (["ping", "--", "x"], "'--' goes with run: cuectl run -- COMMAND [ARGS…]"),
            (["shell-init", "tcsh"], "unknown shell 'tcsh' (bash, zsh or fish)"),
            (["config", "edit"], "usage: cuectl config check [PATH]"),
            (["profile", "loud"], "unknown profile 'loud' (full, quiet or silent)"),
            (["profile", "quiet", "now"], "usage: cuectl profile [full|quiet|silent] | profile app NAME [full|quiet|silent|default]"),
            (["profile", "app"], "usage: cuectl profile [full|quiet|silent] | profile app NAME [full|quiet|silent|default]"),
            (["profile", "app", "mutt", "loud"], "unknown profile 'loud' (full, quiet, silent or default)"),
            (["profile", "quiet", "--important"], "--important does not go with profile"),
            (["stop", "--important"], "--important does not go with stop"),
        ]
        for (args, message) in cases {
            let got = usage(args)
            #expect(got == message, "cuectl \(args.joined(separator: " "))")
            #expect(got?.contains("\n") != true)
        }
    }

    @Test func aPathTooLongForOneLineIsAUsageError() {
        let long = "/" + String(repeating: "a", count: 600)
        #expect(usage(["play-file", long])?.hasPrefix("the request is ") == true)
    }

    @Test func negativeNumbersAreArgumentsNotOptions() {
        #expect(usage(["drag", "-5"]) == "pull distance -5 is outside 0...100000")
    }

    @Test func derivedAppNamesAreSanitized() {
        #expect(CommandParser.derivedAppName("My Tool") == "My-Tool")
        #expect(CommandParser.derivedAppName("/usr/bin/make") == "make")
        #expect(CommandParser.derivedAppName("kworker/0:1") == "0-1")
        #expect(CommandParser.derivedAppName("..") == nil)
        #expect(CommandParser.derivedAppName("") == nil)
    }
}
