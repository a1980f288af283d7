/* libcanberra-stressfb.so: a libcanberra driver for the plug-in's stress, standing in for the
 * driver cued's plug-in falls back to (CANBERRA_DRIVER=cued,stressfb). A play "sounds" for
 * STRESSFB_PLAY_MS (default 20) and its callback comes from this driver's own thread, as
 * pulse's does; each play's id is appended to the file STRESSFB_LOG as a line, so the host
 * knows which plays were heard through the fallback. STRESSFB_BLOCK_MS makes every play call
 * block that long first (the pulse driver blocked its caller 30 s with its server stopped),
 * STRESSFB_OPEN_BLOCK_MS each open (STRESSFB_OPEN_FDS=N: holding N descriptors meanwhile, as
 * pulse's open held its socket and event descriptors while its server hung); STRESSFB_OPEN_FAIL=1 makes every open fail (each attempt
 * is logged as a line `open`). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../canberra-private.h"

#define EXPORT __attribute__((visibility("default")))

struct pending {
        struct pending *next;
        uint32_t id;
        ca_finish_callback_t cb;
        void *userdata;
        uint64_t due;
        int code;          /* set when canceled or destroyed */
};

struct fb {
        pthread_mutex_t lock;
        pthread_cond_t changed;
        struct pending *list;
        bool stopping;
        pthread_t thread;
        ca_context *context;
        int log;
        uint64_t play_ns, block_ns;
};

static uint64_t now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec;
}

static uint64_t env_ms(const char *name, uint64_t fallback) {
        const char *v = getenv(name);
        return (v && *v ? strtoull(v, NULL, 10) : fallback) * 1000000ull;
}

/* Calls back what is due (or canceled), outside the lock. */
static void *run(void *arg) {
        struct fb *f = arg;
        pthread_mutex_lock(&f->lock);
        for (;;) {
                uint64_t now = now_ns(), next = UINT64_MAX;
                struct pending *ready = NULL;
                for (struct pending **q = &f->list; *q;) {
                        struct pending *p = *q;
                        if (p->code || p->due <= now || f->stopping) {
                                *q = p->next;
                                if (f->stopping && !p->code && p->due > now)
                                        p->code = CA_ERROR_DESTROYED;
                                p->next = ready;
                                ready = p;
                        } else {
                                if (p->due < next)
                                        next = p->due;
                                q = &p->next;
                        }
                }
                if (ready) {
                        pthread_mutex_unlock(&f->lock);
                        for (struct pending *p = ready, *n; p; p = n) {
                                n = p->next;
                                if (p->cb)
                                        p->cb(f->context, p->id, p->code, p->userdata);
                                free(p);
                        }
                        pthread_mutex_lock(&f->lock);
                        continue;
                }
                if (f->stopping)
                        break;
                if (next == UINT64_MAX)
                        pthread_cond_wait(&f->changed, &f->lock);
                else {
                        struct timespec ts = { .tv_sec = (time_t) (next / 1000000000ull), .tv_nsec = (long) (next % 1000000000ull) };
                        pthread_cond_timedwait(&f->changed, &f->lock, &ts);
                }
        }
        pthread_mutex_unlock(&f->lock);
        return NULL;
}

static void sleep_ns(uint64_t ns) {
        struct timespec ts = { .tv_sec = (time_t) (ns / 1000000000ull), .tv_nsec = (long) (ns % 1000000000ull) };
        while (nanosleep(&ts, &ts) < 0)
                ;
}

