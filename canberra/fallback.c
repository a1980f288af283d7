/* The fallback: the driver libcanberra would have used (pulse, then alsa: ca_driver_order, or
 * the names after "cued," in CANBERRA_DRIVER), each loaded by the plug-in itself
 * (subdriver.c), tried in turn the way libcanberra's `multi` driver does.
 *
 * Those drivers may block (pulse's play blocked its caller 30 s with its server stopped), so
 * one thread of the context's own, started when first needed, is the only one that calls
 * them; the entry points and the reader only queue jobs. Their callbacks come on their own
 * threads and only record the result here, for the reader (fallback_collect), which ends the
 * play and runs the app's callback. The worker outlives the context if a driver holds it:
 * destroy never waits for it; it destroys its contexts and frees itself when it can. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "subdriver.h"

enum job_kind { JOB_PLAY, JOB_CACHE, JOB_CANCEL };
struct job {
        enum job_kind kind;
        uint32_t id;
        uint64_t serial;
        ca_proplist *props;
};
struct result {
        uint64_t serial;
        int code;
};

struct fallback {
        pthread_mutex_t lock;         /* taken inside ctx.lock, never the other way */
        pthread_cond_t more;
        struct job jobs[FALLBACK_QUEUE];
        unsigned head, count;
        struct result *results;       /* the drivers' callbacks, for the reader */
        unsigned nresults, cap;
        struct ctx *x;                /* NULL once the context is gone */
        bool closing;
        ca_proplist *new_props;       /* the context's properties changed: the worker applies them */
        char device[256];
        bool new_device;

        /* The worker's own. */
        pthread_t thread;
        char names[MAX_FALLBACKS][32];
        int count_names;
        struct subdriver sub[MAX_FALLBACKS];
        ca_proplist *props;
};

/* The names after "cued" in CANBERRA_DRIVER ("cued,alsa"), else libcanberra's own order. */
void fallback_names(struct ctx *x, const char *driver) {
        const char *rest = driver ? driver + strcspn(driver, ",:") : "";
        bool explicit = *rest != 0;
        size_t i = 0;
        for (;;) {
                const char *name;
                size_t n;
                if (explicit) {
                        if (!*rest)
                                break;
                        rest++;
                        name = rest;
                        n = strcspn(rest, ",:");
                        rest += n;
                } else {
                        if (!ca_driver_order[i])
                                break;
                        name = ca_driver_order[i++];
                        n = strlen(name);
                }
                if (n == 0 || n >= sizeof x->fb_names[0] || (n == 4 && !strncmp(name, "cued", 4)) || (n == 5 && !strncmp(name, "multi", 5)))
                        continue;
                if (x->fb_count == MAX_FALLBACKS)
                        break;
                memcpy(x->fb_names[x->fb_count], name, n);
                x->fb_names[x->fb_count++][n] = 0;
        }
}

/* A driver's callback, on its thread: recorded for the reader. Its userdata is the play's serial,
 * no allocation: libcanberra's alsa driver calls back twice when a cancel races the end of the
 * sound (its player thread checks `dead` unlocked, then calls back; cancel sets it and calls
 * back too), and a ticket freed at each call was freed twice (issue 46, the host crashed). A
 * second result for a serial finds its play ended (fallback_collect) and is dropped. The
 * fallback outlives its drivers' callbacks: the worker frees it only after destroying them. */
static void record(struct fallback *f, uint64_t serial, int code) {
        pthread_mutex_lock(&f->lock);
        if (f->x) {
                if (f->nresults == f->cap) {
                        unsigned cap = f->cap ? f->cap * 2 : 64;
                        struct result *r = realloc(f->results, cap * sizeof *r);
                        if (r) {
                                f->results = r;
                                f->cap = cap;
                        }
                }
                if (f->nresults < f->cap)
                        f->results[f->nresults++] = (struct result) { serial, code };
                wake_reader(f->x);
        }
        pthread_mutex_unlock(&f->lock);
}

