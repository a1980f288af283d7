import CPipeWire
import Foundation
import Synchronization
import Testing

/// How `PipeWireSink.open` takes over a new context's data loop (`cued_pw_take_data_loop`).
/// libpipewire 0.3.65 starts the loop's thread in `pw_context_new`, and `pw_data_loop_stop`
/// right after can wait forever: it asks the loop to stop through `pw_loop_invoke`, which runs
/// the request in the caller when the loop has no thread yet, so a thread starting just then
/// sleeps in epoll with nothing to wake it, and the stop joins it. Called directly, that hung
/// about once in 1,000 contexts here (a native stream's first open in about 1 in 30 runs of a
/// PipeWire test: cued answered nothing while its audio thread waited in the join).
/// No server is needed: the data loop is the context's own.
@Suite struct PipeWireDataLoopTests {
    @Test func takingANewContextsDataLoopNeverWaitsForever() throws {
        let contexts = 4_000
        let done = Atomic<Int>(0)
        let failed = Mutex<String?>(nil)
        let thread = Thread {
            if let why = cued_pw_load() { failed.withLock { $0 = String(cString: why) }; return }
            let slot = UnsafeMutablePointer<pthread_t>.allocate(capacity: 1)
            defer { slot.deallocate() }
            for _ in 0..<contexts {
                guard let loop = cued_pw_loop_new() else { failed.withLock { $0 = "pw_loop_new failed" }; return }
                cued_pw_loop_enter(loop)
                let props = cued_pw_properties_new()
                _ = cued_pw_properties_set(props, "config.name", "client.conf")
                guard let context = cued_pw_context_new(loop, props) else {
                    failed.withLock { $0 = "pw_context_new failed: errno \(errno)" }; return
                }
                slot.pointee = 0
                if let data = cued_pw_take_data_loop(context, slot, 2_000) {
                    // The caller owns it now: the thread it replaced is gone (the caller runs the loop).
                    _ = cued_pw_loop_iterate(data, 0)
                    cued_pw_loop_leave(data)
                } else {
                    failed.withLock { $0 = "cued_pw_take_data_loop failed: errno \(errno)" }
                }
                cued_pw_context_destroy(context)
                cued_pw_loop_leave(loop)
                cued_pw_loop_destroy(loop)
                done.add(1, ordering: .releasing)
            }
        }
        thread.start()
        // About 2.5 ms a context; a stuck one stays stuck (the thread is left behind then).
        let deadline = Date().addingTimeInterval(60)
        var last = 0, lastMoved = Date()
        while done.load(ordering: .acquiring) < contexts && Date() < deadline && Date().timeIntervalSince(lastMoved) < 10 {
            usleep(20_000)  // the poll's interval: the wait is on the count, with a deadline
            let now = done.load(ordering: .acquiring)
            if now != last { last = now; lastMoved = Date() }
        }
        let finished = done.load(ordering: .acquiring)
        #expect(finished == contexts, "took \(finished) of \(contexts) contexts' data loops; stuck on the next for \(Int(Date().timeIntervalSince(lastMoved))) s")
        #expect(failed.withLock { $0 } == nil)
    }
}
