import CuedProtocol

/// `cuectl status` for people: the status JSON as an aligned table.
enum StatusTable {
    static func text(_ v: JSON?) -> String {
        switch v {
        case .string(let s)?: return s
        case .number(let d)?: return d == d.rounded() ? String(Int64(d)) : String(d)
        case .bool(let b)?: return b ? "yes" : "no"
        case .null?, nil: return "-"
        default: return v!.encoded
        }
    }

    static func render(_ s: JSON) -> String {
        var rows: [(String, String)] = []
        rows.append(("cued", "\(text(s["version"])) (protocol \(text(s["protocol"])))"))
        rows.append(("muted", text(s["muted"])))
        rows.append(("config", text(s["config"])))
        if let sink = s["sink"] {
            var d = "\(text(sink["spec"])): \(text(sink["state"]))"
            if sink["rate"] != nil, sink["rate"] != .null {
                d += ", \(text(sink["rate"])) Hz, \(text(sink["channels"])) ch, \(text(sink["format"]))"
                d += ", period \(text(sink["period_frames"])) / buffer \(text(sink["buffer_frames"])) frames"
            }
            rows.append(("sink", d))
            if let e = sink["error"], e != .null { rows.append(("sink error", text(e))) }
        }
        if let l = s["latency_us"] {
            rows.append(("latency", "p50 \(text(l["p50"])) µs, p99 \(text(l["p99"])) µs, max \(text(l["max"])) µs"))
        }
        rows.append(("played", text(s["played"])))
        rows.append(("voices", "\(text(s["voices_active"])) active, \(text(s["voices_stolen"])) stolen"))
        rows.append(("clipped", "\(text(s["clipped_samples"])) samples"))
        rows.append(("xruns", text(s["xruns"])))
        rows.append(("dropped", text(s["dropped"])))
        rows.append(("clients", text(s["clients"])))
        if case .object(let cues)? = s["cues"] {
            for (i, (name, c)) in cues.enumerated() {
                rows.append((i == 0 ? "cues" : "", "\(name): \(text(c["frames"])) frames, played \(text(c["played"]))"))
            }
        }
        if case .object(let apps)? = s["apps"] {
            for (i, (name, a)) in apps.enumerated() {
                rows.append((i == 0 ? "apps" : "", "\(name): played \(text(a["played"]))" + (a["muted"] == .bool(true) ? ", muted" : "")))
            }
        }
        rows.append(("sessions", text(s["sessions"])))
        let width = rows.map(\.0.count).max() ?? 0
        return rows.map { $0.0 + String(repeating: " ", count: width - $0.0.count + 2) + $0.1 }.joined(separator: "\n")
    }
}
