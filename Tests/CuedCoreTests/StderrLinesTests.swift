@testable import CuedCore
import Testing

@Suite struct StderrLinesTests {
    @Test func bytesBecomeLinesAcrossReads() {
        var a = LineAssembler(maxLineBytes: 16)
        #expect(a.append(Array("[mpg123] err".utf8)) == [])
        #expect(a.append(Array("or\r\nnext\n\nlast".utf8)) == ["[mpg123] error", "next", ""])
        #expect(a.append(Array("\n".utf8)) == ["last"])
        #expect(a.append([0xFF, 0x41, 0x0A]) == ["\u{FFFD}A"])   // invalid UTF-8 replaced, not dropped
    }

    @Test func anEndlessLineCostsOneLine() {
        var a = LineAssembler(maxLineBytes: 8)
        #expect(a.append([UInt8](repeating: 0x61, count: 20)) == ["aaaaaaaa …"])
        #expect(a.append([UInt8](repeating: 0x61, count: 100_000)) == [])
        #expect(a.append(Array("b\nok\n".utf8)) == ["ok"])
    }

    @Test func limiterPassesNASecondAndCountsTheRest() {
        let s: UInt64 = 1_000_000_000
        var l = LineLimiter(perSecond: 3)
        let t0: UInt64 = 5 * s
        var logged = 0
        for i in 0..<10 {
            let (log, report) = l.admit(now: t0 + UInt64(i) * 1_000_000)
            #expect(report == nil)
            if log { logged += 1 }
        }
        #expect(logged == 3 && l.suppressed == 7)
        #expect(l.untilReport(now: t0 + s / 2) == s / 2)
        #expect(l.endWindow(now: t0 + s - 1) == nil)
        // A quiet drain reports once the window is over, once.
        #expect(l.endWindow(now: t0 + s) == 7)
        #expect(l.endWindow(now: t0 + 3 * s) == nil)
        #expect(l.untilReport(now: t0 + 3 * s) == nil)
        // A busy one reports with the first line of the next window.
        for i in 0..<5 { _ = l.admit(now: t0 + 4 * s + UInt64(i)) }
        let next = l.admit(now: t0 + 5 * s + 1)
        #expect(next.log && next.report == 2)
    }
}
