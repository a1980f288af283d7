import CSDBus
import CuedCore
import CuedProtocol
import CuedSystem
import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

@_silgen_name("eventfd")
private func bus_eventfd(_ initval: UInt32, _ flags: Int32) -> Int32

/// Where cued stands on the session bus (`status`'s `bus`).
public struct BusStatus: Sendable, Equatable {
    public enum Connection: String, Sendable {
        /// `[dbus] enabled = false`.
        case off
        /// No session bus answers (none in this session, or it went away): retried.
        case absent
        case connected
    }
    /// org.sigxcpu.Feedback: cued's, queued behind another owner (feedbackd), or not asked for.
    public enum Name: String, Sendable { case none, owner, queued }
    public var connection: Connection = .off
    public var feedback: Name = .none
    /// `off`, `watching`, or why not (the bus refused to make cued a monitor).
    public var notifications = "off"
    /// The last failure to connect, while absent.
    public var error: String?
    public init() {}
}

/// A TriggerFeedback call, copied off its message.
public struct FeedbackTrigger: Sendable, Equatable {
    public var id: UInt32
    /// The caller's unique bus name (its feedbacks end when it leaves the bus).
    public var sender: String
    public var appID: String
    public var event: String
    /// -1: each feedback once; 0: loop until ended; N: at most N seconds.
    public var timeout: Int32
    public var profile: String?
    public var important: Bool
    public var soundFile: String?
    public init(id: UInt32, sender: String, appID: String, event: String, timeout: Int32,
                profile: String? = nil, important: Bool = false, soundFile: String? = nil) {
        self.id = id; self.sender = sender; self.appID = appID; self.event = event; self.timeout = timeout
        self.profile = profile; self.important = important; self.soundFile = soundFile
    }
}

/// A Notify call seen on the bus, as far as its sound goes.
public struct NotificationSeen: Sendable, Equatable {
    public var appName: String
    public var soundFile: String?
    public var soundName: String?
    public var desktopEntry: String?
    public var category: String?
    public var suppressSound: Bool
    /// 0 low, 1 normal, 2 critical; nil when the hint is absent (normal).
    public var urgency: Int?
    public init(appName: String, soundFile: String? = nil, soundName: String? = nil, desktopEntry: String? = nil,
                category: String? = nil, suppressSound: Bool = false, urgency: Int? = nil) {
        self.appName = appName; self.soundFile = soundFile; self.soundName = soundName; self.desktopEntry = desktopEntry
        self.category = category; self.suppressSound = suppressSound; self.urgency = urgency
    }
}

/// What the bus asks of the daemon. Called on the bus thread: an implementation
/// hops to the event loop and never blocks.
public protocol DesktopBusHost: Sendable {
    func trigger(_ t: FeedbackTrigger)
    func end(_ id: UInt32)
    /// A valid profile name, set through the `Profile` property by `sender`.
    func setProfile(_ name: String, sender: String)
    func notified(_ n: NotificationSeen)
    /// A bus client left: its feedbacks end (as feedbackd does).
    func left(_ sender: String)
    func statusChanged(_ s: BusStatus)
}

/// cued's face on the session bus: org.sigxcpu.Feedback (feedbackd's interface)
/// at /org/sigxcpu/Feedback, and, when asked, a second connection that watches
/// org.freedesktop.Notifications.Notify calls as a monitor (as dbus-monitor
/// does: it sees them, it does not answer them).
///
/// A thread of its own runs sd-bus (libsystemd): it polls the bus connections
/// and an eventfd that `post` writes, so neither the event loop nor the audio
/// thread ever waits on the bus. Replies to TriggerFeedback and EndFeedback go
/// out at once (an id is the bus thread's to hand out); the sound is the
/// loop's, and its end comes back through `feedbackEnded`. With no session
/// bus, or when it goes away, cued runs on and tries again: when the bus's
/// socket appears (inotify on its directory, so an idle cued without a bus
/// does not wake), else 0.5 s, 1 s, 2 s… after a loss, at most every 60 s.
public final class DesktopBus: @unchecked Sendable {
    public struct Options: Sendable {
        /// Ask for org.sigxcpu.Feedback.
        public var feedback = true
        /// Take the name from its owner (feedbackd's `--replace`); otherwise wait in the queue.
        public var replace = false
        /// Watch Notify calls.
        public var notifications = false
        /// The bus to use (tests); nil: the session bus (DBUS_SESSION_BUS_ADDRESS, else $XDG_RUNTIME_DIR/bus).
        public var address: String?
        /// The session bus's socket, watched while there is no bus (`DesktopBus.socketPath(environment:)`).
        public var socketPath: String?
        /// Whether the environment names a session bus at all (`DesktopBus.busConfigured(environment:)`).
        public var busConfigured = true
        public init() {}
    }

