import CuedSystem
import Glibc
import Testing

/// Untrusted files: only a regular file is ever read, and nothing blocks.
@Suite(.timeLimit(.minutes(1))) final class UntrustedFileTests {
    let dir: String = {
        var t = Array("/tmp/cued-f.XXXXXX".utf8CString)
        return t.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
    }()

    deinit { FileSystem.removeTree(dir) }

    func write(_ name: String, _ text: String) -> String {
        let p = dir + "/" + name
        let fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        _ = text.withCString { Glibc.write(fd, $0, strlen($0)) }
        close(fd)
        return p
    }

    func reason(_ body: () throws(FileError) -> Void) -> String? {
        do { try body(); return nil } catch { return error.description }
    }

    @Test func readsARegularFileAndASymlinkToOne() throws {
        let p = write("a.txt", "hello")
        #expect(try UntrustedFile.readText(p, maxBytes: 100) == "hello")
        symlink(p, dir + "/link")
        #expect(try UntrustedFile.readText(dir + "/link", maxBytes: 100) == "hello")
    }

    @Test func aFIFOIsRefusedAtOnce() {
        let p = dir + "/fifo"
        mkfifo(p, 0o600)
        // With no writer, a blocking open would hang here for good.
        let r = reason { () throws(FileError) in _ = try UntrustedFile.read(p, maxBytes: 100) }
        #expect(r == "\(p): is a FIFO, not a regular file")
    }

    @Test func directoriesAndDevicesAreRefused() {
        #expect(reason { () throws(FileError) in _ = try UntrustedFile.open(dir) }?.contains("is a directory") == true)
        #expect(reason { () throws(FileError) in _ = try UntrustedFile.open("/dev/null") }?.contains("is a character device") == true)
    }

    @Test func danglingSymlinksAndLoopsAreNamed() {
        symlink(dir + "/nowhere", dir + "/dangling")
        #expect(reason { () throws(FileError) in _ = try UntrustedFile.open(dir + "/dangling") } == "\(dir)/dangling: is a dangling symbolic link")
        symlink(dir + "/loop2", dir + "/loop1")
        symlink(dir + "/loop1", dir + "/loop2")
        #expect(reason { () throws(FileError) in _ = try UntrustedFile.open(dir + "/loop1") }?.contains("symlink loop") == true)
        #expect(reason { () throws(FileError) in _ = try UntrustedFile.open(dir + "/missing") } == "\(dir)/missing: no such file")
    }

    @Test func readsAreBounded() {
        let p = write("big", String(repeating: "x", count: 1000))
        #expect(reason { () throws(FileError) in _ = try UntrustedFile.read(p, maxBytes: 999) } == "\(p): is 1000 bytes; at most 999 are read")
        #expect((try? UntrustedFile.read(p, maxBytes: 1000))?.count == 1000)
    }

    @Test func invalidUTF8IsNamed() {
        let p = dir + "/bin"
        let fd = open(p, O_WRONLY | O_CREAT, 0o600)
        var b: [UInt8] = [0xff, 0xfe]
        _ = Glibc.write(fd, &b, 2)
        close(fd)
        #expect(reason { () throws(FileError) in _ = try UntrustedFile.readText(p, maxBytes: 10) } == "\(p): is not UTF-8 text")
    }
}

@Suite struct PathTests {
    @Test func components() {
        #expect(Path.directory("/a/b/c.wav") == "/a/b")
        #expect(Path.directory("/c") == "/")
        #expect(Path.directory("c") == ".")
        #expect(Path.lastComponent("/a/b/c.wav") == "c.wav")
        #expect(Path.join("/a", "b") == "/a/b")
        #expect(Path.join("/a/", "b") == "/a/b")
        #expect(Path.join("/a", "/b") == "/b")
    }

    @Test func normalize() {
        #expect(Path.normalize("/a/./b/../c//d") == "/a/c/d")
        #expect(Path.normalize("/../a") == "/a")
        #expect(Path.normalize("a/../../b") == "../b")
        #expect(Path.normalize("/x/bin/../share/cued/sounds") == "/x/share/cued/sounds")
    }

    @Test func environmentAndHome() {
        setenv("CUED_FILES_TEST", "a=b", 1)
        #expect(Environment.current()["CUED_FILES_TEST"] == "a=b")
        #expect(Environment.home(["HOME": "/h"]) == "/h")
        #expect(!Environment.home([:]).isEmpty)
    }
}