static void on_sub_done(ca_context *sub, uint32_t id, int code, void *userdata) {
        struct fallback *f = subdriver_owner(sub);
        (void) id;
        if (f)
                record(f, (uint64_t) (uintptr_t) userdata, code);
}

/* The i-th driver, opened the first time it is needed (tried again at each job until it
 * opens); NULL if it does not open. */
static struct subdriver *sub_of(struct fallback *f, int i) {
        struct subdriver *s = &f->sub[i];
        if (s->c)
                return s;
        if (subdriver_open(s, f->names[i], f->props, f->device) != CA_SUCCESS)
                return NULL;
        debug("fallback opened", f->names[i]);
        return s;
}

/* multi.c's rule: the first driver that plays it takes it; else the first failure. */
static int play_in_subs(struct fallback *f, const struct job *j) {
        int first = CA_ERROR_NODRIVER;
        bool failed = false;
        for (int i = 0; i < f->count_names; i++) {
                struct subdriver *sub = sub_of(f, i);
                if (!sub)
                        continue;
                int r = sub->play(sub->c, j->id, j->props, on_sub_done, (void *) (uintptr_t) j->serial);
                if (r == CA_SUCCESS)
                        return r;
                if (!failed)
                        first = r;
                failed = true;
                if (r == CA_ERROR_NOTFOUND || r == CA_ERROR_DISABLED || r == CA_ERROR_INVALID)
                        break;   /* another driver would not find it either */
        }
        return first;
}

static void *worker(void *arg) {
        struct fallback *f = arg;
        pthread_mutex_lock(&f->lock);
        for (;;) {
                while (!f->count && !f->closing && !f->new_props && !f->new_device)
                        pthread_cond_wait(&f->more, &f->lock);
                if (f->closing)
                        break;
                ca_proplist *props = f->new_props;
                bool device = f->new_device;
                char dev[sizeof f->device];
                memcpy(dev, f->device, sizeof dev);
                f->new_props = NULL;
                f->new_device = false;
                struct job j = { .kind = JOB_CANCEL, .id = 0 };
                bool have = f->count > 0;
                if (have) {
                        j = f->jobs[f->head];
                        f->head = (f->head + 1) % FALLBACK_QUEUE;
                        f->count--;
                }
                pthread_mutex_unlock(&f->lock);
                if (props) {
                        if (f->props)
                                ca_proplist_destroy(f->props);
                        f->props = props;
                }
                for (int i = 0; i < f->count_names; i++)
                        if (f->sub[i].c && (props || device))
                                subdriver_change(&f->sub[i], props, device ? dev : NULL);
                if (have && j.kind == JOB_PLAY) {
                        int r = play_in_subs(f, &j);
                        if (r != CA_SUCCESS)
                                record(f, j.serial, r);
                } else if (have && j.kind == JOB_CACHE) {
                        for (int i = 0; i < f->count_names; i++) {
                                struct subdriver *sub = sub_of(f, i);
                                if (sub && j.props && sub->cache(sub->c, j.props) == CA_SUCCESS)
                                        break;
                        }
                } else if (have)
                        for (int i = 0; i < f->count_names; i++)
                                if (f->sub[i].c)
                                        f->sub[i].cancel(f->sub[i].c, j.id);
                if (j.props)
                        ca_proplist_destroy(j.props);
                pthread_mutex_lock(&f->lock);
        }
        /* The context is gone: what is queued is dropped (its plays were ended), the drivers
         * closed (their callbacks, if any, find no context and only free their tickets). */
        for (; f->count; f->count--, f->head = (f->head + 1) % FALLBACK_QUEUE)
                if (f->jobs[f->head].props)
                        ca_proplist_destroy(f->jobs[f->head].props);
        pthread_mutex_unlock(&f->lock);
        for (int i = 0; i < f->count_names; i++)
                subdriver_close(&f->sub[i]);
        if (f->props)
                ca_proplist_destroy(f->props);
        if (f->new_props)
                ca_proplist_destroy(f->new_props);
        free(f->results);
        pthread_cond_destroy(&f->more);
        pthread_mutex_destroy(&f->lock);
        free(f);
        return NULL;
}