    public static let name = "org.sigxcpu.Feedback"
    static let retryFirstMs: Int64 = 500
    static let retryMaxMs: Int64 = 60_000

    private let options: Options
    private let host: any DesktopBusHost
    private let logger: Logger
    private let wakeFD: Int32
    private let inbox = Mutex<[@Sendable (DesktopBus) -> Void]>([])
    private let stopped = Atomic<Bool>(false)
    private let finished = Atomic<Bool>(false)
    /// The profile the `Profile` property shows (the loop tells; the bus thread reads).
    private let profile = Mutex<String>("full")
    private let profileSignalPending = Atomic<Bool>(false)
    private let handlers: UnsafeMutablePointer<cued_fb_handlers>

    /// sd-bus's functions (libsystemd, loaded by `connect` before the first call).
    private var sd: cued_sd_api { cued_sd().pointee }
    // The bus thread's own.
    private var bus: OpaquePointer?
    private var monitor: OpaquePointer?
    private var slots: [OpaquePointer?] = []
    private var status = BusStatus()
    private var nextID: UInt32 = 1
    private var retryMs = DesktopBus.retryFirstMs
    private var nextAttempt: UInt64 = 0
    private var thread = pthread_t()
    private var started = false
    /// Watches the bus socket's directory while there is no bus (-1: none).
    private var watchFD: Int32 = -1
    private var socketName = ""

    public init(options: Options, host: any DesktopBusHost, logger: Logger) {
        self.options = options
        self.host = host
        self.logger = logger
        wakeFD = bus_eventfd(0, O_NONBLOCK | O_CLOEXEC)
        handlers = .allocate(capacity: 1)
        // Made now, not when the bus is first missed: the descriptors cued holds once it listens are all there.
        defer { watchForSocket() }
        handlers.initialize(to: cued_fb_handlers(
            trigger: { ud, call, t in DesktopBus.from(ud).onTrigger(call, t!.pointee) },
            end: { ud, call, id in DesktopBus.from(ud).onEnd(call, id) },
            get_profile: { ud in DesktopBus.from(ud).profileCString() },
            set_profile: { ud, sender, value, error in
                DesktopBus.from(ud).onSetProfile(value.map { String(cString: $0) } ?? "", sender: sender.map { String(cString: $0) } ?? "", error)
            }))
    }

    deinit {
        handlers.deinitialize(count: 1)
        handlers.deallocate()
        if wakeFD >= 0 { close(wakeFD) }
    }

    private static func from(_ ud: UnsafeMutableRawPointer?) -> DesktopBus {
        Unmanaged<DesktopBus>.fromOpaque(ud!).takeUnretainedValue()
    }

    // MARK: - The loop's side (any thread)

    /// Starts the bus thread (every signal blocked in it: they are the main thread's).
    public func start() {
        guard wakeFD >= 0 else {
            logger.error("D-Bus: no eventfd; the bus stays off")
            return
        }
        let box = Unmanaged.passRetained(self)
        var all = sigset_t(), old = sigset_t()
        sigfillset(&all)
        pthread_sigmask(SIG_SETMASK, &all, &old)
        let rc = pthread_create(&thread, nil, { arg in
            let bus = Unmanaged<DesktopBus>.fromOpaque(arg!).takeRetainedValue()
            bus.run()
            return nil
        }, box.toOpaque())
        pthread_sigmask(SIG_SETMASK, &old, nil)
        if rc == 0 { nameThread(thread, "cued-dbus"); started = true } else {
            box.release()
            logger.error("D-Bus: cannot start its thread; the bus stays off", metadata: ["error": "\(rc)"])
        }
    }

