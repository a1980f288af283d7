#pragma once
#include <alsa/asoundlib.h>

/* snd_lib_error_set_handler takes a variadic function pointer, which Swift
   cannot create: this shim installs a handler that keeps ALSA's own messages
   off stderr (cued reports errors itself, with snd_strerror). */
static void cued_alsa_quiet_handler(const char *file, int line, const char *function,
                                    int err, const char *fmt, ...) {
    (void)file; (void)line; (void)function; (void)err; (void)fmt;
}

static inline int cued_alsa_silence_errors(void) {
    return snd_lib_error_set_handler(cued_alsa_quiet_handler);
}
