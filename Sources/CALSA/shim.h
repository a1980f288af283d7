#pragma once
#include <alsa/asoundlib.h>
#include <stdio.h>

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

/* 1 if ALSA's configuration (alsa.conf, its conf.d, ~/.asoundrc) defines
   pcm.NAME, 0 if not, a negative error code if the configuration cannot be
   read. `snd_config` is a global Swift 6 would not let us touch. */
static inline int cued_alsa_pcm_defined(const char *name) {
    int err = snd_config_update();
    if (err < 0)
        return err;
    char key[512];
    if (snprintf(key, sizeof key, "pcm.%s", name) >= (int)sizeof key)
        return 0;
    snd_config_t *node;
    return snd_config_search(snd_config, key, &node) == 0 ? 1 : 0;
}