    /// Not started (the descriptor limit): `status` says why.
    public func turnedOff(because why: String) {
        var s = BusStatus()
        s.error = why
        host.statusChanged(s)
    }

    /// Leaves the bus (the name goes back to the queue's next owner) and ends the
    /// thread; waits for it at most 200 ms (a bus that hangs holds it in a call: the
    /// process exits without it).
    public func stop() {
        stopped.store(true, ordering: .relaxed)
        wake()
        guard started else { return }
        for _ in 0..<40 where !finished.load(ordering: .acquiring) { usleep(5_000) }
        if finished.load(ordering: .acquiring) { pthread_join(thread, nil) } else { pthread_detach(thread) }
        started = false
    }

    /// A feedback's one end, as the FeedbackEnded signal.
    public func feedbackEnded(_ id: UInt32, reason: FeedbackEndReason) {
        post { bus in
            guard let b = bus.bus, bus.roomToSend(b) else { return }
            let r = cued_emit_feedback_ended(b, id, UInt32(bitPattern: reason.rawValue))
            if r < 0 { bus.logger.debug("D-Bus: FeedbackEnded not sent", metadata: ["error": "\(errnoString(-r))"]) }
        }
    }

    /// The global profile changed (from any source): the property and its PropertiesChanged.
    public func profileChanged(_ name: String) {
        profile.withLock { $0 = name }
        // One PropertiesChanged however many changes came meanwhile (it carries the latest value).
        guard !profileSignalPending.exchange(true, ordering: .relaxed) else { return }
        post { bus in
            bus.profileSignalPending.store(false, ordering: .relaxed)
            guard let b = bus.bus, bus.roomToSend(b) else { return }
            _ = cued_emit_profile_changed(b)
        }
    }

    /// Messages queued for a bus that does not read them (hung) stay in memory: past
    /// this many, signals are dropped (said once) rather than queued.
    static let maxQueuedWrites: UInt64 = 1024
    private var dropping = false

    private func roomToSend(_ b: OpaquePointer) -> Bool {
        var queued: UInt64 = 0
        guard sd.sd_bus_get_n_queued_write!(b, &queued) >= 0, queued >= Self.maxQueuedWrites else {
            dropping = false
            return true
        }
        if !dropping { logger.warning("D-Bus: the bus is not reading; signals are dropped until it does", metadata: ["queued": "\(queued)"]) }
        dropping = true
        return false
    }

    /// Sets what the `Profile` property shows, without a signal (at start).
    public func setInitialProfile(_ name: String) { profile.withLock { $0 = name } }

    private func post(_ job: @escaping @Sendable (DesktopBus) -> Void) {
        inbox.withLock { $0.append(job) }
        wake()
    }

    private func wake() {
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    // MARK: - The bus thread

    private func run() {
        setStatus { $0.connection = .absent }
        var fds = [pollfd](repeating: pollfd(), count: 3)
        while !stopped.load(ordering: .relaxed) {
            if bus == nil, MonotonicNow.ms() >= nextAttempt { connect() }
            drainInbox()
            pump()
            // Wait: the eventfd, the bus, the monitor; until sd-bus's timeout or the next attempt.
            var n = 1
            fds[0] = pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)
            var timeout: Int64 = -1
            if let b = bus {
                fds[n] = pollfd(fd: sd.sd_bus_get_fd!(b), events: Int16(sd.sd_bus_get_events!(b)), revents: 0); n += 1
                var usec: UInt64 = 0
                if sd.sd_bus_get_timeout!(b, &usec) >= 0, usec != UInt64.max {
                    let nowUs = MonotonicNow.ms() * 1000
                    timeout = usec > nowUs ? Int64((usec - nowUs + 999) / 1000) : 0
                }
            } else {
                if nextAttempt != UInt64.max {
                    let now = MonotonicNow.ms()
                    timeout = nextAttempt > now ? Int64(nextAttempt - now) : 0
                }
                if watchFD >= 0 { fds[n] = pollfd(fd: watchFD, events: Int16(POLLIN), revents: 0); n += 1 }
            }
            if let m = monitor {
                fds[n] = pollfd(fd: sd.sd_bus_get_fd!(m), events: Int16(sd.sd_bus_get_events!(m)), revents: 0); n += 1
            }
            let rc = poll(&fds, nfds_t(n), Int32(clamping: timeout))
            if rc < 0 && errno != EINTR { usleep(10_000) }
            if fds[0].revents != 0 {
                var value: UInt64 = 0
                _ = read(wakeFD, &value, 8)
            }
            if bus == nil, watchFD >= 0, n > 1, fds[1].fd == watchFD, fds[1].revents != 0, socketAppeared() {
                nextAttempt = 0
            }
        }
        if watchFD >= 0 { close(watchFD); watchFD = -1 }
        disconnect(reason: nil)
        setStatus { $0 = BusStatus() }
        finished.store(true, ordering: .releasing)
    }

