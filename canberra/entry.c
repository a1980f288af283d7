/* libcanberra-cued.so: libcanberra's output through cued. libcanberra's eight entry points.
 *
 * With CANBERRA_DRIVER=cued, libcanberra (0.30) loads this plug-in and calls cued_driver_open,
 * _play, _cancel, … for every ca_context of the process (GNOME Shell, GTK apps, feedbackd).
 * Each context gets one connection to cued's socket (protocol v1: `app NAME via=libcanberra`,
 * `events on`, `play NAME id`, `play-file PATH id`, `preload NAME`, `stop id ID`), a reader
 * thread of its own (reader.c) and, when first needed, a fallback worker (fallback.c).
 *
 * It runs inside other people's processes, so no call here waits on cued or on another
 * driver: a play is sent (one non-blocking send) or queued for the fallback, and returns; its
 * result comes with its callback, exactly once per accepted play, from the reader thread.
 * What cued does not sound (it went away, stalled, lied, refused) is re-routed to the
 * fallback at once, never lost. Plain C: libc, pthreads and libcanberra.so.0's helpers. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "driver.h"

#define EXPORT __attribute__((visibility("default")))

EXPORT int cued_driver_destroy(ca_context *c);

/* Keeps this module loaded for the life of the process: a context destroyed from its own
 * callback leaves the reader running this code after libcanberra has closed the module, and
 * a fallback worker may outlive its context. */
static void pin_module(void) {
        Dl_info info;
        if (dladdr((void *) cued_driver_destroy, &info) && info.dli_fname)
                dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}

void ctx_free(struct ctx *x) {
        fallback_close(x);
        if (x->props)
                ca_proplist_destroy(x->props);
        if (x->wakefd >= 0)
                close(x->wakefd);
        pthread_mutex_destroy(&x->lock);
        free(x);
}

