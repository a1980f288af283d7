// The wire's words (Wire.swift) written out for the clients in other languages: the C
// header of the libcanberra plug-in and bench's Python module. `cuedwire c|python` prints
// them (`make wire` writes canberra/cued-wire.h and bench/cuedwire.py); a test compares
// the checked-in files with these texts.

public enum WireExport {
    /// A word list: its C and Python name, where it is from, its words.
    struct WordList {
        let name: String
        let about: String
        let words: [(swift: String, wire: String)]
    }

    static var lists: [WordList] {
        [WordList(name: "error", about: "the CODE of `err CODE …`", words: ErrorCode.allCases.map { ("\($0)", $0.rawValue) }),
         WordList(name: "file_problem", about: "the word after `err bad-file`", words: FileProblem.allCases.map { ("\($0)", $0.rawValue) }),
         WordList(name: "end_reason", about: "the REASON of `end ID REASON` (and after `err not-played`)",
                  words: EndReason.allCases.map { ("\($0)", $0.rawValue) }),
         WordList(name: "not_sounded", about: "the word of `ok WORD` for a play that makes no sound",
                  words: NotSounded.allCases.map { ("\($0)", $0.rawValue) })]
    }

    /// `stoppedByID` → `STOPPED_BY_ID`.
    static func constant(_ swiftName: String) -> String {
        var out = "", previous: Character = "_"
        for c in swiftName.replacingBackticks() {
            if c.isUppercase && !previous.isUppercase && previous != "_" { out += "_" }
            out += c.uppercased()
            previous = c
        }
        return out
    }

    static func cRanges(_ ranges: [ClosedRange<UInt8>], _ v: String) -> String {
        ranges.map { r in r.count == 1 ? "\(v) == \(hex(r.lowerBound))" : "(\(v) >= \(hex(r.lowerBound)) && \(v) <= \(hex(r.upperBound)))" }
            .joined(separator: " || ")
    }

    static func hex(_ b: UInt8) -> String {
        let digits = Array("0123456789abcdef")
        return "0x" + String(digits[Int(b >> 4)]) + String(digits[Int(b & 0xF)])
    }

    static let generatedBy = "Generated from Sources/CuedProtocol/Wire.swift by `make wire`: do not edit (make test fails when it drifts)."

    /// canberra/cued-wire.h.
    public static var cHeader: String {
        var s = """
            /* cued-wire.h: protocol v1's words and limits, for the libcanberra plug-in.
             * \(generatedBy) */
            #ifndef CUED_WIRE_H
            #define CUED_WIRE_H

            #include <stdbool.h>
            #include <stddef.h>
            #include <string.h>

            #define CUED_PROTOCOL_VERSION \(ProtocolLimits.version)
            #define CUED_LINE_BYTES \(ProtocolLimits.maxLineBytes)      /* the longest request line, without its LF */
            #define CUED_LABEL_BYTES \(Label.maxBytes)      /* the longest name (cue, app, theme) */
            #define CUED_GAIN_MIN_DB (\(Int(ProtocolLimits.gainRange.lowerBound)))
            #define CUED_GAIN_MAX_DB \(Int(ProtocolLimits.gainRange.upperBound))

            /* A byte of a name: letters, digits, . _ - (the names \(Label.refused.map { "\"\($0)\"" }.joined(separator: " and ")) are refused). */
            static inline bool cued_label_byte(unsigned char b) {
                    return \(cRanges(Label.byteRanges, "b"));
            }

            static inline bool cued_label_refused(const char *s) {
                    return \(Label.refused.map { "!strcmp(s, \"\($0)\")" }.joined(separator: " || "));
            }

            /* A byte written %XX in a play-file path. */
            static inline bool cued_path_escaped(unsigned char b) {
                    return b <= \(hex(FilePath.escapedUpTo))\(FilePath.escapedAlso.map { " || b == \(hex($0))" }.joined());
            }

            /* The index of the word of `n` bytes at `w` in `words`, or -1. */
            static inline int cued_word_index(const char *const *words, int count, const char *w, size_t n) {
                    for (int i = 0; i < count; i++)
                            if (strlen(words[i]) == n && !memcmp(words[i], w, n))
                                    return i;
                    return -1;
            }

            """
        for list in lists {
            let prefix = "CUED_" + list.name.uppercased() + "_"
            s += "\n/* \(list.about) */\nenum cued_\(list.name) {\n"
            s += list.words.map { "        \(prefix)\(constant($0.swift)),\n" }.joined()
            s += "};\n#define CUED_\(list.name.uppercased())_COUNT \(list.words.count)\n\n"
            s += "static inline const char *const *cued_\(list.name)_words(void) {\n"
            s += "        static const char *const words[] = { " + list.words.map { "\"\($0.wire)\"" }.joined(separator: ", ") + " };\n"
            s += "        return words;\n}\n\n"
            s += "static inline const char *cued_\(list.name)_word(enum cued_\(list.name) v) { return cued_\(list.name)_words()[v]; }\n\n"
            s += "/* The \(String(list.name.map { $0 == "_" ? " " : $0 })) spelled by the `n` bytes at `w`, or -1. */\n"
            s += "static inline int cued_\(list.name)_of(const char *w, size_t n) {\n"
            s += "        return cued_word_index(cued_\(list.name)_words(), CUED_\(list.name.uppercased())_COUNT, w, n);\n}\n"
        }
        s += "\n#endif\n"
        return s
    }

