import CuedProtocol
import Testing

@Suite struct RequestParserTests {
    @Test(arguments: [
        ("ping", Request.ping),
        ("play pop", .play(cue: "pop", gainDB: 0)),
        ("play pop -6", .play(cue: "pop", gainDB: -6)),
        ("play pop 3.5", .play(cue: "pop", gainDB: 3.5)),
        ("state pull", .state(.pull, quiet: false)),
        ("state release", .state(.release, quiet: false)),
        ("state loading", .state(.loading, quiet: false)),
        ("state idle", .state(.idle, quiet: false)),
        ("mute", .mute),
        ("unmute", .unmute),
        ("cues", .cues),
        ("status", .status),
        ("  play   pop  ", .play(cue: "pop", gainDB: 0)),
        ("ping\r", .ping),
        ("state loading quiet", .state(.loading, quiet: true)),
        ("session", .session(nil)),
        ("session feed-reader", .session("feed-reader")),
        ("drag 0", .drag(0)),
        ("drag 64.5", .drag(64.5)),
        ("drop", .drop),
        ("threshold 80", .threshold(80)),
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
        ("play pop 1 2", .badArgument),
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
        ("threshold -5", .badArgument),
        ("session a/b", .badArgument),
        ("session a b", .badArgument),
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
        #expect(Reply.err(.unknownCue, "no cue\nnamed x").line == "err unknown-cue no cue named x")
        #expect(Reply.err(.lineTooLong, "m").line == "err line-too-long m")
        #expect(Reply.err(.internal, "m").line == "err internal m")
    }

    @Test func requestsRoundTrip() throws {
        let all: [Request] = [.ping, .play(cue: "pop", gainDB: 0), .play(cue: "x", gainDB: -3.5), .state(.loading, quiet: false),
                              .state(.idle, quiet: true), .session(nil), .session("s"), .drag(12.25), .drop, .threshold(65),
                              .mute, .unmute, .cues, .status]
        for r in all { #expect(try RequestParser.parse(r.line) == r) }
    }

    @Test func cueNames() {
        #expect(CueName.isValid("psst1"))
        #expect(CueName.isValid("mail-sent_2.v2"))
        #expect(!CueName.isValid(""))
        #expect(!CueName.isValid("a/b"))
        #expect(!CueName.isValid(".."))
        #expect(!CueName.isValid(String(repeating: "a", count: 65)))
        #expect(!CueName.isValid("é"))
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

    @Test(arguments: ["", "{", "[1,", "{\"a\" 1}", "tru", "\"abc", "1 2"])
    func rejectsMalformed(text: String) {
        #expect(throws: JSON.ParseError.self) { try JSON.parse(text) }
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

    @Test func overlongPathIsRefused() {
        let long = "/" + String(repeating: "x", count: 120)
        guard case .failure = SocketLocation.resolve(explicit: long, environment: [:]) else { Issue.record("resolved"); return }
    }
}
