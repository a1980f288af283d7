import CuedAudio
import CuedConfig
import CuedCore
import CuedProtocol
import CuedSystem

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
    /// The bank's decoded files by identity: the next reload takes those unchanged as they are.
    public var sounds: [FileIdentity: SoundBuffer]
    /// What the load skipped or could not read (files that cannot be played, a theme's problems),
    /// logged at load and shown by `status` until the next: a `reload` that says "reloaded" has
    /// to say what it left out too.
    public var warnings: [String] = []

    public init(bank: CueBank, config: Config = Config(), settings: Settings = Settings(), theme: SoundTheme,
                feedbackTheme: FeedbackTheme = FeedbackTheme(), sounds: [FileIdentity: SoundBuffer] = [:]) {
        self.bank = bank; self.config = config; self.settings = settings; self.theme = theme; self.feedbackTheme = feedbackTheme
        self.sounds = sounds
    }

    /// The cue for a refresh transition: the config's remap ("" = silent), else the original design's.
    public func cue(from: RefreshState, to: RefreshState, default cue: String?) -> String? {
        if let mapped = config.transitions[Transition(from: from, to: to)] { return mapped.isEmpty ? nil : mapped }
        return cue
    }

    /// A bank cue's design from its `[cues.NAME]` (none: plain, shuffled variants).
    public func design(_ cue: String) -> CueDesign {
        var d = CueDesign()
        guard let s = config.cues[cue] else { return d }
        d.order = s.order ?? .shuffle
        d.pitchJitterCents = s.pitchJitterCents
        d.gainJitterDB = s.gainJitterDB
        d.limit = s.maxVoices.map { CueVoiceLimit(maxVoices: $0, steal: s.steal) }
        d.cooldownNanoseconds = UInt64(s.cooldownMs * 1_000_000)
        d.cooldown = s.cooldown
        return d
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
    /// The cues are charged to `budget`, whose limit becomes the settings' for the
    /// load (and stays so if it succeeds: the old limit comes back if it fails); files
    /// of `reuse` (the bank in force) that did not change are not decoded again.
    public static func load(config: Config, settings: Settings, environment: [String: String],
                            budget: SoundBudget? = nil, reuse: [FileIdentity: SoundBuffer] = [:],
                            cancelled: @escaping @Sendable () -> Bool = { false }) throws(LoadFailure) -> (Runtime, warnings: [String]) {
        let previous = budget?.limit
        budget?.setLimit(settings.soundBudgetBytes)
        do {
            return try load(config: config, settings: settings, environment: environment, loader: CueLoader(budget: budget),
                            reuse: reuse, cancelled: cancelled)
        } catch {
            if let previous { budget?.setLimit(previous) }
            throw error
        }
    }

    private static func load(config: Config, settings: Settings, environment: [String: String], loader: CueLoader,
                             reuse: [FileIdentity: SoundBuffer],
                             cancelled: @escaping @Sendable () -> Bool) throws(LoadFailure) -> (Runtime, warnings: [String]) {
        var files: [String: [String]] = [:]
        for (name, setting) in config.cues { if let f = setting.files ?? setting.file.map({ [$0] }) { files[name] = f } }
        let directories = settings.sounds
        let result: CueBankLoader.Result
        do {
            result = try CueBankLoader(loader: loader).load(directories: directories, files: files, reuse: reuse)
        } catch {
            switch error {
            case .overBudget(let name, let e):
                throw LoadFailure(file: e.path, reason: "cue '\(name)': " + e.reason)
            case .brokenConfigured(let name, let e):
                let at = config.lines["cues.\(name).file"].map { "\(config.path ?? "config"):\($0)" } ?? (config.path ?? "config")
                throw LoadFailure(file: e.path, reason: e.reason + " (cue '\(name)', \(at))")
            case .brokenRequired(let e): throw LoadFailure(file: e.path, reason: e.reason)
            case .missingRequired(let name, let dirs):
                throw LoadFailure(file: dirs.first ?? "(sounds)", reason:
                    "required cue '\(name)' not found; searched: \(dirs.isEmpty ? "(no sounds directories)" : dirs.map { FileSystem.isDirectory($0) ? $0 : $0 + " (no such directory)" }.joined(separator: ", ")). "
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
        if config.pull.detentPoints > 0 && result.bank[config.pull.detentCue] == nil {
            throw LoadFailure(config.issue(config.lines["pull.detent_cue"] != nil ? "pull.detent_cue" : "pull.detent_points",
                                           "no cue named '\(config.pull.detentCue)' for the detent ticks (cues: \(result.bank.names.joined(separator: " ")))"))
        }
        let theme = SoundTheme(name: settings.theme, environment: environment)
        // Read only when cued is to answer feedbackd's clients.
        let (feedbackTheme, fbWarnings) = config.dbus.enabled && config.dbus.feedback
            ? FeedbackTheme.load(name: config.dbus.feedbackTheme, environment: environment) : (FeedbackTheme(), [])
        let warnings = result.warnings + theme.warnings + fbWarnings
        var runtime = Runtime(bank: result.bank, config: config, settings: settings, theme: theme, feedbackTheme: feedbackTheme,
                              sounds: result.sounds)
        runtime.warnings = Array(warnings.prefix(Status.maxWarnings))
        return (runtime, warnings)
    }
}

/// Gives what malloc keeps free inside its heaps back to the system (glibc's
/// `malloc_trim`): after a reload freed a bank's names and tables, or a burst of
/// connections left, which are small allocations spread over the arenas (reloading
/// from 10,000 cues to none left RSS at 33.4 MiB without it, 18.9 with it; idle is
/// 17). It walks every arena under its lock, so it runs in a lane, never on the
/// event loop.
enum MemoryTrim {
    static func now() { _ = cued_malloc_trim(0) }
}

@_silgen_name("malloc_trim")
private func cued_malloc_trim(_ pad: Int) -> Int32
