import CuedConfig
import Foundation

/// TOMLKit's C++ parser (toml++) aborts on some malformed files (an assertion
/// in its key parser, found by `cuedfuzz config`) instead of reporting an
/// error. A config file must never be able to kill the daemon, so before a
/// file is parsed in-process it is parsed once in a child process (cued
/// itself, `--check-config-syntax`); if that child dies, the file is refused.
public enum ConfigGuard {
    /// nil if the file parses without crashing the parser, else why not.
    public static func probe(_ path: String) -> ConfigIssue? {
        guard let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") else { return nil }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for fd: Int32 in [0, 1, 2] {
            posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", fd == 0 ? O_RDONLY : O_WRONLY, 0)
        }
        var attr = posix_spawnattr_t()
        posix_spawnattr_init(&attr)
        defer { posix_spawnattr_destroy(&attr) }
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attr, &none)
        posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETSIGMASK))
        let strings: [String] = [exe, "--check-config-syntax", path]
        var argv: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) }
        argv.append(nil)
        defer { argv.forEach { free($0) } }
        var pid = pid_t()
        guard posix_spawn(&pid, exe, &actions, &attr, argv, environ) == 0 else { return nil }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let signal = status & 0x7F
        guard signal != 0 else { return nil }
        return ConfigIssue(file: path, line: nil, key: nil,
                           message: "the TOML parser crashed on this file (signal \(signal)); it is not valid TOML: check its [table] headers and keys")
    }

    /// `cued --check-config-syntax PATH`: parse and exit 0 (crashing is the answer).
    public static func syntaxChild(_ path: String) -> Never {
        if let text = try? String(contentsOfFile: path, encoding: .utf8) {
            _ = try? ConfigLoader.parse(text, file: path)
        }
        exit(0)
    }
}
