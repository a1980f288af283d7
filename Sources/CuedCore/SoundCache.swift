/// Decoded sounds kept for reuse (theme sounds, played files), bounded by the
/// bytes of their samples and by their number; the least recently used go first.
///
/// A value type with no locking: one owner (the loader thread, or a `Mutex`
/// around it). Evicting a cue only drops the cache's reference: a voice that
/// is playing it keeps it alive until it ends.
///
/// The default byte limit, 16 MiB, holds about 44 s of 48 kHz stereo float —
/// the whole of Debian's freedesktop theme (35 sounds, 42 s, 10.8 MiB decoded:
/// its mono sounds stay mono)
/// or four sounds of the 10 s maximum — while the daemon's own RSS stays in
/// the tens of MB. Bytes alone did not bound it: each entry also costs about
/// 500 bytes of bookkeeping (key, node, cue), and a million played files of
/// one frame each (a file whose mtime changes is a new file) kept a million
/// entries, 470 MB. So the entries are capped too, at 4,096 by default
/// (about 2 MB of bookkeeping at most).
public struct SoundCache<Key: Hashable & Sendable>: Sendable {
    public static var defaultLimitBytes: Int { 16 << 20 }
    public static var defaultLimitEntries: Int { 4_096 }

    private struct Node: Sendable {
        var cue: Cue
        var bytes: Int
        /// Neighbours in use order: `newer` towards `newest`, `older` towards `oldest`.
        var newer: Key?
        var older: Key?
    }

    /// Bytes of samples kept at most.
    public private(set) var limitBytes: Int
    /// Sounds kept at most.
    public private(set) var limitEntries: Int
    /// Bytes of samples kept now.
    public private(set) var bytes = 0
    private var nodes: [Key: Node] = [:]
    private var newest: Key?
    private var oldest: Key?

    public init(limitBytes: Int = Self.defaultLimitBytes, limitEntries: Int = Self.defaultLimitEntries) {
        precondition(limitBytes >= 0 && limitEntries >= 1)
        self.limitBytes = limitBytes
        self.limitEntries = limitEntries
    }

    /// New limits: the least recently used go until what is kept fits. Costs
    /// only the evictions (nothing when the limits grow or stay).
    public mutating func setLimits(bytes: Int, entries: Int = Self.defaultLimitEntries) {
        precondition(bytes >= 0 && entries >= 1)
        limitBytes = bytes
        limitEntries = entries
        while bytes < self.bytes || nodes.count > entries, let victim = oldest { remove(victim) }
    }

    /// Sounds kept.
    public var count: Int { nodes.count }

    /// The bytes a cue takes here: its samples' memory, in whole pages (what the budget counts).
    public static func size(of cue: Cue) -> Int { cue.sound.bytes }

    /// The cue for `key`, now the most recently used; nil if not kept.
    public mutating func get(_ key: Key) -> Cue? {
        guard let node = nodes[key] else { return nil }
        unlink(key)
        pushNewest(key)
        return node.cue
    }

    /// The cue for `key`, its use order unchanged.
    public func peek(_ key: Key) -> Cue? { nodes[key]?.cue }

    public func contains(_ key: Key) -> Bool { nodes[key] != nil }

    /// Keeps `cue` under `key` as the most recently used (replacing what the
    /// key held), evicting the least recently used until it fits in bytes and
    /// in entries. A cue larger
    /// than the whole limit is not kept (returns false): it still plays, it is
    /// just decoded again next time.
    @discardableResult
    public mutating func insert(_ cue: Cue, for key: Key) -> Bool {
        remove(key)
        let size = Self.size(of: cue)
        guard size <= limitBytes else { return false }
        while bytes + size > limitBytes || nodes.count >= limitEntries, let victim = oldest { remove(victim) }
        nodes[key] = Node(cue: cue, bytes: size, newer: nil, older: nil)
        pushNewest(key)
        bytes += size
        return true
    }

    /// Forgets the least recently used sound; false if none is kept.
    @discardableResult
    public mutating func removeOldest() -> Bool {
        guard let victim = oldest else { return false }
        remove(victim)
        return true
    }

    /// Forgets `key`'s cue, if kept.
    public mutating func remove(_ key: Key) {
        guard let node = nodes[key] else { return }
        unlink(key)
        nodes[key] = nil
        bytes -= node.bytes
    }

    public mutating func removeAll() {
        nodes.removeAll()
        newest = nil
        oldest = nil
        bytes = 0
    }

    /// Keys from the most to the least recently used.
    public var keys: [Key] {
        var out: [Key] = []
        out.reserveCapacity(nodes.count)
        var k = newest
        while let key = k { out.append(key); k = nodes[key]?.older }
        return out
    }

    private mutating func unlink(_ key: Key) {
        guard let node = nodes[key] else { return }
        if let n = node.newer { nodes[n]?.older = node.older } else { newest = node.older }
        if let o = node.older { nodes[o]?.newer = node.newer } else { oldest = node.newer }
        nodes[key]?.newer = nil
        nodes[key]?.older = nil
    }

    private mutating func pushNewest(_ key: Key) {
        nodes[key]?.older = newest
        nodes[key]?.newer = nil
        if let n = newest { nodes[n]?.newer = key }
        newest = key
        if oldest == nil { oldest = key }
    }
}
