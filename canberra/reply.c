/* cued's lines parsed, and the wire's words as libcanberra's codes (see reply.h). */
#include <string.h>

#include <canberra.h>

#include "cued-wire.h"
#include "reply.h"

size_t next_line(const char *buf, size_t len, size_t *line_len) {
        const char *nl = memchr(buf, '\n', len);
        if (!nl)
                return 0;
        size_t n = (size_t) (nl - buf);
        *line_len = n && buf[n - 1] == '\r' ? n - 1 : n;
        return n + 1;
}

/* A voice id: 1 to 2^64-1 in plain digits. */
static bool parse_id(const char *s, size_t n, uint64_t *v) {
        uint64_t x = 0;
        if (n == 0 || n > 20)
                return false;
        for (size_t i = 0; i < n; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return false;
                unsigned d = (unsigned) (s[i] - '0');
                if (x > (UINT64_MAX - d) / 10)
                        return false;
                x = x * 10 + d;
        }
        *v = x;
        return x != 0;
}

/* The length of the word at `s` (up to a space or the end). */
static size_t word_len(const char *s, size_t n) {
        const char *sp = memchr(s, ' ', n);
        return sp ? (size_t) (sp - s) : n;
}

struct reply parse_reply(const char *line, size_t n) {
        struct reply r = { .kind = REPLY_BAD, .word = -1, .code = -1, .problem = -1, .reason = -1 };
        if (memchr(line, 0, n))
                return r;   /* cued writes control bytes as \xNN: a NUL is no line of cued's */
        if (n >= 2 && !memcmp(line, "ok", 2) && (n == 2 || line[2] == ' ')) {
                r.kind = REPLY_OK;
                r.bare = n == 2;
                if (n > 3) {
                        const char *p = line + 3;
                        size_t k = n - 3;
                        if (!parse_id(p, k, &r.voice))
                                r.word = cued_not_sounded_of(p, k);
                }
                return r;
        }
        if (n >= 4 && !memcmp(line, "err ", 4)) {
                const char *p = line + 4;
                size_t k = n - 4, w = word_len(p, k);
                if (w == 0)
                        return r;
                r.kind = REPLY_ERR;
                r.code = cued_error_of(p, w);
                if (w < k) {
                        const char *word = p + w + 1;
                        size_t wl = word_len(word, k - w - 1);
                        if (r.code == CUED_ERROR_BAD_FILE)
                                r.problem = cued_file_problem_of(word, wl);
                        else if (r.code == CUED_ERROR_NOT_PLAYED)
                                r.reason = cued_end_reason_of(word, wl);
                }
                return r;
        }
        if (n >= 4 && !memcmp(line, "end ", 4)) {
                const char *p = line + 4;
                size_t k = n - 4, w = word_len(p, k);
                uint64_t voice;
                if (w == k || !parse_id(p, w, &voice))
                        return r;
                const char *reason = p + w + 1;
                size_t rl = k - w - 1;
                if (rl == 0 || memchr(reason, ' ', rl))
                        return r;
                r.kind = REPLY_END;
                r.voice = voice;
                r.reason = cued_end_reason_of(reason, rl);   /* -1: a reason a newer cued added */
                return r;
        }
        return r;
}

int end_code(int reason) {
        if (reason < 0)
                return CA_ERROR_IO;
        switch ((enum cued_end_reason) reason) {
        case CUED_END_REASON_PLAYED:
                return CA_SUCCESS;
        case CUED_END_REASON_STOPPED_BY_ID:
        case CUED_END_REASON_STOPPED_BY_OWNER:
        case CUED_END_REASON_STOPPED_ALL:
        case CUED_END_REASON_STOLEN:
        case CUED_END_REASON_MUTED:
        case CUED_END_REASON_DISCONNECTED:
                return CA_ERROR_CANCELED;
        case CUED_END_REASON_BUSY:
                return CA_ERROR_NOTAVAILABLE;
        case CUED_END_REASON_SHUTDOWN:
                return CA_ERROR_DESTROYED;
        case CUED_END_REASON_LATE:
        case CUED_END_REASON_CUT:
                return CA_ERROR_IO;   /* the device did not play it */
        }
        return CA_ERROR_IO;
}

bool reroute_end(int reason) {
        /* late: never started; cut: the device failed under it; shutdown: cued stopped before
         * it started or while it sounded. Each is a failure of cued's, not a choice. */
        return reason == CUED_END_REASON_LATE || reason == CUED_END_REASON_CUT || reason == CUED_END_REASON_SHUTDOWN;
}

static int file_problem_code(int problem) {
        if (problem < 0)
                return CA_ERROR_CORRUPT;   /* an older cued: no word */
        switch ((enum cued_file_problem) problem) {
        case CUED_FILE_PROBLEM_NOT_FOUND:
                return CA_ERROR_NOTFOUND;
        case CUED_FILE_PROBLEM_DENIED:
                return CA_ERROR_ACCESS;
        case CUED_FILE_PROBLEM_OVER_BUDGET:
                return CA_ERROR_NOTAVAILABLE;
        case CUED_FILE_PROBLEM_TIMED_OUT:
        case CUED_FILE_PROBLEM_NOT_TRIED:
                return CA_ERROR_IO;
        case CUED_FILE_PROBLEM_NOT_REGULAR:
        case CUED_FILE_PROBLEM_UNREADABLE:
                return CA_ERROR_CORRUPT;
        }
        return CA_ERROR_CORRUPT;
}

int err_code(const struct reply *r) {
        if (r->code < 0)
                return CA_ERROR_INTERNAL;   /* a code this build does not know */
        switch ((enum cued_error) r->code) {
        case CUED_ERROR_UNKNOWN_CUE:
                return CA_ERROR_NOTFOUND;
        case CUED_ERROR_BAD_FILE:
                return file_problem_code(r->problem);
        case CUED_ERROR_BAD_ARGUMENT:
                return CA_ERROR_INVALID;
        case CUED_ERROR_RATE_LIMITED:
        case CUED_ERROR_TOO_MANY:
        case CUED_ERROR_BUSY:
                return CA_ERROR_NOTAVAILABLE;
        case CUED_ERROR_LINE_TOO_LONG:
                return CA_ERROR_TOOBIG;
        case CUED_ERROR_UNKNOWN_VERB:
                return CA_ERROR_NOTSUPPORTED;
        case CUED_ERROR_NOT_PLAYED:
                /* an error is never a success, whatever word follows it (`not-played played`) */
                return end_code(r->reason) < 0 ? end_code(r->reason) : CA_ERROR_IO;
        case CUED_ERROR_FORBIDDEN:
                return CA_ERROR_ACCESS;
        case CUED_ERROR_RELOAD_FAILED:
        case CUED_ERROR_INTERNAL:
                return CA_ERROR_INTERNAL;
        }
        return CA_ERROR_INTERNAL;
}

bool reroute_error(const struct reply *r) {
        return (r->code == CUED_ERROR_NOT_PLAYED && (r->reason < 0 || reroute_end(r->reason))) || r->code == CUED_ERROR_BUSY
               || r->code == CUED_ERROR_FORBIDDEN;
}
