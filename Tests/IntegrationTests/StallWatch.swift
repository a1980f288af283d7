import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Watches whether the machine itself stops running threads: one SCHED_FIFO 99 thread
/// pinned to each CPU wakes every half millisecond and notes how late it woke. Nothing
/// in the system can keep such a thread from running but the kernel with interrupts
/// off or the hypervisor not running the virtual CPU: a late wake is a stall every
/// thread on that CPU suffered, PipeWire's own included. On the shared 2-vCPU test VM,
/// with both CPUs busy, such wakes came 10–22 ms late several times a second (docs/decisions/
/// 0006); PipeWire's graph at a quantum of 128 frames (2.7 ms) then misses
/// cycles, for every client. The PipeWire tests tell those holes from cued's with it.
///
/// `available` is false where real-time scheduling is not allowed (then nothing can be
/// told apart and every hole counts as cued's).
///
/// With `normalThread`, one more thread watches at normal scheduling (SCHED_OTHER, nice 0, on
/// no CPU in particular: cued's audio thread as a user without RTKit runs so): how late such a
/// thread woke, the machine's other work included, which the real-time watchers do not see.
final class StallWatch: @unchecked Sendable {
    struct Stall: CustomStringConvertible {
        /// When the thread should have woken (monotonic ns), on which CPU, how late.
        let at: UInt64
        let cpu: Int
        let lateNs: UInt64
        var lateMs: Double { Double(lateNs) / 1e6 }
        var description: String { String(format: "%.1f ms on cpu%d", lateMs, cpu) }
    }

    static let periodNs: UInt64 = 500_000
    /// Late wakes below this are not noted (a healthy machine wakes a FIFO 99 thread within tens of µs).
    static let noteNs: UInt64 = 1_000_000

    /// What the watching threads share; they hold it, not the watch, so that releasing
    /// the watch stops them.
    private final class State: Sendable {
        let running = Atomic<Bool>(true)
        let started = Atomic<Int>(0)
        let realtime = Atomic<Int>(0)
        let stalls = Mutex<[Stall]>([])
        let normalStalls = Mutex<[Stall]>([])
    }

    private let state = State()
    private let cpus: Int
    private let begin = StallWatch.now()

    init(normalThread: Bool = false) {
        cpus = max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN)))
        for cpu in 0..<cpus {
            let state = self.state
            let t = Thread { StallWatch.watch(cpu: cpu, state) }
            t.name = "stall-watch-\(cpu)"
            t.start()
        }
        if normalThread {
            let state = self.state
            let t = Thread { StallWatch.watch(cpu: nil, state) }
            t.name = "stall-watch-normal"
            t.start()
        }
        let threads = cpus + (normalThread ? 1 : 0)
        for _ in 0..<500 where state.started.load(ordering: .acquiring) < threads { usleep(2_000) }
    }

    deinit { stop() }

    /// Every watching thread runs at SCHED_FIFO 99 on its own CPU.
    var available: Bool { state.realtime.load(ordering: .acquiring) == cpus }

    func stop() {
        state.running.store(false, ordering: .releasing)
    }

    /// The stalls noted so far.
    var noted: [Stall] { state.stalls.withLock { $0 } }

    /// The longest stall noted, if any.
    var worst: Stall? { noted.max { $0.lateNs < $1.lateNs } }

    /// Whether the machine stopped for at least `ms` (less the watch's period, the
    /// uncertainty of a late wake) while watched.
    func stalled(atLeastMs ms: Double) -> Bool { Self.any(noted, atLeastMs: ms) }

    /// Whether one of `stalls` was at least `ms` late, less the watch's period (the uncertainty of a late wake).
    private static func any(_ stalls: [Stall], atLeastMs ms: Double) -> Bool {
        let bound = UInt64(max(0, ms * 1e6 - Double(periodNs)))
        return stalls.contains { $0.lateNs >= max(bound, noteNs) }
    }

    /// The normal thread's late wakes (none without `normalThread`).
    var normalNoted: [Stall] { state.normalStalls.withLock { $0 } }

    /// Whether a thread at normal scheduling could not run for at least `ms` (less the watch's period).
    func normalStalled(atLeastMs ms: Double) -> Bool { Self.any(normalNoted, atLeastMs: ms) }

    /// The most time one CPU lost to stalls within any `windowMs` (their lateness summed): a
    /// storm of short stalls starves a thread of a cycle as one long stall does.
    func worstBurstMs(windowMs: Double) -> Double {
        let window = UInt64(windowMs * 1e6)
        var worst: UInt64 = 0
        for cpu in 0..<cpus {
            let mine = noted.filter { $0.cpu == cpu }.sorted { $0.at < $1.at }
            var first = 0, sum: UInt64 = 0
            for s in mine {
                sum += s.lateNs
                while mine[first].at + window < s.at { sum -= mine[first].lateNs; first += 1 }
                worst = max(worst, sum)
            }
        }
        return Double(worst) / 1e6
    }

    /// For messages: how many stalls, the worst ones, over how long.
    var summary: String {
        let all = noted
        let seconds = Double(Self.now() - begin) / 1e9
        guard available else { return "stall watch unavailable (no real-time scheduling)" }
        guard !all.isEmpty else { return String(format: "no stall ≥ 1 ms in %.1f s", seconds) }
        let worst = all.sorted { $0.lateNs > $1.lateNs }.prefix(3).map(\.description).joined(separator: ", ")
        let normal = normalNoted.max { $0.lateNs < $1.lateNs }.map { String(format: "; a normal thread woke up to %.1f ms late", $0.lateMs) } ?? ""
        return String(format: "%d stalls ≥ 1 ms in %.1f s (worst: %@)%@", all.count, seconds, worst, normal)
    }

    /// One watching thread: on `cpu` at SCHED_FIFO 99, or (nil) at normal scheduling anywhere.
    private static func watch(cpu: Int?, _ state: State) {
        guard let cpu else {
            state.started.add(1, ordering: .releasing)
            tick(state) { late, next in state.normalStalls.withLock { $0.append(Stall(at: next, cpu: -1, lateNs: late)) } }
            return
        }
        var set = cpu_set_t()
        withUnsafeMutableBytes(of: &set) { $0[cpu / 8] |= UInt8(1 << (cpu % 8)) }
        // sched_setaffinity is a GNU extension Glibc's module does not declare: looked up instead.
        typealias SetAffinity = @convention(c) (pid_t, Int, UnsafeRawPointer) -> Int32
        let pinned = dlsym(nil, "sched_setaffinity").map { unsafeBitCast($0, to: SetAffinity.self)(0, MemoryLayout<cpu_set_t>.size, &set) == 0 } ?? false
        var param = sched_param(sched_priority: 99)
        if pinned && sched_setscheduler(0, SCHED_FIFO, &param) == 0 { state.realtime.add(1, ordering: .releasing) }
        state.started.add(1, ordering: .releasing)
        tick(state) { late, next in state.stalls.withLock { $0.append(Stall(at: next, cpu: cpu, lateNs: late)) } }
    }

    /// Wakes every `periodNs` until stopped; `note(late, when)` for each wake `noteNs` or more late.
    private static func tick(_ state: State, note: (UInt64, UInt64) -> Void) {
        var next = now()
        while state.running.load(ordering: .acquiring) {
            next += periodNs
            var ts = timespec(tv_sec: Int(next / 1_000_000_000), tv_nsec: Int(next % 1_000_000_000))
            while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nil) == EINTR {}
            let woke = now()
            if woke > next + noteNs {
                note(woke - next, next)
                next = woke
            }
        }
    }

    private static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }
}
