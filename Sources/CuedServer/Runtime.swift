import CuedAudio
import CuedConfig
import CuedCore
import CuedProtocol

/// Everything a reload replaces in one swap: the cues, the config and the
/// settings resolved from it. Voices already playing hold their own cue
/// buffers, so a swap never interrupts them.
public struct Runtime: Sendable {
    public var bank: CueBank
    public var config: Config
    public var settings: Settings
    /// The sound theme `play NAME` falls back to, resolved (its chain read) at load.
    public var theme: SoundTheme
    /// feedbackd's theme, for the events of org.sigxcpu.Feedback (read at load).
    public var feedbackTheme: FeedbackTheme

    public init(bank: CueBank, config: Config = Config(), settings: Settings = Settings(), theme: SoundTheme,
                feedbackTheme: FeedbackTheme = FeedbackTheme()) {
        self.bank = bank; self.config = config; self.settings = settings; self.theme = theme; self.feedbackTheme = feedbackTheme
    }

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

/// Why a (re)load failed, as `err reload-failed MESSAGE` and start-up show it:
/// config problems as `FILE:LINE: key: message`, sound files as `FILE: reason`.
public struct LoadFailure: Error, Sendable, CustomStringConvertible {
    public let file: String
    public let description: String

    init(_ issue: ConfigIssue) {
        file = issue.file
        description = issue.description
    }

    /// Every issue of a config file, one per line.
    init(_ errors: ConfigErrors) {
        file = errors.issues.first?.file ?? "(config)"
        description = errors.description
    }

    /// On one line, for a reply: issues joined by "; ".
    public var oneLine: String { description.split(separator: "\n").joined(separator: "; ") }

    public init(file: String, reason: String) {
        self.file = file
        description = "\(file): \(reason)"
    }

    static let cancelled = LoadFailure(file: "(reload)", reason: "cancelled: cued is stopping")
}

public enum RuntimeLoader {
    /// Loads the cues the config and directories name and checks every
    /// reference (cue gains, transitions) against what loaded. Blocking.
    public static func load(config: Config, settings: Settings, environment: [String: String],
                            cancelled: @escaping @Sendable () -> Bool = { false }) throws(LoadFailure) -> (Runtime, warnings: [String]) {
        var files: [String: String] = [:]
        for (name, setting) in config.cues { if let f = setting.file { files[name] = f } }
        let directories = settings.sounds
        let result: CueBankLoader.Result
        do {
            result = try CueBankLoader().load(directories: directories, files: files)
        } catch {
            switch error {
            case .brokenConfigured(let name, let e):
                let at = config.lines["cues.\(name).file"].map { "\(config.path ?? "config"):\($0)" } ?? (config.path ?? "config")
                throw LoadFailure(file: e.path, reason: e.reason + " (cue '\(name)', \(at))")
            case .brokenRequired(let e): throw LoadFailure(file: e.path, reason: e.reason)
            case .missingRequired(let name, let dirs):
                throw LoadFailure(file: dirs.first ?? "(sounds)", reason:
                    "required cue '\(name)' not found; searched: \(dirs.isEmpty ? "(no sounds directories)" : dirs.joined(separator: ", ")). "
                    + "Install the cues (make install), or point --sounds or the config's `sounds` at a directory holding psst1, psst2 and pop")
            }
        }
        if cancelled() { throw .cancelled }
        for name in config.cues.keys.sorted() where result.bank[name] == nil {
            throw LoadFailure(config.issue("cues.\(name)", "no file given and no cue '\(name)' in \(directories.joined(separator: ", "))"))
        }
        for (t, cue) in config.transitions.sorted(by: { $0.key.description < $1.key.description })
        where !cue.isEmpty && result.bank[cue] == nil {
            throw LoadFailure(config.issue("transitions.\"\(t)\"", "no cue named '\(cue)' (cues: \(result.bank.names.joined(separator: " ")))"))
        }
        let theme = SoundTheme(name: settings.theme, environment: environment)
        // Read only when cued is to answer feedbackd's clients.
        let (feedbackTheme, fbWarnings) = config.dbus.enabled && config.dbus.feedback
            ? FeedbackTheme.load(name: config.dbus.feedbackTheme, environment: environment) : (FeedbackTheme(), [])
        return (Runtime(bank: result.bank, config: config, settings: settings, theme: theme, feedbackTheme: feedbackTheme),
                result.warnings + theme.warnings + fbWarnings)
    }
}
