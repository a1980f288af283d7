import CuedAudio
import CuedCore
import CuedProtocol
import Foundation
import Logging
import Synchronization

public enum CuedVersion {
    public static let string = "0.1.0"
}

/// The daemon's shared state and its answer to every request. Called from
/// the event loop; hands cues to the audio engine through its queue and never
/// waits on audio.
public final class Daemon: Sendable {
    public let engine: AudioEngine
    public let logger: Logger
    private let bank: Mutex<CueBank>
    private let mutedFlag: Atomic<Bool>
    private let store: StateStore?
    private let sessions: Mutex<SessionRegistry>
    public let clients = Atomic<Int>(0)
    /// Called when something `statusLine` shows changes (systemd's STATUS=).
    private let onStatusChange: @Sendable (String) -> Void

    public init(engine: AudioEngine, bank: CueBank, muted: Bool, store: StateStore?,
                sessions: SessionRegistry = SessionRegistry(), logger: Logger,
                onStatusChange: @escaping @Sendable (String) -> Void = { _ in }) {
        self.onStatusChange = onStatusChange
        self.engine = engine
        self.bank = Mutex(bank)
        self.sessions = Mutex(sessions)
        self.mutedFlag = Atomic(muted)
        self.store = store
        self.logger = logger
    }

    public var muted: Bool { mutedFlag.load(ordering: .relaxed) }
    public var cueBank: CueBank { bank.withLock { $0 } }

    /// Replaces the cue bank whole (reload).
    public func replaceBank(_ new: CueBank) {
        bank.withLock { $0 = new }
        onStatusChange(statusLine())
    }

    /// One line for systemd's STATUS=: cues, sink state, mute.
    public func statusLine() -> String {
        let s = engine.stats
        return "\(cueBank.names.count) cues, sink \(engine.sinkSpec) \(s.sinkState.rawValue)"
            + (s.sinkError.map { " (\($0))" } ?? "") + (muted ? ", muted" : ", unmuted")
    }

    /// What a connection carries between requests: its private session, or
    /// the name of the shared session it is bound to.
    public struct ConnectionState: Sendable {
        public var privateSession = RefreshSession()
        public var sessionName: String?
        public init() {}
    }

    /// Runs `body` on the connection's current session (private or named).
    private func withSession<R: Sendable>(_ conn: inout ConnectionState, now: UInt64, _ body: (inout RefreshSession) -> R) -> R {
        guard let name = conn.sessionName else { return body(&conn.privateSession) }
        return sessions.withLock { $0.withSession(name, now: now, body) }
    }

    /// Parses one request line and answers it. `connection` holds the
    /// connection's session; `receivedAt` is when the line was read (monotonic ns).
    public func respond(to line: [UInt8], connection: inout ConnectionState, receivedAt: UInt64) -> Reply {
        let request: Request
        do {
            request = try RequestParser.parse(line)
        } catch {
            logger.debug("bad request", metadata: ["error.code": "\(error.code.rawValue)"])
            return error.reply
        }
        logger.debug("request", metadata: ["request": "\(request.line)"])
        switch request {
        case .ping:
            return .ok("pong")
        case .play(let name, let gainDB):
            guard let cue = cueBank[name] else { return unknownCue(name) }
            if muted { return .ok("muted") }
            return submit(cue, gainDB: gainDB, receivedAt: receivedAt) ?? .ok(nil)
        case .state(let target, let quiet):
            return perform(withSession(&connection, now: receivedAt) { $0.set(target, quiet: quiet) }, receivedAt: receivedAt)
        case .drag(let points):
            return perform(withSession(&connection, now: receivedAt) { $0.drag(points) }, receivedAt: receivedAt)
        case .drop:
            return perform(withSession(&connection, now: receivedAt) { $0.drop() }, receivedAt: receivedAt)
        case .threshold(let points):
            withSession(&connection, now: receivedAt) { $0.threshold = points }
            return .ok(Request.number(points))
        case .session(let name):
            if let name { connection.sessionName = name }
            let s = withSession(&connection, now: receivedAt) { $0 }
            return .ok("\(connection.sessionName ?? "-") \(s.state.rawValue) \(Request.number(s.threshold))")
        case .mute:
            setMuted(true)
            return .ok("muted")
        case .unmute:
            setMuted(false)
            return .ok("unmuted")
        case .cues:
            return .ok(cueBank.names.joined(separator: " "))
        case .status:
            return .ok(status().encoded)
        }
    }