    private func drainInbox() {
        let jobs = inbox.withLock { jobs -> [@Sendable (DesktopBus) -> Void] in defer { jobs = [] }; return jobs }
        for job in jobs { job(self) }
    }

    /// Lets sd-bus do all it can without waiting: dispatch calls, send what is queued.
    private func pump() {
        if let b = bus {
            var r: Int32 = 1
            while r > 0 { r = sd.sd_bus_process!(b, nil) }
            if r < 0 || sd.sd_bus_is_open!(b) <= 0 {
                disconnect(reason: r < 0 ? errnoString(-r) : "the bus closed the connection")
                return
            }
        }
        if let m = monitor {
            var r: Int32 = 1
            while r > 0 {
                var message: OpaquePointer?
                r = sd.sd_bus_process!(m, &message)
                if let message {
                    seen(message)
                    _ = sd.sd_bus_message_unref!(message)
                }
            }
            if r < 0 || sd.sd_bus_is_open!(m) <= 0 {
                logger.warning("D-Bus: the notification monitor was disconnected; watching again at the next connection")
                _ = sd.sd_bus_flush_close_unref!(m)
                monitor = nil
                setStatus { $0.notifications = "lost" }
            }
        }
    }

    private func connect() {
        // No bus to connect to: libsystemd is not loaded for nothing (the socket is watched).
        if options.address == nil, let path = options.socketPath, FileSystem.entry(path) == .none {
            retry(error: "no session bus at \(path)")
            return
        }
        if options.address == nil && !options.busConfigured {
            retry(error: "no session bus (neither DBUS_SESSION_BUS_ADDRESS nor XDG_RUNTIME_DIR is set)")
            return
        }
        if let why = cued_sd_load() {
            retry(error: String(cString: why))
            return
        }
        var b: OpaquePointer?
        var r: Int32
        if let address = options.address {
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
            retry(error: errnoString(-r))
            return
        }
        bus = b
        // The bus's own news about our name, and about clients that leave (arg2 empty).
        addMatch(b, "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',interface='org.freedesktop.DBus',member='NameAcquired'") { bus, m in
            var name: UnsafePointer<CChar>?
            if cued_read_s(m, &name) >= 0, let name, String(cString: name) == DesktopBus.name { bus.setStatus { $0.feedback = .owner } }
        }
        addMatch(b, "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',interface='org.freedesktop.DBus',member='NameLost'") { bus, m in
            var name: UnsafePointer<CChar>?
            if cued_read_s(m, &name) >= 0, let name, String(cString: name) == DesktopBus.name {
                bus.logger.notice("D-Bus: \(DesktopBus.name) was taken by another process; cued waits in the queue for it")
                bus.setStatus { $0.feedback = .queued }
                // Its clients' EndFeedback now goes to the new owner: loops here could never be ended.
                bus.host.left("*")
            }
        }
        addMatch(b, "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',interface='org.freedesktop.DBus',member='NameOwnerChanged',arg2=''") { bus, m in
            var name: UnsafePointer<CChar>?, old: UnsafePointer<CChar>?, new: UnsafePointer<CChar>?
            if cued_read_sss(m, &name, &old, &new) >= 0, let name, name.pointee == 0x3A /* ':' a unique name */ {
                bus.host.left(String(cString: name))
            }
        }
        if options.feedback { requestName(b) }
        if options.notifications { watchNotifications(b) }
        retryMs = Self.retryFirstMs
        if watchFD >= 0 { close(watchFD); watchFD = -1 }
        logger.info("D-Bus: connected to the session bus", metadata: ["feedback": "\(status.feedback.rawValue)", "notifications": "\(status.notifications)"])
        setStatus { $0.connection = .connected; $0.error = nil }
    }

