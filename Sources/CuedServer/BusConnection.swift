import CSDBus
import CuedSystem
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// One connection to the session bus and what hangs on it: the sd-bus handle, the
/// notification monitor (a second connection, when asked for), and the slots of the
/// matches and objects registered on it. Closing it closes them all. The bus thread's own.
final class BusConnection {
    let bus: OpaquePointer
    /// The monitor of Notify calls, while it lasts.
    private(set) var monitor: OpaquePointer?
    private var slots: [OpaquePointer?] = []
    private var matches: [Match] = []
    private var closed = false
    private var sd: cued_sd_api { cued_sd().pointee }

    private init(bus: OpaquePointer) { self.bus = bus }

    /// Opens a connection to `address`, else to the user's session bus; libsystemd must be
    /// loaded. The error (strerror) if it cannot.
    static func open(address: String?) -> Result<BusConnection, OpenError> {
        let sd = cued_sd().pointee
        var b: OpaquePointer?
        var r: Int32
        if let address {
            r = sd.sd_bus_new!(&b)
            if r >= 0 { _ = sd.sd_bus_set_description!(b, "cued") }
            if r >= 0 { r = sd.sd_bus_set_address!(b, address) }
            if r >= 0 { r = sd.sd_bus_set_bus_client!(b, 1) }
            if r >= 0 { r = sd.sd_bus_start!(b) }
        } else {
            r = sd.sd_bus_open_user_with_description!(&b, "cued")
        }
        guard r >= 0, let b else {
            if let b { _ = sd.sd_bus_flush_close_unref!(b) }
            return .failure(OpenError(description: errnoString(-r)))
        }
        return .success(BusConnection(bus: b))
    }

    struct OpenError: Error, CustomStringConvertible { let description: String }

    /// A match's handler and its bus, the userdata of its slot (kept while the connection lasts).
    private final class Match {
        unowned let owner: DesktopBus
        let handler: (DesktopBus, OpaquePointer) -> Void
        init(owner: DesktopBus, handler: @escaping (DesktopBus, OpaquePointer) -> Void) { self.owner = owner; self.handler = handler }
    }

    /// Calls `handler` on the bus thread for each message matching `rule`; false if the bus refused the match.
    @discardableResult
    func addMatch(_ rule: String, owner: DesktopBus, _ handler: @escaping (DesktopBus, OpaquePointer) -> Void) -> Int32 {
        let match = Match(owner: owner, handler: handler)
        matches.append(match)
        var slot: OpaquePointer?
        let r = sd.sd_bus_add_match!(bus, &slot, rule, { m, ud, _ in
            guard let m, let ud else { return 0 }
            let match = Unmanaged<Match>.fromOpaque(ud).takeUnretainedValue()
            match.handler(match.owner, m)
            return 0
        }, Unmanaged.passUnretained(match).toOpaque())
        if r >= 0 { slots.append(slot) }
        return r
    }

    /// A slot (an object, a pending call) released with the connection.
    func keep(_ slot: OpaquePointer?) { slots.append(slot) }

    /// Makes the monitor connection; nil, or why the bus refused it.
    func watchNotifications() -> String? {
        var address: UnsafePointer<CChar>?
        guard sd.sd_bus_get_address!(bus, &address) >= 0, let address else { return "no bus address" }
        var error = sd_bus_error()
        defer { sd.sd_bus_error_free!(&error) }
        var m: OpaquePointer?
        let r = cued_monitor_open(address, &m, &error)
        guard r >= 0, let m else { return "refused: " + (error.message.map { String(cString: $0) } ?? errnoString(-r)) }
        monitor = m
        return nil
    }

    /// Lets sd-bus do all it can without waiting (dispatch calls, send what is queued);
    /// why the connection is broken, if it is.
    func process() -> String? {
        var r: Int32 = 1
        while r > 0 { r = sd.sd_bus_process!(bus, nil) }
        if r < 0 { return errnoString(-r) }
        return sd.sd_bus_is_open!(bus) > 0 ? nil : "the bus closed the connection"
    }

    /// The monitor's messages, each to `seen`; false once its connection broke (it is then closed).
    func processMonitor(_ seen: (OpaquePointer) -> Void) -> Bool {
        guard let m = monitor else { return true }
        var r: Int32 = 1
        while r > 0 {
            var message: OpaquePointer?
            r = sd.sd_bus_process!(m, &message)
            if let message {
                seen(message)
                _ = sd.sd_bus_message_unref!(message)
            }
        }
        guard r < 0 || sd.sd_bus_is_open!(m) <= 0 else { return true }
        _ = sd.sd_bus_flush_close_unref!(m)
        monitor = nil
        return false
    }

    /// The descriptors to poll, with the events sd-bus waits for, and its own timeout (µs, monotonic).
    func pollFD() -> pollfd { pollfd(fd: sd.sd_bus_get_fd!(bus), events: Int16(sd.sd_bus_get_events!(bus)), revents: 0) }
    func monitorPollFD() -> pollfd? {
        monitor.map { pollfd(fd: sd.sd_bus_get_fd!($0), events: Int16(sd.sd_bus_get_events!($0)), revents: 0) }
    }
    var timeoutMicroseconds: UInt64? {
        var usec: UInt64 = 0
        return sd.sd_bus_get_timeout!(bus, &usec) >= 0 && usec != UInt64.max ? usec : nil
    }

    /// Messages queued for a bus that does not read them (hung).
    var queuedWrites: UInt64? {
        var queued: UInt64 = 0
        return sd.sd_bus_get_n_queued_write!(bus, &queued) >= 0 ? queued : nil
    }

    /// Leaves the bus: the name goes back to the queue's next owner.
    func close() {
        guard !closed else { return }
        closed = true
        for slot in slots { _ = sd.sd_bus_slot_unref!(slot) }
        slots = []
        matches = []
        if let m = monitor { _ = sd.sd_bus_flush_close_unref!(m); monitor = nil }
        _ = sd.sd_bus_flush_close_unref!(bus)
    }

    deinit { close() }
}