    /// Turns a session's outcome into sound and a reply: `ok CUE`, `ok -`, `ok muted`.
    private func perform(_ outcome: RefreshSession.Outcome, receivedAt: UInt64) -> Reply {
        switch outcome.action {
        case .none:
            if outcome.prewarm && !muted { engine.submit(.prewarm) }
            return .ok("-")
        case .play(let name):
            if muted { return .ok("muted") }
            guard let cue = cueBank[name] else { return .err(.internal, "transition cue '\(name)' is not loaded") }
            return submit(cue, gainDB: 0, receivedAt: receivedAt) ?? .ok(name)
        }
    }

    private func unknownCue(_ name: String) -> Reply {
        .err(.unknownCue, "no cue named '\(name)' (cues: \(cueBank.names.joined(separator: " ")))")
    }

    /// Queues a cue; nil on success, an error reply if the audio queue is full.
    private func submit(_ cue: Cue, gainDB: Double, receivedAt: UInt64) -> Reply? {
        guard engine.submit(.play(cue, gain: decibelsToGain(gainDB), requestTime: receivedAt)) else {
            return .err(.internal, "audio queue is full; try again")
        }
        return nil
    }

    public func setMuted(_ value: Bool) {
        let old = mutedFlag.exchange(value, ordering: .relaxed)
        if value { engine.submit(.fadeOutAll) }
        guard old != value else { return }
        logger.info(value ? "muted" : "unmuted")
        onStatusChange(statusLine())
        do {
            try store?.save(.init(muted: value))
        } catch {
            logger.error("cannot save state", metadata: ["file": "\(store?.path ?? "")", "error": "\(error)"])
        }
    }

    public func status() -> JSON {
        let s = engine.stats
        func n(_ v: Int) -> JSON { .number(Double(v)) }
        func count(_ a: borrowing Atomic<Int>) -> JSON { n(a.load(ordering: .relaxed)) }
        let f = s.sinkFormat
        var sink: [(String, JSON)] = [("spec", .string(engine.sinkSpec)), ("state", .string(s.sinkState.rawValue))]
        sink.append(("rate", f.map { n($0.rate) } ?? .null))
        sink.append(("channels", f.map { n($0.channels) } ?? .null))
        sink.append(("format", f.map { .string($0.sampleFormat.rawValue) } ?? .null))
        sink.append(("period_frames", f.map { n($0.periodFrames) } ?? .null))
        sink.append(("buffer_frames", f.map { n($0.bufferFrames) } ?? .null))
        sink.append(("error", s.sinkError.map(JSON.string) ?? .null))

        let bank = cueBank
        var cues: [(String, JSON)] = []
        for name in bank.names {
            let c = bank[name]!
            cues.append((name, .object([("frames", n(c.frames)), ("played", count(c.played))])))
        }

        var latency: [(String, JSON)] = [("p50", .null), ("p99", .null), ("max", .null)]
        if let l = s.latencyPercentiles() {
            latency = [("p50", n(Int(l.p50))), ("p99", n(Int(l.p99))), ("max", n(Int(l.max)))]
        }

        var out: [(String, JSON)] = [("version", .string(CuedVersion.string)), ("protocol", n(ProtocolLimits.version))]
        out.append(("pid", n(Int(getpid()))))
        out.append(("muted", .bool(muted)))
        out.append(("sink", .object(sink)))
        out.append(("cues", .object(cues)))
        out.append(("played", count(s.played)))
        out.append(("voices_active", count(s.voicesActive)))
        out.append(("voices_stolen", count(s.stolen)))
        out.append(("clipped_samples", count(s.clipped)))
        out.append(("xruns", count(s.xruns)))
        out.append(("dropped", count(s.dropped)))
        out.append(("clients", count(clients)))
        let now = MonotonicClock.now()
        out.append(("sessions", n(sessions.withLock { $0.count(now: now) })))
        out.append(("latency_us", .object(latency)))
        return .object(out)
    }
}
