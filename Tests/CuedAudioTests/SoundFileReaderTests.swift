@testable import CuedAudio
import CueDSP
import CuedSystem
import Foundation
import Testing
import TestSupport

@Suite struct SoundFileReaderTests {
    let dir = TempDir()

    /// What libsndfile sees through the reader is the file: reads and seeks of every kind
    /// (across chunk edges, longer than a chunk, past the end, before the start) against a
    /// model of the bytes, with a 64-byte chunk so that every path is taken often.
    @Test func readsAndSeeksSeeTheFilesBytes() throws {
        let bytes = (0..<5_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 8) }
        let path = dir.file("bytes.raw")
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let file = try UntrustedFile.openIdentified(path)
        defer { close(file.fd) }
        let reader = try SoundFileReader(file, chunkBytes: 64)
        #expect(reader.readStart() == nil)
        var position = 0
        var random = SeededNoise(seed: 19)
        let out = UnsafeMutableRawPointer.allocate(byteCount: 400, alignment: 1)
        defer { out.deallocate() }
        for _ in 0..<3_000 {
            if random.next(4) == 0 {
                let whence = [SEEK_SET, SEEK_CUR, SEEK_END][random.next(3)]
                let offset = random.next(6_000) - 3_000
                let base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? position : bytes.count
                let got = reader.seek(offset, whence: whence)
                if base + offset < 0 {
                    #expect(got == -1)  // refused, the position kept
                } else {
                    #expect(got == base + offset)
                    position = base + offset
                }
            } else {
                let wanted = random.next(400)
                let n = reader.read(into: out, wanted)
                let expected = position < bytes.count ? Array(bytes[position..<min(bytes.count, position + wanted)]) : []
                #expect(Array(UnsafeRawBufferPointer(start: out, count: n)) == expected)
                position += n
            }
            #expect(reader.tell == position)
        }
        #expect(reader.failure == nil)
    }

    /// No read makes the kernel read ahead of it: after reading the start of a sparse file
    /// as libsndfile does (8 KiB at a time, in order), the page cache holds what was read and
    /// nothing more. (With the kernel's readahead it holds more, read ahead: for holes, pages
    /// zeroed inside the reader's own read(2).)
    @Test func theKernelReadsOnlyWhatIsAskedFor() throws {
        let path = dir.file("sparse.wav")
        let size = 64 << 20
        try CraftedWAV.write(path, CraftedWAV.wav(channels: 2, rate: 48_000, dataBytes: size - 44), size: size)
        let file = try UntrustedFile.openIdentified(path)
        defer { close(file.fd) }
        let reader = try SoundFileReader(file)
        #expect(reader.readStart() == nil)
        let out = UnsafeMutableRawPointer.allocate(byteCount: 8_192, alignment: 1)
        defer { out.deallocate() }
        let read = 4 * SoundFileReader.chunkBytes
        for _ in 0..<read / 8_192 { #expect(reader.read(into: out, 8_192) == 8_192) }
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        #expect(try residentPages(file.fd, size: size) <= read / page)
    }

    /// A read that fails is the reason the decode gives, not a short file: at the start, and
    /// in the middle of the decode (past the first chunk the reader holds).
    @Test(arguments: [false, true])
    func aFailedReadIsTheReasonGiven(midDecode: Bool) throws {
        let path = dir.file("tone.wav")
        let frames = 3 * SoundFileReader.chunkBytes / 2  // three chunks of 16-bit mono
        try WAV.write(path, int16: [Int16](repeating: 1_000, count: frames), sampleRate: 48_000, channels: 1)
        let file = try UntrustedFile.openIdentified(path)
        defer { close(file.fd) }
        // The same descriptor number, then open for writing only: every read fails (EBADF).
        // Swapped in before the decode, or when it first asks whether to stop (after the
        // header, with the first chunk read).
        func breakReads() {
            let writeOnly = open(path, O_WRONLY | O_CLOEXEC)
            #expect(writeOnly >= 0 && dup2(writeOnly, file.fd) == file.fd)
            close(writeOnly)
        }
        if !midDecode { breakReads() }
        var broken = !midDecode
        let error = #expect(throws: SndFileError.self) {
            try CueLoader().load(file, path: path, name: "tone", cancelled: {
                if !broken { broken = true; breakReads() }
                return false
            })
        }
        #expect(error?.reason == "cannot read it: \(errnoString(EBADF))")
    }

    /// Pages of the file in the page cache (mincore on a mapping of it).
    func residentPages(_ fd: Int32, size: Int) throws -> Int {
        let map = mmap(nil, size, PROT_READ, MAP_SHARED, fd, 0)
        try #require(map != MAP_FAILED)
        defer { munmap(map, size) }
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        var vector = [UInt8](repeating: 0, count: (size + page - 1) / page)
        try #require(mincore(map, size, &vector) == 0)
        return vector.reduce(0) { $0 + Int($1 & 1) }
    }
}

extension SeededNoise {
    /// 0 ..< bound.
    mutating func next(_ bound: Int) -> Int { Int(nextUInt64() % UInt64(bound)) }
}
