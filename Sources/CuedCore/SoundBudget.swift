import CuedSystem
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The one memory budget for decoded sound, in bytes: the config's cues, the sound
/// cache, sounds held by playing voices, decodes in flight and a reload's new cues
/// beside the old ones all count against it, because it is charged where sample
/// memory is allocated (`SampleMemory`) and given back where that memory is freed
/// (whichever thread drops the last reference, the audio thread included: lock-free).
///
/// Past the limit a charge is refused; before refusing, the budget asks its `relief`
/// (the sound cache) to give up what it can. Why it exists: without it, 300 cues
/// naming one 10 s file held 1.1 GB, and 4,000 `play-file`s of distinct files 1.5 GB.
public final class SoundBudget: Sendable {
    /// 64 MiB: the whole freedesktop theme decoded (35 sounds, 10.8 MiB) and the shipped
    /// cues (0.3 MB), with room beside them for 12 sounds of the 10 s maximum (3.84 MB
    /// each, 46 MB) decoding or playing at once — every decoding worker busy.
    public static let defaultLimitBytes = 64 << 20

    private let limitBytes: Atomic<Int>
    private let usedBytes = Atomic<Int>(0)
    private let decodingBytes = Atomic<Int>(0)
    private let refusals = Atomic<Int>(0)
    private let relief = Mutex<(@Sendable (_ needed: Int) -> Void)?>(nil)
    /// Buffers of its memory whose last reference the audio thread dropped (their unmapping
    /// handed to the reclaimer): 0 while the audio thread lets go of nothing (tests).
    let droppedByAudioThread = Atomic<Int>(0)

    public init(limitBytes: Int = SoundBudget.defaultLimitBytes) {
        precondition(limitBytes >= 0)
        self.limitBytes = Atomic(limitBytes)
    }

    /// The limit, in bytes.
    public var limit: Int { limitBytes.load(ordering: .relaxed) }
    /// Bytes charged now.
    public var used: Int { usedBytes.load(ordering: .relaxed) }
    /// Of `used`: memory of decodes not finished yet (their buffers, and what the
    /// decoding libraries are estimated to hold).
    public var decoding: Int { decodingBytes.load(ordering: .relaxed) }
    /// Charges refused since start.
    public var refused: Int { refusals.load(ordering: .relaxed) }

    /// A new limit (a reload): what is charged stays; new charges meet the new limit.
    public func setLimit(_ bytes: Int) {
        precondition(bytes >= 0)
        limitBytes.store(bytes, ordering: .relaxed)
    }

    /// What to ask, once per charge that does not fit, to give up memory (`needed`
    /// bytes would make it fit): the sound cache drops its least recently used
    /// sounds. It must not charge this budget, and no charge may be made while
    /// holding a lock it takes.
    public func setRelief(_ body: (@Sendable (_ needed: Int) -> Void)?) {
        relief.withLock { $0 = body }
    }

    /// Takes `bytes` if they fit under the limit, asking the relief first if they do
    /// not; false (counted in `refused`) if they still do not.
    public func charge(_ bytes: Int) -> Bool {
        precondition(bytes >= 0)
        if tryCharge(bytes) { return true }
        if let ask = relief.withLock({ $0 }) {
            ask(used + bytes - limit)
            if tryCharge(bytes) { return true }
        }
        refusals.add(1, ordering: .relaxed)
        return false
    }

    private func tryCharge(_ bytes: Int) -> Bool {
        var now = usedBytes.load(ordering: .relaxed)
        while true {
            guard bytes <= limit - now else { return false }
            let (done, seen) = usedBytes.compareExchange(expected: now, desired: now + bytes, ordering: .relaxed)
            if done { return true }
            now = seen
        }
    }

    /// Gives `bytes` back (lock-free: the audio thread may call it).
    public func release(_ bytes: Int) {
        usedBytes.subtract(bytes, ordering: .relaxed)
    }

    func decodingStarted(_ bytes: Int) { decodingBytes.add(bytes, ordering: .relaxed) }
    func decodingEnded(_ bytes: Int) { decodingBytes.subtract(bytes, ordering: .relaxed) }

    /// Why a charge of `bytes` was refused, with how to raise the limit (the end of an
    /// `err bad-file` or `err reload-failed` reply).
    public func refusal(_ bytes: Int) -> String {
        "over the memory budget for decoded sound: it needs \(Self.mib(bytes)) MiB and \(Self.mib(used)) of the "
            + "\(Self.mib(limit)) MiB are in use (cuectl status shows by what); raise sound_budget_mb in cued.toml "
            + "or cued's --sound-budget-mb"
    }

    /// Bytes as MiB with at most one decimal: 3.7, 64.
    public static func mib(_ bytes: Int) -> String {
        let tenths = (bytes * 10 + 524_288) / 1_048_576
        return tenths % 10 == 0 ? "\(tenths / 10)" : "\(tenths / 10).\(tenths % 10)"
    }
}

