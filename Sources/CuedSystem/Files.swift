// Small Glibc helpers the daemon uses instead of Foundation: errors from
// errno, paths, the environment, and opening files that are untrusted input.
#if canImport(Glibc)
import Glibc
#endif

/// strerror of an errno value.
public func errnoString(_ e: Int32 = errno) -> String { String(cString: strerror(e)) }

/// A file that could not be used, and why: `PATH: REASON`.
public struct FileError: Error, Sendable, CustomStringConvertible, Equatable {
    public let path: String
    public let reason: String
    /// The errno behind it, if any.
    public let code: Int32
    public init(path: String, reason: String, code: Int32 = 0) { self.path = path; self.reason = reason; self.code = code }
    public var description: String { "\(path): \(reason)" }
}

/// Opens files that are untrusted input (sound, config and state files) so
/// that nothing but a regular file is ever read: a FIFO cannot block the
/// caller, a device is never opened, and a symlink swapped in between a check
/// and the open changes nothing, because the check is made on the descriptor.
public enum UntrustedFile {
    /// What `stat` says a path is, in words, for error messages.
    static func kind(_ mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFDIR: return "a directory"
        case S_IFIFO: return "a FIFO"
        case S_IFCHR: return "a character device"
        case S_IFBLK: return "a block device"
        case S_IFSOCK: return "a socket"
        case S_IFLNK: return "a symbolic link"
        default: return "not a regular file"
        }
    }

    /// Why opening `path` failed, in words a user can act on.
    static func reason(_ e: Int32, _ path: String) -> String {
        switch e {
        case ENOENT:
            var st = stat()
            if lstat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFLNK { return "is a dangling symbolic link" }
            return "no such file"
        case ELOOP: return "too many levels of symbolic links (a symlink loop?)"
        case EACCES: return "permission denied"
        case ENOTDIR: return "a component of the path is not a directory"
        default: return errnoString(e)
        }
    }

    /// Opens `path` read-only (following symlinks) and returns the descriptor
    /// and the file's size, or an error naming the path if it is anything but
    /// a regular file. The caller closes the descriptor.
    public static func open(_ path: String) throws(FileError) -> (fd: Int32, size: Int) {
        let file = try openIdentified(path)
        return (file.fd, file.size)
    }

    /// `open`, also returning what identifies the file that was opened (from
    /// the same `fstat`), e.g. to key a cache by the file actually read.
    public static func openIdentified(_ path: String) throws(FileError) -> OpenedFile {
        // O_NONBLOCK: opening a FIFO must not wait for a writer. The type is
        // then checked on the descriptor itself (no window for a swap).
        let fd = Glibc.open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)
        guard fd >= 0 else {
            let e = errno
            throw FileError(path: path, reason: reason(e, path), code: e)
        }
        var st = stat()
        guard fstat(fd, &st) == 0 else {
            let e = errno
            close(fd)
            throw FileError(path: path, reason: errnoString(e), code: e)
        }
        guard (st.st_mode & S_IFMT) == S_IFREG else {
            close(fd)
            throw FileError(path: path, reason: "is \(kind(st.st_mode)), not a regular file", code: EINVAL)
        }
        // A regular file never blocks; reads behave as usual from here.
        let flags = fcntl(fd, F_GETFL)
        if flags >= 0 { _ = fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) }
        return OpenedFile(fd: fd, size: Int(st.st_size), identity: FileIdentity(st))
    }

    /// The whole of a small regular file, refusing one over `maxBytes`.
    public static func read(_ path: String, maxBytes: Int) throws(FileError) -> [UInt8] {
        let (fd, size) = try open(path)
        defer { close(fd) }
        guard size <= maxBytes else {
            throw FileError(path: path, reason: "is \(size) bytes; at most \(maxBytes) are read", code: EFBIG)
        }
        // The size may change under us: read at most maxBytes + 1 and check.
        var bytes = [UInt8](repeating: 0, count: maxBytes + 1)
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + done, $0.count - done) }
            if n < 0 {
                if errno == EINTR { continue }
                let e = errno
                throw FileError(path: path, reason: "cannot read it: \(errnoString(e))", code: e)
            }
            if n == 0 { break }
            done += n
        }
        guard done <= maxBytes else {
            throw FileError(path: path, reason: "grew past \(maxBytes) bytes while being read", code: EFBIG)
        }
        bytes.removeLast(bytes.count - done)
        return bytes
    }

    /// `read`, as UTF-8 text.
    public static func readText(_ path: String, maxBytes: Int) throws(FileError) -> String {
        let bytes = try read(path, maxBytes: maxBytes)
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw FileError(path: path, reason: "is not UTF-8 text", code: EILSEQ)
        }
        return text
    }
}

/// Which file, in which version: equal identities mean the same file with
/// (almost certainly) the same content. A rewrite in place within the same
/// nanosecond and size is the one change it cannot see.
public struct FileIdentity: Hashable, Sendable, CustomStringConvertible {
    public let device: UInt64
    public let inode: UInt64
    public let size: Int64
    /// Modification time, nanoseconds since the epoch.
    public let modifiedNanoseconds: Int64

    public init(device: UInt64, inode: UInt64, size: Int64, modifiedNanoseconds: Int64) {
        self.device = device; self.inode = inode; self.size = size; self.modifiedNanoseconds = modifiedNanoseconds
    }

