/* The fallback: the driver libcanberra would have used (pulse, then alsa: ca_driver_order, or
 * the names after "cued," in CANBERRA_DRIVER), each loaded by the plug-in itself
 * (subdriver.c), tried in turn the way libcanberra's `multi` driver does.
 *
 * Those drivers may block (pulse's play blocked its caller 30 s with its server stopped), so a
 * worker thread is the only one that calls them; the entry points and the reader only queue
 * jobs. Their callbacks come on their own threads and only record the result here, for the
 * reader (fallback_collect), which ends the play and runs the app's callback.
 *
 * Bounds, whatever the drivers do (issue 46 item 2):
 * - A context's worker is started when it has jobs and ends after FALLBACK_IDLE_NS without
 *   any (closing its drivers); at most MAX_WORKERS exist in the process, across all its
 *   contexts, so a driver that hangs holds at most that many threads and their descriptors
 *   (it used to be a thread per context: 510 of them, and 1,022 descriptors, in 6 s). A
 *   context that finds none free has its play called back at once.
 * - Every play has a deadline: taken by a driver by its birth + FALLBACK_LATE_NS (else it is
 *   too late to be worth hearing: dropped, called back CA_ERROR_NOTAVAILABLE, by the reader
 *   if the worker is stuck), then its driver's callback by SOUND_MAX_NS + VOICE_GRACE_NS
 *   after (else CA_ERROR_IO). fallback_deadlines, on the reader, enforces both.
 * - A driver that failed to open is not tried again before its backoff (1 s doubling to
 *   30 s), and one whose open or play has been in progress for FALLBACK_HUNG_NS in any worker
 *   is skipped by the others meanwhile: that knowledge is the process's, not a context's.
 * A worker outlives its context if a driver holds it: destroy never waits for it; it destroys
 * its drivers and frees the fallback when it can. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driver.h"
#include "subdriver.h"

enum job_kind { JOB_PLAY, JOB_CACHE, JOB_CANCEL };
struct job {
        enum job_kind kind;
        uint32_t id;
        uint64_t serial;
        uint64_t born_ns;     /* the play's: past FALLBACK_LATE_NS it is dropped */
        ca_proplist *props;
};
struct result {
        uint64_t serial;
        int code;
        bool accepted;        /* the driver took it: its callback is due within a sound's length */
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
        bool running;                 /* a worker serves it (else the next job starts one) */
        ca_proplist *new_props;       /* the context's properties changed: the worker applies them */
        char device[256];
        bool new_device;

        /* The worker's (one at a time: `running`). */
        char names[MAX_FALLBACKS][32];
        int count_names;
        struct subdriver sub[MAX_FALLBACKS];
        ca_proplist *props;
        char open_device[256];
        int slot;                     /* its place in `pool.busy` */
};

/* The process's workers, and what it knows of each driver (pool.lock: a leaf, taken inside
 * f->lock, held for table work only). */
struct health {
        char name[32];
        uint64_t retry_ns, backoff_ns;   /* an open that failed: not again before retry_ns */
};
static struct {
        pthread_mutex_t lock;
        int workers;
        bool taken[MAX_WORKERS];                                         /* a worker's slot */
        struct { const char *name; uint64_t since; } busy[MAX_WORKERS];   /* each worker's call in progress */
        struct health health[MAX_FALLBACKS * 2];
        int nhealth;
} pool = { .lock = PTHREAD_MUTEX_INITIALIZER };

static struct health *health_of(const char *name) {
        for (int i = 0; i < pool.nhealth; i++)
                if (!strcmp(pool.health[i].name, name))
                        return &pool.health[i];
        if (pool.nhealth == (int) (sizeof pool.health / sizeof pool.health[0]))
                return NULL;
        struct health *h = &pool.health[pool.nhealth++];
        snprintf(h->name, sizeof h->name, "%s", name);
        return h;
}

/* Whether driver `name` may be called now: not in its backoff, not hung in another worker. */
static bool driver_usable(const char *name, bool opening, uint64_t now) {
        pthread_mutex_lock(&pool.lock);
        struct health *h = health_of(name);
        bool ok = !(opening && h && now < h->retry_ns);
        for (int i = 0; ok && i < MAX_WORKERS; i++)
                if (pool.busy[i].name && !strcmp(pool.busy[i].name, name) && now - pool.busy[i].since >= FALLBACK_HUNG_NS)
                        ok = false;
        pthread_mutex_unlock(&pool.lock);
        return ok;
}

/* The worker in `slot` is in a call of driver `name` (NULL: out of it). */
static void busy(int slot, const char *name) {
        pthread_mutex_lock(&pool.lock);
        pool.busy[slot].name = name;
        pool.busy[slot].since = now_ns();
        pthread_mutex_unlock(&pool.lock);
}

