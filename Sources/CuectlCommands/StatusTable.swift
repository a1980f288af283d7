import CuedProtocol
#if canImport(Glibc)
import Glibc
#endif

/// `cuectl status` for people: the shared `Status` as an aligned table.
public enum StatusTable {
    static func text(_ v: Int?) -> String { v.map(String.init) ?? "-" }

    public static func render(_ s: Status) -> String {
        var rows: [(String, String)] = []
        rows.append(("cued", "\(s.version) (protocol \(s.protocolVersion)), pid \(s.pid)"))
        rows.append(("muted", s.muted ? "yes" : "no"))
        rows.append(("profile", s.profile.rawValue))
        if !s.stateSaved { rows.append(("state", "not saved (retrying): \(s.stateError ?? "unknown error")")) }
        rows.append(("config", s.config ?? "-"))
        var sink = "\(s.sink.spec): \(s.sink.state)"
        if let kind = s.sink.kind { sink += " (\(kind))" }
        if s.sink.rate != nil {
            sink += ", \(text(s.sink.rate)) Hz, \(text(s.sink.channels)) ch, \(s.sink.format ?? "-")"
            sink += ", period \(text(s.sink.periodFrames)) / buffer \(text(s.sink.bufferFrames)) frames"
        }
        if let delay = s.sink.delayUs { sink += ", delay \(delay) µs" }
        rows.append(("sink", sink))
        if let why = s.sink.why { rows.append(("", why)) }
        if let e = s.sink.error { rows.append(("sink error", e)) }
        if let words = s.sink.failingWords { rows.append(("sink health", "failing: it \(words)")) }
        rows.append(("margin", marginLine(s.sink)))
        if let stream = volumeLine(s.sink.stream) { rows.append(("stream", stream)) }
        if let o = s.sink.outputVolume.flatMap(volumeLine) { rows.append(("output volume", o)) }
        let l = s.latencyUs
        rows.append(("latency", "p50 \(text(l.p50)) µs, p99 \(text(l.p99)) µs, max \(text(l.max)) µs"))
        rows.append(("", "(\(Status.Latency.measures))"))
        rows.append(("played", String(s.played)))
        rows.append(("voices", "\(s.voicesActive) active, \(s.voicesStolen) stolen"))
        rows.append(("clipped", "\(s.clippedSamples) samples"))
        rows.append(("device", "\(s.xruns) xruns, \(s.missedCycles) missed cycles, \(s.stalls) stalls, \(s.devicesLost) lost, \(s.rewinds) rewinds"))
        rows.append(("audio thread", s.audioThread))
        rows.append(("dropped", String(s.dropped)))
        if s.decodersStuck > 0 { rows.append(("decoding", "\(s.decodersStuck) decoders stuck on a file system that does not answer")) }
        rows.append(("clients", "\(s.clients) connected (cap \(s.maxClients)), \(s.rateLimited) rate-limited, \(s.refusedBusy) refused busy, "
                     + "\(s.evictedIdle) idle evicted, \(s.evictedShare) taken for another process, \(s.closedUnread) closed unread"))
        if let pid = s.busiestPid {
            rows.append(("", "\(s.clientProcesses) process\(s.clientProcesses == 1 ? "" : "es"), pid \(pid) holds \(s.busiestClients); "
                         + "\(s.clientOutputBytes) bytes unsent (\(s.clientOutputLimitBytes) a connection at most)"))
        }
        for (i, name) in s.cues.keys.sorted().enumerated() {
            let c = s.cues[name]!
            rows.append((i == 0 ? "cues" : "", "\(name): \(c.frames) frames, played \(c.played)"))
        }
        for (i, name) in s.apps.keys.sorted().enumerated() {
            let a = s.apps[name]!
            var d = "\(name): played \(a.played)"
            if a.dropped > 0 { d += ", dropped \(a.dropped)" }
            if a.muted { d += ", muted" }
            if let p = a.profile { d += ", profile \(p.rawValue)" }
            if !a.via.isEmpty { d += ", via " + a.via.joined(separator: ", ") }
            rows.append((i == 0 ? "apps" : "", d))
        }
        if s.appsUnlisted > 0 || s.appsUnlistedPlayed > 0 {
            rows.append((s.apps.isEmpty ? "apps" : "", "(\(s.appsUnlisted) more not listed; \(s.appsUnlistedPlayed) played by apps not listed)"))
        }
        let t = s.theme
        var theme = t.name
        if !t.chain.isEmpty { theme += " (" + t.chain.joined(separator: " → ") + ")" }
        theme += ", \(t.cached) cached, \(mib(t.cacheBytes)) of \(mib(t.cacheLimitBytes)) MiB"
        rows.append(("theme", theme))
        if s.memory.limitBytes > 0 { rows.append(("memory", memoryLine(s.memory))) }
        rows.append(("sessions", String(s.sessions)))
        rows.append(("d-bus", busLine(s.bus)))
        rows.append(contentsOf: desktopRows(s.desktop))
        let width = rows.map(\.0.count).max() ?? 0
        return rows.map { $0.0 + String(repeating: " ", count: width - $0.0.count + 2) + $0.1 }.joined(separator: "\n")
    }

