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
/// `follow(pid:)` watches cued's audio threads (its own "cued-audio", and an ALSA plugin's data
/// thread) from the kernel's account of them (`/proc/PID/task/TID/schedstat`'s run delay): how
/// long each waited to run, runnable but given no CPU. Where they run at normal scheduling (a
/// user's cued without RTKit) the machine's other work keeps them waiting, which the real-time
/// watchers do not see; a wait the kernel counts is the scheduler's, and a thread slow of its own
/// (a lock, a page fault, a long mix) adds none.
final class StallWatch: @unchecked Sendable {
    struct Stall: CustomStringConvertible {
        /// When the thread should have woken (monotonic ns), on which CPU, how late.
        let at: UInt64
        let cpu: Int
        let lateNs: UInt64
        /// A followed thread's wait: its name (`audioThreads`); "" for a watcher's late wake.
        var thread = ""
        var lateMs: Double { Double(lateNs) / 1e6 }
        var description: String { String(format: "%.1f ms on cpu%d", lateMs, cpu) }
    }

    static let periodNs: UInt64 = 500_000
    /// Late wakes below this are not noted (a healthy machine wakes a FIFO 99 thread within tens of µs).
    static let noteNs: UInt64 = 1_000_000
    /// A followed thread's waits below this are not noted.
    static let waitNoteNs: UInt64 = 250_000

    /// What the watching threads share; they hold it, not the watch, so that releasing
    /// the watch stops them.
    private final class State: Sendable {
        let running = Atomic<Bool>(true)
        let started = Atomic<Int>(0)
        let realtime = Atomic<Int>(0)
        let stalls = Mutex<[Stall]>([])
        /// cued's audio threads' waits to run: `cpu` -1, `lateNs` how long (`follow`).
        let waits = Mutex<[Stall]>([])
        /// The processes whose audio threads are followed (`follow`), read by the follower.
        let followed = Mutex<[pid_t]>([])
        /// How many audio threads the follower has found and reads.
        let following = Atomic<Int>(0)
        /// The threads that could not make themselves real-time, and whether each is a watcher
        /// (not the follower): RTKit is asked for them.
        let tids = Mutex<[(pid_t, Bool)]>([])
    }

    private let state = State()
    private let cpus: Int
    private let begin = StallWatch.now()

