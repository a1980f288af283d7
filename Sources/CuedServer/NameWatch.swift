import CuedSystem
#if canImport(Glibc)
import Glibc
#endif

/// A file that may appear or be replaced (the session bus's socket, WirePlumber's state file),
/// and an inotify watch on its directory, so that its creation is seen at once and nothing
/// wakes for it otherwise: no timer. The bus thread's own (one owner, no locks).
struct NameWatch {
    /// The file's path (nil: nothing to watch).
    let path: String?
    /// The names in its directory whose events count (the file's own, and any given).
    private let names: Set<String>
    private let directory: String
    /// The inotify descriptor while armed, else -1.
    private(set) var fd: Int32 = -1

    init(path: String?, alsoNames: Set<String> = []) {
        self.path = path
        guard let path, let slash = path.lastIndex(of: "/") else { names = []; directory = ""; return }
        directory = slash == path.startIndex ? "/" : String(path[..<slash])
        names = alsoNames.union([String(path[path.index(after: slash)...])])
    }

    /// Whether the file exists now (true when there is no path to look at).
    var socketThere: Bool { path.map { FileSystem.entry($0) != .none } ?? true }

    /// Arms the watch if it is not; whether it is armed.
    @discardableResult
    mutating func arm() -> Bool {
        guard fd < 0, path != nil else { return fd >= 0 }
        let f = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard f >= 0 else { return false }
        guard inotify_add_watch(f, directory, UInt32(IN_CREATE | IN_MOVED_TO | IN_ATTRIB | IN_CLOSE_WRITE)) >= 0 else { close(f); return false }
        fd = f
        return true
    }

    mutating func disarm() {
        if fd >= 0 { close(fd); fd = -1 }
    }

    /// Drains the watch; true if the file's name (or another of `names`) was among its events.
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
                    if names.contains(seen) { found = true }
                }
                offset += MemoryLayout<inotify_event>.size + nameLength
            }
        }
        return found
    }
}
