import CuedProtocol
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The wire's words: one table (Wire.swift), the C header and the Python module generated
/// from it and checked in, and the machine words errors carry.
@Suite struct WireTests {
    /// The checkout's root, from this file's path (Tests/CuedProtocolTests/WireTests.swift).
    static let root: String = {
        var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(3)
        return parts.joined(separator: "/")
    }()

    static func read(_ relative: String) -> String? {
        guard let f = fopen(root + "/" + relative, "r") else { return nil }
        defer { fclose(f) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = fread(&chunk, 1, chunk.count, f)
            if n == 0 { break }
            bytes += chunk[..<n]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    @Test(arguments: [("canberra/cued-wire.h", WireExport.cHeader), ("bench/cuedwire.py", WireExport.pythonModule)])
    func theCheckedInCopiesAreWhatTheTableSays(file: String, text: String) throws {
        let checkedIn = try #require(Self.read(file), "\(file) is missing: run make wire")
        #expect(checkedIn == text, "\(file) drifted from Sources/CuedProtocol/Wire.swift: run make wire (and adapt its users)")
    }

    @Test func theHeaderSpellsEveryWord() {
        let h = WireExport.cHeader
        for w in ErrorCode.allCases.map(\.rawValue) + FileProblem.allCases.map(\.rawValue) + EndReason.allCases.map(\.rawValue) {
            #expect(h.contains("\"\(w)\""), "\(w)")
        }
        #expect(h.contains("CUED_ERROR_RATE_LIMITED,") && h.contains("CUED_END_REASON_STOPPED_BY_ID,") && h.contains("CUED_FILE_PROBLEM_NOT_FOUND,"))
        #expect(h.contains("#define CUED_LINE_BYTES \(ProtocolLimits.maxLineBytes)") && h.contains("#define CUED_LABEL_BYTES \(Label.maxBytes)"))
    }

    @Test func errorsCarryTheirMachineWord() {
        #expect(Reply.badFile(.notFound, "/x.wav: no such file").line == "err bad-file not-found /x.wav: no such file")
        #expect(Reply.notPlayed(.late, "the device did not start it").line == "err not-played late the device did not start it")
        #expect(ErrorReply(line: "err bad-file not-found /x.wav: no such file")
                == ErrorReply(code: "bad-file", word: "not-found", message: "/x.wav: no such file"))
        // A word only where the code has words; prose that happens to start like one stays prose.
        #expect(ErrorReply(line: "err unknown-cue late night")?.word == nil)
        #expect(ErrorReply(line: "err bad-file /x.wav: no such file") == ErrorReply(code: "bad-file", word: nil, message: "/x.wav: no such file"))
        #expect(ErrorReply(line: "err internal") == ErrorReply(code: "internal", word: nil, message: ""))
        #expect(ErrorReply(line: "ok") == nil && ErrorReply(line: "errand") == nil)
        #expect(ErrorCode.notPlayed.words == ["busy", "late", "cut", "shutdown"])
    }

    /// The label rule as the docs say it: letters, digits, `.`, `_`, `-` (ASCII).
    @Test func labelBytesAreLettersDigitsAndThree() {
        let said = Set(Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-".utf8))
        #expect(Set((0...255).map(UInt8.init).filter(Label.isLabelByte)) == said)
        #expect(Set((0...255).map(UInt8.init).filter(FilePath.isEscaped)) == Set(Array(0...0x20) + [0x25, 0x7F]))
    }
}

extension ErrorReply {
    init(code: String, word: String?, message: String) {
        self.init(line: "err x")!
        self.code = code; self.word = word; self.message = message
    }
}
