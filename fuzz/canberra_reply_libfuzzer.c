/* libFuzzer on the libcanberra plug-in's reading of cued's lines (canberra/reply.c): any bytes,
 * split into lines as the reader splits them, each parsed and mapped to libcanberra's codes.
 * Properties checked on every input: no crash or undefined behaviour (ASan, UBSan), the line
 * splitter never reads past its input and always moves on, a parsed reply's fields are in
 * the wire's ranges (cued-wire.h), and only an `ok` or `end` line carries a voice.
 * `make canberra-fuzz` builds it; make test runs it briefly from fuzz/seeds/canberra. */
#include <canberra.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../canberra/cued-wire.h"
#include "../canberra/reply.h"

static void check(int cond) {
        if (!cond)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *buf = (const char *) data;
        size_t off = 0, used, n;
        while (off < size && (used = next_line(buf + off, size - off, &n))) {
                check(used >= 1 && used <= size - off && n < used);
                struct reply r = parse_reply(buf + off, n);
                check(r.kind >= REPLY_BAD && r.kind <= REPLY_END);
                check(r.word >= -1 && r.word < CUED_NOT_SOUNDED_COUNT);
                check(r.code >= -1 && r.code < CUED_ERROR_COUNT);
                check(r.problem >= -1 && r.problem < CUED_FILE_PROBLEM_COUNT);
                check(r.reason >= -1 && r.reason < CUED_END_REASON_COUNT);
                check(r.voice == 0 || r.kind == REPLY_OK || r.kind == REPLY_END);
                check(r.kind != REPLY_END || r.voice != 0);
                check(r.problem < 0 || r.code == CUED_ERROR_BAD_FILE);
                if (r.kind == REPLY_END)
                        check(end_code(r.reason) <= 0);
                if (r.kind == REPLY_ERR) {
                        check(err_code(&r) < 0);
                        (void) reroute_error(&r);
                }
                off += used;
        }
        return 0;
}
