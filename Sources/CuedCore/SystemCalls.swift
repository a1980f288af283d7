/// glibc calls that Swift's Glibc module does not export (<sys/eventfd.h> is not part of
/// it, nor is gettid), declared once for every module: CuedCore imports no C target of
/// its own.
public enum SystemCall {
    /// eventfd(2): a counter a thread sleeps on in `poll()`; `flags` O_NONBLOCK and
    /// O_CLOEXEC (EFD_NONBLOCK and EFD_CLOEXEC have their values). -1 and errno on failure.
    public static func eventfd(_ initval: UInt32 = 0, flags: Int32) -> Int32 { glibc_eventfd(initval, flags) }

    /// gettid(3): the calling thread's id (what setpriority on one thread takes).
    public static func gettid() -> Int32 { glibc_gettid() }
}

@_silgen_name("eventfd")
private func glibc_eventfd(_ initval: UInt32, _ flags: Int32) -> Int32

@_silgen_name("gettid")
private func glibc_gettid() -> Int32