    init(_ st: stat) {
        self.init(device: UInt64(st.st_dev), inode: UInt64(st.st_ino), size: Int64(st.st_size),
                  modifiedNanoseconds: Int64(st.st_mtim.tv_sec) &* 1_000_000_000 &+ Int64(st.st_mtim.tv_nsec))
    }

    public var description: String { "dev \(device) ino \(inode) size \(size) mtime \(modifiedNanoseconds) ns" }
}

/// A regular file opened by `UntrustedFile.openIdentified`. The caller owns
/// `fd` and closes it.
public struct OpenedFile: Sendable {
    public let fd: Int32
    public let size: Int
    public let identity: FileIdentity
}

/// What is at a path, without following a final symlink.
public enum PathEntry: Equatable, Sendable {
    case none
    case regular
    case directory
    case symlink
    case other
}

public enum FileSystem {
    /// What `lstat` sees at `path`.
    public static func entry(_ path: String) -> PathEntry {
        var st = stat()
        guard lstat(path, &st) == 0 else { return .none }
        switch st.st_mode & S_IFMT {
        case S_IFREG: return .regular
        case S_IFDIR: return .directory
        case S_IFLNK: return .symlink
        default: return .other
        }
    }

    /// True if `path` (following symlinks) is a directory.
    public static func isDirectory(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
    }

    /// True if `path` (following symlinks) is a regular file.
    public static func isRegularFile(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG
    }

    /// Creates `path` and its missing parents with `mode`.
    public static func makeDirectories(_ path: String, mode: mode_t = 0o700) throws(FileError) {
        var current = path.hasPrefix("/") ? "" : "."
        for part in path.split(separator: "/") {
            current += "/" + part
            if mkdir(current, mode) != 0 && errno != EEXIST {
                let e = errno
                throw FileError(path: current, reason: "cannot create directory: \(errnoString(e))", code: e)
            }
        }
        guard isDirectory(path) else { throw FileError(path: path, reason: "exists and is not a directory", code: ENOTDIR) }
    }

    /// The names in a directory (without . and ..), sorted; empty if it cannot be read.
    public static func list(_ dir: String) -> [String] {
        guard let d = opendir(dir) else { return [] }
        defer { closedir(d) }
        var names: [String] = []
        while let e = readdir(d) {
            let name = withUnsafeBytes(of: e.pointee.d_name) { buf in
                String(cString: buf.baseAddress!.assumingMemoryBound(to: CChar.self))
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }

    /// Removes `path` and, if it is a directory, everything under it (symlinks
    /// are removed, never followed).
    public static func removeTree(_ path: String) {
        if entry(path) == .directory {
            for name in list(path) { removeTree(path + "/" + name) }
            rmdir(path)
        } else {
            unlink(path)
        }
    }

    /// Where a symlink points, or nil.
    public static func readLink(_ path: String) -> String? {
        var buf = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = readlink(path, &buf, buf.count - 1)
        guard n > 0 else { return nil }
        return String(decoding: buf[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The running executable's path.
    public static var executablePath: String? { readLink("/proc/self/exe") }
}

/// Path strings, as NSString's path methods did.
public enum Path {
    /// `/a/b/c.wav` → `/a/b`; `c.wav` → `.`; `/c` → `/`.
    public static func directory(_ path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        if slash == path.startIndex { return "/" }
        return String(path[..<slash])
    }

    /// `/a/b/c.wav` → `c.wav`.
    public static func lastComponent(_ path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return path }
        return String(path[path.index(after: slash)...])
    }

    /// Joins with one slash; an absolute `rest` wins.
    public static func join(_ base: String, _ rest: String) -> String {
        if rest.hasPrefix("/") || base.isEmpty { return rest }
        return base.hasSuffix("/") ? base + rest : base + "/" + rest
    }

    /// Removes `.` and empty components and folds `..` (lexically).
    public static func normalize(_ path: String) -> String {
        let absolute = path.hasPrefix("/")
        var parts: [Substring] = []
        for p in path.split(separator: "/") {
            if p == "." { continue }
            if p == "..", let last = parts.last, last != ".." { parts.removeLast(); continue }
            if p == "..", absolute { continue }
            parts.append(p)
        }
        let joined = parts.joined(separator: "/")
        return absolute ? "/" + joined : (joined.isEmpty ? "." : joined)
    }
}

/// The process environment, read once into a dictionary.
public enum Environment {
    public static func current() -> [String: String] {
        var env: [String: String] = [:]
        var p = environ
        while let entry = p.pointee {
            let s = String(cString: entry)
            if let eq = s.firstIndex(of: "=") { env[String(s[..<eq])] = String(s[s.index(after: eq)...]) }
            p += 1
        }
        return env
    }

    /// The home directory: `$HOME`, else the passwd entry's.
    public static func home(_ env: [String: String]) -> String {
        if let h = env["HOME"], !h.isEmpty { return h }
        if let pw = getpwuid(getuid()), let dir = pw.pointee.pw_dir { return String(cString: dir) }
        return "/"
    }
}

extension StringProtocol {
    /// True if `needle` occurs in this string (bytewise). The daemon's modules
    /// are built without the regex library, which provides `contains(_:)` for strings.
    public func includes(_ needle: String) -> Bool {
        let hay = Array(utf8), n = Array(needle.utf8)
        guard !n.isEmpty else { return true }
        guard n.count <= hay.count else { return false }
        return (0...(hay.count - n.count)).contains { hay[$0..<($0 + n.count)].elementsEqual(n) }
    }
}
