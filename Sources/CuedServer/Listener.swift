import CuedClient
import CuedProtocol
import CuedSystem
import Logging
import NIOCore
#if canImport(Glibc)
import Glibc
#endif

/// The socket file and its directory, made safe before cued listens.
enum SocketFile {
    /// Checks (or creates, 0700) the socket's directory and clears a stale
    /// socket file. The directory must be cued's user's own and closed to
    /// others: anyone who can write there could replace the socket. Refuses
    /// if a live daemon answers there, or if the path is not a socket.
    /// `cuedsOwn`: the default socket's directory (`SocketLocation.ownDirectory`),
    /// the only one the advice may tell to remove: any other is someone's (/tmp).
    static func prepare(_ path: String, cuedsOwn: String?) throws(StartupError) {
        let dir = Path.directory(path)
        switch FileSystem.entry(dir) {
        case .none:
            // Only the last directory is created: a missing parent (say,
            // XDG_RUNTIME_DIR itself, which the login manager makes) is an error.
            let parent = Path.directory(dir)
            guard FileSystem.isDirectory(parent) else {
                throw StartupError("\(parent) does not exist, so the socket directory \(dir) cannot be created. "
                                   + "XDG_RUNTIME_DIR (normally /run/user/UID) is made by the login manager; "
                                   + "log in through one, or pass --socket PATH in a directory that exists", exitCode: 1)
            }
            guard mkdir(dir, 0o700) == 0 || errno == EEXIST else {
                let e = errno
                throw StartupError("cannot create socket directory \(dir): \(errnoString(e))", exitCode: 1)
            }
        case .directory:
            break
        default:
            throw StartupError("\(dir) exists and is not a directory; remove it or choose another --socket", exitCode: 1)
        }
        try checkPrivate(dir, cuedMakesIt: dir == cuedsOwn)
        var st = stat()
        guard lstat(path, &st) == 0 else { return }
        guard (st.st_mode & S_IFMT) == S_IFSOCK else {
            throw StartupError("\(path) exists and is not a socket; remove it or choose another --socket", exitCode: 1)
        }
        if isAnswering(path) {
            throw StartupError("another cued is already running on \(path); not starting a second one", exitCode: 1)
        }
        unlink(path)  // stale: nobody listens
    }

    /// The directory must be owned by us and not writable by group or others. The fix
    /// offered touches only what is cued's or the user's: a directory cued makes may be
    /// removed (it is made again), one of the user's own closed; any other (another
    /// user's, a shared one such as /tmp) is left alone for a socket elsewhere.
    static func checkPrivate(_ dir: String, cuedMakesIt: Bool) throws(StartupError) {
        var st = stat()
        guard lstat(dir, &st) == 0 else {
            let e = errno
            throw StartupError("cannot inspect socket directory \(dir): \(errnoString(e))", exitCode: 1)
        }
        if st.st_uid != getuid() {
            throw StartupError("socket directory \(dir) belongs to uid \(st.st_uid), not to this user (uid \(getuid())); "
                               + "another user could replace the socket. "
                               + (cuedMakesIt ? "Remove it (cued makes it again, 0700), or choose another --socket" : elsewhere), exitCode: 1)
        }
        let mode = st.st_mode & 0o777
        if mode & 0o022 != 0 {
            // Sticky and open to others: shared on purpose (/tmp), not the user's to close.
            let shared = st.st_mode & S_ISVTX != 0 && !cuedMakesIt
            throw StartupError("socket directory \(dir) is writable by \(mode & 0o002 != 0 ? "everyone" : "its group") (mode \(String(st.st_mode & 0o7777, radix: 8))"
                               + (shared ? ", a shared directory" : "") + "); another user could replace the socket. "
                               + (shared ? elsewhere : "Fix it with: chmod 700 \(dir), or choose another --socket"), exitCode: 1)
        }
    }

    /// The advice for a directory that is not cued's to change.
    static let elsewhere = "Choose a --socket in a directory of your own (e.g. --socket ~/.cued.sock; "
        + "without --socket: $XDG_RUNTIME_DIR/cued/cued.sock, which cued makes)"

    /// A live daemon accepts a connection; a stale socket file refuses it.
    static func isAnswering(_ path: String) -> Bool {
        (try? CueClient(path: path, timeoutSeconds: 1)) != nil
    }

    static func inode(_ path: String) -> UInt64? {
        var st = stat()
        return lstat(path, &st) == 0 ? UInt64(st.st_ino) : nil
    }
}

