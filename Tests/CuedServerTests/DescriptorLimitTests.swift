@testable import CuedServer
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// What counts against the connection cap: descriptors cued holds for good, not a file or a
/// directory being read on another thread when it counts (a theme looked up, a sound decoded),
/// which made the cap one lower at random. Each kind is a real descriptor, typed by the kernel.
@Suite struct DescriptorLimitTests {
    func held(_ fd: Int32, kept: Bool = false, target: String = "/some/file") throws -> Bool {
        defer { if fd > 2 { close(fd) } }
        var st = stat()
        try #require(fstat(fd, &st) == 0)
        return DescriptorLimit.heldForGood(fd: fd, mode: st.st_mode, kept: kept, target: { target })
    }

    @Test func socketsPipesDevicesAndKeptFilesCountFilesBeingReadDoNot() throws {
        let dir = NSTemporaryDirectory() + "cued-fd-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try #require(FileManager.default.createFile(atPath: dir + "/a.wav", contents: Data([1, 2, 3])))
        #expect(try !held(open(dir + "/a.wav", O_RDONLY | O_CLOEXEC)))
        #expect(try !held(open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)))
        // A file cued keeps (its log's stderr), and PipeWire's buffers (memfd, a regular file).
        #expect(try held(open(dir + "/a.wav", O_RDONLY | O_CLOEXEC), kept: true))
        #expect(try held(open(dir + "/a.wav", O_RDONLY | O_CLOEXEC), target: "/memfd:pipewire-memfd:flags=0x0000000f (deleted)"))
        var pair: [Int32] = [0, 0]
        try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0)
        #expect(try held(pair[0]) && held(pair[1]))
        var pipeFds: [Int32] = [0, 0]
        try #require(pipe(&pipeFds) == 0)
        #expect(try held(pipeFds[0]) && held(pipeFds[1]))
        #expect(try held(open("/dev/null", O_RDONLY | O_CLOEXEC)))
        // stdin, stdout and stderr count whatever they are (a file when redirected).
        #expect(DescriptorLimit.heldForGood(fd: 2, mode: S_IFREG, kept: false, target: { "/tmp/log" }))
    }

    /// The count itself: a file opened (a read under way) leaves it as it was; a socket adds one.
    @Test func aFileBeingReadIsNotCountedASocketIs() throws {
        // Other tests in this process open and close descriptors meanwhile: the socket's +1 is
        // looked for in a few tries, the file's +0 the same way.
        func settles(_ delta: Int, _ body: () -> Void) -> Bool {
            (0..<20).contains { _ in
                let before = DescriptorLimit.inUse()
                body()
                return DescriptorLimit.inUse() - before == delta
            }
        }
        let file = open("/proc/self/status", O_RDONLY | O_CLOEXEC)
        defer { close(file) }
        var opened: [Int32] = []
        defer { for fd in opened { close(fd) } }
        #expect(settles(0) { opened.append(open("/proc/self/stat", O_RDONLY | O_CLOEXEC)) })
        #expect(settles(1) { opened.append(socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)) })
    }
}