    /// The margin against stalls: `256 frames (5.3 ms), grown 1× after 1 miss, shrunk 0×`, or `fixed by the device`.
    static func marginLine(_ k: Status.Sink) -> String {
        guard let frames = k.marginFrames else { return "fixed by the device" }
        var line = "\(frames) frames"
        if let rate = k.rate, rate > 0 {
            let tenths = (frames * 100_000 / rate + 5) / 10  // of a millisecond, rounded
            line += " (\(tenths / 10).\(tenths % 10) ms)"
        }
        return line + ", grown \(k.marginGrowths)× after \(k.marginMisses) \(k.marginMisses == 1 ? "miss" : "misses"), shrunk \(k.marginShrinks)×"
    }

    /// The session bus in a few words: `connected; feedback owner (2 live); notifications watching`.
    static func busLine(_ b: Status.Bus) -> String {
        switch b.connection {
        case "connected":
            var line = "connected; org.sigxcpu.Feedback " + b.feedback
            if b.live > 0 { line += " (\(b.live) live)" }
            return line + "; notifications " + b.notifications
        case "absent": return "no session bus" + (b.error.map { " (\($0))" } ?? "")
        default: return b.connection
        }
    }

    /// The desktop's sound settings in force, each with where it comes from.
    static func desktopRows(_ d: Status.Desktop) -> [(String, String)] {
        func onOff(_ b: Bool) -> String { b ? "on" : "off" }
        return [("desktop", "portal " + d.portal),
                ("", "theme \(d.theme.value) (\(d.theme.from))"),
                ("", "event sounds \(onOff(d.eventSounds.value)) (\(d.eventSounds.from))"),
                ("", "input-feedback sounds \(onOff(d.inputFeedbackSounds.value)) (\(d.inputFeedbackSounds.from))"),
                ("", "do not disturb \(onOff(d.doNotDisturb.value)) (\(d.doNotDisturb.from))")]
            + (d.systemSounds.flatMap(volumeLine).map { [("", "system sounds " + $0)] } ?? [])
    }

    /// A volume as people read it: `50% (0.125 linear), muted (from …)`; nil when nothing is known.
    static func volumeLine(_ v: Status.StreamVolume) -> String? {
        // The gain heard: the master volume times the loudest channel's (PipeWire's Props carry both).
        let linear = v.volume == nil && v.channelVolumes.isEmpty ? nil : (v.volume ?? 1) * (v.channelVolumes.max() ?? 1)
        guard linear != nil || v.mute != nil || v.from != nil else { return nil }
        var parts: [String] = []
        if let l = linear {
            // A mixer's percent is the cube root of the linear gain (wpctl, pactl).
            parts.append("\(Int((pow(l, 1.0 / 3) * 100).rounded()))% (\(l) linear)")
        }
        if let m = v.mute { parts.append(m ? "muted" : "unmuted") }
        var line = parts.joined(separator: ", ")
        if let from = v.from { line += (line.isEmpty ? "" : " ") + "(\(from))" }
        return line
    }

    /// The budget for decoded sound and what holds it:
    /// `19.5 of 64.0 MiB (cues 3.7, cache 15.8, playing 0.0, decoding 0.0), 0 refused`.
    public static func memoryLine(_ m: Status.Memory) -> String {
        "\(mib(m.usedBytes)) of \(mib(m.limitBytes)) MiB (cues \(mib(m.cuesBytes)), cache \(mib(m.cacheBytes)), "
            + "playing \(mib(m.playingBytes)), decoding \(mib(m.decodingBytes))), \(m.refused) refused"
    }

    /// Bytes as MiB with one decimal.
    static func mib(_ bytes: Int) -> String {
        let tenths = (bytes * 10 + 524_288) / 1_048_576
        return "\(tenths / 10).\(tenths % 10)"
    }
}