EXPORT int stressfb_driver_open(ca_context *c) {
        const char *log = getenv("STRESSFB_LOG");
        int fd = log ? open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600) : -1;
        if (fd >= 0) {
                if (write(fd, "open\n", 5) != 5)
                        perror("stressfb: log");
                close(fd);
        }
        uint64_t block = env_ms("STRESSFB_OPEN_BLOCK_MS", 0);
        if (block) {
                int held[16], n = getenv("STRESSFB_OPEN_FDS") ? atoi(getenv("STRESSFB_OPEN_FDS")) : 0;
                n = n < 0 ? 0 : n > 16 ? 16 : n;
                for (int i = 0; i < n; i++)
                        held[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
                sleep_ns(block);
                for (int i = 0; i < n; i++)
                        if (held[i] >= 0)
                                close(held[i]);
        }
        if (getenv("STRESSFB_OPEN_FAIL"))
                return CA_ERROR_NOTAVAILABLE;
        struct fb *f = calloc(1, sizeof *f);
        pthread_condattr_t ca;
        if (!f)
                return CA_ERROR_OOM;
        f->context = c;
        f->play_ns = env_ms("STRESSFB_PLAY_MS", 20);
        f->block_ns = env_ms("STRESSFB_BLOCK_MS", 0);
        f->log = log ? open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600) : -1;
        pthread_mutex_init(&f->lock, NULL);
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&f->changed, &ca);
        pthread_condattr_destroy(&ca);
        if (pthread_create(&f->thread, NULL, run, f)) {
                free(f);
                return CA_ERROR_OOM;
        }
        c->private = f;
        return CA_SUCCESS;
}

EXPORT int stressfb_driver_destroy(ca_context *c) {
        struct fb *f = c->private;
        pthread_mutex_lock(&f->lock);
        f->stopping = true;
        pthread_cond_broadcast(&f->changed);
        pthread_mutex_unlock(&f->lock);
        pthread_join(f->thread, NULL);
        if (f->log >= 0)
                close(f->log);
        pthread_cond_destroy(&f->changed);
        pthread_mutex_destroy(&f->lock);
        free(f);
        c->private = NULL;
        return CA_SUCCESS;
}

EXPORT int stressfb_driver_change_device(ca_context *c, const char *device) {
        (void) c;
        (void) device;
        return CA_SUCCESS;
}

EXPORT int stressfb_driver_change_props(ca_context *c, ca_proplist *changed, ca_proplist *merged) {
        (void) c;
        (void) changed;
        (void) merged;
        return CA_SUCCESS;
}

EXPORT int stressfb_driver_play(ca_context *c, uint32_t id, ca_proplist *p, ca_finish_callback_t cb, void *userdata) {
        struct fb *f = c->private;
        (void) p;
        if (f->block_ns)
                sleep_ns(f->block_ns);
        struct pending *e = calloc(1, sizeof *e);
        if (!e)
                return CA_ERROR_OOM;
        *e = (struct pending) { .id = id, .cb = cb, .userdata = userdata, .due = now_ns() + f->play_ns };
        if (f->log >= 0) {
                char line[24];
                int n = snprintf(line, sizeof line, "%u\n", id);
                if (write(f->log, line, (size_t) n) != n)
                        perror("stressfb: log");
        }
        pthread_mutex_lock(&f->lock);
        e->next = f->list;
        f->list = e;
        pthread_cond_broadcast(&f->changed);
        pthread_mutex_unlock(&f->lock);
        return CA_SUCCESS;
}

EXPORT int stressfb_driver_cancel(ca_context *c, uint32_t id) {
        struct fb *f = c->private;
        pthread_mutex_lock(&f->lock);
        for (struct pending *p = f->list; p; p = p->next)
                if (p->id == id && !p->code)
                        p->code = CA_ERROR_CANCELED;
        pthread_cond_broadcast(&f->changed);
        pthread_mutex_unlock(&f->lock);
        return CA_SUCCESS;
}

EXPORT int stressfb_driver_cache(ca_context *c, ca_proplist *p) {
        (void) c;
        (void) p;
        return CA_SUCCESS;
}

EXPORT int stressfb_driver_playing(ca_context *c, uint32_t id, int *playing) {
        struct fb *f = c->private;
        *playing = 0;
        pthread_mutex_lock(&f->lock);
        for (struct pending *p = f->list; p; p = p->next)
                if (p->id == id && !p->code)
                        *playing = 1;
        pthread_mutex_unlock(&f->lock);
        return CA_SUCCESS;
}