EXPORT int cued_driver_open(ca_context *c) {
        const char *d = c ? c->driver : NULL;
        if (!c)
                return CA_ERROR_INVALID;
        if (d && (strncmp(d, "cued", 4) || (d[4] && d[4] != ',' && d[4] != ':')))
                return CA_ERROR_NODRIVER;
        if (c->private)
                return CA_ERROR_STATE;
        static pthread_once_t pinned = PTHREAD_ONCE_INIT;
        pthread_once(&pinned, pin_module);
        struct ctx *x = calloc(1, sizeof *x);
        if (!x)
                return CA_ERROR_OOM;
        x->context = c;
        x->fd = -1;
        x->wakefd = -1;
        pthread_mutex_init(&x->lock, NULL);
        c->private = x;

        const char *s = getenv("CUED_SOCKET"), *rt = getenv("XDG_RUNTIME_DIR");
        if (s && *s)
                snprintf(x->socket_path, sizeof x->socket_path, "%s", s);
        else if (rt && *rt && strlen(rt) + sizeof "/cued/cued.sock" <= sizeof x->socket_path)
                snprintf(x->socket_path, sizeof x->socket_path, "%s/cued/cued.sock", rt);
        if (strlen(x->socket_path) + 1 >= sizeof x->socket_path)
                x->socket_path[0] = 0;   /* too long for a socket address: cued is out of reach */
        fallback_names(x, d);
        app_of(NULL, c->props, x->context_app);
        x->props = copy_props(c->props);
        if (c->device)
                snprintf(x->device, sizeof x->device, "%s", c->device);

        if ((x->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
                cued_driver_destroy(c);
                return CA_ERROR_SYSTEM;
        }
        /* The thread takes none of the host's signals. */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        int r = pthread_create(&x->reader, NULL, reader_main, x);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (r) {
                cued_driver_destroy(c);
                return CA_ERROR_OOM;
        }
        x->reader_started = true;
        connect_if_due(x);
        return CA_SUCCESS;
}

EXPORT int cued_driver_destroy(ca_context *c) {
        struct ctx *x;
        if (!c || !(x = CTX(c)))
                return CA_ERROR_STATE;
        c->private = NULL;
        if (!x->reader_started) {
                ctx_free(x);
                return CA_SUCCESS;
        }
        pthread_mutex_lock(&x->lock);
        x->stopping = true;
        if (pthread_equal(pthread_self(), x->reader)) {
                /* From a callback, on the reader: it cannot wait for itself. Every play left is
                 * called back now (libcanberra frees the context once this returns); the reader
                 * ends when the callback returns, and frees the rest. */
                end_all(x, CA_ERROR_DESTROYED);
                run_callbacks(x);
                x->destroyed_on_reader = true;
                pthread_mutex_unlock(&x->lock);
                pthread_detach(x->reader);
                return CA_SUCCESS;
        }
        wake_reader(x);
        pthread_mutex_unlock(&x->lock);
        pthread_join(x->reader, NULL);
        ctx_free(x);
        return CA_SUCCESS;
}

EXPORT int cued_driver_change_device(ca_context *c, const char *device) {
        struct ctx *x;
        if (!c || !(x = CTX(c)))
                return CA_ERROR_STATE;
        /* cued has one output, its own: a device is the fallback's business */
        pthread_mutex_lock(&x->lock);
        snprintf(x->device, sizeof x->device, "%s", device ? device : "");
        fallback_change(x);
        pthread_mutex_unlock(&x->lock);
        return CA_SUCCESS;
}

EXPORT int cued_driver_change_props(ca_context *c, ca_proplist *changed, ca_proplist *merged) {
        struct ctx *x;
        if (!c || !changed || !merged || !(x = CTX(c)))
                return CA_ERROR_INVALID;
        /* The app and theme are read from the properties at each play. */
        ca_proplist *copy = copy_props(merged);
        if (!copy)
                return CA_ERROR_OOM;
        char app[CUED_LABEL_BYTES + 1];
        app_of(NULL, merged, app);
        pthread_mutex_lock(&x->lock);
        if (x->props)
                ca_proplist_destroy(x->props);
        x->props = copy;
        snprintf(x->context_app, sizeof x->context_app, "%s", app);
        fallback_change(x);
        pthread_mutex_unlock(&x->lock);
        return CA_SUCCESS;
}

EXPORT int cued_driver_play(ca_context *c, uint32_t id, ca_proplist *proplist, ca_finish_callback_t cb, void *userdata) {
        struct ctx *x;
        struct request req;
        if (!c || !proplist || (userdata && !cb) || !(x = CTX(c)))
                return CA_ERROR_INVALID;
        int v = describe(proplist, c->props, false, &req);
        if (v < 0)
                return v;
        /* A copy, to hand the play to the fallback if cued does not sound it. */
        ca_proplist *copy = copy_props(proplist);
        if (!copy)
                return CA_ERROR_OOM;
        connect_if_due(x);
        pthread_mutex_lock(&x->lock);
        struct play *pl = x->nplays < MAX_PLAYS ? play_new(x, id, cb, userdata, copy, req.has_retry ? req.retry.s : NULL) : NULL;
        if (!pl) {
                int code = x->nplays < MAX_PLAYS ? CA_ERROR_OOM : CA_ERROR_NOTAVAILABLE;
                pthread_mutex_unlock(&x->lock);
                ca_proplist_destroy(copy);
                return code;
        }
        if (v == SEND && cued_takes_plays(x)) {
                /* On a failed send the connection breaks, and re-routes this play with the rest. */
                if (strcmp(req.app, x->app))
                        declare_app(x, req.app, PEND_APP);
                send_request(x, &req.line, PEND_PLAY, pl);
                if (pl->state == SENT && !pl->replies_owed)
                        play_reroute(x, pl, "not sent");
        } else
                play_reroute(x, pl, v == SEND ? "cued absent" : "a file cued cannot be told of");
        pthread_mutex_unlock(&x->lock);
        return CA_SUCCESS;
}

EXPORT int cued_driver_cancel(ca_context *c, uint32_t id) {
        struct ctx *x;
        if (!c || !(x = CTX(c)))
                return CA_ERROR_STATE;
        pthread_mutex_lock(&x->lock);
        bool fallback = false;
        for (struct play *pl = x->plays, *n; pl; pl = n) {
                n = pl->next;
                if (pl->ca_id != id || pl->state == DONE)
                        continue;
                if (pl->state == PLAYING)
                        send_stop(x, pl->voice);   /* the voice may yet sound its last milliseconds */
                fallback |= pl->state == FALLBACK;
                play_finish(x, pl, CA_ERROR_CANCELED);
                n = x->plays;   /* a failed stop breaks the connection, which may end others: again from the start */
        }
        if (fallback)
                fallback_cancel(x, id);
        pthread_mutex_unlock(&x->lock);
        return CA_SUCCESS;
}

EXPORT int cued_driver_cache(ca_context *c, ca_proplist *proplist) {
        struct ctx *x;
        struct request req;
        if (!c || !proplist || !(x = CTX(c)))
                return CA_ERROR_INVALID;
        int v = describe(proplist, c->props, true, &req);
        if (v < 0)
                return v;
        ca_proplist *copy = copy_props(proplist);
        connect_if_due(x);
        pthread_mutex_lock(&x->lock);
        /* Not waited for: cued decodes it ahead, and a play finds it ready or waits for it. */
        if (v == SEND && cued_takes_plays(x)) {
                if (strcmp(req.app, x->app))
                        declare_app(x, req.app, PEND_APP);
                send_request(x, &req.line, PEND_PRELOAD, NULL);
                if (copy)
                        ca_proplist_destroy(copy);
        } else
                fallback_cache(x, copy);
        pthread_mutex_unlock(&x->lock);
        return CA_SUCCESS;
}

EXPORT int cued_driver_playing(ca_context *c, uint32_t id, int *playing) {
        struct ctx *x;
        if (!c || !playing || !(x = CTX(c)))
                return CA_ERROR_INVALID;
        *playing = 0;
        pthread_mutex_lock(&x->lock);
        for (struct play *pl = x->plays; pl && !*playing; pl = pl->next)
                *playing = pl->ca_id == id && pl->state != DONE;
        pthread_mutex_unlock(&x->lock);
        return CA_SUCCESS;
}
