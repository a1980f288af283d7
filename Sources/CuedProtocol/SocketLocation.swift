/// Where the daemon's socket is: `--socket PATH`, else `$CUED_SOCKET`, else
/// `$XDG_RUNTIME_DIR/cued/cued.sock`. Shared by cued and its clients.
public enum SocketLocation {
    /// sun_path holds 107 bytes and a NUL, but SwiftNIO (which cued listens with)
    /// refuses paths over 103 bytes; one limit for cued and its clients.
    public static let maxPathBytes = 103

    /// The default socket's directory, `$XDG_RUNTIME_DIR/cued`: the one directory cued makes
    /// (and may tell a user to remove); nil without XDG_RUNTIME_DIR.
    public static func ownDirectory(environment: [String: String]) -> String? {
        guard let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty else { return nil }
        return runtime + "/cued"
    }

    public static func resolve(explicit: String?, environment: [String: String]) -> Result<String, SocketLocationError> {
        let path: String
        if let explicit, !explicit.isEmpty { path = explicit }
        else if let env = environment["CUED_SOCKET"], !env.isEmpty { path = env }
        else if let own = ownDirectory(environment: environment) { path = own + "/cued.sock" }
        else {
            return .failure(SocketLocationError(message:
                "XDG_RUNTIME_DIR is not set, so there is no default socket path; pass --socket PATH (or set CUED_SOCKET)"))
        }
        guard path.utf8.count <= maxPathBytes else {
            return .failure(SocketLocationError(message:
                "socket path is \(path.utf8.count) bytes, over the limit of \(maxPathBytes): \(path)\n  use a shorter --socket PATH (or CUED_SOCKET, or XDG_RUNTIME_DIR)"))
        }
        return .success(path)
    }
}

public struct SocketLocationError: Error, Sendable, CustomStringConvertible {
    public let message: String
    public var description: String { message }
}
