/// Bytes that C libraries write to descriptor 2, cut into lines for cued's log.
/// A line longer than `maxLineBytes` is cut there (the rest of it is dropped,
/// not logged as more lines), so one endless line costs one log line.
public struct LineAssembler: Sendable {
    public let maxLineBytes: Int
    private var pending: [UInt8] = []
    /// The line being read was cut: its bytes until the next LF are dropped.
    private var skipping = false

    public init(maxLineBytes: Int = 512) {
        precondition(maxLineBytes > 0)
        self.maxLineBytes = maxLineBytes
        pending.reserveCapacity(maxLineBytes)
    }

    /// The lines `bytes` complete (without their LF; a CR before it dropped).
    public mutating func append<C: Collection>(_ bytes: C) -> [String] where C.Element == UInt8 {
        var lines: [String] = []
        for b in bytes {
            if b == 0x0A {
                if !skipping { lines.append(take()) }
                skipping = false
            } else if !skipping {
                pending.append(b)
                if pending.count == maxLineBytes {
                    lines.append(take() + " …")
                    skipping = true
                }
            }
        }
        return lines
    }

    private mutating func take() -> String {
        if pending.last == 0x0D { pending.removeLast() }
        let s = String(decoding: pending, as: UTF8.self)
        pending.removeAll(keepingCapacity: true)
        return s
    }
}

/// At most `perSecond` lines a second (windows of one second from the first
/// line); the rest of a window's lines are counted, and the count is reported
/// once, when the window has ended. Time is passed in (monotonic ns).
public struct LineLimiter: Sendable {
    public let perSecond: Int
    private var windowStart: UInt64?
    private var passed = 0
    /// Lines dropped in the current window, not yet reported.
    public private(set) var suppressed = 0

    public init(perSecond: Int) {
        precondition(perSecond > 0)
        self.perSecond = perSecond
    }

    /// Whether a line arriving at `now` is logged, and the count of the lines
    /// dropped in a window that has ended, to report first (nil if none).
    public mutating func admit(now: UInt64) -> (log: Bool, report: Int?) {
        let report = endWindow(now: now)
        if windowStart == nil { windowStart = now }
        if passed < perSecond {
            passed += 1
            return (true, report)
        }
        suppressed += 1
        return (false, report)
    }

    /// The count of dropped lines to report if their window has ended by `now`
    /// (nil if none): for a drain that has gone quiet.
    public mutating func endWindow(now: UInt64) -> Int? {
        guard let start = windowStart, now &- start >= 1_000_000_000 else { return nil }
        windowStart = nil
        passed = 0
        defer { suppressed = 0 }
        return suppressed > 0 ? suppressed : nil
    }

    /// Nanoseconds until the current window ends, if lines dropped in it wait
    /// to be reported.
    public func untilReport(now: UInt64) -> UInt64? {
        guard suppressed > 0, let start = windowStart else { return nil }
        let end = start &+ 1_000_000_000
        return now >= end ? 0 : end - now
    }
}
