/* Another libcanberra driver (pulse, alsa), loaded and called by the plug-in itself: its module
 * opened with dlopen from the directory this plug-in was loaded from, its context built as
 * libcanberra builds one, its entry points called directly.
 *
 * Not through ca_context_open and ca_context_destroy: those load and unload drivers with libltdl,
 * whose state is global and unlocked, and the fallback's thread would then race the host's own
 * threads opening and destroying contexts (a crash, seen in make test). glibc's dlopen locks.
 *
 * A driver's module, once loaded, stays loaded for the life of the process (RTLD_NODELETE):
 * libcanberra's alsa driver plays each sound on a detached thread of its own, and its destroy
 * waits only until that thread has unlinked its play, not until it has returned; the thread
 * then still runs the module's code (the rest of thread_func). A dlclose just after unmapped
 * it under the thread: SIGSEGV at an address in no module, 1 of 181 ASan runs of
 * alsa-null-cancel, every run with the player threads slowed at their end (issue 46). A hung
 * worker abandoned in a driver (fallback.c) is in its code too. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "subdriver.h"

/* glibc serializes dlopen and dlclose with a lock of its own, which ThreadSanitizer cannot see:
 * this one, around ours, shows it the order (the fallbacks of several contexts load drivers at
 * once), so that the sanitizer stress reports only races of the plug-in's. */
static pthread_mutex_t loader = PTHREAD_MUTEX_INITIALIZER;

/* The directory libcanberra loaded this plug-in from: where its other drivers are. */
static bool plugin_dir(char *out, size_t cap) {
        Dl_info info;
        if (!dladdr((void *) plugin_dir, &info) || !info.dli_fname)
                return false;
        const char *slash = strrchr(info.dli_fname, '/');
        size_t n = slash ? (size_t) (slash - info.dli_fname) : 0;
        if (!slash || n + 1 > cap)
                return false;
        memcpy(out, info.dli_fname, n);
        out[n] = 0;
        return true;
}

/* The context a subdriver is opened with, and who owns it: a driver's callback names its context,
 * so the callback finds its fallback there and needs no allocation of its own per play. */
struct owned_context {
        struct ca_context c;    /* first: the driver is given &c */
        uint32_t magic;
        void *owner;
};
static const uint32_t OWNED = 0x63756564;   /* "cued" */

void *subdriver_owner(ca_context *c) {
        struct owned_context *o = (struct owned_context *) c;
        return o && o->magic == OWNED ? o->owner : NULL;
}

static void *entry(void *dso, const char *name, const char *what) {
        char sym[96];
        snprintf(sym, sizeof sym, "%s_%s", name, what);
        void *f = dlsym(dso, sym);
        return f ? f : dlsym(dso, what);   /* dso.c's rule: the prefixed name, else the plain one */
}

int subdriver_open(struct subdriver *s, const char *name, ca_proplist *props, const char *device) {
        char dir[PATH_MAX], path[PATH_MAX + 64];
        void *owner = s->owner;
        memset(s, 0, sizeof *s);
        s->owner = owner;
        if (!plugin_dir(dir, sizeof dir) || (size_t) snprintf(path, sizeof path, "%s/libcanberra-%s.so", dir, name) >= sizeof path)
                return CA_ERROR_NODRIVER;
        pthread_mutex_lock(&loader);
        s->dso = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
        pthread_mutex_unlock(&loader);
        if (!s->dso)
                return CA_ERROR_NODRIVER;
        s->open = (int (*)(ca_context *)) entry(s->dso, name, "driver_open");
        s->destroy = (int (*)(ca_context *)) entry(s->dso, name, "driver_destroy");
        s->change_device = (int (*)(ca_context *, const char *)) entry(s->dso, name, "driver_change_device");
        s->change_props = (int (*)(ca_context *, ca_proplist *, ca_proplist *)) entry(s->dso, name, "driver_change_props");
        s->play = (int (*)(ca_context *, uint32_t, ca_proplist *, ca_finish_callback_t, void *)) entry(s->dso, name, "driver_play");
        s->cancel = (int (*)(ca_context *, uint32_t)) entry(s->dso, name, "driver_cancel");
        s->cache = (int (*)(ca_context *, ca_proplist *)) entry(s->dso, name, "driver_cache");
        int r = CA_ERROR_CORRUPT;
        struct owned_context *o = calloc(1, sizeof *o);
        struct ca_context *c = o ? &o->c : NULL;
        if (o) {
                o->magic = OWNED;
                o->owner = owner;
        }
        if (s->open && s->destroy && s->change_device && s->change_props && s->play && s->cancel && s->cache && c) {
                c->mutex = ca_mutex_new();
                c->props = props ? copy_props(props) : NULL;
                if (!c->props)
                        ca_proplist_create(&c->props);
                c->driver = strdup(name);
                c->device = device && *device ? strdup(device) : NULL;
                s->c = c;
                r = c->mutex && c->props && c->driver ? s->open(c) : CA_ERROR_OOM;
                if (r == CA_SUCCESS) {
                        c->opened = 1;
                        return r;
                }
        }
        subdriver_close(s);
        return r;
}

void subdriver_close(struct subdriver *s) {
        struct ca_context *c = s->c;
        if (c && c->opened)
                s->destroy(c);
        if (c) {
                if (c->props)
                        ca_proplist_destroy(c->props);
                if (c->mutex)
                        ca_mutex_free(c->mutex);
                free(c->driver);
                free(c->device);
                ((struct owned_context *) c)->magic = 0;
                free(c);
        }
        if (s->dso) {
                pthread_mutex_lock(&loader);
                dlclose(s->dso);
                pthread_mutex_unlock(&loader);
        }
        s->c = NULL;
        s->dso = NULL;
}

void subdriver_change(struct subdriver *s, ca_proplist *props, const char *device) {
        struct ca_context *c = s->c;
        if (props) {
                ca_proplist *copy = copy_props(props);
                if (copy && s->change_props(c, copy, copy) == CA_SUCCESS) {
                        ca_proplist_destroy(c->props);
                        c->props = copy;
                } else if (copy)
                        ca_proplist_destroy(copy);
        }
        if (device) {
                char *d = *device ? strdup(device) : NULL;
                if (s->change_device(c, d) == CA_SUCCESS) {
                        free(c->device);
                        c->device = d;
                } else
                        free(d);
        }
}
