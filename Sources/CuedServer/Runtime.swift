import CuedAudio
import CuedConfig
import CuedCore
import CuedProtocol

/// Everything a reload replaces in one swap: the cues and the settings that
/// apply per request. Voices already playing hold their own cue buffers, so
/// a swap never interrupts them.
public struct Runtime: Sendable {
    public var bank: CueBank
    public var config: Config

    public init(bank: CueBank, config: Config = Config()) { self.bank = bank; self.config = config }

    /// The cue for a refresh transition: the config's remap ("" = silent), else the original design's.
    public func cue(from: RefreshState, to: RefreshState, default cue: String?) -> String? {
        if let mapped = config.transitions[Transition(from: from, to: to)] { return mapped.isEmpty ? nil : mapped }
        return cue
    }

    /// Total gain in dB for a play: request + cue + app + master.
    public func gainDB(request: Double, cue: String, app: String?) -> Double {
        request + (config.cues[cue]?.gainDB ?? 0) + (app.flatMap { config.apps[$0]?.gainDB } ?? 0) + config.masterGainDB
    }
}

/// Why a (re)load failed: the file at fault and the reason, as
/// `err reload-failed FILE: REASON` shows it.
public struct LoadFailure: Error, Sendable, CustomStringConvertible {
    public let file: String
    public let reason: String
    public var description: String { "\(file): \(reason)" }

    init(_ issue: ConfigIssue) {
        file = issue.file
        var r = ""
        if let line = issue.line { r += "line \(line): " }
        if let key = issue.key { r += "\(key): " }
        reason = r + issue.message
    }

    public init(file: String, reason: String) { self.file = file; self.reason = reason }
}

public enum RuntimeLoader {
    /// Loads the cues the config and directories name and checks every
    /// reference (cue gains, transitions) against what loaded.
    public static func load(config: Config, directories: [String]) throws(LoadFailure) -> (Runtime, warnings: [String]) {
        var files: [String: String] = [:]
        for (name, setting) in config.cues { if let f = setting.file { files[name] = f } }
        let result: CueBankLoader.Result
        do {
            result = try CueBankLoader().load(directories: directories, files: files)
        } catch {
            switch error {
            case .brokenConfigured(let name, let e):
                throw LoadFailure(file: e.path, reason: e.reason + " (cue '\(name)', \(config.path ?? "config")"
                                  + (config.lines["cues.\(name).file"].map { " line \($0)" } ?? "") + ")")
            case .brokenRequired(let e): throw LoadFailure(file: e.path, reason: e.reason)
            case .missingRequired: throw LoadFailure(file: directories.first ?? "(sounds)", reason: "\(error)")
            }
        }
        for name in config.cues.keys.sorted() where result.bank[name] == nil {
            throw LoadFailure(config.issue("cues.\(name)", "no file given and no cue '\(name)' in \(directories.joined(separator: ", "))"))
        }
        for (t, cue) in config.transitions.sorted(by: { $0.key.description < $1.key.description })
        where !cue.isEmpty && result.bank[cue] == nil {
            throw LoadFailure(config.issue("transitions.\"\(t)\"", "no cue named '\(cue)' (cues: \(result.bank.names.joined(separator: " ")))"))
        }
        return (Runtime(bank: result.bank, config: config), result.warnings)
    }
}
