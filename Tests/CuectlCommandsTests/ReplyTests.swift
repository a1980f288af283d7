import CuedProtocol
@testable import CuectlCommands
import Testing

@Suite struct ReplyTests {
    let play = Invocation.Render.play(what: "pop")

    @Test func playReplies() {
        #expect(ReplyInterpreter.outcome("ok", render: play) == Outcome(exitCode: 0))
        #expect(ReplyInterpreter.outcome("ok muted", render: play) == Outcome(stdout: "muted: cue not played", exitCode: 0))
        #expect(ReplyInterpreter.outcome("ok silent", render: play) == Outcome(stdout: "silent: cue not played (the profile is silent)", exitCode: 0))
        #expect(ReplyInterpreter.outcome("ok cooldown", render: play).stdout?.hasPrefix("cooldown: ") == true)
        #expect(ReplyInterpreter.outcome("ok disabled", render: .play(what: "bell"))
                == Outcome(stdout: "disabled: the sound theme has no sound for bell", exitCode: 0))
        #expect(ReplyInterpreter.outcome("ok stopped", render: play) == Outcome(stdout: "stopped before the end", exitCode: 0))
        // The machine word after the code is for programs; cuectl prints the prose.
        #expect(ReplyInterpreter.outcome("err not-played cut the device failed", render: play)
                == Outcome(stderr: "cuectl: not-played: the device failed", exitCode: 1))
        #expect(ReplyInterpreter.outcome("err bad-file unreadable /x.ogg: not a sound file", render: play)
                == Outcome(stderr: "cuectl: bad-file: /x.ogg: not a sound file", exitCode: 1))
        // A reply without a word (an older cued) reads as before.
        #expect(ReplyInterpreter.outcome("err bad-file /x.ogg: not a sound file", render: play)
                == Outcome(stderr: "cuectl: bad-file: /x.ogg: not a sound file", exitCode: 1))
        #expect(ReplyInterpreter.outcome("err unknown-cue no cue or theme sound 'x'", render: play).exitCode == 1)
    }

    @Test func payloadRepliesPrintThePayload() {
        #expect(ReplyInterpreter.outcome("ok 2", render: .payload) == Outcome(stdout: "2", exitCode: 0))
        #expect(ReplyInterpreter.outcome("ok bell complete", render: .payload) == Outcome(stdout: "bell complete", exitCode: 0))
        #expect(ReplyInterpreter.outcome("ok", render: .payload) == Outcome(exitCode: 0))
        #expect(ReplyInterpreter.outcome("what", render: .payload) == Outcome(stderr: "cuectl: unexpected reply: what", exitCode: 1))
        #expect(ReplyInterpreter.outcome("err internal", render: .payload) == Outcome(stderr: "cuectl: internal", exitCode: 1))
    }

    @Test func statusRendersEveryNewField() {
        var s = Status()
        s.version = "9.9"
        s.sink.spec = "alsa:default"
        s.sink.state = "running"
        s.sink.kind = "plugin"
        s.sink.rate = 48_000
        s.sink.channels = 2
        s.sink.format = "S16_LE"
        s.sink.delayUs = 4321
        s.sink.marginFrames = 256; s.sink.marginGrowths = 1; s.sink.marginMisses = 1
        s.stalls = 3
        s.devicesLost = 8
        s.rewinds = 9
        s.missedCycles = 11
        s.audioThread = "realtime"
        s.evictedIdle = 5
        s.rateLimited = 6
        s.refusedBusy = 7
        s.maxClients = 39
        s.evictedShare = 2
        s.closedUnread = 1
        s.clientProcesses = 3
        s.busiestPid = 4242
        s.busiestClients = 12
        s.appsUnlisted = 13
        s.appsUnlistedPlayed = 14
        s.apps = ["mutt": Status.App(played: 4, dropped: 2, muted: true), "backup": Status.App(profile: .silent)]
        s.profile = .quiet
        s.cues = ["pop": Status.Cue(frames: 100, played: 1)]
        s.theme.name = "ocean"
        s.theme.chain = ["ocean", "freedesktop"]
        s.theme.cached = 2
        s.theme.cacheBytes = 3 * 1_048_576
        s.theme.cacheLimitBytes = 16 * 1_048_576
        s.latencyUs.p50 = 120
        s.stateSaved = false
        s.stateError = "No space left on device"
        let out = ReplyInterpreter.outcome("ok " + s.json.encoded, render: .statusTable)
        let table = out.stdout ?? ""
        for piece in ["9.9", "alsa:default: running (plugin)", "delay 4321 µs", "3 stalls", "8 lost", "9 rewinds", "11 missed cycles", "5 idle evicted",
                      "6 rate-limited", "7 refused busy", "mutt: played 4, dropped 2, muted", "pop: 100 frames, played 1",
                      "ocean (ocean → freedesktop), 2 cached, 3.0 of 16.0 MiB", "p50 120 µs", Status.Latency.measures,
                      "not saved (retrying): No space left on device", "backup: played 0, profile silent", "(cap 39)",
                      "2 taken for another process", "1 closed unread", "3 processes, pid 4242 holds 12", "13 more not listed; 14 played",
                      "256 frames (5.3 ms), grown 1× after 1 miss, shrunk 0×"] {
            #expect(table.contains(piece), "missing '\(piece)' in:\n\(table)")
        }
        #expect(table.split(separator: "\n").contains { $0.hasPrefix("profile ") && $0.hasSuffix(" quiet") }, "no profile row in:\n\(table)")
        #expect(table.split(separator: "\n").contains { $0.hasPrefix("audio thread ") && $0.hasSuffix(" realtime") },
                "no audio thread row in:\n\(table)")
        #expect(ReplyInterpreter.outcome("ok " + s.json.encoded, render: .statusJSON).stdout == s.json.encoded)
    }
}

