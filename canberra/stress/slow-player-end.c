/* slow-player-end.so: preloaded into canberra-host, it widens a race of libcanberra's alsa
 * driver that crashed the host 1 run in 181 (issue 46). The driver plays each sound on a
 * detached thread of its own (thread_func in its alsa.c); at its end the thread takes the
 * driver's lock, unlinks its play, posts the semaphore a destroy waits on, unlocks, and only
 * then returns out of the driver's code. Here each such thread waits SLOW_END_MS (default 30)
 * before that last lock, so that a destroy finds it still there, and 100 ms after the unlock
 * that follows its post, so that whatever the destroy's caller does next happens while the
 * thread is still in the driver's code: a dlclose of the driver unmapped it (SIGSEGV at an
 * address in no module, every run before subdriver.c kept the module loaded).
 *
 * It wraps pthread_create (the threads the alsa driver starts are marked), sem_post and
 * ca_mutex_lock/unlock (libcanberra's, called by the driver through its PLT). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EXPORT __attribute__((visibility("default")))

static __thread int player, posted;

struct start {
        void *(*fn)(void *);
        void *arg;
};

static void *marked(void *a) {
        struct start s = *(struct start *) a;
        free(a);
        player = 1;
        return s.fn(s.arg);
}

static void sleep_ms(long ms) {
        struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
        while (nanosleep(&ts, &ts))
                ;
}

EXPORT int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg) {
        static int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
        if (!real)
                *(void **) &real = dlsym(RTLD_NEXT, "pthread_create");
        Dl_info info;
        struct start *s;
        if (dladdr(__builtin_return_address(0), &info) && info.dli_fname && strstr(info.dli_fname, "libcanberra-alsa") &&
            (s = malloc(sizeof *s))) {
                s->fn = fn;
                s->arg = arg;
                int r = real(t, attr, marked, s);
                if (r)
                        free(s);
                return r;
        }
        return real(t, attr, fn, arg);
}

EXPORT int sem_post(sem_t *sem) {
        static int (*real)(sem_t *);
        if (!real)
                *(void **) &real = dlsym(RTLD_NEXT, "sem_post");
        posted = player;
        return real(sem);
}

typedef struct ca_mutex ca_mutex;

EXPORT void ca_mutex_lock(ca_mutex *m) {
        static void (*real)(ca_mutex *);
        static long ms = -1;
        if (!real)
                *(void **) &real = dlsym(RTLD_NEXT, "ca_mutex_lock");
        if (ms < 0)
                ms = getenv("SLOW_END_MS") ? atol(getenv("SLOW_END_MS")) : 30;
        if (player)
                sleep_ms(ms);
        real(m);
}

EXPORT void ca_mutex_unlock(ca_mutex *m) {
        static void (*real)(ca_mutex *);
        if (!real)
                *(void **) &real = dlsym(RTLD_NEXT, "ca_mutex_unlock");
        real(m);
        if (posted) {
                posted = 0;
                sleep_ms(100);
        }
}