    private func requestName(_ b: OpaquePointer) {
        var slot: OpaquePointer?
        let r = cued_fb_add_object(b, &slot, handlers, Unmanaged.passUnretained(self).toOpaque())
        guard r >= 0 else {
            logger.error("D-Bus: cannot register \(CUED_FB_PATH)", metadata: ["error": "\(errnoString(-r))"])
            return
        }
        slots.append(slot)
        // Queued if another process (feedbackd) has it; replaceable, so `feedbackd --replace` takes it back.
        var flags = UInt64(SD_BUS_NAME_ALLOW_REPLACEMENT) | UInt64(SD_BUS_NAME_QUEUE)
        if options.replace { flags |= UInt64(SD_BUS_NAME_REPLACE_EXISTING) }
        let got = sd.sd_bus_request_name!(b, Self.name, flags)
        if got > 0 {
            status.feedback = .owner
            logger.info("D-Bus: \(Self.name) is cued's")
        } else if got == 0 {
            status.feedback = .queued
            logger.notice(options.replace
                ? "D-Bus: \(Self.name) is owned by another process (feedbackd?) that does not let it be taken; cued waits in the queue (stop that process to hand it over)"
                : "D-Bus: \(Self.name) is owned by another process (feedbackd?); cued waits in the queue (`[dbus] replace = true` takes it from an owner that allows it)")
        } else {
            logger.error("D-Bus: cannot ask for \(Self.name)", metadata: ["error": "\(errnoString(-got))"])
        }
    }

    private func watchNotifications(_ b: OpaquePointer) {
        var address: UnsafePointer<CChar>?
        guard sd.sd_bus_get_address!(b, &address) >= 0, let address else {
            status.notifications = "no bus address"
            return
        }
        var error = sd_bus_error()
        defer { sd.sd_bus_error_free!(&error) }
        var m: OpaquePointer?
        let r = cued_monitor_open(address, &m, &error)
        if r >= 0, let m {
            monitor = m
            status.notifications = "watching"
        } else {
            let why = error.message.map { String(cString: $0) } ?? errnoString(-r)
            status.notifications = "refused: " + why
            logger.warning("D-Bus: cannot watch notifications (the bus refused a monitor)", metadata: ["error": "\(why)"])
        }
    }

    /// A match's handler and its bus, the userdata of its slot (kept while the connection lasts).
    private final class Match {
        unowned let bus: DesktopBus
        let handler: (DesktopBus, OpaquePointer) -> Void
        init(bus: DesktopBus, handler: @escaping (DesktopBus, OpaquePointer) -> Void) { self.bus = bus; self.handler = handler }
    }
    private var matches: [Match] = []

    private func addMatch(_ b: OpaquePointer, _ rule: String, _ handler: @escaping (DesktopBus, OpaquePointer) -> Void) {
        let match = Match(bus: self, handler: handler)
        matches.append(match)
        var slot: OpaquePointer?
        let r = sd.sd_bus_add_match!(b, &slot, rule, { m, ud, _ in
            guard let m, let ud else { return 0 }
            let match = Unmanaged<Match>.fromOpaque(ud).takeUnretainedValue()
            match.handler(match.bus, m)
            return 0
        }, Unmanaged.passUnretained(match).toOpaque())
        if r >= 0 { slots.append(slot) } else {
            logger.warning("D-Bus: cannot add a match", metadata: ["rule": "\(rule)", "error": "\(errnoString(-r))"])
        }
    }