/// Bytes of a decode's budget held for what the decoding libraries allocate
/// themselves (not cued's to count exactly), given back when the decode ends.
/// Measured with mallinfo2 around the calls (Debian 12): libsndfile's handle
/// 11 KB for a WAV, 93 KB for FLAC, 200 KB for Ogg Vorbis once reading; a stereo
/// libsamplerate converter 884 KB at best quality, 285 KB at medium.
public struct BudgetReservation: ~Copyable {
    public let bytes: Int
    let budget: SoundBudget?

    public static let decoderBytes = 256 << 10
    public static let bestResamplerBytes = 1 << 20
    public static let mediumResamplerBytes = 320 << 10

    /// nil if the budget refuses.
    public init?(bytes: Int, budget: SoundBudget?) {
        if let budget {
            guard budget.charge(bytes) else { return nil }
            budget.decodingStarted(bytes)
        }
        self.bytes = bytes
        self.budget = budget
    }

    deinit {
        budget?.decodingEnded(bytes)
        budget?.release(bytes)
    }
}

/// Why sample memory could not be had.
public enum SampleMemoryFailure: Error, Sendable, Equatable {
    /// The budget refused (the reason names it and how to raise it).
    case overBudget(String)
    /// The system refused (out of memory, `RLIMIT_AS`, too many mappings).
    case noMemory(bytes: Int)

    public var reason: String {
        switch self {
        case .overBudget(let why): return why
        case .noMemory(let bytes):
            return "cannot allocate \(bytes) bytes to decode it (out of memory or over the address-space limit)"
        }
    }
}

/// Memory for samples (or a decode's scratch), charged to a budget. It comes from
/// mmap in whole pages, not malloc: freed, it goes back to the system at once.
/// (With malloc, a cue's buffer landed in the arena of whichever decoding thread
/// made it once glibc's dynamic mmap threshold had risen past its size, and freed
/// arena memory stayed resident: 4,000 `play-file`s of distinct 1 s files left
/// cued at 933 MB of RSS with 21 MB in use.) Counted as decoding until a
/// `SoundBuffer` adopts it. One owner: freed once, in `deinit` (or by the buffer).
public struct SampleMemory: ~Copyable {
    /// nil when empty.
    public let base: UnsafeMutableRawPointer?
    /// Bytes mapped: a whole number of pages (what the budget counts).
    public private(set) var bytes: Int
    let budget: SoundBudget?
    /// False once a buffer took the memory over.
    private var owned = true

    public static let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))

    /// `wanted` bytes rounded up to whole pages, charged to `budget` (nil: not counted,
    /// for tests and synthesized cues).
    public static func allocate(_ wanted: Int, budget: SoundBudget?) -> Result<SampleMemory, SampleMemoryFailure> {
        guard wanted >= 0, wanted <= Int.max - pageSize else { return .failure(.noMemory(bytes: wanted)) }
        let bytes = (wanted + pageSize - 1) / pageSize * pageSize
        if let budget {
            guard budget.charge(bytes) else { return .failure(.overBudget(budget.refusal(bytes))) }
        }
        guard bytes > 0 else { return .success(SampleMemory(base: nil, bytes: 0, budget: budget)) }
        let p = mmap(nil, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        guard let p, p != UnsafeMutableRawPointer(bitPattern: -1) else {
            budget?.release(bytes)
            return .failure(.noMemory(bytes: bytes))
        }
        budget?.decodingStarted(bytes)
        return .success(SampleMemory(base: p, bytes: bytes, budget: budget))
    }

    private init(base: UnsafeMutableRawPointer?, bytes: Int, budget: SoundBudget?) {
        self.base = base; self.bytes = bytes; self.budget = budget
    }

    /// Gives back the whole pages past the first `used` bytes.
    public mutating func shrink(to used: Int) {
        let keep = (max(0, used) + Self.pageSize - 1) / Self.pageSize * Self.pageSize
        guard let base, keep < bytes else { return }
        munmap(base + keep, bytes - keep)
        budget?.decodingEnded(bytes - keep)
        budget?.release(bytes - keep)
        bytes = keep
    }

    /// Hands the memory to a buffer (it is no longer decoding).
    consuming func adopt() -> (base: UnsafeMutableRawPointer?, bytes: Int, budget: SoundBudget?) {
        budget?.decodingEnded(bytes)
        owned = false
        return (base, bytes, budget)
    }

    deinit {
        guard owned else { return }
        budget?.decodingEnded(bytes)
        SampleReclaimer.free(base, bytes, budget)
    }
}

