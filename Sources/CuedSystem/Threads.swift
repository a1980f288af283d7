#if canImport(Glibc)
import Glibc
#endif

/// Names a thread cued starts ("cued-audio", at most 15 bytes), as `top -H`, `ps -L` and a
/// debugger show it. glibc's `pthread_setname_np` is declared only under _GNU_SOURCE, which
/// Swift's Glibc module does not define.
@_silgen_name("pthread_setname_np")
private func pthread_setname_np_(_ thread: pthread_t, _ name: UnsafePointer<CChar>) -> Int32

public func nameThread(_ thread: pthread_t, _ name: StaticString) {
    name.withUTF8Buffer { raw in
        raw.withMemoryRebound(to: CChar.self) { _ = pthread_setname_np_(thread, $0.baseAddress!) }
    }
}

/// Every thread cued starts, started one way: named, with every signal blocked (signals are the
/// main thread's, taken with sigwaitinfo, even one that arrives before the thread runs), and
/// detached unless it is to be joined. No Dispatch, no Foundation: a pthread and its body.
public enum CuedThread {
    /// Why a thread did not start: pthread_create's error.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public let code: Int32
        public var description: String { errnoString(code) }
    }

    private final class Start {
        let body: () -> Void
        init(_ body: @escaping () -> Void) { self.body = body }
    }

    /// Starts `body` on a thread of its own named `name`; its handle (join it if `joinable`).
    @discardableResult
    public static func start(_ name: StaticString, joinable: Bool = false,
                             _ body: sending @escaping () -> Void) -> Result<pthread_t, Failure> {
        let box = Unmanaged.passRetained(Start(body))
        var all = sigset_t(), old = sigset_t()
        sigfillset(&all)
        pthread_sigmask(SIG_SETMASK, &all, &old)
        var thread = pthread_t()
        let rc = pthread_create(&thread, nil, { arg in
            Unmanaged<Start>.fromOpaque(arg!).takeRetainedValue().body()
            return nil
        }, box.toOpaque())
        pthread_sigmask(SIG_SETMASK, &old, nil)
        guard rc == 0 else {
            box.release()
            return .failure(Failure(code: rc))
        }
        nameThread(thread, name)
        if !joinable { pthread_detach(thread) }
        return .success(thread)
    }
}
