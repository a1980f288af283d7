import CSDBus
import CuedCore
import CuedSystem
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// Carries out `RealtimeGrant`'s asks: RTKit on the system bus, or the Realtime portal on the
/// session bus, for the audio thread (by its tid), on a thread of its own made for the ask
/// ("cued-rt": never the audio thread, never the event loop), each exchange bounded
/// (`timeoutMs`). Chances come from the event loop: once cued is up (after READY=1: the bus is
/// never on the start-up's path) and when a device opens. A bus whose socket is not there is
/// answered without loading libsystemd. What each ask got is logged once, and shown by `status`.
final class RealtimeAsker: Sendable {
    static let timeoutMs: Int32 = 2_000

    private let stats: EngineStats
    private let logger: Logger
    /// The buses' sockets, where their addresses are plain `unix:path=` ones (else nil: tried).
    private let systemBus: String?
    private let sessionBus: String?

    init(stats: EngineStats, environment env: [String: String], logger: Logger) {
        self.stats = stats
        self.logger = logger
        systemBus = Self.socketPath(env["DBUS_SYSTEM_BUS_ADDRESS"], default: "/run/dbus/system_bus_socket")
        sessionBus = Self.socketPath(env["DBUS_SESSION_BUS_ADDRESS"],
                                     default: env["XDG_RUNTIME_DIR"].flatMap { $0.hasPrefix("/") ? $0 + "/bus" : nil })
    }

    /// Whether cued runs in a Flatpak sandbox, where the Realtime portal is the way.
    static var sandboxed: Bool { FileSystem.entry("/.flatpak-info") != .none }

    /// The socket of a bus address's first `unix:path=` entry (nil: not such an address).
    static func socketPath(_ address: String?, default fallback: String?) -> String? {
        guard let address, !address.isEmpty else { return fallback }
        let first = address.prefix { $0 != ";" }
        guard first.hasPrefix("unix:"), let kv = first.dropFirst(5).split(separator: ",").first(where: { $0.hasPrefix("path=") })
        else { return nil }
        return String(kv.dropFirst(5))
    }

    /// A chance to ask (from the event loop): starts the asking thread if the grant says so.
    func chance() {
        let now = MonotonicClock.now()
        let actual = EngineStats.scheduling(ofThread: stats.audioThreadID.load(ordering: .relaxed))
        let ask = stats.realtime.withLock { g -> RealtimeGrant.Ask? in
            if let actual { g.observed(actual, now: now) }
            return g.chance(now: now)
        }
        guard let ask else { return }
        let job = Job(asker: self, first: ask)
        if case .failure(let why) = CuedThread.start("cued-rt", { job.run() }) {
            _ = stats.realtime.withLock { $0.answered(.unreachable("cannot start a thread to ask (\(why))"), now: now) }
        }
    }

    private final class Job {
        let asker: RealtimeAsker
        let first: RealtimeGrant.Ask
        init(asker: RealtimeAsker, first: RealtimeGrant.Ask) { self.asker = asker; self.first = first }

        /// Asks, and asks the next service the grant names, until it names none.
        func run() {
            var ask: RealtimeGrant.Ask? = first
            while let a = ask {
                let answer = asker.exchange(a)
                let (next, status) = asker.stats.realtime.withLock { g in (g.answered(answer, now: MonotonicClock.now()), g.status) }
                ask = next
                if case .realtime(let p) = answer {
                    asker.logger.info("audio thread: \(status)", metadata: ["priority": "\(p)"])
                } else if next == nil {
                    asker.logger.notice("audio thread: \(status)")
                }
            }
        }
    }

    /// One exchange with the service `ask` names.
    private func exchange(_ ask: RealtimeGrant.Ask) -> RealtimeGrant.Answer {
        let portal = ask.via == .portal
        if let path = portal ? sessionBus : systemBus, FileSystem.entry(path) == .none {
            return .unreachable("no \(portal ? "session" : "system") bus at \(path)")
        }
        let tid = stats.audioThreadID.load(ordering: .relaxed)
        guard tid > 0 else { return .unreachable("the audio thread has not started") }
        var request = cued_rt_request(portal: portal ? 1 : 0, pid: UInt64(getpid()), tid: UInt64(tid), priority: Int32(ask.priority),
                                      nice: Int32(ask.nice ?? 0), timeout_ms: Self.timeoutMs)
        var result = cued_rt_result()
        _ = cued_rt_ask(&request, &result)
        let why = withUnsafeBytes(of: result.why) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
        if result.priority > 0 { return .realtime(priority: Int(result.priority)) }
        if result.nice != 0 { return .nice(Int(result.nice), realtimeRefused: why) }
        return result.unreachable != 0 ? .unreachable(why) : .refused(why)
    }
}
