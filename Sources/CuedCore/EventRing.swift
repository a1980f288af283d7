import Synchronization

/// A bounded single-producer, single-consumer ring, lock-free, every slot allocated at init:
/// what the audio thread hands out (`AudioEngine.Outbound`) to the relay thread. The producer
/// stages entries and publishes them in one go (`publish`), after it has let go of its own
/// copies of what they carry: the consumer, which may drop an entry's values the moment it
/// pops it, then always holds their last reference, so nothing is freed on the audio thread.
final class EventRing<Element>: @unchecked Sendable {
    private let mask: Int
    /// Uninitialized outside [head, tail + staged).
    private let slots: UnsafeMutablePointer<Element>
    /// The consumer's next slot.
    private let head = Atomic<Int>(0)
    /// The end of what is published.
    private let tail = Atomic<Int>(0)
    /// Written but not published yet: the producer's alone.
    private var staged = 0

    let capacity: Int

    /// `capacity` is rounded up to a power of two.
    init(capacity: Int) {
        var size = 2
        while size < capacity { size <<= 1 }
        self.capacity = size
        mask = size - 1
        slots = .allocate(capacity: size)
    }

    deinit {
        // Only the owner's last reference ends it: no thread is producing or consuming then.
        let h = head.load(ordering: .relaxed), t = tail.load(ordering: .relaxed) + staged
        for i in h..<t { (slots + (i & mask)).deinitialize(count: 1) }
        slots.deallocate()
    }

    /// Free slots (producer only).
    var room: Int { capacity - (tail.load(ordering: .relaxed) + staged - head.load(ordering: .acquiring)) }

    /// Writes `e` for the next `publish`; false (nothing written) when the ring is full. Producer only.
    func stage(_ e: consuming Element) -> Bool {
        let t = tail.load(ordering: .relaxed) + staged
        guard t - head.load(ordering: .acquiring) < capacity else { return false }
        (slots + (t & mask)).initialize(to: e)
        staged += 1
        return true
    }

    /// Makes the staged entries visible to the consumer; false if there were none. Producer only.
    @discardableResult
    func publish() -> Bool {
        guard staged > 0 else { return false }
        tail.store(tail.load(ordering: .relaxed) + staged, ordering: .releasing)
        staged = 0
        return true
    }

    /// The oldest published entry, moved out; nil when none is. Consumer only.
    func pop() -> Element? {
        let h = head.load(ordering: .relaxed)
        guard h != tail.load(ordering: .acquiring) else { return nil }
        let e = (slots + (h & mask)).move()
        head.store(h + 1, ordering: .releasing)
        return e
    }
}
