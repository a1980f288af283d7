#if canImport(Glibc)
import Glibc
#endif

/// A sink that fails on purpose, for tests of how cued survives a device:
/// `--sink fault:SPEC`, SPEC a comma-separated list of
///   `open-fail=N`   the first N opens fail (no device yet);
///   `write-K=ERR`   the K-th write (counted over the sink's life) fails with
///                   ERR: EPIPE (xrun) or ESTRPIPE (suspend), which the sink
///                   recovers as ALSA's snd_pcm_recover would; ENODEV (unplugged)
///                   or EIO (broken), which lose the device;
///   `down-ms=M`     after ENODEV, opens fail for M ms (then the device returns).
/// Otherwise it behaves like the null sink: frames consumed at the real rate.
/// Threading: every method on the audio thread only (see `Sink`).
public final class FaultSink: Sink {
    public enum Fault: String, Sendable { case EPIPE, ESTRPIPE, ENODEV, EIO }

    public let spec: String
    private let format: SinkFormat
    private var clock: DeviceClock
    private var openFailuresLeft: Int
    private let faults: [Int: Fault]
    private let downNanoseconds: UInt64
    private var downUntil: UInt64 = 0
    private var writes = 0

    /// Parses SPEC (the part after `fault:`); nil with a reason if malformed.
    public static func parse(_ spec: String, latencyMs: Int = 10) -> Result<FaultSink, SinkError> {
        var openFail = 0, down: UInt64 = 0
        var faults: [Int: Fault] = [:]
        for item in spec.split(separator: ",") where !item.isEmpty {
            let kv = item.split(separator: "=", maxSplits: 1).map(String.init)
            guard kv.count == 2 else { return .failure(SinkError("fault sink: '\(item)' is not KEY=VALUE")) }
            switch kv[0] {
            case "open-fail":
                guard let n = Int(kv[1]), n >= 0 else { return .failure(SinkError("fault sink: open-fail needs a count")) }
                openFail = n
            case "down-ms":
                guard let n = UInt64(kv[1]) else { return .failure(SinkError("fault sink: down-ms needs milliseconds")) }
                down = n * 1_000_000
            default:
                guard kv[0].hasPrefix("write-"), let k = Int(kv[0].dropFirst(6)), k > 0,
                      let f = Fault(rawValue: kv[1]) else {
                    return .failure(SinkError("fault sink: unknown '\(item)' (open-fail=N, write-K=EPIPE|ESTRPIPE|ENODEV|EIO, down-ms=M)"))
                }
                faults[k] = f
            }
        }
        return .success(FaultSink(spec: "fault:" + spec, openFail: openFail, faults: faults, downNs: down, latencyMs: latencyMs))
    }

    init(spec: String, openFail: Int, faults: [Int: Fault], downNs: UInt64, latencyMs: Int) {
        self.spec = spec
        openFailuresLeft = openFail
        self.faults = faults
        downNanoseconds = downNs
        format = .clocked(latencyMs: latencyMs)
        clock = DeviceClock(rate: format.rate, bufferFrames: format.bufferFrames)
    }

    public func open() throws(SinkError) -> SinkFormat {
        if openFailuresLeft > 0 {
            openFailuresLeft -= 1
            throw SinkError("fault: cannot open the device: No such device (ENODEV)")
        }
        if MonotonicClock.now() < downUntil { throw SinkError("fault: cannot open the device: No such device (ENODEV)") }
        return format
    }

    public func write(_ data: UnsafeRawPointer, frames: Int) throws(SinkError) -> Int {
        writes += 1
        switch faults[writes] {
        case .EPIPE?, .ESTRPIPE?:
            clock.write(frames: frames)  // recovered, as snd_pcm_recover would, and the period written again
            return 1
        case .ENODEV?:
            downUntil = MonotonicClock.now() + downNanoseconds
            throw SinkError("fault: write failed: No such device (ENODEV)")
        case .EIO?:
            throw SinkError("fault: write failed: Input/output error (EIO)")
        case nil:
            clock.write(frames: frames)
            return 0
        }
    }

    public func stop() { clock.drain() }
    public func close() {}
}
