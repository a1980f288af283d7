import Synchronization

/// cued's own stream as the sound server's graph sets it: the native PipeWire stream's Props
/// (volume, mute, channel volumes: what WirePlumber restores for the Notification role, what a
/// mixer or `wpctl` sets), published by the audio thread and read by the server (`status`,
/// `why`). The audio thread only stores atomics (a sequence lock: no lock, no allocation, no
/// system call); a reader retries while a publish is under way.
public final class StreamProps: Sendable {
    /// What the graph last said, and whether the stream is open now.
    public struct Snapshot: Sendable, Equatable {
        /// A native stream is open now (else what follows is as it was last seen, if ever).
        public var open = false
        /// Its node's id on the graph (`wpctl set-volume ID …`), while open.
        public var nodeID: Int?
        /// Linear gains (1 is unity); nil where the graph never said.
        public var volume: Double?
        public var mute: Bool?
        public var channelVolumes: [Double] = []
        /// Props seen since start (0: never).
        public var changes = 0
        public init() {}

        /// Whether the graph silences cued's stream: muted, or every volume at 0.
        public var silenced: Bool {
            mute == true || volume == 0 || (!channelVolumes.isEmpty && channelVolumes.allSatisfy { $0 == 0 })
        }
    }

    static let channels = 2
    /// Even: stable; odd: a publish is under way.
    private let sequence = Atomic<Int>(0)
    private let changes = Atomic<Int>(0)
    private let isOpen = Atomic<Bool>(false)
    private let node = Atomic<Int>(-1)
    /// Micro-units of linear gain; -1: not said.
    private let volume = Atomic<Int>(-1)
    /// -1: not said; 0, 1.
    private let mute = Atomic<Int>(-1)
    private let channelCount = Atomic<Int>(0)
    private let channel0 = Atomic<Int>(-1)
    private let channel1 = Atomic<Int>(-1)

    public init() {}

    private static func micro(_ v: Float) -> Int { Int((max(0, min(v, 100)) * 1_000_000).rounded()) }

    /// The audio thread: the stream opened (its node id, -1 if not known) or closed.
    public func setOpen(_ open: Bool, nodeID: Int = -1) {
        write {
            isOpen.store(open, ordering: .relaxed)
            node.store(open ? nodeID : -1, ordering: .relaxed)
        }
    }

    /// The audio thread: Props the graph set (nil: not in them); `channels` of them at most 2 kept.
    public func publish(volume v: Float?, mute m: Bool?, channels: Int, _ c0: Float, _ c1: Float) {
        write {
            if let v { volume.store(Self.micro(v), ordering: .relaxed) }
            if let m { mute.store(m ? 1 : 0, ordering: .relaxed) }
            if channels > 0 {
                channelCount.store(min(channels, Self.channels), ordering: .relaxed)
                channel0.store(Self.micro(c0), ordering: .relaxed)
                channel1.store(channels > 1 ? Self.micro(c1) : -1, ordering: .relaxed)
            }
            changes.add(1, ordering: .relaxed)
        }
    }

    private func write(_ body: () -> Void) {
        sequence.add(1, ordering: .releasing)
        body()
        sequence.add(1, ordering: .releasing)
    }

    /// A consistent view (retried while the audio thread publishes; its publishes are a few stores).
    public var snapshot: Snapshot {
        var s = Snapshot()
        for _ in 0..<100 {
            let before = sequence.load(ordering: .acquiring)
            if before & 1 == 1 { continue }
            s = Snapshot()
            s.open = isOpen.load(ordering: .relaxed)
            let id = node.load(ordering: .relaxed)
            s.nodeID = id >= 0 ? id : nil
            let v = volume.load(ordering: .relaxed)
            s.volume = v >= 0 ? Double(v) / 1_000_000 : nil
            let m = mute.load(ordering: .relaxed)
            s.mute = m >= 0 ? m == 1 : nil
            let n = channelCount.load(ordering: .relaxed)
            let c0 = channel0.load(ordering: .relaxed), c1 = channel1.load(ordering: .relaxed)
            s.channelVolumes = [c0, c1].prefix(n).map { Double($0) / 1_000_000 }
            s.changes = changes.load(ordering: .relaxed)
            if sequence.load(ordering: .acquiring) == before { break }
        }
        return s
    }
}
