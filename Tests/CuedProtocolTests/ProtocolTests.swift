import CuedProtocol
import Testing

@Suite struct RequestParserTests {
    @Test(arguments: [
        ("ping", Request.ping),
        ("play pop", .play(cue: "pop", gainDB: 0, wait: false)),
        ("play pop -6", .play(cue: "pop", gainDB: -6, wait: false)),
        ("play pop 3.5", .play(cue: "pop", gainDB: 3.5, wait: false)),
        ("state pull", .state(.pull, quiet: false)),
        ("state release", .state(.release, quiet: false)),
        ("state loading", .state(.loading, quiet: false)),
        ("state idle", .state(.idle, quiet: false)),
        ("mute", .mute),
        ("unmute", .unmute),
        ("cues", .cues(theme: false)),
        ("cues theme", .cues(theme: true)),
        ("play pop wait", .play(cue: "pop", gainDB: 0, wait: true)),
        ("play pop -6 wait", .play(cue: "pop", gainDB: -6, wait: true)),
        ("play bell", .play(cue: "bell", gainDB: 0, wait: false)),
        ("play-file /tmp/a.ogg", .playFile(path: "/tmp/a.ogg", gainDB: 0, wait: false)),
        ("play-file /tmp/my%20sound%25.ogg -3 wait", .playFile(path: "/tmp/my sound%.ogg", gainDB: -3, wait: true)),
        ("play-file /tmp/é.wav", .playFile(path: "/tmp/é.wav", gainDB: 0, wait: false)),
        ("stop", .stop(.mine)),
        ("stop all", .stop(.all)),
        ("stop pop", .stop(.cue("pop"))),
        ("status", .status),
        ("status wait", .statusWait),
        ("  play   pop  ", .play(cue: "pop", gainDB: 0, wait: false)),
        ("ping\r", .ping),
        ("state loading quiet", .state(.loading, quiet: true)),
        ("session", .session(nil)),
        ("session feed-reader", .session("feed-reader")),
        ("drag 0", .drag(0)),
        ("drag 64.5", .drag(64.5)),
        ("drop", .drop),
        ("threshold 80", .threshold(80)),
        ("play pop id", .play(cue: "pop", options: PlayOptions(wantsID: true))),
        ("play ring -3 id loop priority=10", .play(cue: "ring", options: PlayOptions(gainDB: -3, wantsID: true, loop: .forever, priority: 10))),
        ("play ring loop=3 wait", .play(cue: "ring", options: PlayOptions(wait: true, loop: .times(3)))),
        ("play ring loop detach id", .play(cue: "ring", options: PlayOptions(wantsID: true, loop: .forever, detach: true))),
        ("play ring priority=-100 loop=2.5s", .play(cue: "ring", options: PlayOptions(loop: .seconds(2.5), priority: -100))),
        ("play-file /tmp/a.ogg id loop=10s", .playFile(path: "/tmp/a.ogg", options: PlayOptions(wantsID: true, loop: .seconds(10)))),
        ("stop id 42", .stop(.id(42))),
        ("stop id 9007199254740993", .stop(.id(9_007_199_254_740_993))),  // past 2^53: a number still (no voice has it: ok 0)
        ("stop id 18446744073709551615", .stop(.id(UInt64.max))),
        ("stop id", .stop(.cue("id"))),
        ("events on", .events(true)),
        ("events off", .events(false)),
        ("profile", .profile(nil)),
        ("profile quiet", .profile(.quiet)),
        ("profile full", .profile(.full)),
        ("profile silent", .profile(.silent)),
        ("profile app mutt", .profileApp("mutt", nil)),
        ("profile app mutt silent", .profileApp("mutt", .profile(.silent))),
        ("profile app mutt default", .profileApp("mutt", .default)),
        ("profile app app quiet", .profileApp("app", .profile(.quiet))),
        ("play alarm important", .play(cue: "alarm", options: PlayOptions(important: true))),
        ("play alarm -3 important id loop=2 priority=9", .play(cue: "alarm", options: PlayOptions(gainDB: -3, wantsID: true, loop: .times(2), priority: 9, important: true))),
        ("play-file /tmp/a.ogg important wait", .playFile(path: "/tmp/a.ogg", options: PlayOptions(wait: true, important: true))),
        ("play bell theme=Yaru", .play(cue: "bell", options: PlayOptions(theme: ThemeChoice(name: "Yaru")))),
        ("play bell -6 id theme=freedesktop:5.1", .play(cue: "bell", options: PlayOptions(gainDB: -6, wantsID: true, theme: ThemeChoice(name: "freedesktop", profile: "5.1")))),
        ("preload bell", .preload(cue: "bell", theme: nil)),
        ("preload bell theme=ocean:stereo", .preload(cue: "bell", theme: ThemeChoice(name: "ocean", profile: "stereo"))),
        ("app mutt", .app("mutt")),
        ("app org.gnome.Shell via=libcanberra", .app("org.gnome.Shell", via: "libcanberra")),
    ])
    func parsesEveryVerb(line: String, expected: Request) throws {
        #expect(try RequestParser.parse(line) == expected)
    }

