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
///   `down-ms=M`     after ENODEV, opens fail for M ms (then the device returns);
///   `stall-K`       from the K-th write on, the device takes no frame (as a
///                   stalled PipeWire PCM does) until it is closed and reopened;
///   `stall-K=always` the same, and every reopened device stalls too (at once).
/// Otherwise it behaves like the null sink: frames consumed at the real rate (`Pacing.selfClocked`).
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
    private let stallAt: Int?
    private let stallAlways: Bool
    private var stalled = false

    /// Parses SPEC (the part after `fault:`); nil with a reason if malformed.
    public static func parse(_ spec: String, latencyMs: Int = 10) -> Result<FaultSink, SinkError> {
        var openFail = 0, down: UInt64 = 0
        var faults: [Int: Fault] = [:]
        var stallAt: Int?, stallAlways = false
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
            case let key where key.hasPrefix("stall-"):
                guard let k = Int(key.dropFirst(6)), k > 0, kv[1] == "once" || kv[1] == "always" else {
                    return .failure(SinkError("fault sink: '\(item)': stall-K=once|always"))
                }
                stallAt = k
                stallAlways = kv[1] == "always"
            default:
                guard kv[0].hasPrefix("write-"), let k = Int(kv[0].dropFirst(6)), k > 0,
                      let f = Fault(rawValue: kv[1]) else {
                    return .failure(SinkError("fault sink: unknown '\(item)' (open-fail=N, write-K=EPIPE|ESTRPIPE|ENODEV|EIO, down-ms=M, stall-K=once|always)"))
                }
                faults[k] = f
            }
        }
        return .success(FaultSink(spec: "fault:" + spec, openFail: openFail, faults: faults, downNs: down,
                                  stallAt: stallAt, stallAlways: stallAlways, latencyMs: latencyMs))
    }

    init(spec: String, openFail: Int, faults: [Int: Fault], downNs: UInt64, stallAt: Int?, stallAlways: Bool, latencyMs: Int) {
        self.spec = spec
        self.stallAt = stallAt
        self.stallAlways = stallAlways
        openFailuresLeft = openFail
        self.faults = faults
        downNanoseconds = downNs
        format = .clocked(latencyMs: latencyMs)
        clock = DeviceClock(rate: format.rate, bufferFrames: format.bufferFrames)
    }

    public func open() throws(SinkError) -> OpenedDevice {
        if openFailuresLeft > 0 {
            openFailuresLeft -= 1
            throw SinkError("fault: cannot open the device: No such device (ENODEV)")
        }
        if MonotonicClock.now() < downUntil { throw SinkError("fault: cannot open the device: No such device (ENODEV)") }
        stalled = stallAlways && stalled
        clock.drop()
        return OpenedDevice(kind: "fault", format: format, pacing: .selfClocked)
    }

    public func write(_ data: UnsafeRawPointer, frames: Int) throws(SinkError) -> SinkWrite {
        writes += 1
        if writes == stallAt { stalled = true }
        if stalled {
            // Takes nothing; waits a period, as a poll on a stuck device would time out.
            MonotonicClock.sleep(until: MonotonicClock.now() + UInt64(format.periodFrames) * 1_000_000_000 / UInt64(format.rate))
            return SinkWrite(frames: 0)
        }
        switch faults[writes] {
        case .EPIPE?, .ESTRPIPE?:
            clock.write(frames: frames)  // recovered, as snd_pcm_recover would, and the period written again
            return SinkWrite(frames: frames, xruns: 1)
        case .ENODEV?:
            downUntil = MonotonicClock.now() + downNanoseconds
            throw SinkError("fault: write failed: No such device (ENODEV)")
        case .EIO?:
            throw SinkError("fault: write failed: Input/output error (EIO)")
        case nil:
            clock.write(frames: frames)
            return SinkWrite(frames: frames)
        }
    }

    public func delayFrames(now: UInt64) -> Int { clock.delay(now: now) }
    public func stop() { clock.drop() }
    public func close() { clock.drop() }
}
