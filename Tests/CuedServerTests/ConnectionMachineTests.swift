@testable import CuedServer
import Testing

/// The connection's pipeline as a value: order, deferred replies, credit, reads.
@Suite struct ConnectionMachineTests {
    func line(_ s: String) -> LineEvent { .line(Array(s.utf8)) }

    func feed(_ m: inout ConnectionMachine, _ lines: [String]) {
        for l in lines { let ok = m.received(Array((l + "\n").utf8)); #expect(ok) }
    }

    /// Runs what the credit allows; returns the lines run.
    func drain(_ m: inout ConnectionMachine) -> [String] {
        var out: [String] = []
        while case .run(.line(let b)) = m.next() { out.append(String(decoding: b, as: UTF8.self)) }
        return out
    }

    @Test func linesRunInOrderWithinTheCredit() {
        var m = ConnectionMachine()
        feed(&m, ["ping", "threshold 1", "ping", "ping", "ping", "ping"])
        m.grantTurn(4)
        #expect(drain(&m) == ["ping", "threshold 1", "ping", "ping"])
        do { let v = m.next(); #expect(v == .yield) }
        #expect(m.runnable)
        m.grantTurn(4)
        #expect(drain(&m) == ["ping", "ping"])
        do { let v = m.next(); #expect(v == .idle) }
        #expect(!m.hasQueued && m.queuedLines == 0)
    }

    /// A costly line may overdraw; the debt is paid on later turns.
    @Test func aCostlyLineOverdrawsAndPaysLater() {
        var m = ConnectionMachine()
        feed(&m, ["status", "ping"])
        m.grantTurn(4)
        #expect(drain(&m) == ["status"])
        #expect(m.credit == 4 - VerbCost.of(verb: "status"))
        var turns = 0
        while true { let n = m.next(); guard n == .yield else { break }; m.grantTurn(4); turns += 1 }
        // 20 units of debt at 4 a turn: the ping waits 5 more turns, then runs.
        #expect(turns == (VerbCost.of(verb: "status") - 4) / 4 + 1)
    }

    /// An idle connection does not hoard credit: a turn gives at most one quantum.
    @Test func creditIsNotHoarded() {
        var m = ConnectionMachine()
        for _ in 0..<10 { m.grantTurn(16) }
        #expect(m.credit == 16)
        feed(&m, Array(repeating: "ping", count: 40))
        #expect(drain(&m).count == 16)
    }

    /// A deferred reply holds the lines after it, and the reads.
    @Test func aDeferredReplyHoldsTheLinesAfterIt() {
        var m = ConnectionMachine()
        feed(&m, ["play-file /x wait", "ping"])
        m.grantTurn(16)
        do { let v = m.next(); #expect(v == .run(line("play-file /x wait"))) }
        m.deferred()
        do { let v = m.next(); #expect(v == .idle) }
        do { let v = m.readRequested(); #expect(v == .hold) }
        m.answered()
        do { let v = m.next(); #expect(v == .run(line("ping"))) }
        do { let v = m.next(); #expect(v == .idle) }
        do { let v = m.releaseHeldRead(); #expect(v == .read) }
        #expect(m.reading == .free)
    }

    /// A client that does not take its replies gets no more lines run and no reads.
    @Test func noRunningOrReadingWhileRepliesAreNotTaken() {
        var m = ConnectionMachine()
        feed(&m, ["ping", "ping"])
        m.grantTurn(16)
        do { let v = m.next(); #expect(v == .run(line("ping"))) }
        m.replyQueued(m.output.runBytes)  // unsent: the client is not reading
        do { let v = m.next(); #expect(v == .idle) }
        do { let v = m.readRequested(); #expect(v == .hold) }
        do { let v = m.sent(m.output.runBytes); #expect(v) }  // it read them: work resumes
        do { let v = m.next(); #expect(v == .run(line("ping"))) }
        do { let v = m.next(); #expect(v == .idle) }
        do { let v = m.releaseHeldRead(); #expect(v == .read) }
    }

    /// A read that brings more than a light turn makes the connection heavy:
    /// its next read waits for a grant, asked for once.
    @Test func aHeavyConnectionsReadsWaitForAGrant() {
        var m = ConnectionMachine()
        feed(&m, Array(repeating: "ping", count: 10))
        m.readFinished(lightLines: 4)
        #expect(m.heavy)
        m.grantTurn(100)
        _ = drain(&m)
        do { let v = m.readRequested(); #expect(v == .askGrant) }
        #expect(m.readRequested() == .hold)  // asked already
        do { let v = m.releaseHeldRead(); #expect(v == .hold) }
        do { let v = m.readGranted(); #expect(v) }
        #expect(m.reading == .free)
        // The next read brings one line: light again, its reads are free.
        feed(&m, ["ping"])
        m.readFinished(lightLines: 4)
        #expect(!m.heavy)
        m.grantTurn(4)
        _ = drain(&m)
        do { let v = m.readRequested(); #expect(v == .read) }
    }

    /// A grant that comes while lines wait is not used; the read is asked for again later.
    @Test func aGrantWhileBusyIsKeptForLater() {
        var m = ConnectionMachine()
        feed(&m, Array(repeating: "ping", count: 10))
        m.readFinished(lightLines: 4)
        m.grantTurn(100)
        _ = drain(&m)
        do { let v = m.readRequested(); #expect(v == .askGrant) }
        m.replyQueued(m.output.runBytes)
        do { let v = m.readGranted(); #expect(!v) }
        #expect(m.reading == .held)
        _ = m.sent(m.output.runBytes)
        do { let v = m.releaseHeldRead(); #expect(v == .askGrant) }
        do { let v = m.readGranted(); #expect(v) }
    }

    /// After EOF: done once everything is answered, not before.
    @Test func halfCloseIsDoneWhenAllIsAnswered() {
        var m = ConnectionMachine()
        feed(&m, ["reload", "ping"])
        do { let v = m.inputEnded(); #expect(v == .answerFirst) }
        #expect(m.lifecycle == .inputClosed)
        m.grantTurn(16)
        do { let v = m.next(); #expect(v == .run(line("reload"))) }
        m.deferred()
        do { let v = m.finishIfDone(); #expect(!v) }
        m.answered()
        _ = drain(&m)
        do { let v = m.finishIfDone(); #expect(v) }
        #expect(m.lifecycle == .closing(.init(inputEnded: true)))
        do { let v = m.finishIfDone(); #expect(!v) }  // once
        do { let v = m.close(); #expect(!v) }  // closing already: no second last line
    }

    /// Closing discards what is queued and what arrives; reads go on (to drain).
    @Test func closingDiscards() {
        var m = ConnectionMachine()
        feed(&m, ["ping", "ping"])
        m.close()
        do { let v = m.next(); #expect(v == .idle) }
        do { let v = m.received(Array("ping\n".utf8)); #expect(!v) }
        do { let v = m.readRequested(); #expect(v == .read) }
        #expect(m.queuedLines == 0)
    }

    /// A long pipeline's queue is compacted as it runs (no unbounded head).
    @Test func aLongQueueRunsInOrder() {
        var m = ConnectionMachine()
        for k in 0..<5_000 { _ = m.received(Array("threshold \(k)\n".utf8)) }
        var seen = 0
        while true {
            m.grantTurn(16)
            let run = drain(&m)
            if run.isEmpty { break }
            for l in run { #expect(l == "threshold \(seen)"); seen += 1 }
        }
        #expect(seen == 5_000)
    }

    /// Lines are cut where they run, whatever the reads' boundaries.
    @Test func linesSpanReads() {
        var m = ConnectionMachine()
        _ = m.received(Array("pi".utf8))
        #expect(!m.hasQueued)
        _ = m.received(Array("ng\nthresh".utf8))
        _ = m.received(Array("old 2\r\n".utf8))
        #expect(m.queuedLines == 2)
        m.grantTurn(16)
        #expect(drain(&m) == ["ping", "threshold 2\r"])
    }

    /// A line over the limit: the lines before it run, then it is reported once, and the rest is discarded.
    @Test func aLineOverTheLimitComesAfterTheLinesBeforeIt() {
        var m = ConnectionMachine(maxLineBytes: 10)
        _ = m.received(Array("ping\n".utf8) + Array(repeating: UInt8(ascii: "a"), count: 11))
        _ = m.received(Array("\nping\n".utf8))
        #expect(m.queuedLines == 2)
        m.grantTurn(16)
        do { let v = m.next(); #expect(v == .run(line("ping"))) }
        do { let v = m.next(); #expect(v == .run(.tooLong)) }
        do { let v = m.next(); #expect(v == .idle) }
        // The same with the LF in the same read.
        var n = ConnectionMachine(maxLineBytes: 10)
        _ = n.received(Array(repeating: UInt8(ascii: "b"), count: 12) + Array("\nping\n".utf8))
        n.grantTurn(16)
        do { let v = n.next(); #expect(v == .run(.tooLong)) }
        // A line of exactly the limit is a line.
        var o = ConnectionMachine(maxLineBytes: 10)
        _ = o.received(Array(repeating: UInt8(ascii: "c"), count: 10) + [0x0A])
        o.grantTurn(16)
        do { let v = o.next(); #expect(v == .run(.line(Array(repeating: UInt8(ascii: "c"), count: 10)))) }
    }

    /// A last line without LF at EOF still counts as a request; an empty rest does not.
    @Test func aLastLineWithoutLFCounts() {
        var m = ConnectionMachine()
        _ = m.received(Array("ping\nstatus".utf8))
        #expect(m.queuedLines == 1)
        do { let v = m.inputEnded(); #expect(v == .answerFirst) }
        #expect(m.queuedLines == 2)
        m.grantTurn(100)
        #expect(drain(&m) == ["ping", "status"])
        do { let v = m.finishIfDone(); #expect(v) }
        var n = ConnectionMachine()
        _ = n.received(Array("ping\n".utf8))
        _ = n.inputEnded()
        #expect(n.queuedLines == 1)
    }

    @Test func verbCosts() {
        #expect(VerbCost.of(line("status")) == VerbCost.of(verb: "status"))
        #expect(VerbCost.of(line("status\r")) == VerbCost.of(verb: "status"))
        #expect(VerbCost.of(line("status wait")) == VerbCost.other)  // its reply is charged when rendered
        #expect(VerbCost.of(line("stop all")) == VerbCost.of(verb: "stop"))
        #expect(VerbCost.of(line("stop")) == VerbCost.of(verb: "stop"))
        #expect(VerbCost.of(line("play pop")) == VerbCost.of(verb: "play"))
        #expect(VerbCost.of(line("play-file /a b.wav")) == VerbCost.of(verb: "play"))
        #expect(VerbCost.of(line("reload\r")) == VerbCost.of(verb: "reload"))
        #expect(VerbCost.of(line("cues theme")) == VerbCost.of(verb: "cues"))
        #expect(VerbCost.of(line("ping")) == VerbCost.other)
        #expect(VerbCost.of(line("mute")) == VerbCost.other)
        #expect(VerbCost.of(line("profile app mutt quiet")) == VerbCost.other)  // as mute: a state change
        #expect(VerbCost.of(line("statusx")) == VerbCost.other)
        #expect(VerbCost.of(line("")) == VerbCost.other)
        #expect(VerbCost.of(.tooLong) == VerbCost.tooLong)
    }

    /// Output: lines run while the unsent replies stay under the mark; event
    /// lines may fill up to the bound (plus the largest reply held), no further.
    @Test func outputIsBoundedInBytes() {
        var m = ConnectionMachine(output: .init(runBytes: 100, limitBytes: 400))
        feed(&m, ["ping", "ping"])
        m.grantTurn(16)
        do { let v = m.next(); #expect(v == .run(line("ping"))) }
        m.replyQueued(1_000)  // a big reply: over the mark
        #expect(!m.takesReplies && !m.runnable)
        do { let v = m.next(); #expect(v == .idle) }
        #expect(!m.busy)  // waiting only on its client: idle for the table
        // Events: room for the bound beyond the big reply, not more.
        do { let v = m.eventQueued(400); #expect(v) }
        do { let v = m.eventQueued(1); #expect(!v) }
        do { let v = m.sent(1_350); #expect(v) }  // it read: under the mark again
        #expect(m.unsentBytes == 50 && m.runnable)
        // The big reply's allowance is gone with it.
        do { let v = m.eventQueued(351); #expect(!v) }
        do { let v = m.eventQueued(350); #expect(v) }
    }

    /// A reply ready in the connection's turn runs before the lines after it, charged its cost.
    @Test func aReadyReplyIsRenderedFirstAndCharged() {
        var m = ConnectionMachine()
        feed(&m, ["status wait", "ping"])
        m.grantTurn(4)
        do { let v = m.next(); #expect(v == .run(line("status wait"))) }
        m.deferred()
        do { let v = m.next(); #expect(v == .idle) }
        #expect(m.busy)
        m.replyReady(cost: VerbCost.of(verb: "status"))
        m.grantTurn(4)
        do { let v = m.next(); #expect(v == .render) }
        #expect(m.credit == 4 - VerbCost.of(verb: "status"))
        do { let v = m.next(); #expect(v == .yield) }
        while m.next() == .yield { m.grantTurn(4) }
        #expect(m.queuedLines == 0)
    }

    /// The close sequence: a refused newcomer closes as soon as its line is out
    /// and what it sent was read; otherwise the write side shuts and it drains,
    /// or both close once the client's EOF came.
    @Test func theCloseSequence() {
        var refused = ConnectionMachine()
        do { let v = refused.close(refused: true); #expect(v) }
        do { let v = refused.close(); #expect(!v) }  // one last line only
        #expect(refused.drainNanoseconds(normal: 2, refused: 1) == 1)
        do { let v = refused.lastLineWritten(); #expect(v == .output) }
        #expect(!refused.closesAfterRead)
        do { let v = refused.received(Array("play x\n".utf8)); #expect(!v) }  // discarded
        #expect(refused.closesAfterRead)

        var m = ConnectionMachine()
        feed(&m, ["ping"])
        do { let v = m.close(); #expect(v) }
        #expect(m.queuedLines == 0 && m.drainNanoseconds(normal: 2, refused: 1) == 2)
        do { let v = m.readRequested(); #expect(v == .read) }  // reads on, to discard
        do { let v = m.inputEnded(); #expect(v == .closeNow) }
        do { let v = m.lastLineWritten(); #expect(v == .all) }
        m.closed()
        #expect(m.lifecycle == .closed)
        do { let v = m.lastLineWritten(); #expect(v == .none) }

        // EOF first, then an error's last line: both ways at once.
        var n = ConnectionMachine()
        _ = n.received(Array("later\n".utf8))
        do { let v = n.inputEnded(); #expect(v == .answerFirst) }
        do { let v = n.close(); #expect(v) }
        do { let v = n.lastLineWritten(); #expect(v == .all) }
    }
}