/// Decoded samples (interleaved stereo float), owned: several cues may share one
/// (cues naming the same file). Its memory is charged to the budget until the last
/// reference goes; if that is on the audio thread, the unmapping is handed to the
/// reclaimer thread (munmap takes the process's memory-map lock, which a thread
/// reading /proc/PID/smaps or faulting pages in may hold).
public final class SoundBuffer: @unchecked Sendable {  // immutable
    public let samples: UnsafeBufferPointer<Float>
    /// Interleaved channels: 2, or 1 for a mono source (kept mono: half the memory, the mixer
    /// plays it on both sides).
    public let channels: Int
    /// Bytes it takes: whole pages, what the budget counts.
    public let bytes: Int
    private let base: UnsafeMutableRawPointer?
    private let budget: SoundBudget?

    /// Takes `memory`, whose first `count` floats are the samples (`channels` interleaved).
    public init(adopting memory: consuming SampleMemory, count: Int, channels: Int = 2) {
        precondition(channels == 1 || channels == 2, "mono or stereo")
        precondition(count % channels == 0, "interleaved samples come in whole frames")
        self.channels = channels
        precondition(count * MemoryLayout<Float>.stride <= memory.bytes)
        let (base, bytes, budget) = memory.adopt()
        self.base = base; self.bytes = bytes; self.budget = budget
        samples = UnsafeBufferPointer(start: base?.assumingMemoryBound(to: Float.self), count: count)
    }

    /// A copy of `samples`, not counted (tests, synthesized cues). Traps if the memory
    /// cannot be had, like any array.
    public convenience init(copying samples: [Float], channels: Int = 2) {
        guard case .success(let memory) = SampleMemory.allocate(samples.count * MemoryLayout<Float>.stride, budget: nil) else {
            fatalError("cannot allocate \(samples.count) samples")
        }
        if let base = memory.base { samples.withUnsafeBytes { base.copyMemory(from: $0.baseAddress!, byteCount: $0.count) } }
        self.init(adopting: memory, count: samples.count, channels: channels)
    }

    deinit { SampleReclaimer.free(base, bytes, budget) }
}

/// Unmaps sample memory and gives its bytes back to the budget; on the audio thread
/// (which marks itself), the unmapping is queued for a thread of its own instead.
public enum SampleReclaimer {
    private struct Freed: @unchecked Sendable {
        var base: UnsafeMutableRawPointer
        var bytes: Int
        var budget: SoundBudget?
    }

    private final class Queue: Sendable {
        /// Preallocated: the audio thread's append never allocates while under `capacity`.
        let pending: Mutex<[Freed]>
        let capacity = 4_096
        let wake: Int32
        init() {
            var a: [Freed] = []
            a.reserveCapacity(capacity)
            pending = Mutex(a)
            wake = SystemCall.eventfd(flags: O_CLOEXEC)
        }
    }

    private static let queue = Queue()
    private static let started = Atomic<Bool>(false)
    /// Memory the audio thread handed over rather than unmapping it there (tests).
    static let handedOver = Atomic<Int>(0)
    private static let audioThreadKey: pthread_key_t = {
        var key = pthread_key_t()
        precondition(pthread_key_create(&key, nil) == 0)
        return key
    }()

    /// Starts the reclaimer thread (once; the audio engine calls it before its thread runs).
    public static func start() {
        guard queue.wake >= 0, !started.exchange(true, ordering: .relaxed) else { return }
        _ = audioThreadKey
        if case .failure = CuedThread.start("cued-reclaim", { SampleReclaimer.run() }) {
            started.store(false, ordering: .relaxed)
        }
    }

    /// Called on the audio thread: memory freed there from now on is unmapped elsewhere.
    public static func markAudioThread() {
        guard started.load(ordering: .relaxed) else { return }
        pthread_setspecific(audioThreadKey, UnsafeRawPointer(bitPattern: 1))
    }

    static func free(_ base: UnsafeMutableRawPointer?, _ bytes: Int, _ budget: SoundBudget?) {
        guard let base else { return }
        if started.load(ordering: .relaxed), pthread_getspecific(audioThreadKey) != nil {
            let queued = queue.pending.withLock { p -> Bool in
                guard p.count < queue.capacity else { return false }
                p.append(Freed(base: base, bytes: bytes, budget: budget))
                return true
            }
            if queued {
                handedOver.add(1, ordering: .relaxed)
                budget?.droppedByAudioThread.add(1, ordering: .relaxed)
                var one: UInt64 = 1
                _ = write(queue.wake, &one, 8)
                return
            }
        }
        munmap(base, bytes)
        budget?.release(bytes)
    }

    private static func run() {
        var spare: [Freed] = []
        spare.reserveCapacity(queue.capacity)
        while true {
            var n: UInt64 = 0
            if read(queue.wake, &n, 8) < 0 && errno != EINTR { return }
            queue.pending.withLock { swap(&$0, &spare) }
            for f in spare {
                munmap(f.base, f.bytes)
                f.budget?.release(f.bytes)
            }
            spare.removeAll(keepingCapacity: true)
        }
    }
}
