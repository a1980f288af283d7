import CuedProtocol
import CuectlCommands
import Testing

/// The verb table is the grammar: everything derived from it holds for every verb, so a
/// new verb is its case, row and line in Verbs.swift, its handler and its wording
/// (DaemonVerbTests' switch asks for them), and cuectl's words for it if cuectl offers it.
@Suite struct VerbTableTests {
    /// Its example parses and says itself again (the wire line is canonical).
    @Test(arguments: VerbSpec.all.map(\.name))
    func theExampleParsesAndRoundTrips(verb: String) throws {
        let spec = try #require(VerbSpec.named(Substring(verb)))
        let request = try RequestParser.parse(spec.example)
        #expect(request.line == spec.example)
        #expect(try RequestParser.parse(words: spec.example.split(separator: " ").map(String.init)) == request)
    }

    /// What a line costs the event loop comes from its verb's entry, read from the bytes.
    @Test func theCostOfALineIsItsVerbs() {
        for spec in VerbSpec.all {
            let alone = spec.name, withArgs = spec.name + " x"
            #expect(VerbSpec.cost(ofLine: Array(alone.utf8)) == spec.cost.alone, "\(alone)")
            #expect(VerbSpec.cost(ofLine: Array((alone + "\r").utf8)) == spec.cost.alone, "\(alone)\\r")
            #expect(VerbSpec.cost(ofLine: Array(withArgs.utf8)) == spec.cost.withArguments, "\(withArgs)")
        }
        #expect(VerbSpec.cost(ofLine: Array("nosuchverb".utf8)) == 1)
        #expect(VerbSpec.cost(ofLine: Array("statuses".utf8)) == 1)
    }

    /// cuectl's words are keyed by the table's verbs: none names a verb the protocol lacks,
    /// and only the socket's own verbs have none.
    @Test func cuectlsWordsAreKeyedByTheTablesVerbs() {
        let names = Set(VerbSpec.all.map(\.name))
        #expect(Set(CuectlVerb.byVerb.keys).subtracting(names).isEmpty)
        #expect(names.subtracting(CuectlVerb.byVerb.keys) == ["events", "app"])
        #expect(CuectlVerb.offered.count == CuectlVerb.byVerb.count)
    }

    /// cuectl offers every verb it has words for: its help shows their usage and help,
    /// and a plain verb's words go on the wire as the protocol parses them.
    @Test(arguments: VerbSpec.all.map(\.name))
    func cuectlOffersWhatTheTableSays(verb: String) throws {
        let spec = try #require(VerbSpec.named(Substring(verb)))
        guard let offer = CuectlVerb.named(verb) else {
            #expect(!CuectlHelp.commands.contains(verb))
            return
        }
        let (usage, help) = (offer.usage, offer.help)
        #expect(CuectlHelp.commands.contains(verb))
        let text = CuectlHelp.text.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        #expect(text.contains(usage.split(whereSeparator: \.isWhitespace).joined(separator: " ")), "\(usage)")
        #expect(text.contains(help.split(whereSeparator: \.isWhitespace).joined(separator: " ")), "\(help)")
        if case .plain = offer.form {
            let words = spec.example.split(separator: " ").map(String.init)
            let inv = try CommandParser.parse(words, cwd: "/")
            guard case .request(let r, _) = inv.action else { Issue.record("\(verb): \(inv.action)"); return }
            #expect(r == (try RequestParser.parse(spec.example)))
        }
    }
}
