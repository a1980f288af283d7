import CuedSystem
#if canImport(Glibc)
import Glibc
#endif

/// Where the session bus's socket is, and an inotify watch on its directory while there is
/// no bus, so that its creation is seen at once and an idle cued without a bus never wakes.
/// The bus thread's own (one owner, no locks).
struct BusSocketWatch {
    /// The socket's path (nil: not a plain `unix:path=` address, nothing to watch).
    let path: String?
    private let name: String
    private let directory: String
    /// The inotify descriptor while armed, else -1.
    private(set) var fd: Int32 = -1

    init(path: String?) {
        self.path = path
        guard let path, let slash = path.lastIndex(of: "/") else { name = ""; directory = ""; return }
        directory = slash == path.startIndex ? "/" : String(path[..<slash])
        name = String(path[path.index(after: slash)...])
    }

    /// Whether the socket exists now (true when there is no path to look at).
    var socketThere: Bool { path.map { FileSystem.entry($0) != .none } ?? true }

    /// Arms the watch if it is not; whether it is armed.
    @discardableResult
    mutating func arm() -> Bool {
        guard fd < 0, path != nil else { return fd >= 0 }
        let f = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard f >= 0 else { return false }
        guard inotify_add_watch(f, directory, UInt32(IN_CREATE | IN_MOVED_TO | IN_ATTRIB)) >= 0 else { close(f); return false }
        fd = f
        return true
    }

    mutating func disarm() {
        if fd >= 0 { close(fd); fd = -1 }
    }

    /// Drains the watch; true if the socket's name was among its events.
    func appeared() -> Bool {
        guard fd >= 0 else { return false }
        var found = false
        let size = 4096
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 8)
        defer { buffer.deallocate() }
        while true {
            let n = read(fd, buffer, size)
            guard n > 0 else { break }
            var offset = 0
            while offset + MemoryLayout<inotify_event>.size <= n {
                let event = buffer.load(fromByteOffset: offset, as: inotify_event.self)
                let nameLength = Int(event.len)
                if nameLength > 0 {
                    let seen = String(cString: buffer.advanced(by: offset + MemoryLayout<inotify_event>.size).assumingMemoryBound(to: CChar.self))
                    if seen == name { found = true }
                }
                offset += MemoryLayout<inotify_event>.size + nameLength
            }
        }
        return found
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
}
