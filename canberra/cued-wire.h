/* cued-wire.h: protocol v1's words and limits, for the libcanberra plug-in.
 * Generated from Sources/CuedProtocol/Wire.swift by `make wire`: do not edit (make test fails when it drifts). */
#ifndef CUED_WIRE_H
#define CUED_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#define CUED_PROTOCOL_VERSION 1
#define CUED_LINE_BYTES 512      /* the longest request line, without its LF */
#define CUED_LABEL_BYTES 64      /* the longest name (cue, app, theme) */
#define CUED_GAIN_MIN_DB (-60)
#define CUED_GAIN_MAX_DB 12

/* A byte of a name: letters, digits, . _ - (the names "." and ".." are refused). */
static inline bool cued_label_byte(unsigned char b) {
        return (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5a) || (b >= 0x61 && b <= 0x7a) || b == 0x2e || b == 0x5f || b == 0x2d;
}

static inline bool cued_label_refused(const char *s) {
        return !strcmp(s, ".") || !strcmp(s, "..");
}

/* A byte written %XX in a play-file path. */
static inline bool cued_path_escaped(unsigned char b) {
        return b <= 0x20 || b == 0x25 || b == 0x7f;
}

/* The index of the word of `n` bytes at `w` in `words`, or -1. */
static inline int cued_word_index(const char *const *words, int count, const char *w, size_t n) {
        for (int i = 0; i < count; i++)
                if (strlen(words[i]) == n && !memcmp(words[i], w, n))
                        return i;
        return -1;
}

/* the CODE of `err CODE …` */
enum cued_error {
        CUED_ERROR_UNKNOWN_VERB,
        CUED_ERROR_UNKNOWN_CUE,
        CUED_ERROR_BAD_ARGUMENT,
        CUED_ERROR_LINE_TOO_LONG,
        CUED_ERROR_RELOAD_FAILED,
        CUED_ERROR_FORBIDDEN,
        CUED_ERROR_BUSY,
        CUED_ERROR_RATE_LIMITED,
        CUED_ERROR_BAD_FILE,
        CUED_ERROR_NOT_PLAYED,
        CUED_ERROR_TOO_MANY,
        CUED_ERROR_INTERNAL,
};
#define CUED_ERROR_COUNT 12

static inline const char *const *cued_error_words(void) {
        static const char *const words[] = { "unknown-verb", "unknown-cue", "bad-argument", "line-too-long", "reload-failed", "forbidden", "busy", "rate-limited", "bad-file", "not-played", "too-many", "internal" };
        return words;
}

static inline const char *cued_error_word(enum cued_error v) { return cued_error_words()[v]; }

/* The error spelled by the `n` bytes at `w`, or -1. */
static inline int cued_error_of(const char *w, size_t n) {
        return cued_word_index(cued_error_words(), CUED_ERROR_COUNT, w, n);
}

/* the word after `err bad-file` */
enum cued_file_problem {
        CUED_FILE_PROBLEM_NOT_FOUND,
        CUED_FILE_PROBLEM_DENIED,
        CUED_FILE_PROBLEM_NOT_REGULAR,
        CUED_FILE_PROBLEM_UNREADABLE,
        CUED_FILE_PROBLEM_OVER_BUDGET,
        CUED_FILE_PROBLEM_TIMED_OUT,
        CUED_FILE_PROBLEM_NOT_TRIED,
};
#define CUED_FILE_PROBLEM_COUNT 7

static inline const char *const *cued_file_problem_words(void) {
        static const char *const words[] = { "not-found", "denied", "not-regular", "unreadable", "over-budget", "timed-out", "not-tried" };
        return words;
}

static inline const char *cued_file_problem_word(enum cued_file_problem v) { return cued_file_problem_words()[v]; }

/* The file problem spelled by the `n` bytes at `w`, or -1. */
static inline int cued_file_problem_of(const char *w, size_t n) {
        return cued_word_index(cued_file_problem_words(), CUED_FILE_PROBLEM_COUNT, w, n);
}

/* the REASON of `end ID REASON` (and after `err not-played`) */
enum cued_end_reason {
        CUED_END_REASON_PLAYED,
        CUED_END_REASON_STOPPED_BY_ID,
        CUED_END_REASON_STOPPED_BY_OWNER,
        CUED_END_REASON_STOPPED_ALL,
        CUED_END_REASON_STOLEN,
        CUED_END_REASON_MUTED,
        CUED_END_REASON_BUSY,
        CUED_END_REASON_LATE,
        CUED_END_REASON_CUT,
        CUED_END_REASON_SHUTDOWN,
        CUED_END_REASON_DISCONNECTED,
};
#define CUED_END_REASON_COUNT 11

static inline const char *const *cued_end_reason_words(void) {
        static const char *const words[] = { "played", "stopped-id", "stopped-app", "stopped-all", "stolen", "muted", "busy", "late", "cut", "shutdown", "disconnected" };
        return words;
}

static inline const char *cued_end_reason_word(enum cued_end_reason v) { return cued_end_reason_words()[v]; }

/* The end reason spelled by the `n` bytes at `w`, or -1. */
static inline int cued_end_reason_of(const char *w, size_t n) {
        return cued_word_index(cued_end_reason_words(), CUED_END_REASON_COUNT, w, n);
}

/* the word of `ok WORD` for a play that makes no sound */
enum cued_not_sounded {
        CUED_NOT_SOUNDED_MUTED,
        CUED_NOT_SOUNDED_SILENT,
        CUED_NOT_SOUNDED_DISABLED,
        CUED_NOT_SOUNDED_COOLDOWN,
};
#define CUED_NOT_SOUNDED_COUNT 4

static inline const char *const *cued_not_sounded_words(void) {
        static const char *const words[] = { "muted", "silent", "disabled", "cooldown" };
        return words;
}

static inline const char *cued_not_sounded_word(enum cued_not_sounded v) { return cued_not_sounded_words()[v]; }

/* The not sounded spelled by the `n` bytes at `w`, or -1. */
static inline int cued_not_sounded_of(const char *w, size_t n) {
        return cued_word_index(cued_not_sounded_words(), CUED_NOT_SOUNDED_COUNT, w, n);
}

#endif
