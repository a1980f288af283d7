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
