import CuedProtocol

/// `cuectl why [CUE]` and the list `cuectl doctor` shows for pop: cued's reasons (`WhyReport`),
/// with libcanberra's routing added where it applies (cuectl's to tell: the switch file and the
/// plug-in are the user's session's, not cued's), each with its fix, numbered in the order they
/// apply. Exit 0 when nothing holds the sound back, 1 otherwise.
public enum WhyRender {
    /// The report with libcanberra's routing put in its place, for an app that plays through
    /// libcanberra while routing is off (its sounds then never reach cued).
    public static func reasons(_ report: WhyReport, canberra: CanberraRouting.Facts?) -> [WhyReport.Reason] {
        var reasons = report.reasons
        guard report.canberraApp, let f = canberra, f.pluginDirectory != nil, !f.on || CanberraRouting.silencing(f) else { return reasons }
        let routing = CanberraRouting.silencing(f)
            ? WhyReport.Reason("canberra-routing", says: "CANBERRA_DRIVER=cued but cued's plug-in is not in \(f.pluginDirectory!): libcanberra's sounds are silent",
                               fix: "install the plug-in (the cued package, or sudo make install-canberra), or cuectl canberra off")
            : WhyReport.Reason("canberra-routing", says: "libcanberra's sounds do not go through cued (its routing is off): \(report.app ?? "the app")'s next sound plays through libcanberra's own driver, not cued",
                               fix: "cuectl canberra on (from your next login)")
        let at = reasons.firstIndex { WhyReport.outputReasons.contains($0.name) } ?? reasons.endIndex
        reasons.insert(routing, at: at)
        return reasons
    }

    public static func lines(_ report: WhyReport, canberra: CanberraRouting.Facts?) -> [String] {
        let reasons = reasons(report, canberra: canberra)
        let who = report.app.map { " by \($0)" } ?? ""
        guard !reasons.isEmpty else { return ["\(report.cue)\(who) would be heard: nothing holds it back"] }
        var out = ["\(report.cue)\(who) would not be heard:"]
        for (i, r) in reasons.enumerated() {
            out.append("  \(i + 1). \(r.says) [\(r.name)]")
            out.append("     fix: \(r.fix)")
        }
        return out
    }

    public static func outcome(_ report: WhyReport, canberra: CanberraRouting.Facts?) -> Outcome {
        Outcome(stdout: lines(report, canberra: canberra).joined(separator: "\n"),
                exitCode: reasons(report, canberra: canberra).isEmpty ? ExitCode.ok : ExitCode.errorReply)
    }
}
