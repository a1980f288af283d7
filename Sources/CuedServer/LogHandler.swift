import Foundation
import Logging

/// swift-log to stderr. Under journald (JOURNAL_STREAM set) lines carry a
/// `<N>` priority prefix and no timestamp of their own; otherwise a local
/// timestamp leads.
public struct StderrLogHandler: LogHandler {
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    private let label: String
    private let journal: Bool

    public init(label: String, level: Logger.Level, journal: Bool = ProcessInfo.processInfo.environment["JOURNAL_STREAM"] != nil) {
        self.label = label; self.logLevel = level; self.journal = journal
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        let level = event.level, message = event.message
        var all = metadata
        if let extra = event.metadata { all.merge(extra) { $1 } }
        let meta = all.isEmpty ? "" : " " + all.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        let text: String
        if journal {
            text = "<\(Self.priority(level))>\(message)\(meta)\n"
        } else {
            text = "\(Self.timestamp()) \(level) \(label): \(message)\(meta)\n"
        }
        FileHandle.standardError.write(Data(text.utf8))
    }

    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: return 7
        case .info: return 6
        case .notice: return 5
        case .warning: return 4
        case .error: return 3
        case .critical: return 2
        }
    }

    static func timestamp() -> String {
        var t = time(nil)
        var tm = tm()
        localtime_r(&t, &tm)
        var buf = [UInt8](repeating: 0, count: 32)
        let n = strftime(&buf, buf.count, "%Y-%m-%dT%H:%M:%S", &tm)
        return String(decoding: buf[0..<n], as: UTF8.self)
    }
}
