import Synchronization

/// A bounded multi-producer queue for the audio thread. Producers never
/// block on audio: `push` takes a short lock and fails when full.
final class CommandQueue: Sendable {
    /// A ring that starts small and doubles, up to `capacity`, when producers
    /// fill it: an idle daemon keeps a few KiB, not the 400 KiB a full-size
    /// ring of commands takes. Only producers (push) ever grow it; the audio
    /// thread's pop never allocates.
    private struct Ring {
        var items: [AudioEngine.Command?]
        var head = 0, count = 0
        let capacity: Int

        mutating func grow() {
            let size = min(capacity, items.count * 2)
            var bigger = [AudioEngine.Command?](repeating: nil, count: size)
            for i in 0..<count { bigger[i] = items[(head + i) % items.count] }
            items = bigger
            head = 0
        }
    }
    static let initialSize = 64
    private let ring: Mutex<Ring>
    init(capacity: Int) {
        ring = Mutex(Ring(items: Array(repeating: nil, count: min(capacity, Self.initialSize)), capacity: capacity))
    }

    func push(_ c: AudioEngine.Command) -> Bool {
        ring.withLock { r in
            if r.count == r.items.count {
                guard r.items.count < r.capacity else { return false }
                r.grow()
            }
            r.items[(r.head + r.count) % r.items.count] = c
            r.count += 1
            return true
        }
    }

    var isEmpty: Bool { ring.withLock { $0.count == 0 } }

    func pop() -> AudioEngine.Command? {
        ring.withLock { r in
            guard r.count > 0 else { return nil }
            let c = r.items[r.head]
            r.items[r.head] = nil
            r.head = (r.head + 1) % r.items.count
            r.count -= 1
            return c
        }
    }
}
