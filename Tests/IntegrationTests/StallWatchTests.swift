import Foundation
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The stall watch's account of cued's audio threads, by which make test's run without RTKit
/// judges a hole the machine's: a wait the kernel made that thread sit through is seen, and
/// how long it was.
@Suite struct StallWatchTests {
    /// Why this process may not schedule a thread SCHED_FIFO 99 (the watch's threads and the test's
    /// spinner), or nil: tried once, on a thread of its own that ends after. Root may; a user has no
    /// CAP_SYS_NICE and an RLIMIT_RTPRIO of 0, which only root can raise, and a user namespace's
    /// capabilities do not count for the scheduler. (RTKit, a user's real time on a desktop, grants
    /// priority 20 at most, to threads it is asked for: a daemon of root's, which cued's own tests
    /// of it run privately as root.)
    static let realtimeRefusedReason: String? = {
        let tried = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var failure: Int32 = 0
        let thread = Thread {
            var param = sched_param(sched_priority: 99)
            failure = sched_setscheduler(0, SCHED_FIFO, &param) == 0 ? 0 : errno
            tried.signal()
        }
        thread.start()
        tried.wait()
        guard failure != 0 else { return nil }
        var limit = rlimit()
        getrlimit(__rlimit_resource_t(14), &limit)  // RLIMIT_RTPRIO (glibc's enum constant does not import)
        return "needs real-time scheduling (SCHED_FIFO 99), refused to uid \(getuid()): \(String(cString: strerror(failure)))"
            + " (no CAP_SYS_NICE, RLIMIT_RTPRIO \(limit.rlim_cur); root may)"
    }()

    @Test(.enabled(if: StallWatchTests.realtimeRefusedReason == nil, Comment(rawValue: StallWatchTests.realtimeRefusedReason ?? "")))
    func aWaitForcedOnAFollowedThreadIsSeenWhole() throws {
        let dir = TempDir()
        // A busy process on CPU 0 whose thread bears the name of cued's audio thread (a thread's
        // name starts as the file run).
        let named = dir.file("cued-audio")
        try FileManager.default.createSymbolicLink(atPath: named, withDestinationPath: "/bin/sh")
        let busy = try Subprocess("/usr/bin/taskset", ["-c", "0", named, "-c", "while :; do :; done"])
        defer { busy.stop(grace: 0) }
        let watch = StallWatch()
        defer { watch.stop() }
        try #require(watch.available, "the watch needs real-time scheduling (the tests run as root)")
        watch.follow(pid: busy.pid)
        #expect(eventually(timeout: 5) { watch.following == 1 }, "the follower did not find the thread named cued-audio")

        // A real-time thread on CPU 0 keeps the busy one from running for 30 ms.
        let spun = DispatchSemaphore(value: 0)
        let spinner = Thread {
            var param = sched_param(sched_priority: 50)
            if StallWatch.pin(to: 0) && sched_setscheduler(0, SCHED_FIFO, &param) == 0 {
                let end = Date().addingTimeInterval(0.030)
                while Date() < end {}
            }
            spun.signal()
        }
        spinner.start()
        spun.wait()
        #expect(eventually(timeout: 5) { watch.waited(atLeastMs: 25) },
                "no wait of 25 ms or more seen; \(watch.summary)")
        #expect(watch.summary.contains("cued's audio threads waited to run"), "\(watch.summary)")
    }
}
