"""Protocol v1's words and limits, for bench's clients of cued.

Generated from Sources/CuedProtocol/Wire.swift by `make wire`: do not edit (make test fails when it drifts).
"""

PROTOCOL_VERSION = 1
LINE_BYTES = 512  # the longest request line, without its LF
LABEL_BYTES = 64  # the longest name (cue, app, theme)
GAIN_DB = (-60, 12)
LABEL_BYTE_RANGES = ((0x30, 0x39), (0x41, 0x5a), (0x61, 0x7a), (0x2e, 0x2e), (0x5f, 0x5f), (0x2d, 0x2d))
LABEL_REFUSED = (".", "..")
PATH_ESCAPED_UP_TO = 0x20
PATH_ESCAPED_ALSO = (0x25, 0x7f)

# the CODE of `err CODE …`
ERR_UNKNOWN_VERB = "unknown-verb"
ERR_UNKNOWN_CUE = "unknown-cue"
ERR_BAD_ARGUMENT = "bad-argument"
ERR_LINE_TOO_LONG = "line-too-long"
ERR_RELOAD_FAILED = "reload-failed"
ERR_FORBIDDEN = "forbidden"
ERR_BUSY = "busy"
ERR_RATE_LIMITED = "rate-limited"
ERR_BAD_FILE = "bad-file"
ERR_NOT_PLAYED = "not-played"
ERR_TOO_MANY = "too-many"
ERR_INTERNAL = "internal"
ERROR_WORDS = (ERR_UNKNOWN_VERB, ERR_UNKNOWN_CUE, ERR_BAD_ARGUMENT, ERR_LINE_TOO_LONG, ERR_RELOAD_FAILED, ERR_FORBIDDEN, ERR_BUSY, ERR_RATE_LIMITED, ERR_BAD_FILE, ERR_NOT_PLAYED, ERR_TOO_MANY, ERR_INTERNAL,)

# the word after `err bad-file`
FILE_NOT_FOUND = "not-found"
FILE_DENIED = "denied"
FILE_NOT_REGULAR = "not-regular"
FILE_UNREADABLE = "unreadable"
FILE_OVER_BUDGET = "over-budget"
FILE_TIMED_OUT = "timed-out"
FILE_NOT_TRIED = "not-tried"
FILE_PROBLEM_WORDS = (FILE_NOT_FOUND, FILE_DENIED, FILE_NOT_REGULAR, FILE_UNREADABLE, FILE_OVER_BUDGET, FILE_TIMED_OUT, FILE_NOT_TRIED,)

# the REASON of `end ID REASON` (and after `err not-played`)
END_PLAYED = "played"
END_STOPPED_BY_ID = "stopped-id"
END_STOPPED_BY_OWNER = "stopped-app"
END_STOPPED_ALL = "stopped-all"
END_STOLEN = "stolen"
END_MUTED = "muted"
END_BUSY = "busy"
END_LATE = "late"
END_CUT = "cut"
END_SHUTDOWN = "shutdown"
END_DISCONNECTED = "disconnected"
END_REASON_WORDS = (END_PLAYED, END_STOPPED_BY_ID, END_STOPPED_BY_OWNER, END_STOPPED_ALL, END_STOLEN, END_MUTED, END_BUSY, END_LATE, END_CUT, END_SHUTDOWN, END_DISCONNECTED,)

# the word of `ok WORD` for a play that makes no sound
OK_MUTED = "muted"
OK_SILENT = "silent"
OK_DISABLED = "disabled"
OK_COOLDOWN = "cooldown"
NOT_SOUNDED_WORDS = (OK_MUTED, OK_SILENT, OK_DISABLED, OK_COOLDOWN,)


def is_label(name):
    """Whether cued takes `name` (str) as a cue, app or theme name."""
    b = name.encode()
    return 0 < len(b) <= LABEL_BYTES and name not in LABEL_REFUSED and all(any(lo <= c <= hi for lo, hi in LABEL_BYTE_RANGES) for c in b)


def encode_path(path):
    """A play-file path as one word of a request line (str)."""
    return "".join("%%%02X" % c if c <= PATH_ESCAPED_UP_TO or c in PATH_ESCAPED_ALSO else chr(c) for c in path.encode()
                   ).encode("latin-1").decode("utf-8")


def err_word(reply, code):
    """For an `err CODE WORD …` reply of `code`: its WORD; None for any other reply."""
    parts = reply.split(" ", 3)
    return parts[2] if len(parts) >= 3 and parts[0] == "err" and parts[1] == code else None


def is_err(reply, code, word=None):
    """Whether `reply` is `err CODE …` (and, given `word`, `err CODE WORD …`)."""
    if word is not None:
        return err_word(reply, code) == word
    return reply == "err " + code or reply.startswith("err " + code + " ")
