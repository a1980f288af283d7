/* LD_PRELOAD for `make bench`'s canberra-gtk-play rows: writes the monotonic time (ns) at which
 * the program calls ca_context_play_full to $CANBERRA_STAMP, then calls libcanberra's own. A
 * process per sound first starts (GTK, the X connection); from this moment on, what is measured
 * is the driver's part: loading it, connecting, the sound. */
#define _GNU_SOURCE
#include <canberra.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int ca_context_play_full(ca_context *c, uint32_t id, ca_proplist *p, ca_finish_callback_t cb, void *userdata) {
        static int (*real)(ca_context *, uint32_t, ca_proplist *, ca_finish_callback_t, void *);
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        const char *path = getenv("CANBERRA_STAMP");
        FILE *f = path ? fopen(path, "w") : NULL;
        if (f) {
                fprintf(f, "%lld\n", (long long) ts.tv_sec * 1000000000LL + ts.tv_nsec);
                fclose(f);
        }
        if (!real)
                *(void **) &real = dlsym(RTLD_NEXT, "ca_context_play_full");
        return real ? real(c, id, p, cb, userdata) : CA_ERROR_NOTAVAILABLE;
}