static void opened(const char *name, bool ok) {
        pthread_mutex_lock(&pool.lock);
        struct health *h = health_of(name);
        if (h && ok)
                h->backoff_ns = h->retry_ns = 0;
        else if (h) {
                h->backoff_ns = h->backoff_ns ? h->backoff_ns * 2 : BACKOFF_MIN_NS;
                if (h->backoff_ns > BACKOFF_MAX_NS)
                        h->backoff_ns = BACKOFF_MAX_NS;
                h->retry_ns = now_ns() + h->backoff_ns;
        }
        pthread_mutex_unlock(&pool.lock);
}

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
static void record(struct fallback *f, uint64_t serial, int code, bool accepted) {
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
                        f->results[f->nresults++] = (struct result) { serial, code, accepted };
                wake_reader(f->x);
        }
        pthread_mutex_unlock(&f->lock);
}

static void on_sub_done(ca_context *sub, uint32_t id, int code, void *userdata) {
        struct fallback *f = subdriver_owner(sub);
        (void) id;
        if (f)
                record(f, (uint64_t) (uintptr_t) userdata, code, false);
}

/* The i-th driver, opened the first time it is needed; NULL if it does not open, or is in its
 * backoff, or hangs in another worker. */
static struct subdriver *sub_of(struct fallback *f, int i) {
        struct subdriver *s = &f->sub[i];
        if (s->c)
                return s;
        if (!driver_usable(f->names[i], true, now_ns()))
                return NULL;
        busy(f->slot, f->names[i]);
        int r = subdriver_open(s, f->names[i], f->props, f->open_device);
        busy(f->slot, NULL);
        opened(f->names[i], r == CA_SUCCESS);
        if (r != CA_SUCCESS)
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
                if (!sub || !driver_usable(f->names[i], false, now_ns()))
                        continue;
                busy(f->slot, f->names[i]);
                int r = sub->play(sub->c, j->id, j->props, on_sub_done, (void *) (uintptr_t) j->serial);
                busy(f->slot, NULL);
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

static void close_subs(struct fallback *f) {
        for (int i = 0; i < f->count_names; i++)
                subdriver_close(&f->sub[i]);
}

static void fallback_free(struct fallback *f) {
        for (; f->count; f->count--, f->head = (f->head + 1) % FALLBACK_QUEUE)
                if (f->jobs[f->head].props)
                        ca_proplist_destroy(f->jobs[f->head].props);
        if (f->props)
                ca_proplist_destroy(f->props);
        if (f->new_props)
                ca_proplist_destroy(f->new_props);
        free(f->results);
        pthread_cond_destroy(&f->more);
        pthread_mutex_destroy(&f->lock);
        free(f);
}

static void *worker(void *arg) {
        struct fallback *f = arg;
        int slot = f->slot;   /* f may be gone when the worker leaves */
        pthread_mutex_lock(&f->lock);
        for (;;) {
                bool idle = false;
                while (!f->count && !f->closing && !f->new_props && !f->new_device && !idle) {
                        struct timespec ts;
                        clock_gettime(CLOCK_MONOTONIC, &ts);
                        ts.tv_sec += (time_t) (FALLBACK_IDLE_NS / 1000000000ull);
                        idle = pthread_cond_timedwait(&f->more, &f->lock, &ts) == ETIMEDOUT;
                }
                if (f->closing)
                        break;
                if (idle && !f->count && !f->new_props && !f->new_device) {
                        /* Nothing to do for a while: its drivers closed, its place given back. */
                        pthread_mutex_unlock(&f->lock);
                        close_subs(f);
                        pthread_mutex_lock(&f->lock);
                        if (f->count || f->closing || f->new_props || f->new_device)
                                continue;
                        f->running = false;
                        pthread_mutex_unlock(&f->lock);   /* f may be freed from here on (fallback_close) */
                        goto leave;
                }
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
                if (device)
                        memcpy(f->open_device, dev, sizeof f->open_device);
                for (int i = 0; i < f->count_names; i++)
                        if (f->sub[i].c && (props || device))
                                subdriver_change(&f->sub[i], props, device ? dev : NULL);
                if (have && j.kind == JOB_PLAY && now_ns() - j.born_ns >= FALLBACK_LATE_NS) {
                        record(f, j.serial, CA_ERROR_NOTAVAILABLE, false);   /* a sound this late is a wrong sound */
                } else if (have && j.kind == JOB_PLAY) {
                        int r = play_in_subs(f, &j);
                        record(f, j.serial, r, r == CA_SUCCESS);
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
         * closed (their callbacks, if any, find no context), then the rest freed. */
        pthread_mutex_unlock(&f->lock);
        close_subs(f);
        fallback_free(f);
leave:
        pthread_mutex_lock(&pool.lock);
        pool.workers--;
        pool.taken[slot] = false;
        pool.busy[slot].name = NULL;
        pthread_mutex_unlock(&pool.lock);
        return NULL;
}

/* A worker for `f` if the process has one to spare (f->lock held). */
static bool start_worker(struct fallback *f) {
        int slot = -1;
        pthread_mutex_lock(&pool.lock);
        for (int i = 0; i < MAX_WORKERS && slot < 0; i++)
                if (!pool.taken[i])
                        slot = i;
        if (slot >= 0) {
                pool.taken[slot] = true;
                pool.workers++;
        }
        pthread_mutex_unlock(&pool.lock);
        if (slot < 0) {
                debug("no fallback worker free", "the process has MAX_WORKERS");
                return false;
        }
        f->slot = slot;
        pthread_t t;
        pthread_attr_t attr;
        sigset_t all, old;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);   /* nobody waits for it: it may hang in a driver */
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);   /* the host's signals are not its */
        int r = pthread_create(&t, &attr, worker, f);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        pthread_attr_destroy(&attr);
        if (r) {
                pthread_mutex_lock(&pool.lock);
                pool.taken[slot] = false;
                pool.workers--;
                pthread_mutex_unlock(&pool.lock);
                return false;
        }
        f->running = true;
        return true;
}

/* The fallback of the context, made if need be (ctx.lock held); its worker starts with its first job. */
static struct fallback *fallback_of(struct ctx *x) {
        if (x->fb || x->stopping)
                return x->fb;
        struct fallback *f = calloc(1, sizeof *f);
        if (!f)
                return NULL;
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_mutex_init(&f->lock, NULL);
        pthread_cond_init(&f->more, &ca);
        pthread_condattr_destroy(&ca);
        f->x = x;
        f->count_names = x->fb_count;
        memcpy(f->names, x->fb_names, sizeof f->names);
        for (int i = 0; i < MAX_FALLBACKS; i++)
                f->sub[i].owner = f;
        f->props = copy_props(x->props);
        snprintf(f->device, sizeof f->device, "%s", x->device);
        memcpy(f->open_device, f->device, sizeof f->open_device);
        return x->fb = f;
}

static bool queue(struct ctx *x, struct job j) {
        struct fallback *f = fallback_of(x);
        if (!f)
                return false;
        pthread_mutex_lock(&f->lock);
        /* a cancel needs no worker started: with none, no driver is open, so none plays it */
        bool room = f->count < FALLBACK_QUEUE && (f->running || (j.kind != JOB_CANCEL && start_worker(f)));
        if (room) {
                f->jobs[(f->head + f->count++) % FALLBACK_QUEUE] = j;
                pthread_cond_signal(&f->more);
        }
        pthread_mutex_unlock(&f->lock);
        return room;
}

bool fallback_play(struct ctx *x, struct play *pl) {
        if (!pl->props || !queue(x, (struct job) { JOB_PLAY, pl->ca_id, pl->serial, pl->born_ns, pl->props }))
                return false;
        pl->props = NULL;   /* the job's now */
        pl->state = FALLBACK;
        pl->fb_due_ns = pl->born_ns + FALLBACK_LATE_NS;
        if (!x->fb_due_ns || pl->fb_due_ns < x->fb_due_ns)
                x->fb_due_ns = pl->fb_due_ns;
        wake_reader(x);   /* it keeps the deadline */
        debug("playing through the fallback", NULL);
        return true;
}

void fallback_cache(struct ctx *x, ca_proplist *props) {
        if (!queue(x, (struct job) { JOB_CACHE, 0, 0, 0, props }) && props)
                ca_proplist_destroy(props);
}

void fallback_cancel(struct ctx *x, uint32_t id) {
        if (x->fb)
                queue(x, (struct job) { JOB_CANCEL, id, 0, 0, NULL });
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
        uint64_t now = now_ns();
        for (unsigned i = 0; i < n; i++)
                for (struct play *pl = x->plays; pl; pl = pl->next)
                        if (pl->serial == results[i].serial) {
                                if (pl->state == FALLBACK && results[i].accepted) {
                                        pl->fb_taken = true;
                                        pl->fb_due_ns = now + SOUND_MAX_NS + VOICE_GRACE_NS;   /* its callback comes by then */
                                } else if (pl->state == FALLBACK) {
                                        play_finish(x, pl, results[i].code);
                                        play_release(x, pl);
                                }
                                break;
                        }
        free(results);
}

int fallback_deadlines(struct ctx *x) {
        uint64_t now = now_ns();
        if (!x->fb_due_ns)
                return -1;
        if (now >= x->fb_due_ns) {
                uint64_t due = 0;
                for (struct play *pl = x->plays, *n; pl; pl = n) {
                        n = pl->next;
                        if (pl->state != FALLBACK)
                                continue;
                        if (pl->fb_due_ns > now) {
                                due = !due || pl->fb_due_ns < due ? pl->fb_due_ns : due;
                                continue;
                        }
                        bool taken = pl->fb_taken;
                        debug(taken ? "the fallback's driver never called back" : "the fallback did not take it in time", NULL);
                        play_finish(x, pl, taken ? CA_ERROR_IO : CA_ERROR_NOTAVAILABLE);
                        play_release(x, pl);
                }
                x->fb_due_ns = due;
                if (!due)
                        return -1;
        }
        return (int) ((x->fb_due_ns - now) / MS) + 1;
}

void fallback_close(struct ctx *x) {
        struct fallback *f = x->fb;
        if (!f)
                return;
        x->fb = NULL;
        pthread_mutex_lock(&f->lock);
        f->x = NULL;
        f->closing = true;
        bool running = f->running;
        pthread_cond_signal(&f->more);
        pthread_mutex_unlock(&f->lock);
        if (!running)
                fallback_free(f);   /* no worker: nothing else refers to it (its drivers closed when it left) */
}
