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
    @Test func aWaitForcedOnAFollowedThreadIsSeenWhole() throws {
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