    @Test(arguments: [
        ("", ErrorCode.unknownVerb),
        ("   ", .unknownVerb),
        ("\r", .unknownVerb),
        ("PING", .unknownVerb),
        ("dance", .unknownVerb),
        ("play", .badArgument),
        ("status now", .badArgument),
        ("status wait wait", .badArgument),
        ("play pop 1 2", .badArgument),
        ("play pop wait id", .badArgument),
        ("play pop wait wait", .badArgument),
        ("play pop loop loop=2", .badArgument),
        ("play pop wait -6", .badArgument),
        ("play pop loop=0", .badArgument),
        ("play pop loop=1001", .badArgument),
        ("play pop loop=0s", .badArgument),
        ("play pop loop=3601s", .badArgument),
        ("play pop loop=-1", .badArgument),
        ("play pop loop=", .badArgument),
        ("play pop loop=1e3", .badArgument),
        ("play pop priority=101", .badArgument),
        ("play pop priority=", .badArgument),
        ("play pop priority", .badArgument),
        ("play pop priority=1.5", .badArgument),
        ("play pop wait=1", .badArgument),
        ("play pop id=3", .badArgument),
        ("play pop colour=red", .badArgument),
        ("stop id 0", .badArgument),
        ("stop id -1", .badArgument),
        ("stop id x", .badArgument),
        ("stop id 99999999999999999999", .badArgument),
        ("stop pop now", .badArgument),
        ("events", .badArgument),
        ("events maybe", .badArgument),
        ("play pop loud", .badArgument),
        ("play pop nan", .badArgument),
        ("play pop inf", .badArgument),
        ("play pop 13", .badArgument),
        ("play pop -61", .badArgument),
        ("play ../etc/passwd", .badArgument),
        ("play /tmp/x.wav", .badArgument),
        ("play ..", .badArgument),
        ("state", .badArgument),
        ("state sideways", .badArgument),
        ("state idle now", .badArgument),
        ("ping extra", .badArgument),
        ("mute everything", .badArgument),
        ("state idle loud", .badArgument),
        ("drag", .badArgument),
        ("drag -1", .badArgument),
        ("drag far", .badArgument),
        ("drag nan", .badArgument),
        ("drop now", .badArgument),
        ("threshold 0", .badArgument),
        ("drag 0x10", .badArgument),
        ("drag 1e3", .badArgument),
        ("drag 1.2.3", .badArgument),
        ("drag 5-", .badArgument),
        ("play pop 0x2", .badArgument),
        ("play pop wait wait", .badArgument),
        ("play pop wait -3", .badArgument),
        ("play pop -3 -3", .badArgument),
        ("cues all", .badArgument),
        ("stop a/b", .badArgument),
        ("stop all now", .badArgument),
        ("play-file", .badArgument),
        ("play-file relative.wav", .badArgument),
        ("play-file /tmp/x%2", .badArgument),
        ("play-file /tmp/x%zz", .badArgument),
        ("play-file /tmp/x%00", .badArgument),
        ("play-file /tmp/%ff", .badArgument),
        ("threshold -5", .badArgument),
        ("session a/b", .badArgument),
        ("session a b", .badArgument),
        ("profile loud", .badArgument),
        ("profile Quiet", .badArgument),
        ("profile quiet now", .badArgument),
        ("profile app", .badArgument),
        ("profile app a/b", .badArgument),
        ("profile app mutt loud", .badArgument),
        ("profile app mutt quiet now", .badArgument),
        ("profile default", .badArgument),
        ("play pop important=1", .badArgument),
        ("play pop important important", .badArgument),
        ("play pop important -3", .badArgument),
        ("play bell theme=", .badArgument),
        ("play bell theme=a/b", .badArgument),
        ("play bell theme=a:", .badArgument),
        ("play bell theme=a:b:c", .badArgument),
        ("play bell theme=a theme=b", .badArgument),
        ("play bell theme", .badArgument),
        ("play-file /tmp/a.wav theme=ocean", .badArgument),
        ("preload", .badArgument),
        ("preload a/b", .badArgument),
        ("preload bell ocean", .badArgument),
        ("preload bell theme=ocean id", .badArgument),
        ("app a via", .badArgument),
        ("app a via=", .badArgument),
        ("app a via=a/b", .badArgument),
        ("app a b", .badArgument),
    ])
    func rejectsBadRequests(line: String, code: ErrorCode) {
        #expect(throws: ProtocolError.self) { try RequestParser.parse(line) }
        do { _ = try RequestParser.parse(line) } catch { #expect(error.code == code, "\(line.debugDescription)") }
    }

    @Test func lineAtTheLimitIsAcceptedOverIsNot() throws {
        // "play " + 507 bytes of name = 512 bytes: parsed (the name is then too long to be a cue).
        let atLimit = Array(("play " + String(repeating: "a", count: 507)).utf8)
        #expect(atLimit.count == 512)
        do { _ = try RequestParser.parse(atLimit) } catch { #expect(error.code == .badArgument) }
        let ping512 = Array(("ping" + String(repeating: " ", count: 508)).utf8)
        #expect(try RequestParser.parse(ping512) == .ping)
        // 512 bytes plus a CR is still within the limit.
        #expect(try RequestParser.parse(ping512 + [13]) == .ping)
        let over = ping512 + [0x20]
        do { _ = try RequestParser.parse(over); Issue.record("513 bytes accepted") } catch { #expect(error.code == .lineTooLong) }
    }

    @Test func invalidUTF8IsABadArgument() {
        for bytes: [UInt8] in [[0x70, 0x6C, 0x61, 0x79, 0x20, 0xFF], [0xC3], [0xED, 0xA0, 0x80], [0x00, 0xFE]] {
            do { _ = try RequestParser.parse(bytes); Issue.record("accepted \(bytes)") } catch { #expect(error.code == .badArgument) }
        }
    }

    @Test func nulBytesAreNotAVerb() {
        do { _ = try RequestParser.parse([0x70, 0x69, 0x6E, 0x67, 0x00]); Issue.record("accepted") } catch {
            #expect(error.code == .unknownVerb)
        }
    }

    @Test func repliesEncode() {
        #expect(Reply.ok(nil).line == "ok")
        #expect(Reply.ok("pong").line == "ok pong")
        #expect(Reply.err(.unknownCue, "no cue\nnamed x").line == "err unknown-cue no cue\\x0anamed x")
        #expect(Reply.err(.unknownVerb, "'a\u{0}b\u{1b}[31m' is not a verb").line == "err unknown-verb 'a\\x00b\\x1b[31m' is not a verb")
        #expect(Reply.err(.lineTooLong, "m").line == "err line-too-long m")
        #expect(Reply.err(.internal, "m").line == "err internal m")
    }

    @Test func requestsRoundTrip() throws {
        let all: [Request] = [.ping, .play(cue: "pop", gainDB: 0, wait: false), .play(cue: "x", gainDB: -3.5, wait: true), .state(.loading, quiet: false),
                              .state(.idle, quiet: true), .session(nil), .session("s"), .drag(12.25), .drop, .threshold(65),
                              .mute, .unmute, .cues(theme: false), .cues(theme: true), .status,
                              .playFile(path: "/a b/%c\t.wav", gainDB: -1.5, wait: true), .stop(.mine), .stop(.all), .stop(.cue("pop")),
                              .play(cue: "r", options: PlayOptions(gainDB: 2, wantsID: true, loop: .seconds(1.5), priority: -7)),
                              .play(cue: "r", options: PlayOptions(wait: true, loop: .times(7))),
                              .playFile(path: "/x", options: PlayOptions(loop: .forever, priority: 100)),
                              .stop(.id(9)), .stop(.cue("id")), .events(true), .events(false),
                              .profile(nil), .profile(.silent), .profileApp("a", nil), .profileApp("a", .profile(.full)), .profileApp("a", .default),
                              .play(cue: "r", options: PlayOptions(gainDB: -1, wait: true, loop: .forever, priority: 3, important: true)),
                              .play(cue: "bell", options: PlayOptions(wantsID: true, theme: ThemeChoice(name: "t", profile: "5.1"))),
                              .preload(cue: "bell", theme: nil), .preload(cue: "bell", theme: ThemeChoice(name: "t")),
                              .app("a"), .app("a", via: "libcanberra")]
        for r in all { #expect(try RequestParser.parse(r.line) == r) }
    }

    @Test func labels() {
        #expect(Label.isValid("psst1"))
        #expect(Label.isValid("mail-sent_2.v2"))
        #expect(Label.isValid(String(repeating: "a", count: 64)))
        #expect(!Label.isValid(""))
        #expect(!Label.isValid("a/b"))
        #expect(!Label.isValid("My Tool"))
        #expect(!Label.isValid(".."))
        #expect(!Label.isValid(String(repeating: "a", count: 65)))
        #expect(!Label.isValid("é"))
        #expect(Label.problem("My Tool", what: "app name").hasPrefix("app name 'My Tool' is not a name"))
    }

    @Test func filePathsEscapeOnlyWhatMust() {
        #expect(FilePath.encode("/a b/c%d\te.wav") == "/a%20b/c%25d%09e.wav")
        #expect(FilePath.encode("/tmp/é.ogg") == "/tmp/é.ogg")
        #expect(FilePath.decode("/a%20b/c%25d%09e.wav") == "/a b/c%d\te.wav")
    }

    @Test func profileMessagesSayTheChoices() {
        do { _ = try RequestParser.parse("profile loud"); Issue.record("accepted") } catch {
            #expect(error.message == "unknown profile 'loud' (full, quiet or silent)")
        }
        do { _ = try RequestParser.parse("profile app mutt loud"); Issue.record("accepted") } catch {
            #expect(error.message == "unknown profile 'loud' (full, quiet, silent or default)")
        }
        do { _ = try RequestParser.parse("profile app"); Issue.record("accepted") } catch {
            #expect(error.message == "usage: profile [full|quiet|silent] | profile app NAME [full|quiet|silent|default]")
        }
    }

    /// silent < quiet < full: the stricter of two is their min.
    @Test func profilesAreOrderedByHowMuchTheyLetSound() {
        #expect(Profile.silent < .quiet && Profile.quiet < .full)
        #expect(min(Profile.full, .quiet) == .quiet)
        #expect(min(Profile.silent, .full) == .silent)
        #expect(Profile.allCases.sorted() == [.silent, .quiet, .full])
    }

    @Test func decimalsAreStrict() {
        #expect(RequestParser.decimal("12") == 12)
        #expect(RequestParser.decimal("-3.5") == -3.5)
        #expect(RequestParser.decimal("+.5") == 0.5)
        for bad in ["0x10", "1e3", "inf", "nan", "", "-", ".", "--1", "1,5"] {
            #expect(RequestParser.decimal(Substring(bad)) == nil, "\(bad)")
        }
    }
}

@Suite struct JSONTests {
    @Test func encodesAndParsesBack() throws {
        let v = JSON.object([("a", .number(1)), ("b", .string("q\"\\\n\u{1}é")), ("c", .array([.bool(true), .null, .number(2.5)])),
                             ("d", .object([]))])
        #expect(v.encoded == #"{"a":1,"b":"q\"\\\n\u0001é","c":[true,null,2.5],"d":{}}"#)
        #expect(try JSON.parse(v.encoded) == v)
        #expect(try JSON.parse(" [ 1 , -2e3 ] ") == .array([.number(1), .number(-2000)]))
    }

    /// Every control character (C0, DEL, C1) is a `\u` escape: the reply line
    /// keeps the JSON as it is (a raw DEL became `\x7F` there, an invalid escape).
    @Test func escapesEveryControlCharacter() throws {
        for v in Array(0..<0x20) + Array(0x7F...0x9F) + [0x2028, 0x2029] {
            let s = String(Unicode.Scalar(UInt32(v))!)
            let text = JSON.string("a" + s + "b").encoded
            let hex = String(v, radix: 16)
            let escape = [0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"][v] ?? "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            #expect(text == "\"a" + escape + "b\"")
            #expect(Reply.ok(text).line == "ok " + text)
            #expect(try JSON.parse(text) == .string("a" + s + "b"))
        }
    }

    /// For any names (random scalars, controls likely), `status` sent as a reply line is JSON that reads back the same.
    @Test func statusLineAlwaysParses() throws {
        var rng = SystemRandomNumberGenerator()
        func name() -> String {
            String(String.UnicodeScalarView((0..<Int.random(in: 0...12, using: &rng)).map { _ in
                let pick = Int.random(in: 0..<4, using: &rng)
                let v = pick == 0 ? UInt32.random(in: 0...0x20, using: &rng) : pick == 1 ? UInt32.random(in: 0x7F...0xA0, using: &rng)
                    : pick == 2 ? UInt32.random(in: 0x21...0x7E, using: &rng) : UInt32.random(in: 0xA1...0x10FFFF, using: &rng)
                return Unicode.Scalar(v) ?? "\u{FFFD}"
            }))
        }
        for _ in 0..<2000 {
            var s = Status()
            for _ in 0..<3 { s.cues[name()] = .init(frames: 1); s.apps[name()] = .init(played: 1) }
            s.sink.error = name()
            let line = Reply.ok(s.json.encoded).line
            let back = try #require(Status.parse(String(line.dropFirst(3))), "\(line)")
            #expect(back.cues.keys.sorted() == s.cues.keys.sorted())
            #expect(back.apps.keys.sorted() == s.apps.keys.sorted())
            #expect(back.sink.error == s.sink.error)
        }
    }

    @Test(arguments: ["", "{", "[1,", "{\"a\" 1}", "tru", "\"abc", "1 2", "\"a\u{7}b\"", "\"\\x7F\"", "\"\\u12\""])
    func rejectsMalformed(text: String) {
        #expect(throws: JSON.ParseError.self) { try JSON.parse(text) }
    }

    /// 100,000 `[` (a feedbackd theme of 100 KB) overflowed the stack; nesting is
    /// bounded, arrays and objects alike, and the error says so.
    @Test(arguments: [("[", "]"), ("{\"a\":", "}"), ("[{\"a\":", "}]")])
    func nestingIsBounded(open: String, close: String) throws {
        let levels = open.filter { $0 == "[" || $0 == "{" }.count
        let n = JSON.maxDepth / levels
        #expect(try JSON.parse(String(repeating: open, count: n) + "1" + String(repeating: close, count: n)) != .null)
        for count in [n + 1, 100_000] {
            #expect(throws: JSON.ParseError.self) { try JSON.parse(String(repeating: open, count: count) + "1" + String(repeating: close, count: count)) }
            do { _ = try JSON.parse(String(repeating: open, count: count)) } catch {
                #expect(error.reason.contains("nested deeper than \(JSON.maxDepth)"), "\(error)")
            }
        }
    }
}

@Suite struct SocketLocationTests {
    @Test func precedence() throws {
        #expect(try SocketLocation.resolve(explicit: "/a.sock", environment: ["CUED_SOCKET": "/b", "XDG_RUNTIME_DIR": "/r"]).get() == "/a.sock")
        #expect(try SocketLocation.resolve(explicit: nil, environment: ["CUED_SOCKET": "/b", "XDG_RUNTIME_DIR": "/r"]).get() == "/b")
        #expect(try SocketLocation.resolve(explicit: nil, environment: ["XDG_RUNTIME_DIR": "/r"]).get() == "/r/cued/cued.sock")
    }

    @Test func missingRuntimeDirNamesTheFlag() {
        guard case .failure(let e) = SocketLocation.resolve(explicit: nil, environment: [:]) else { Issue.record("resolved"); return }
        #expect(e.message.contains("XDG_RUNTIME_DIR"))
        #expect(e.message.contains("--socket"))
    }

    @Test func overlongPathIsRefused() throws {
        // 103 bytes is the most SwiftNIO binds; 104 must be refused here, with the fix.
        let ok = "/" + String(repeating: "x", count: 102)
        #expect(try SocketLocation.resolve(explicit: ok, environment: [:]).get() == ok)
        let long = "/" + String(repeating: "x", count: 103)
        guard case .failure(let e) = SocketLocation.resolve(explicit: long, environment: [:]) else { Issue.record("resolved"); return }
        #expect(e.message.contains("104 bytes"))
        #expect(e.message.contains("shorter"))
    }
}

@Suite struct StatusTests {
    @Test func roundTripsThroughJSON() throws {
        var s = Status()
        s.version = "1.2.3"; s.protocolVersion = 1; s.pid = 42; s.muted = true; s.config = "/c.toml"; s.stateSaved = false; s.stateError = "No space left on device"
        s.sink.spec = "alsa:default"; s.sink.state = "idle"; s.sink.kind = "ioplug"; s.sink.rate = 48_000
        s.sink.channels = 2; s.sink.format = "S16_LE"; s.sink.periodFrames = 240; s.sink.bufferFrames = 480
        s.sink.delayUs = 5000; s.sink.error = "x"
        s.sink.marginFrames = 512; s.sink.marginGrowths = 2; s.sink.marginShrinks = 1; s.sink.marginMisses = 3
        s.cues = ["pop": .init(frames: 10, played: 2)]
        s.apps = ["mutt": .init(played: 3, dropped: 1, muted: true, profile: .quiet), "feedr": .init(played: 1),
                  "Mutter": .init(played: 2, via: ["libcanberra"])]
        s.profile = .silent
        s.played = 5; s.voicesActive = 1; s.voicesStolen = 2; s.clippedSamples = 3; s.xruns = 4; s.stalls = 6; s.devicesLost = 13; s.audioThread = "realtime"
        s.dropped = 7; s.decodersStuck = 14; s.clients = 8; s.rateLimited = 9; s.refusedBusy = 10; s.evictedIdle = 11; s.sessions = 12
        s.latencyUs.p50 = 100; s.latencyUs.p99 = 200; s.latencyUs.max = 300
        s.theme.name = "ocean"; s.theme.chain = ["ocean", "freedesktop"]; s.theme.cached = 2
        s.theme.cacheBytes = 1000; s.theme.cacheLimitBytes = 4000
        let text = s.json.encoded
        #expect(Status.parse(text) == s)
        #expect(text.contains(#""sink":{"spec":"alsa:default","state":"idle""#))
    }

    @Test func fieldPathsCoverNestedKeys() {
        let paths = Status.fieldPaths
        for p in ["version", "profile", "apps.NAME.profile", "apps.NAME.via", "sink.state", "sink.device_delay_us", "devices_lost", "audio_thread", "cues.NAME.played", "apps.NAME.dropped", "latency_us.measures",
                  "theme.cache_bytes", "stalls", "evicted_idle"] {
            #expect(paths.contains(p), "\(p)")
        }
    }
}
