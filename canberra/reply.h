/* cued's lines as the plug-in reads them: a pure parser (no state, no allocation, no I/O),
 * fuzzed on its own (fuzz/canberra_reply_libfuzzer.c), and what the wire's words mean to
 * libcanberra. */
#ifndef CUED_REPLY_H
#define CUED_REPLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum reply_kind {
        REPLY_BAD,    /* not a line cued sends: the connection is not cued's, or lies */
        REPLY_OK,     /* ok[ PAYLOAD] */
        REPLY_ERR,    /* err CODE[ WORD] …  */
        REPLY_END,    /* end ID REASON */
};

struct reply {
        enum reply_kind kind;
        uint64_t voice;       /* ok ID, end ID (0: none) */
        int word;             /* ok WORD: a cued_not_sounded (-1: none, or another payload) */
        bool bare;            /* plain `ok` */
        int code;             /* err CODE: a cued_error (-1: a code this build does not know) */
        int problem;          /* err bad-file WORD: a cued_file_problem (-1: none) */
        int reason;           /* end ID REASON, err not-played REASON: a cued_end_reason (-1: none or unknown) */
};

/* The first line in `buf` (`len` bytes): its length without the LF (and a CR before it) in
 * `*line_len`, and the bytes it takes with its LF; 0 if there is no whole line yet. */
size_t next_line(const char *buf, size_t len, size_t *line_len);

/* One line (without its LF), which may hold any byte. */
struct reply parse_reply(const char *line, size_t n);

/* What libcanberra is told. */
int end_code(int reason);               /* a voice's end, for its callback */
int err_code(const struct reply *r);    /* an `err` reply to a play or a preload */
/* Errors after which the sound had better go to the fallback than nowhere: cued is
 * stopping (a restart) or refused the connection. */
bool reroute_error(const struct reply *r);
/* Ends after which the voice did not (fully) sound and the fallback should play it. */
bool reroute_end(int reason);

#endif
