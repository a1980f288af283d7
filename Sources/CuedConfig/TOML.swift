// A TOML 1.0 parser for cued's config file: the whole syntax (strings of all
// four kinds, integers in four bases, floats, booleans, dates and times,
// arrays, inline tables, tables, arrays of tables, dotted keys) with the
// language's redefinition rules, every value tagged with the line it was
// written on. Pure Swift and bounds-checked: no input can crash it (nesting is
// capped: tables, dotted keys, arrays and inline tables together), and it needs
// no Foundation. Dates and times are recognised and kept
// as text: no cued key takes one, so they only ever make a type error.
//
// The reader is TOMLReader.swift (the document: keys, headers, tables) and TOMLValues.swift
// (the values); this file has the tree it builds and its entry point.

/// A parsed value and where it was written.
public struct TOMLNode: Sendable {
    public var value: TOMLValue
    /// 1-based line of the key (or, in an array, of the element).
    public var line: Int
}

public enum TOMLValue: Sendable {
    case string(String)
    case integer(Int64)
    case float(Double)
    case bool(Bool)
    /// An offset or local date-time, date or time, as written.
    case datetime(String)
    case array([TOMLNode])
    case table(TOMLTable)

    /// "a string", "an integer"… for error messages.
    public var typeName: String {
        switch self {
        case .string: return "a string"
        case .integer: return "an integer"
        case .float: return "a number"
        case .bool: return "a boolean"
        case .datetime: return "a date/time"
        case .array: return "an array"
        case .table: return "a table"
        }
    }
}

/// A table: keys in the order written.
public struct TOMLTable: Sendable {
    public private(set) var keys: [String] = []
    private var values: [String: TOMLNode] = [:]
    public init() {}
    public subscript(key: String) -> TOMLNode? { values[key] }
    mutating func set(_ key: String, _ node: TOMLNode) {
        if values.updateValue(node, forKey: key) == nil { keys.append(key) }
    }
}

public struct TOMLError: Error, Sendable, Equatable, CustomStringConvertible {
    public let line: Int
    public let message: String
    public var description: String { "line \(line): \(message)" }
}

public enum TOMLParser {
    /// Values nested deeper than this below the document are refused, however
    /// the levels are made: a `[table.header]`'s or a dotted key's parts, arrays and
    /// inline tables all count (a config never needs more; freezing, comparing and
    /// freeing the tree recurse, and 40,000 levels of `[a.a.a…]` overflowed the stack).
    public static let maxDepth = 32

    static func tooDeep() -> String {
        "nested deeper than \(maxDepth) levels (table headers, dotted keys, arrays and inline tables together)"
    }

    public static func parse(_ text: String) throws(TOMLError) -> TOMLTable {
        var p = TOMLReader(Array(text.utf8))
        return try p.document()
    }
}

/// How a table came to exist, for the rules on defining it again.
enum TOMLTableKind { case implicit, header, dotted, inline, arrayElement }

/// The mutable tree built while parsing; frozen into `TOMLTable` at the end.
final class TOMLBuilderTable {
    var kind: TOMLTableKind
    var line: Int
    /// Levels below the document (the root is 0): at most `TOMLParser.maxDepth`.
    let depth: Int
    var keys: [String] = []
    var entries: [String: Entry] = [:]
    init(_ kind: TOMLTableKind, line: Int, depth: Int) { self.kind = kind; self.line = line; self.depth = depth }

    enum Entry {
        case value(TOMLNode)
        case table(TOMLBuilderTable)
        /// `[[name]]`: an array of tables.
        case tables([TOMLBuilderTable], line: Int)
    }

    func set(_ key: String, _ e: Entry) {
        if entries.updateValue(e, forKey: key) == nil { keys.append(key) }
    }

    func frozen() -> TOMLTable {
        var t = TOMLTable()
        for k in keys {
            switch entries[k]! {
            case .value(let node): t.set(k, node)
            case .table(let sub): t.set(k, TOMLNode(value: .table(sub.frozen()), line: sub.line))
            case .tables(let list, let line):
                t.set(k, TOMLNode(value: .array(list.map { TOMLNode(value: .table($0.frozen()), line: $0.line) }), line: line))
            }
        }
        return t
    }
}