    /// bench/cuedwire.py.
    public static var pythonModule: String {
        var s = """
            \"\"\"Protocol v1's words and limits, for bench's clients of cued.

            \(generatedBy)
            \"\"\"

            PROTOCOL_VERSION = \(ProtocolLimits.version)
            LINE_BYTES = \(ProtocolLimits.maxLineBytes)  # the longest request line, without its LF
            LABEL_BYTES = \(Label.maxBytes)  # the longest name (cue, app, theme)
            GAIN_DB = (\(Int(ProtocolLimits.gainRange.lowerBound)), \(Int(ProtocolLimits.gainRange.upperBound)))
            LABEL_BYTE_RANGES = (\(Label.byteRanges.map { "(\(hex($0.lowerBound)), \(hex($0.upperBound)))" }.joined(separator: ", ")))
            LABEL_REFUSED = (\(Label.refused.map { "\"\($0)\"" }.joined(separator: ", ")))
            PATH_ESCAPED_UP_TO = \(hex(FilePath.escapedUpTo))
            PATH_ESCAPED_ALSO = (\(FilePath.escapedAlso.map(hex).joined(separator: ", ")))

            """
        for list in lists {
            let prefix = list.name == "error" ? "ERR_" : list.name == "file_problem" ? "FILE_" : list.name == "end_reason" ? "END_" : "OK_"
            s += "\n# \(list.about)\n"
            s += list.words.map { "\(prefix)\(constant($0.swift)) = \"\($0.wire)\"\n" }.joined()
            s += "\(list.name.uppercased())_WORDS = (" + list.words.map { "\(prefix)\(constant($0.swift))" }.joined(separator: ", ") + ",)\n"
        }
        s += """


            def is_label(name):
                \"\"\"Whether cued takes `name` (str) as a cue, app or theme name.\"\"\"
                b = name.encode()
                return 0 < len(b) <= LABEL_BYTES and name not in LABEL_REFUSED and all(any(lo <= c <= hi for lo, hi in LABEL_BYTE_RANGES) for c in b)


            def encode_path(path):
                \"\"\"A play-file path as one word of a request line (str).\"\"\"
                return "".join("%%%02X" % c if c <= PATH_ESCAPED_UP_TO or c in PATH_ESCAPED_ALSO else chr(c) for c in path.encode()
                               ).encode("latin-1").decode("utf-8")


            def err_word(reply, code):
                \"\"\"For an `err CODE WORD …` reply of `code`: its WORD; None for any other reply.\"\"\"
                parts = reply.split(" ", 3)
                return parts[2] if len(parts) >= 3 and parts[0] == "err" and parts[1] == code else None


            def is_err(reply, code, word=None):
                \"\"\"Whether `reply` is `err CODE …` (and, given `word`, `err CODE WORD …`).\"\"\"
                if word is not None:
                    return err_word(reply, code) == word
                return reply == "err " + code or reply.startswith("err " + code + " ")

            """
        return s
    }
}

extension String {
    fileprivate func replacingBackticks() -> String { filter { $0 != "`" } }
}
