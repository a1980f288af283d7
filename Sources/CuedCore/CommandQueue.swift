import Synchronization

/// The audio thread's commands: a bounded multi-producer, single-consumer ring, lock-free
/// (Dmitry Vyukov's bounded queue). Every slot is allocated at init; `push` fails when the
/// ring is full; `pop`, on the audio thread, takes no lock, allocates nothing and never
/// waits: a producer preempted between claiming a slot and publishing it makes that slot,
/// and those after it, look empty until it publishes (then its `submit` wakes the thread).
/// `pop` moves the command out, so the audio thread holds the only reference to what it
/// carries and decides where it is let go of (`AudioEngine`: on the relay thread).
final class CommandQueue: @unchecked Sendable {
    private let mask: Int
    /// Per slot: `i` (free for the push at position `i`), `i + 1` (published for the pop at
    /// `i`), then `i + capacity` (free again, for the next lap).
    private let sequences: UnsafeMutablePointer<Atomic<Int>>
    /// Uninitialized but between a push's claim and the pop that moves the command out.
    private let slots: UnsafeMutablePointer<AudioEngine.Command>
    private let enqueue = Atomic<Int>(0)
    /// The consumer's position: only `pop` writes it (an atomic so `isEmpty` may be read too).
    private let dequeue = Atomic<Int>(0)
    /// Test hook: runs inside `push` after the slot is claimed, before it is published.
    private let claimedForTesting: (@Sendable () -> Void)?

    let capacity: Int

    /// `capacity` is rounded up to a power of two.
    init(capacity: Int, claimedForTesting: (@Sendable () -> Void)? = nil) {
        var size = 2
        while size < capacity { size <<= 1 }
        self.capacity = size
        mask = size - 1
        sequences = .allocate(capacity: size)
        for i in 0..<size { (sequences + i).initialize(to: Atomic(i)) }
        slots = .allocate(capacity: size)
        self.claimedForTesting = claimedForTesting
    }

    deinit {
        while pop() != nil {}
        sequences.deinitialize(count: capacity)
        sequences.deallocate()
        slots.deallocate()
    }

    /// False when full. Lock-free: producers contend on one compare-and-swap.
    func push(_ c: AudioEngine.Command) -> Bool {
        var pos = enqueue.load(ordering: .relaxed)
        while true {
            let seq = sequences[pos & mask].load(ordering: .acquiring)
            if seq == pos {
                let (won, now) = enqueue.weakCompareExchange(expected: pos, desired: pos + 1, ordering: .relaxed)
                if won { break }
                pos = now
            } else if seq < pos {
                return false  // the slot still holds the command of a lap ago: full
            } else {
                pos = enqueue.load(ordering: .relaxed)  // another producer took it
            }
        }
        (slots + (pos & mask)).initialize(to: c)
        claimedForTesting?()
        // Sequentially consistent, as `isEmpty`'s load: with `AudioEngine`'s `sleeping` flag
        // either the thread sees this command before it sleeps or the producer sees it asleep.
        sequences[pos & mask].store(pos + 1, ordering: .sequentiallyConsistent)
        return true
    }

    /// Nothing published at the consumer's position (audio thread).
    var isEmpty: Bool {
        let pos = dequeue.load(ordering: .relaxed)
        return sequences[pos & mask].load(ordering: .sequentiallyConsistent) != pos + 1
    }

    /// The oldest published command, moved out; nil when none is (audio thread only).
    func pop() -> AudioEngine.Command? {
        let pos = dequeue.load(ordering: .relaxed)
        guard sequences[pos & mask].load(ordering: .acquiring) == pos + 1 else { return nil }
        let c = (slots + (pos & mask)).move()
        sequences[pos & mask].store(pos + capacity, ordering: .releasing)
        dequeue.store(pos + 1, ordering: .relaxed)
        return c
    }
}