/// Descriptors: the soft RLIMIT_NOFILE is raised to the hard one, and the
/// connection cap kept below it: the limit, less what is open once cued
/// listens (about 10: standard streams, event loop, listening socket, log),
/// less `reserve` for what cued opens later.
enum DescriptorLimit {
    /// Descriptors kept free of connections, besides those open once cued
    /// listens: the audio device (a sound server's ALSA plugin takes up to 6),
    /// 2 sound files being decoded, 2 for a state save (temp file, directory),
    /// and 1 to accept a newcomer at the cap and tell it `err busy`.
    static let reserve = 11
    /// The D-Bus face's two sockets (the bus, the notification monitor), reserved
    /// when it is on; its eventfd and socket watch are open before cued counts.
    static let busReserve = 2

    /// Raises the soft limit to the hard limit; returns the soft limit in force.
    static func raise() -> Int {
        var lim = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &lim) == 0 else { return 1024 }
        if lim.rlim_cur < lim.rlim_max {
            var raised = lim
            raised.rlim_cur = lim.rlim_max
            if setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &raised) == 0 { lim = raised }
        }
        return lim.rlim_cur > rlim_t(Int32.max) ? Int(Int32.max) : Int(lim.rlim_cur)
    }

    /// Descriptors cued holds for good now: every one but a file or directory being read on
    /// another thread (a theme looked up, a sound decoded, a state file saved: it closes again;
    /// counted, it made the cap one lower at random, `make test` saw open=15 for 14 under load) and
    /// this listing's own. Files cued keeps (its log's stderr, PipeWire's memfd buffers) count.
    static func inUse() -> Int {
        let log = LogWriter.destination
        return FileSystem.list("/proc/self/fd").reduce(0) { n, name in
            guard let fd = Int32(name) else { return n }
            var st = stat()
            guard fd <= 2 || fstat(fd, &st) == 0 else { return n }  // closed since the listing: its own
            return heldForGood(fd: fd, mode: st.st_mode, kept: fd == log, target: { target(of: fd) }) ? n + 1 : n
        }
    }

    /// Whether descriptor `fd` of type `mode` counts (see `inUse`): `kept`, a file cued keeps open;
    /// `target`, where /proc says it points (asked only of files).
    static func heldForGood(fd: Int32, mode: mode_t, kept: Bool, target: () -> String) -> Bool {
        let type = mode & S_IFMT
        guard fd > 2, !kept, type == S_IFREG || type == S_IFDIR else { return true }
        return type == S_IFREG && target().hasPrefix("/memfd:")
    }

    private static func target(of fd: Int32) -> String {
        var buf = [CChar](repeating: 0, count: 256)
        let n = readlink("/proc/self/fd/\(fd)", &buf, buf.count - 1)
        return n > 0 ? String(decoding: buf[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
    }

    /// The most connections `limit` descriptors allow when `inUse` are open.
    static func maxClients(for limit: Int, inUse: Int, extra: Int = 0) -> Int { max(1, limit - inUse - reserve - extra) }

    /// Whether `limit` leaves the bus its sockets beside one client and the reserve.
    static func roomForBus(limit: Int, inUse: Int) -> Bool { limit - inUse - reserve - busReserve >= 1 }
}

/// Out of descriptors (EMFILE, ENFILE), accepting stops for `pause` and
/// newcomers wait in the listen queue. NIO's `AcceptBackoffHandler` does not
/// do this when the first accept of a wake-up fails (the channel stays
/// registered for reading, and epoll wakes it at once: 17,752 failed accept4
/// calls in 3 s): here reading is switched off (autoRead) and on again.
final class AcceptPauseHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = Channel
    typealias InboundOut = Channel

    static let pause = TimeAmount.milliseconds(100)
    private let logger: Logger
    private var paused = false
    /// Pauses so far (the first of a run is logged).
    private(set) var pauses = 0

    init(logger: Logger) { self.logger = logger }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        guard let e = error as? IOError, [EMFILE, ENFILE, ENOBUFS, ENOMEM].contains(e.errnoCode) else {
            context.fireErrorCaught(error)
            return
        }
        guard !paused else { return }
        paused = true
        pauses += 1
        if pauses == 1 || pauses % 100 == 0 {
            logger.warning("out of descriptors: accepting paused", metadata: ["error": "\(e)", "pause_ms": "100", "pauses": "\(pauses)"])
        }
        let channel = context.channel
        try? channel.syncOptions?.setOption(.autoRead, value: false)
        context.eventLoop.assumeIsolated().scheduleTask(in: Self.pause) {
            self.paused = false
            try? channel.syncOptions?.setOption(.autoRead, value: true)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.fireChannelRead(data)
    }
}
