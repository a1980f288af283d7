import CSDBus
import CuedCore
import CuedProtocol
import CuedSystem
import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// cued's face on the session bus: org.sigxcpu.Feedback (feedbackd's interface)
/// at /org/sigxcpu/Feedback, and, when asked, a second connection that watches
/// org.freedesktop.Notifications.Notify calls as a monitor (as dbus-monitor
/// does: it sees them, it does not answer them).
///
/// A thread of its own runs sd-bus (libsystemd): it polls the bus connections
/// and an eventfd that `post` writes, so neither the event loop nor the audio
/// thread ever waits on the bus. Replies to TriggerFeedback and EndFeedback go
/// out at once (an id is the bus thread's to hand out); the sound is the
/// loop's, and its end comes back through `feedbackEnded`. When to connect, and
/// what a loss means, is `BusMachine`'s (a value, tested on a fake clock): with no
/// session bus, or when it goes away, cued runs on and tries again, when the bus's
/// socket appears (`NameWatch`), else 0.5 s, 1 s, 2 s… after a loss, at most
/// every 60 s. The connection and what hangs on it is a `BusConnection`; the
/// messages it dispatches are FeedbackObject.swift's.
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
        /// Read the desktop's sound settings (the Settings portal, the notification server's Inhibited).
        public var followDesktop = false
        /// KDE's settings win over GNOME's where both are there (`XDG_CURRENT_DESKTOP` names KDE).
        public var preferKDE = false
        /// WirePlumber's state directory (`WirePlumberState.directory`); nil: not read.
        public var wirePlumberDirectory: String?
        public init() {}
    }

    public static let name = "org.sigxcpu.Feedback"

    let options: Options
    let host: any DesktopBusHost
    let logger: Logger
    private let wakeFD: Int32
    private let inbox = Mutex<[@Sendable (DesktopBus) -> Void]>([])
    /// The thread's life, between the loop's side (start, stop) and the bus thread.
    private enum Phase: Int { case notStarted, running, stopAsked, finished }
    private let phase = Atomic<Int>(Phase.notStarted.rawValue)
    private var thread = pthread_t()
    /// The profile the `Profile` property shows (the loop tells; the bus thread reads).
    let profile = Mutex<String>("full")
    private let profileSignalPending = Atomic<Bool>(false)
    private let handlers: UnsafeMutablePointer<cued_fb_handlers>

    /// sd-bus's functions (libsystemd, loaded by `connect` before the first call).
    var sd: cued_sd_api { cued_sd().pointee }
    // The bus thread's own.
    private var machine: BusMachine
    private(set) var link: BusConnection?
    private var watch: NameWatch
    private var published = BusStatus()
    var nextID: UInt32 = 1
    /// The desktop's settings as read (SettingsPortal.swift), the read under way, and what the host was last told.
    var portal: PortalSettings
    var portalCall = PortalCall.idle
    /// A portal that answered without Settings (started without its backend, say) is asked
    /// again: when, and how many times it was (`PortalRetry`).
    var portalRetry = PortalRetry()
    var sentDesktop: DesktopSound?
    /// WirePlumber's state files, and its directory's parent while the directory does not exist (WirePlumberWatch.swift).
    var stateFiles: NameWatch
    var stateDirectory: NameWatch

    public init(options: Options, host: any DesktopBusHost, logger: Logger) {
        self.options = options
        self.host = host
        self.logger = logger
        var settings = BusMachine.Settings()
        settings.notifications = options.notifications
        machine = BusMachine(settings: settings)
        portal = PortalSettings(preferKDE: options.preferKDE)
        let wp = options.followDesktop ? options.wirePlumberDirectory : nil
        stateFiles = NameWatch(path: wp.map { $0 + "/" + WirePlumberState.files[0] }, alsoNames: Set(WirePlumberState.files))
        stateDirectory = NameWatch(path: wp)
        wakeFD = SystemCall.eventfd(flags: O_NONBLOCK | O_CLOEXEC)
        // Made now, not when the bus is first missed: the descriptors cued holds once it listens are all there.
        watch = NameWatch(path: options.socketPath)
        watch.arm()
        handlers = .allocate(capacity: 1)
        handlers.initialize(to: cued_fb_handlers(
            trigger: { ud, call, t in DesktopBus.from(ud).onTrigger(call, t!.pointee) },
            end: { ud, call, id in DesktopBus.from(ud).onEnd(call, id) },
            get_profile: { ud in DesktopBus.from(ud).profileCString() },
            set_profile: { ud, sender, value, error in
                DesktopBus.from(ud).onSetProfile(value.map { String(cString: $0) } ?? "", sender: sender.map { String(cString: $0) } ?? "", error)
            }))
    }

    deinit {
        watch.disarm()
        stateFiles.disarm()
        stateDirectory.disarm()
        handlers.deinitialize(count: 1)
        handlers.deallocate()
        if wakeFD >= 0 { close(wakeFD) }
    }

    private static func from(_ ud: UnsafeMutableRawPointer?) -> DesktopBus {
        Unmanaged<DesktopBus>.fromOpaque(ud!).takeUnretainedValue()
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

    // MARK: - The loop's side (any thread)

    /// Starts the bus thread (every signal blocked in it: they are the main thread's).
    public func start() {
        guard wakeFD >= 0 else {
            logger.error("D-Bus: no eventfd; the bus stays off")
            return
        }
        guard phase.compareExchange(expected: Phase.notStarted.rawValue, desired: Phase.running.rawValue, ordering: .acquiringAndReleasing).exchanged else { return }
        switch CuedThread.start("cued-dbus", joinable: true, { [self] in run() }) {
        case .success(let t): thread = t
        case .failure(let why):
            phase.store(Phase.notStarted.rawValue, ordering: .releasing)
            logger.error("D-Bus: cannot start its thread; the bus stays off", metadata: ["error": "\(why)"])
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
        guard phase.compareExchange(expected: Phase.running.rawValue, desired: Phase.stopAsked.rawValue, ordering: .acquiringAndReleasing).exchanged else { return }
        wake()
        let finished = { self.phase.load(ordering: .acquiring) == Phase.finished.rawValue }
        for _ in 0..<40 where !finished() { usleep(5_000) }
        if finished() { pthread_join(thread, nil) } else { pthread_detach(thread) }
    }

    /// A feedback's one end, as the FeedbackEnded signal.
    public func feedbackEnded(_ id: UInt32, reason: FeedbackEndReason) {
        post { bus in
            guard let b = bus.link?.bus, bus.roomToSend() else { return }
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
            guard let b = bus.link?.bus, bus.roomToSend() else { return }
            _ = cued_emit_profile_changed(b)
        }
    }

    /// Messages queued for a bus that does not read them (hung) stay in memory: past
    /// this many, signals are dropped (said once) rather than queued.
    static let maxQueuedWrites: UInt64 = 1024
    private var dropping = false

    private func roomToSend() -> Bool {
        guard let queued = link?.queuedWrites, queued >= Self.maxQueuedWrites else {
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
        handle(.start)
        watchWirePlumber()
        var fds = [pollfd](repeating: pollfd(), count: 5)
        while phase.load(ordering: .acquiring) == Phase.running.rawValue {
            if let d = machine.deadline, MonotonicClock.now() >= d { handle(.timer) }
            if let at = portalRetry.at, MonotonicClock.now() >= at { portalRetry.at = nil; readPortal() }
            drainInbox()
            pump()
            // Wait: the eventfd, the bus (or the socket's watch), the monitor; until sd-bus's timeout or the next attempt.
            var n = 1
            fds[0] = pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)
            var timeout: Int64 = -1
            let nowUs = MonotonicClock.now() / 1000
            if let c = link {
                fds[n] = c.pollFD(); n += 1
                if let usec = c.timeoutMicroseconds { timeout = usec > nowUs ? Int64((usec - nowUs + 999) / 1000) : 0 }
                if let at = portalRetry.at {
                    let ms = at / 1000 > nowUs ? Int64((at / 1000 - nowUs + 999) / 1000) : 0
                    timeout = timeout < 0 ? ms : min(timeout, ms)
                }
                if let m = c.monitorPollFD() { fds[n] = m; n += 1 }
            } else {
                if let d = machine.deadline { timeout = d / 1000 > nowUs ? Int64((d / 1000 - nowUs + 999) / 1000) : 0 }
                if watch.fd >= 0 { fds[n] = pollfd(fd: watch.fd, events: Int16(POLLIN), revents: 0); n += 1 }
            }
            let stateAt = n
            for fd in [stateFiles.fd, stateDirectory.fd] { fds[n] = pollfd(fd: fd, events: Int16(POLLIN), revents: 0); n += 1 }
            let rc = poll(&fds, nfds_t(n), Int32(clamping: timeout))
            if rc < 0 && errno != EINTR { usleep(10_000) }
            if fds[0].revents != 0 {
                var value: UInt64 = 0
                _ = read(wakeFD, &value, 8)
            }
            if link == nil, watch.fd >= 0, n > 1, fds[1].fd == watch.fd, fds[1].revents != 0, watch.appeared() {
                handle(.socketAppeared)
            }
            // (A descriptor of -1 is skipped by poll: its revents stay 0.)
            if fds[stateAt].revents != 0 || fds[stateAt + 1].revents != 0 {
                wirePlumberEvent(files: fds[stateAt].revents != 0, directory: fds[stateAt + 1].revents != 0)
            }
        }
        handle(.stop)
        phase.store(Phase.finished.rawValue, ordering: .releasing)
    }

    private func drainInbox() {
        let jobs = inbox.withLock { jobs -> [@Sendable (DesktopBus) -> Void] in defer { jobs = [] }; return jobs }
        for job in jobs { job(self) }
    }

    /// Lets sd-bus do all it can without waiting: dispatch calls, send what is queued.
    private func pump() {
        guard let c = link else { return }
        if let broken = c.process() {
            handle(.lost(broken, socketThere: watch.socketThere, watching: watch.arm()))
            return
        }
        if !c.processMonitor({ seen($0) }) {
            logger.warning("D-Bus: the notification monitor was disconnected; watching again at the next connection")
            handle(.notifications("lost"))
        }
    }

    /// Feeds the machine and carries out what it says.
    func handle(_ event: BusMachine.Event) {
        for action in machine.handle(event, now: MonotonicClock.now()) {
            switch action {
            case .connect: connect()
            case .disconnect(let lost):
                link?.close()
                link = nil
                if let lost { logger.warning("D-Bus: lost the session bus; trying again", metadata: ["error": "\(lost)"]) }
            case .endClientFeedbacks: host.left("*")
            case .unwatchSocket: watch.disarm()
            case .publish(let s):
                // Not connected yet is no news: only a failure to connect is said (with its error).
                if s.connection == .absent, let error = s.error, published.connection != .absent || published.error != error {
                    logger.info("D-Bus: no session bus; trying again when it appears", metadata: ["error": "\(error)"])
                }
                published = s
                host.statusChanged(s)
                if s.connection == .absent && s.error != nil && options.followDesktop { desktopLost() }
            case .exit: break  // `run` ends: the phase is no longer `running`
            }
        }
    }

    // MARK: - Connecting (bus thread)

    private func connect() {
        if let why = whyNotConnect() {
            handle(.connectFailed(why, socketThere: watch.socketThere, watching: watch.arm()))
            return
        }
        let c: BusConnection
        switch BusConnection.open(address: options.address) {
        case .success(let opened): c = opened
        case .failure(let error):
            handle(.connectFailed(error.description, socketThere: watch.socketThere, watching: watch.arm()))
            return
        }
        link = c
        watchBusNews(c)
        if options.followDesktop { followDesktop(c) }
        let feedback = options.feedback ? requestName(c) : .none
        var notifications = "off"
        if options.notifications {
            if let why = c.watchNotifications() {
                notifications = why
                logger.warning("D-Bus: cannot watch notifications (the bus refused a monitor)", metadata: ["error": "\(why)"])
            } else {
                notifications = "watching"
            }
        }
        logger.info("D-Bus: connected to the session bus", metadata: ["feedback": "\(feedback.rawValue)", "notifications": "\(notifications)"])
        handle(.connected(feedback: feedback, notifications: notifications))
    }

    /// Why not even try: no bus to connect to (libsystemd is not loaded for nothing; the socket is watched).
    private func whyNotConnect() -> String? {
        if options.address == nil, let path = watch.path, !watch.socketThere { return "no session bus at \(path)" }
        if options.address == nil && !options.busConfigured {
            return "no session bus (neither DBUS_SESSION_BUS_ADDRESS nor XDG_RUNTIME_DIR is set)"
        }
        return cued_sd_load().map { String(cString: $0) }
    }

    /// The bus's own news about our name, and about clients that leave (arg2 empty).
    private func watchBusNews(_ c: BusConnection) {
        let dbus = "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',interface='org.freedesktop.DBus'"
        let rules: [(String, (DesktopBus, OpaquePointer) -> Void)] = [
            ("\(dbus),member='NameAcquired'", { bus, m in
                var name: UnsafePointer<CChar>?
                if cued_read_s(m, &name) >= 0, let name, String(cString: name) == DesktopBus.name { bus.handle(.name(.owner)) }
            }),
            ("\(dbus),member='NameLost'", { bus, m in
                var name: UnsafePointer<CChar>?
                guard cued_read_s(m, &name) >= 0, let name, String(cString: name) == DesktopBus.name else { return }
                bus.logger.notice("D-Bus: \(DesktopBus.name) was taken by another process; cued waits in the queue for it")
                bus.handle(.name(.queued))
            }),
            ("\(dbus),member='NameOwnerChanged',arg2=''", { bus, m in
                var name: UnsafePointer<CChar>?, old: UnsafePointer<CChar>?, new: UnsafePointer<CChar>?
                if cued_read_sss(m, &name, &old, &new) >= 0, let name, name.pointee == 0x3A /* ':' a unique name */ {
                    bus.host.left(String(cString: name))
                }
            }),
        ]
        for (rule, handler) in rules {
            let r = c.addMatch(rule, owner: self, handler)
            if r < 0 { logger.warning("D-Bus: cannot add a match", metadata: ["rule": "\(rule)", "error": "\(errnoString(-r))"]) }
        }
    }

    private func requestName(_ c: BusConnection) -> BusStatus.Name {
        var slot: OpaquePointer?
        let r = cued_fb_add_object(c.bus, &slot, handlers, Unmanaged.passUnretained(self).toOpaque())
        guard r >= 0 else {
            logger.error("D-Bus: cannot register \(CUED_FB_PATH)", metadata: ["error": "\(errnoString(-r))"])
            return .none
        }
        c.keep(slot)
        // Queued if another process (feedbackd) has it; replaceable, so `feedbackd --replace` takes it back.
        var flags = UInt64(SD_BUS_NAME_ALLOW_REPLACEMENT) | UInt64(SD_BUS_NAME_QUEUE)
        if options.replace { flags |= UInt64(SD_BUS_NAME_REPLACE_EXISTING) }
        let got = sd.sd_bus_request_name!(c.bus, Self.name, flags)
        if got > 0 {
            logger.info("D-Bus: \(Self.name) is cued's")
            return .owner
        }
        if got == 0 {
            logger.notice(options.replace
                ? "D-Bus: \(Self.name) is owned by another process (feedbackd?) that does not let it be taken; cued waits in the queue (stop that process to hand it over)"
                : "D-Bus: \(Self.name) is owned by another process (feedbackd?); cued waits in the queue (`[dbus] replace = true` takes it from an owner that allows it)")
            return .queued
        }
        logger.error("D-Bus: cannot ask for \(Self.name)", metadata: ["error": "\(errnoString(-got))"])
        return .none
    }
}