    private func disconnect(reason: String?) {
        for slot in slots { _ = sd.sd_bus_slot_unref!(slot) }
        slots = []
        matches = []
        if let m = monitor { _ = sd.sd_bus_flush_close_unref!(m); monitor = nil }
        if let b = bus { _ = sd.sd_bus_flush_close_unref!(b); bus = nil }
        guard let reason else { return }
        logger.warning("D-Bus: lost the session bus; trying again", metadata: ["error": "\(reason)"])
        host.left("*")
        retry(error: reason)
    }

    /// Whether the environment says where a session bus would be (sd_bus_open_user's two places).
    static func busConfigured(environment env: [String: String]) -> Bool {
        !(env["DBUS_SESSION_BUS_ADDRESS"] ?? "").isEmpty || (env["XDG_RUNTIME_DIR"] ?? "").hasPrefix("/")
    }

    /// The bus socket's path when the address is a plain `unix:path=` (else nil: no watch).
    static func socketPath(environment env: [String: String]) -> String? {
        if let address = env["DBUS_SESSION_BUS_ADDRESS"], !address.isEmpty {
            let first = address.split(separator: ";").first.map(String.init) ?? address
            guard first.hasPrefix("unix:") else { return nil }
            for kv in first.dropFirst(5).split(separator: ",") where kv.hasPrefix("path=") {
                let path = String(kv.dropFirst(5))
                return path.hasPrefix("/") && !path.contains("%") ? path : nil
            }
            return nil
        }
        guard let rt = env["XDG_RUNTIME_DIR"], rt.hasPrefix("/") else { return nil }
        return rt + "/bus"
    }

    /// Watches the directory of the bus socket, so its creation is seen at once.
    private func watchForSocket() {
        guard watchFD < 0, let path = options.socketPath else { return }
        let slash = path.lastIndex(of: "/")!
        let dir = slash == path.startIndex ? "/" : String(path[..<slash])
        socketName = String(path[path.index(after: slash)...])
        let fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else { return }
        guard inotify_add_watch(fd, dir, UInt32(IN_CREATE | IN_MOVED_TO | IN_ATTRIB)) >= 0 else { close(fd); return }
        watchFD = fd
    }