/* The fallback of the context, started if need be (ctx.lock held). */
static struct fallback *fallback_of(struct ctx *x) {
        if (x->fb || x->stopping)
                return x->fb;
        struct fallback *f = calloc(1, sizeof *f);
        if (!f)
                return NULL;
        pthread_mutex_init(&f->lock, NULL);
        pthread_cond_init(&f->more, NULL);
        f->x = x;
        f->count_names = x->fb_count;
        memcpy(f->names, x->fb_names, sizeof f->names);
        for (int i = 0; i < MAX_FALLBACKS; i++)
                f->sub[i].owner = f;
        f->props = copy_props(x->props);
        snprintf(f->device, sizeof f->device, "%s", x->device);
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);   /* the host's signals are not its */
        int r = pthread_create(&f->thread, NULL, worker, f);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (r) {
                if (f->props)
                        ca_proplist_destroy(f->props);
                pthread_cond_destroy(&f->more);
                pthread_mutex_destroy(&f->lock);
                free(f);
                return NULL;
        }
        return x->fb = f;
}

static bool queue(struct ctx *x, struct job j) {
        struct fallback *f = fallback_of(x);
        if (!f)
                return false;
        pthread_mutex_lock(&f->lock);
        bool room = f->count < FALLBACK_QUEUE;
        if (room) {
                f->jobs[(f->head + f->count++) % FALLBACK_QUEUE] = j;
                pthread_cond_signal(&f->more);
        }
        pthread_mutex_unlock(&f->lock);
        return room;
}

bool fallback_play(struct ctx *x, struct play *pl) {
        if (!pl->props || !queue(x, (struct job) { JOB_PLAY, pl->ca_id, pl->serial, pl->props }))
                return false;
        pl->props = NULL;   /* the job's now */
        pl->state = FALLBACK;
        debug("playing through the fallback", NULL);
        return true;
}

void fallback_cache(struct ctx *x, ca_proplist *props) {
        if (!queue(x, (struct job) { JOB_CACHE, 0, 0, props }) && props)
                ca_proplist_destroy(props);
}

void fallback_cancel(struct ctx *x, uint32_t id) {
        if (x->fb)
                queue(x, (struct job) { JOB_CANCEL, id, 0, NULL });
}

void fallback_change(struct ctx *x) {
        struct fallback *f = x->fb;
        if (!f)
                return;
        ca_proplist *copy = copy_props(x->props);
        pthread_mutex_lock(&f->lock);
        if (copy) {
                if (f->new_props)
                        ca_proplist_destroy(f->new_props);
                f->new_props = copy;
        }
        snprintf(f->device, sizeof f->device, "%s", x->device);
        f->new_device = true;
        pthread_cond_signal(&f->more);
        pthread_mutex_unlock(&f->lock);
}

void fallback_collect(struct ctx *x) {
        struct fallback *f = x->fb;
        if (!f)
                return;
        pthread_mutex_lock(&f->lock);
        struct result *results = f->results;
        unsigned n = f->nresults;
        f->results = NULL;
        f->nresults = f->cap = 0;
        pthread_mutex_unlock(&f->lock);
        for (unsigned i = 0; i < n; i++)
                for (struct play *pl = x->plays; pl; pl = pl->next)
                        if (pl->serial == results[i].serial) {
                                if (pl->state == FALLBACK) {
                                        play_finish(x, pl, results[i].code);
                                        play_release(x, pl);
                                }
                                break;
                        }
        free(results);
}

void fallback_close(struct ctx *x) {
        struct fallback *f = x->fb;
        if (!f)
                return;
        x->fb = NULL;
        /* Detached first: once it sees `closing` the worker frees `f`, which is not touched again. */
        pthread_detach(f->thread);
        pthread_mutex_lock(&f->lock);
        f->x = NULL;
        f->closing = true;
        pthread_cond_signal(&f->more);
        pthread_mutex_unlock(&f->lock);
}