    /// `rtkit`: where the tests are not root, the watching threads ask it for real time, as a
    /// desktop user's threads would (its highest priority, not 99: enough to see the machine stop,
    /// the way it stops for cued's own real-time thread).
    init(rtkit: RealtimeKitStack? = nil) {
        cpus = max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN)))
        for cpu in 0..<cpus {
            let state = self.state
            let t = Thread { StallWatch.watch(cpu: cpu, state) }
            t.name = "stall-watch-\(cpu)"
            t.start()
        }
        let state = self.state
        let t = Thread { StallWatch.follow(state) }
        t.name = "stall-watch-run"
        t.start()
        for _ in 0..<500 where state.started.load(ordering: .acquiring) < cpus + 1 { usleep(2_000) }
        if let rtkit, state.realtime.load(ordering: .acquiring) < cpus {
            // RTKit grants a process whose RLIMIT_RTTIME is bounded (these threads sleep every period).
            var rl = rlimit(rlim_cur: 200_000, rlim_max: 200_000)
            var old = rlimit()
            if getrlimit(__rlimit_resource_t(15), &old) == 0, old.rlim_max < rl.rlim_max { rl = old }
            _ = setrlimit(__rlimit_resource_t(15), &rl)
            for (tid, watcher) in state.tids.withLock({ $0 }) where rtkit.makeRealtime(pid: getpid(), tid: tid) && watcher {
                state.realtime.add(1, ordering: .releasing)
            }
        }
    }

    deinit { stop() }

    /// Every watching thread runs real-time on its own CPU (SCHED_FIFO 99, or RTKit's).
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

    /// Follows the audio threads (`audioThreads`) of the process `pid` (cued) until it is gone.
    func follow(pid: pid_t) { state.followed.withLock { $0.append(pid) } }

    /// How many audio threads the follower has found and reads.
    var following: Int { state.following.load(ordering: .acquiring) }

    /// The followed threads' waits to run, a quarter millisecond or more each.
    var waits: [Stall] { state.waits.withLock { $0 } }

    /// Whether a followed thread waited at least `ms` to run, at once (less the watch's period).
    func waited(atLeastMs ms: Double, threads: Set<String> = audioThreads) -> Bool {
        Self.any(waits.filter { threads.contains($0.thread) }, atLeastMs: ms)
    }

    /// The followed threads that run at normal scheduling whatever cued's own does: the pulse
    /// plugin's mainloop (libasound2-plugins asks no real time for it).
    static let normalThreads: Set<String> = ["threaded-ml"]

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

    /// Why a run with a hole on a graph whose shortest cycle is `frames` (48 kHz) proves nothing
    /// of cued (nil: it does): the watch saw the machine stop for a cycle (less the half
    /// millisecond it looks every), or lose a cycle in stalls within four; or, where cued's audio
    /// thread is a normal one (`normalThread`: no RTKit), the kernel kept it waiting to run for a
    /// cycle; so too a thread that is normal whatever cued's is (`normalThreads`: the pulse
    /// plugin's, which carries cued's audio to pipewire-pulse). Unavailable (no real time for the watch), it saw nothing: every hole is cued's.
    func spoiled(cycle frames: Int, normalThread: Bool) -> String? {
        guard available else { return nil }
        let cycle = Double(frames) * 1000 / 48_000
        let burst = worstBurstMs(windowMs: 4 * cycle)
        if stalled(atLeastMs: cycle - 0.5) || burst >= cycle {
            return String(format: "the machine stopped running threads for a graph cycle of %d frames (%.1f ms) or more (at most %.1f ms lost on one CPU within 4 cycles)", frames, cycle, burst)
        }
        if waited(atLeastMs: cycle - 0.5, threads: normalThread ? Self.audioThreads : Self.normalThreads) {
            return String(format: "the kernel kept a normal audio thread of cued's (or of its ALSA plugin's) waiting for a graph cycle of %d frames (%.1f ms) or more", frames, cycle)
        }
        return nil
    }

    /// For messages: how many stalls, the worst ones, over how long.
    var summary: String {
        let all = noted
        let seconds = Double(Self.now() - begin) / 1e9
        guard available else { return "stall watch unavailable (no real-time scheduling)" }
        let worst = all.sorted { $0.lateNs > $1.lateNs }.prefix(3).map(\.description).joined(separator: ", ")
        let long = waits.filter { $0.lateNs >= Self.noteNs }.sorted { $0.lateNs > $1.lateNs }
        let normal = long.isEmpty ? "" : String(format: "; cued's audio threads waited to run %d times ≥ 1 ms (worst: %@)", long.count,
                                                 long.prefix(3).map { String(format: "%.1f ms", $0.lateMs) }.joined(separator: ", "))
        let machine = all.isEmpty ? String(format: "no stall ≥ 1 ms in %.1f s", seconds)
                                  : String(format: "%d stalls ≥ 1 ms in %.1f s (worst: %@)", all.count, seconds, worst)
        return machine + normal
    }

    /// One watching thread: on `cpu` at SCHED_FIFO 99.
    private static func watch(cpu: Int, _ state: State) {
        let pinned = pin(to: cpu)
        var param = sched_param(sched_priority: 99)
        if pinned && sched_setscheduler(0, SCHED_FIFO, &param) == 0 { state.realtime.add(1, ordering: .releasing) }
        else if pinned { state.tids.withLock { $0.append((threadID(), true)) } }
        state.started.add(1, ordering: .releasing)
        tick(state, note: { late, next in state.stalls.withLock { $0.append(Stall(at: next, cpu: cpu, lateNs: late)) } })
    }

    /// The calling thread's id (glibc's gettid, which Glibc's module does not declare: looked up).
    static func threadID() -> pid_t {
        typealias GetTID = @convention(c) () -> pid_t
        return dlsym(nil, "gettid").map { unsafeBitCast($0, to: GetTID.self)() } ?? -1
    }

    /// Pins the calling thread to `cpu`; false where it may not.
    static func pin(to cpu: Int) -> Bool {
        var set = cpu_set_t()
        withUnsafeMutableBytes(of: &set) { $0[cpu / 8] |= UInt8(1 << (cpu % 8)) }
        // sched_setaffinity is a GNU extension Glibc's module does not declare: looked up instead.
        typealias SetAffinity = @convention(c) (pid_t, Int, UnsafeRawPointer) -> Int32
        return dlsym(nil, "sched_setaffinity").map { unsafeBitCast($0, to: SetAffinity.self)(0, MemoryLayout<cpu_set_t>.size, &set) == 0 } ?? false
    }

    /// The threads cued's audio passes through: its own, and the data thread of the ALSA plugin it
    /// writes to (pipewire's, pulse's).
    static let audioThreads: Set<String> = ["cued-audio", "alsa-pipewire", "threaded-ml"]

    /// The follower: every period, each followed process's audio threads' run delay, the
    /// kernel's sum of a thread's waits to run (schedstat's second field, ns). A rise of
    /// `waitNoteNs` or more between two looks is one wait (a thread woken once a graph cycle waits
    /// at most once a period), counted whole when it ends. FIFO 99 so that it looks every period;
    /// the account is the kernel's either way.
    private static func follow(_ state: State) {
        var param = sched_param(sched_priority: 99)
        if sched_setscheduler(0, SCHED_FIFO, &param) != 0 { state.tids.withLock { $0.append((threadID(), false)) } }
        state.started.add(1, ordering: .releasing)
        var threads: [String: (fd: Int32, delay: UInt64, name: String)] = [:]  // by "pid/tid"
        var looks = 0
        tick(state, each: {
            // Threads are looked for every 10 ms (cued starts its own after its socket, a plugin's
            // at each device open).
            looks += 1
            if looks % 20 == 0 {
                for pid in state.followed.withLock({ $0 }) {
                    guard let tids = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task") else {
                        state.followed.withLock { $0.removeAll { $0 == pid } }
                        continue
                    }
                    for tid in tids where threads["\(pid)/\(tid)"] == nil {
                        let task = "/proc/\(pid)/task/\(tid)/"
                        let comm = ((try? String(contentsOfFile: task + "comm", encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
                        guard audioThreads.contains(comm) else { continue }
                        let fd = open(task + "schedstat", O_RDONLY | O_CLOEXEC)
                        if fd >= 0 { threads["\(pid)/\(tid)"] = (fd, runDelay(fd) ?? 0, comm) }
                    }
                }
            }
            for (key, t) in threads {
                guard let delay = runDelay(t.fd) else { close(t.fd); threads[key] = nil; continue }
                if delay >= t.delay + waitNoteNs { state.waits.withLock { $0.append(Stall(at: now(), cpu: -1, lateNs: delay - t.delay, thread: t.name)) } }
                threads[key]?.delay = delay
            }
            state.following.store(threads.count, ordering: .releasing)
        })
        for t in threads.values { close(t.fd) }
    }

    /// schedstat's run delay (ns) read again from its start; nil once the thread is gone.
    private static func runDelay(_ fd: Int32) -> UInt64? {
        var buf = [UInt8](repeating: 0, count: 96)
        let n = buf.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count - 1, 0) }
        guard n > 0 else { return nil }
        let fields = String(decoding: buf[0..<n], as: UTF8.self).split(separator: " ")
        return fields.count >= 2 ? UInt64(fields[1]) : nil
    }

    /// Wakes every `periodNs` until stopped; `note(late, when)` for each wake `noteNs` or more
    /// late, `each()` at every wake.
    private static func tick(_ state: State, note: (UInt64, UInt64) -> Void = { _, _ in }, each: () -> Void = {}) {
        var next = now()
        while state.running.load(ordering: .acquiring) {
            next += periodNs
            var ts = timespec(tv_sec: Int(next / 1_000_000_000), tv_nsec: Int(next % 1_000_000_000))
            while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nil) == EINTR {}
            let woke = now()
            each()
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