/// A reload waits minutes, not seconds (a 28 s reload was reported as "did not
/// reply in time", exit 69, though it succeeded); if even that passes, cuectl
/// says the reload is still running, with its own exit status.
@Suite struct PlayWarningTests {
    func status(_ state: String, spec: String = "pipewire", error: String? = nil, why: String? = nil) -> Status {
        var s = Status()
        s.sink.state = state
        s.sink.spec = spec
        s.sink.error = error
        s.sink.why = why
        return s
    }

    @Test func aFailedOutputOrAutoPlayingToNothingIsSaid() {
        #expect(PlayWarning.text(status("failed", error: "cannot connect to PipeWire: Connection refused"))
                == "cuectl: warning: cued's output pipewire has failed (cannot connect to PipeWire: Connection refused): "
                + "the cue sounds only if it reopens in time; cuectl doctor says how to fix it")
        #expect(PlayWarning.text(status("idle", spec: "null", why: "auto: no sound server answers"))
                == "cuectl: warning: not heard: auto: no sound server answers")
        for fine in [status("running"), status("closed"), status("idle"), status("idle", spec: "null")] {
            #expect(PlayWarning.text(fine) == nil, "\(fine.sink)")
        }
    }

    @Test func aPlayWaitedForOrNot() throws {
        #expect(try RequestParser.parse("play pop").playsACue)
        #expect(try RequestParser.parse("play-file /x.wav").playsACue)
        #expect(try RequestParser.parse("play pop wait").playsACue)
        #expect(!(try RequestParser.parse("ping").playsACue))
        #expect(!(try RequestParser.parse("stop").playsACue))
    }
}

@Suite struct ReplyTimeoutTests {
    @Test func reloadWaitsLongAndSaysItIsStillRunning() {
        #expect(ReplyTimeout.milliseconds(for: .reload) == 300_000)
        #expect(ReplyTimeout.milliseconds(for: .ping) == 5_000)
        #expect(ReplyTimeout.milliseconds(for: .play(cue: "pop", gainDB: 0, wait: true)) == 30_000)
        let late = ReplyTimeout.outcome(for: .reload)
        #expect(late.message.hasPrefix("cued is still reloading after 300 s; the reload goes on"))
        #expect(late.exitCode == ExitCode.stillRunning && ExitCode.stillRunning == 75)
        #expect(ReplyTimeout.outcome(for: .status) == ("cued did not reply in time (5 s)", ExitCode.noDaemon))
    }
}

/// A volume as the table shows it is what is heard: the master volume times the loudest channel's
/// (WirePlumber 0.5 keeps `"volume":0.2` beside channel volumes of 1).
@Suite struct VolumeLineTests {
    @Test func theMasterVolumeCountsBesideChannelVolumes() {
        var v = Status.StreamVolume()
        (v.volume, v.mute, v.channelVolumes) = (0.2, true, [1, 1])
        #expect(StatusTable.volumeLine(v) == "58% (0.2 linear), muted")
        (v.volume, v.channelVolumes) = (1, [0.125, 0.125])
        #expect(StatusTable.volumeLine(v)?.hasPrefix("50% (0.125 linear)") == true)
        (v.volume, v.channelVolumes, v.mute) = (nil, [], nil)
        #expect(StatusTable.volumeLine(v) == nil)
    }
}
