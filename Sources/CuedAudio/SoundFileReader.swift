import CSndFile
import CuedCore
import CuedSystem
#if canImport(Glibc)
import Glibc
#endif

/// libsndfile's reads of one sound file, done by cued: each read(2) asks the
/// kernel for at most `chunkBytes`, and the kernel's readahead is off for the
/// descriptor (`POSIX_FADV_RANDOM`), so no read makes the kernel do more than that.
///
/// Why: libsndfile reads 8 KiB at a time and the kernel reads ahead of it, up to
/// the device's `read_ahead_kb` (8 MiB on this machine's virtio disk). Where a
/// file has holes (a sparse file, 0 bytes on disk, is a legal WAV of silence),
/// that readahead is no I/O but pages zeroed inside the reader's read(2): single
/// reads took 17–29 ms here. A kernel that does not preempt kernel code (this
/// one runs `preempt=none`) runs nothing else on that core meanwhile, whatever
/// the decoder's nice value or policy: not the event loop, not the state saver,
/// not the SCHED_FIFO audio thread. With a slow decode in such a read on every
/// core, another client's cached `play-file` took 80 ms at p99 (issue 19, row
/// 19.2b). A 128 KiB read zeroes in well under a millisecond, and on a real
/// disk is still a sizeable sequential read (about 600 MB/s here uncached, where
/// libsndfile's 8 KiB reads without readahead managed 130).
///
/// One decode's: not thread-safe. Reads are `pread`s at the reader's own
/// position (the descriptor's offset is not used).
final class SoundFileReader {
    static let chunkBytes = 128 * 1024

    private let fd: Int32
    /// From the open's `fstat`: what libsndfile is told the file's length is.
    private let size: Int
    private let capacity: Int
    private let memory: SampleMemory
    private let buffer: UnsafeMutableRawPointer
    /// The file's bytes [start, start + count) are in `buffer`.
    private var start = 0
    private var count = 0
    private var position = 0
    /// errno of a read that failed: libsndfile saw the end of the file there.
    private(set) var failure: Int32?

    /// Its buffer is charged to `budget` (a decode's).
    init(_ file: OpenedFile, chunkBytes: Int = SoundFileReader.chunkBytes, budget: SoundBudget? = nil) throws(SampleMemoryFailure) {
        switch SampleMemory.allocate(max(chunkBytes, 1), budget: budget) {
        case .success(let m): memory = m
        case .failure(let e): throw e
        }
        fd = file.fd
        size = file.size
        capacity = chunkBytes
        buffer = memory.base!
        // Advice only: where it is not taken, reads are still bounded, readahead is not.
        _ = posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM)
    }

    /// Reads the file's first chunk (its header) into the buffer; why it could not, or nil.
    /// Done before libsndfile opens it, outside the lock its opens share: a file on a file
    /// system that stopped answering blocks this thread alone.
    func readStart() -> String? {
        guard size > 0 else { return nil }
        fill(at: 0)
        return failure.map { "cannot read it: \(errnoString($0))" }
    }

    /// Up to `wanted` bytes at the position into `destination`: fewer only at the end
    /// of the file or after a failed read.
    func read(into destination: UnsafeMutableRawPointer, _ wanted: Int) -> Int {
        var done = 0
        while done < wanted {
            if position >= start && position < start + count {
                let n = min(wanted - done, start + count - position)
                memcpy(destination + done, buffer + (position - start), n)
                done += n
                position += n
            } else if !fill(at: position) {
                break
            }
        }
        return done
    }

    /// The new position, or -1 (a position before the start, an unknown `whence`).
    func seek(_ offset: Int, whence: Int32) -> Int {
        let base: Int
        switch whence {
        case SEEK_SET: base = 0
        case SEEK_CUR: base = position
        case SEEK_END: base = size
        default: return -1
        }
        let (p, overflow) = base.addingReportingOverflow(offset)
        guard !overflow, p >= 0 else { return -1 }
        position = p
        return p
    }

    var tell: Int { position }

    /// One bounded read into the buffer at `offset`; false at the end of the file or on
    /// a failure (kept: no read is tried after one).
    @discardableResult
    private func fill(at offset: Int) -> Bool {
        guard failure == nil else { return false }
        while true {
            let n = pread(fd, buffer, capacity, off_t(offset))
            if n < 0 && errno == EINTR { continue }
            if n < 0 {
                failure = errno
                count = 0
                return false
            }
            start = offset
            count = n
            return n > 0
        }
    }

    /// libsndfile's callbacks; the user data is an unretained `SoundFileReader` that
    /// outlives the `SNDFILE`.
    static func virtualIO() -> SF_VIRTUAL_IO {
        func reader(_ p: UnsafeMutableRawPointer?) -> SoundFileReader {
            Unmanaged<SoundFileReader>.fromOpaque(p!).takeUnretainedValue()
        }
        var io = SF_VIRTUAL_IO()
        io.get_filelen = { sf_count_t(reader($0).size) }
        io.seek = { offset, whence, user in sf_count_t(reader(user).seek(Int(offset), whence: whence)) }
        io.read = { destination, wanted, user in
            guard let destination, wanted > 0 else { return 0 }
            return sf_count_t(reader(user).read(into: destination, Int(wanted)))
        }
        io.write = { _, _, _ in 0 }
        io.tell = { sf_count_t(reader($0).tell) }
        return io
    }
}