    /// Drains the watch; true if the socket's name was among its events.
    private func socketAppeared() -> Bool {
        var found = false
        let size = 4096
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 8)
        defer { buffer.deallocate() }
        while true {
            let n = read(watchFD, buffer, size)
            guard n > 0 else { break }
            var offset = 0
            while offset + MemoryLayout<inotify_event>.size <= n {
                let event = buffer.load(fromByteOffset: offset, as: inotify_event.self)
                let nameLength = Int(event.len)
                if nameLength > 0 {
                    let name = String(cString: buffer.advanced(by: offset + MemoryLayout<inotify_event>.size).assumingMemoryBound(to: CChar.self))
                    if name == socketName { found = true }
                }
                offset += MemoryLayout<inotify_event>.size + nameLength
            }
        }
        return found
    }

    /// The next attempt: when the socket appears (watched: no timer, so an idle
    /// cued without a bus never wakes), or, when the socket is there but does not
    /// answer or cannot be watched, after a back-off.
    private func retry(error: String) {
        watchForSocket()
        let socketThere = options.socketPath.map { FileSystem.entry($0) != .none } ?? true
        if status.connection != .absent || status.error != error {
            logger.info("D-Bus: no session bus; trying again when it appears", metadata: ["error": "\(error)"])
        }
        if watchFD >= 0 && !socketThere {
            nextAttempt = UInt64.max
        } else {
            nextAttempt = MonotonicNow.ms() + UInt64(retryMs)
            retryMs = min(retryMs * 2, Self.retryMaxMs)
        }
        setStatus {
            $0.connection = .absent; $0.error = error
            $0.feedback = .none
            $0.notifications = self.options.notifications ? "off (no bus)" : "off"
        }
    }

    private func setStatus(_ change: (inout BusStatus) -> Void) {
        let before = status
        change(&status)
        if status != before { host.statusChanged(status) }
    }

    // MARK: - org.sigxcpu.Feedback (bus thread, from sd_bus_process)

    private func onTrigger(_ call: OpaquePointer?, _ t: cued_fb_trigger) -> Int32 {
        guard let call else { return -EINVAL }
        let app = t.app_id.map { String(cString: $0) } ?? ""
        let event = t.event.map { String(cString: $0) } ?? ""
        if app.isEmpty { return cued_reply_error(call, "org.freedesktop.DBus.Error.InvalidArgs", "Invalid app id: it is empty") }
        if event.isEmpty { return cued_reply_error(call, "org.freedesktop.DBus.Error.InvalidArgs", "Invalid event: it is empty") }
        let hintProfile = t.profile.map { String(cString: $0) }
        if let p = hintProfile, Profile(rawValue: p) == nil {
            return cued_reply_error(call, "org.freedesktop.DBus.Error.InvalidArgs",
                                    "Invalid hints: profile '\(p)' is not one of full, quiet, silent")
        }
        let id = nextID
        nextID = nextID == UInt32.max ? 1 : nextID + 1
        let r = cued_reply_u(call, id)
        if r < 0 { return r }
        let sender = sd.sd_bus_message_get_sender!(call).map { String(cString: $0) } ?? ""
        host.trigger(FeedbackTrigger(id: id, sender: sender, appID: app, event: event, timeout: max(t.timeout, -1),
                                     profile: hintProfile, important: t.important != 0,
                                     soundFile: t.sound_file.map { String(cString: $0) }))
        return 1
    }

    private func onEnd(_ call: OpaquePointer?, _ id: UInt32) -> Int32 {
        guard let call else { return -EINVAL }
        // As feedbackd: ending an id that has ended (or never was) is not an error.
        let r = cued_reply_empty(call)
        if r < 0 { return r }
        host.end(id)
        return 1
    }

    private func profileCString() -> UnsafePointer<CChar>? {
        let p = profile.withLock { $0 }
        return FeedbackProfiles.cString(Profile(rawValue: p) ?? .full)
    }

    private func onSetProfile(_ value: String, sender: String, _ error: UnsafeMutablePointer<sd_bus_error>?) -> Int32 {
        guard Profile(rawValue: value) != nil else {
            cued_error_set(error, "org.freedesktop.DBus.Error.InvalidArgs", "Profile '\(value)' is not one of full, quiet, silent")
            return -EINVAL
        }
        host.setProfile(value, sender: sender)
        return 0
    }

    // MARK: - Notifications (bus thread)

    private func seen(_ message: OpaquePointer) {
        var n = cued_notify()
        let r = cued_parse_notify(message, &n)
        if r < 0 {
            logger.debug("D-Bus: a malformed Notify call ignored", metadata: ["error": "\(errnoString(-r))"])
            return
        }
        guard r > 0 else { return }
        func s(_ p: UnsafePointer<CChar>?) -> String? { p.map { String(cString: $0) } }
        host.notified(NotificationSeen(appName: s(n.app_name) ?? "", soundFile: s(n.sound_file), soundName: s(n.sound_name),
                                       desktopEntry: s(n.desktop_entry), category: s(n.category),
                                       suppressSound: n.suppress_sound != 0, urgency: n.urgency >= 0 ? Int(n.urgency) : nil))
    }
}

/// FeedbackEnded's reasons, as feedbackd numbers them (`u` on the bus: -1 is 4294967295).
public enum FeedbackEndReason: Int32, Sendable {
    /// No usable feedback for the event (nothing to play in this profile, no such sound, muted).
    case notFound = -1
    /// Every feedback ran its natural length.
    case natural = 0
    /// The timeout expired.
    case expired = 1
    /// EndFeedback, or cued stopped it (stop, mute).
    case explicit = 2
}

/// A profile's name as a C string that lives forever (the property getter returns it to sd-bus).
enum FeedbackProfiles {
    static func cString(_ p: Profile) -> UnsafePointer<CChar> {
        let s: StaticString = switch p {
        case .full: "full"
        case .quiet: "quiet"
        case .silent: "silent"
        }
        return UnsafeRawPointer(s.utf8Start).assumingMemoryBound(to: CChar.self)
    }
}

private enum MonotonicNow {
    static func ms() -> UInt64 { MonotonicClock.now() / 1_000_000 }
}
