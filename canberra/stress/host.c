/* canberra-host: a host process for cued's libcanberra plug-in, as GNOME Shell is one: real
 * libcanberra (CANBERRA_DRIVER=cued,stressfb), contexts and threads calling it, cued (real,
 * or canberra/stress/fake-cued in a hostile mode) started, stopped and restarted under it.
 * Every call is timed in this process; every accepted play must get exactly one callback,
 * and before the contexts are destroyed (--settle seconds after the last play). Prints one
 * JSON object. Run inside a mount namespace where libcanberra's driver directory holds the
 * plug-in and libcanberra-stressfb.so (the Swift tests' CanberraSandbox, bench's sandbox).
 *
 *   canberra-host [--fake MODE --fake-bin PATH | --cued "BIN\nARG…"] --socket PATH [options]
 *   (--cued: cued's command, one word a line, so that a path may hold a space)
 *   --plays N --threads T --contexts C --gap-us U --cancel PCT --playing PCT --file PCT
 *   --missing PCT (plays of a sound or file the fake does not have) --settle S
 *   --restart-every K (kill cued, SIGKILL and SIGTERM in turn, and start it again)
 *   --stop-at K --stop-ms MS (SIGSTOP cued at the K-th play for MS; --stop-delay-ms D: D ms after it)
 *   --recreate-every K (destroy a context with its plays pending and make a new one)
 *   --destroy-in-callback N (N contexts each destroyed from its play's callback)
 *   --event NAME --file-path PATH (what is played; default event "pop"; %d in NAME: the context's index)
 *   --own-context (thread i plays on context i mod C, starting i * gap / T later: a soak's steady pace)
 *   --plays-out PATH (a line a play: id context call-ns return code callback-ns)
 *   --figures-every K (the process's RSS, threads and descriptors every K plays, in the JSON)
 *   --no-cued 1 (nothing listens on the socket: every play goes to the fallback, as with cued not running)
 *   --event-per-play 1 (play K's sound is named pK: the fake cued's FAKE_CUED_LOG says which plays it took)
 *   --slow-at K --slow-ms MS (play K's callback sleeps MS: an app's slow callback)
 * The JSON has each accepted play's time from its call to its callback (callback_ms), the plays
 * without a callback 5 s after their call (late_5s) and the plays heard twice (played_twice). */
#define _GNU_SOURCE
#include <canberra.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "host.h"

struct options opt = { .plays = 1000, .threads = 1, .contexts = 1, .settle = 10, .event = "pop" };
atomic_int cued_pid, restarts;
static struct rec *recs;
static atomic_int next_play, caller_thread_callbacks, extra_callbacks;
enum { EXTRA_IDS = 0x7fff0000 };   /* plays outside the numbered run (pending at a destroy from a callback) */
static struct samples s_callback = { PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, "callback" };
static struct samples s_play = { PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, "play" }, s_cancel = { PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, "cancel" },
                      s_playing = { PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, "playing" };
static ca_context **contexts;
static pthread_rwlock_t contexts_lock = PTHREAD_RWLOCK_INITIALIZER;   /* written only to replace one */
static __thread bool in_call;

static void on_finish(ca_context *c, uint32_t id, int code, void *userdata) {
        (void) c;
        (void) userdata;
        if (in_call)
                atomic_fetch_add(&caller_thread_callbacks, 1);
        if (id >= EXTRA_IDS)
                atomic_fetch_add(&extra_callbacks, 1);
        else if (id < (uint32_t) opt.plays + 1) {
                atomic_store(&recs[id].callback_ns, now_ns());
                atomic_store(&recs[id].code, code);
                atomic_fetch_add(&recs[id].callbacks, 1);
                if (opt.slow_at && id == (uint32_t) opt.slow_at)
                        usleep((useconds_t) opt.slow_ms * 1000);
        }
}

/* ---- the host's calls ---- */

static ca_proplist *props_for(int id, int context) {
        char event[128];
        if (opt.event_per_play)
                snprintf(event, sizeof event, "p%d", id);
        else
                snprintf(event, sizeof event, opt.event, context);   /* a %d in it: the context's own sound */
        ca_proplist *p;
        ca_proplist_create(&p);
        bool missing = opt.missing_pct && rand() % 100 < opt.missing_pct;
        if (opt.file && opt.file_pct && (id % 100) < opt.file_pct) {
                ca_proplist_sets(p, CA_PROP_MEDIA_FILENAME, missing ? "/nonexistent/missing.wav" : opt.file);
                if (rand() % 2)
                        ca_proplist_sets(p, CA_PROP_EVENT_ID, "missing-event");   /* theme lookup first, the file as the retry */
        } else
                ca_proplist_sets(p, CA_PROP_EVENT_ID, missing ? "missing-sound" : event);
        return p;
}

static ca_context *new_context(int i) {
        ca_context *c;
        char name[32];
        snprintf(name, sizeof name, "stress-%d", i);
        ca_context_create(&c);
        ca_context_change_props(c, CA_PROP_APPLICATION_NAME, name, NULL);
        ca_context_open(c);
        return c;
}

static void *worker(void *arg) {
        unsigned seed = (unsigned) (uintptr_t) arg;
        int self = (int) (uintptr_t) arg - 1;
        if (opt.own_context && opt.gap_us)
                usleep((useconds_t) (self * (opt.gap_us / opt.threads)));   /* staggered */
        for (;;) {
                int id = atomic_fetch_add(&next_play, 1);
                if (id > opt.plays)
                        break;
                events_at(id);
                if (opt.figures_every && id % opt.figures_every == 0)
                        sample_figures(id);
                int ci = opt.own_context ? self % opt.contexts : (int) (rand_r(&seed) % (unsigned) opt.contexts);
                if (opt.recreate_every && id % opt.recreate_every == 0) {
                        pthread_rwlock_wrlock(&contexts_lock);
                        ca_context_destroy(contexts[ci]);   /* its pending plays end now (CA_ERROR_DESTROYED) */
                        contexts[ci] = new_context(ci);
                        pthread_rwlock_unlock(&contexts_lock);
                }
                pthread_rwlock_rdlock(&contexts_lock);
                ca_context *c = contexts[ci];
                ca_proplist *p = props_for(id, ci);
                recs[id].context = ci;
                recs[id].call_ns = now_ns();
                in_call = true;
                double t = now_us();
                int r = ca_context_play_full(c, (uint32_t) id, p, on_finish, NULL);
                add(&s_play, now_us() - t);
                in_call = false;
                ca_proplist_destroy(p);
                recs[id].ret = r;
                recs[id].accepted = r == CA_SUCCESS;
                if (opt.cancel_pct && (int) (rand_r(&seed) % 100) < opt.cancel_pct) {
                        uint32_t victim = (uint32_t) (id - (int) (rand_r(&seed) % 8));
                        in_call = true;
                        t = now_us();
                        ca_context_cancel(c, victim > 0 ? victim : 1);
                        add(&s_cancel, now_us() - t);
                        in_call = false;
                }
                if (opt.playing_pct && (int) (rand_r(&seed) % 100) < opt.playing_pct) {
                        int playing = 0;
                        in_call = true;
                        t = now_us();
                        ca_context_playing(c, (uint32_t) id, &playing);
                        add(&s_playing, now_us() - t);
                        in_call = false;
                }
                pthread_rwlock_unlock(&contexts_lock);
                if (opt.gap_us)
                        usleep((useconds_t) opt.gap_us);
        }
        return NULL;
}

/* ---- a context destroyed from its own callback ---- */

struct self_destroy {
        ca_context *c;
        atomic_int done;
};

static void destroy_me(ca_context *c, uint32_t id, int code, void *userdata) {
        struct self_destroy *s = userdata;
        (void) id;
        (void) code;
        ca_context_destroy(c);
        atomic_store(&s->done, 1);
}

static int destroy_in_callbacks(int n) {
        int ended = 0;
        for (int i = 0; i < n; i++) {
                struct self_destroy s = { .c = new_context(1000 + i) };
                ca_proplist *p = props_for(0, 0);
                for (int k = 0; k < 3; k++)   /* plays still pending when it goes */
                        ca_context_play_full(s.c, (uint32_t) (EXTRA_IDS + k), p, on_finish, NULL);
                int r = ca_context_play_full(s.c, 1, p, destroy_me, &s);
                ca_proplist_destroy(p);
                if (r != CA_SUCCESS) {
                        ca_context_destroy(s.c);
                        continue;
                }
                for (int w = 0; w < 2000 && !atomic_load(&s.done); w++)
                        usleep(1000);
                ended += atomic_load(&s.done);
                if (!atomic_load(&s.done))
                        return -1;   /* never called back: the context is lost, stop here */
        }
        return ended;
}

static int int_arg(const char *s) { return (int) strtol(s, NULL, 10); }

static void *nothing(void *arg) { return arg; }

int main(int argc, char **argv) {
        for (int i = 1; i + 1 < argc; i += 2) {
                const char *k = argv[i], *v = argv[i + 1];
#define INT(name, field) else if (!strcmp(k, name)) opt.field = int_arg(v);
#define STR(name, field) else if (!strcmp(k, name)) opt.field = v;
                if (!strcmp(k, "--settle"))
                        opt.settle = strtod(v, NULL);
                STR("--fake", fake) STR("--fake-bin", fake_bin) STR("--cued", cued) STR("--socket", socket) STR("--event", event)
                STR("--file-path", file) STR("--plays-out", plays_out)
                INT("--plays", plays) INT("--threads", threads) INT("--contexts", contexts) INT("--gap-us", gap_us)
                INT("--cancel", cancel_pct) INT("--playing", playing_pct) INT("--file", file_pct) INT("--missing", missing_pct)
                INT("--restart-every", restart_every) INT("--stop-at", stop_at) INT("--stop-ms", stop_ms)
                INT("--recreate-every", recreate_every) INT("--destroy-in-callback", destroy_in_callback)
                INT("--own-context", own_context) INT("--figures-every", figures_every) INT("--no-cued", no_cued)
                INT("--event-per-play", event_per_play) INT("--slow-at", slow_at) INT("--slow-ms", slow_ms)
                INT("--stop-delay-ms", stop_delay_ms)
                else {
                        fprintf(stderr, "canberra-host: unknown option %s\n", k);
                        return 64;
                }
#undef INT
#undef STR
        }
        if (!opt.socket || (!opt.fake && !opt.cued && !opt.no_cued) || (opt.fake && !opt.fake_bin) || opt.threads < 1 || opt.contexts < 1) {
                fprintf(stderr, "usage: canberra-host (--fake MODE --fake-bin PATH | --cued \"BIN\\nARG…\") --socket PATH [options]\n");
                return 64;
        }
        signal(SIGPIPE, SIG_IGN);
        setenv("CUED_SOCKET", opt.socket, 1);
        /* HOST_DRIVER=stressfb: the same load on the stand-in driver alone (what libcanberra and the machine cost). */
        setenv("CANBERRA_DRIVER", getenv("HOST_DRIVER") ? getenv("HOST_DRIVER") : "cued,stressfb", 1);
        recs = calloc((size_t) opt.plays + 2, sizeof *recs);
        atomic_store(&next_play, 1);
        atomic_store(&cued_pid, opt.no_cued ? 0 : spawn_cued());
        if (!opt.no_cued && !wait_listening()) {
                fprintf(stderr, "canberra-host: %s never listened\n", opt.socket);
                stop_cued(SIGKILL);
                return 1;
        }

        /* The process before any context, while they run, and once they are gone (the fallback's
         * threads end on their own, just after: waited for, at most 5 s). */
        long rss0, rss1, rss2;
        int threads0, threads1, threads2, fds0, fds1, fds2;
        pthread_t warm;   /* a thread first: a sanitizer starts a thread of its own at the first one */
        pthread_create(&warm, NULL, nothing, NULL);
        pthread_join(warm, NULL);
        self_figures(&rss0, &threads0, &fds0);
        contexts = calloc((size_t) opt.contexts, sizeof *contexts);
        for (int i = 0; i < opt.contexts; i++)
                contexts[i] = new_context(i);
        double t0 = now_us();
        pthread_t *ts = calloc((size_t) opt.threads, sizeof *ts);
        for (int i = 0; i < opt.threads; i++)
                pthread_create(&ts[i], NULL, worker, (void *) (uintptr_t) (i + 1));
        for (int i = 0; i < opt.threads; i++)
                pthread_join(ts[i], NULL);
        free(ts);
        double ran = now_us() - t0;

        /* Every accepted play ends by itself (played, re-routed, failed), not at destroy. */
        double deadline = now_us() + opt.settle * 1e6;
        int pending = 0;
        do {
                pending = 0;
                for (int id = 1; id <= opt.plays; id++)
                        pending += recs[id].accepted && atomic_load(&recs[id].callbacks) == 0;
                if (pending)
                        usleep(10000);
        } while (pending && now_us() < deadline);
        double settled = now_us() - t0 - ran;
        self_figures(&rss1, &threads1, &fds1);
        for (int i = 0; i < opt.contexts; i++)
                ca_context_destroy(contexts[i]);
        free(contexts);
        int self_destroyed = opt.destroy_in_callback ? destroy_in_callbacks(opt.destroy_in_callback) : 0;
        for (int i = 0; i < 500; i++) {
                self_figures(&rss2, &threads2, &fds2);
                if (threads2 <= threads0 && fds2 <= fds0)
                        break;
                usleep(10000);
        }
        stop_cued(SIGTERM);

        int accepted = 0, once = 0, twice = 0, none = 0, late = 0, codes[40] = { 0 }, rets[40] = { 0 };
        for (int id = 1; id <= opt.plays; id++) {
                int n = atomic_load(&recs[id].callbacks);
                uint64_t cb = atomic_load(&recs[id].callback_ns);
                if (recs[id].accepted && n) {
                        add(&s_callback, (double) (cb - recs[id].call_ns) / 1e3);
                }
                late += recs[id].accepted && (!n || cb - recs[id].call_ns > 5000 * 1000000ull);
                rets[-recs[id].ret < 40 && recs[id].ret <= 0 ? -recs[id].ret : 39]++;
                if (!recs[id].accepted) {
                        twice += n;   /* a refused play gets no callback */
                        continue;
                }
                accepted++;
                once += n == 1;
                twice += n > 1;
                none += n == 0;
                if (n) {
                        int c = -atomic_load(&recs[id].code);
                        codes[c >= 0 && c < 40 ? c : 39]++;
                }
        }
        printf("{\"plays\": %d, \"accepted\": %d, \"callbacks_once\": %d, \"callbacks_extra\": %d, \"never_called_back\": %d, "
               "\"pending_at_destroy\": %d, \"caller_thread_callbacks\": %d, \"restarts\": %d, \"self_destroyed\": %d, "
               "\"self_destroy_pending_callbacks\": %d, \"fallback_plays\": %d, \"late_5s\": %d, \"played_twice\": %d, \"fallback_opens\": %d, \"ran_s\": %.3f, "
               "\"settled_s\": %.3f, ",
               opt.plays, accepted, once, twice, none, pending, atomic_load(&caller_thread_callbacks), atomic_load(&restarts), self_destroyed,
               atomic_load(&extra_callbacks), fallback_plays(), late, played_twice(), fallback_opens(), ran / 1e6, settled / 1e6);
        printf("\"returns\": {");
        for (int i = 0, first = 1; i < 40; i++)
                if (rets[i]) {
                        printf("%s\"%d\": %d", first ? "" : ", ", -i, rets[i]);
                        first = 0;
                }
        printf("}, \"codes\": {");
        for (int i = 0, first = 1; i < 40; i++)
                if (codes[i]) {
                        printf("%s\"%d\": %d", first ? "" : ", ", -i, codes[i]);
                        first = 0;
                }
        printf("}, \"figures\": ");
        print_figures();
        printf(", \"rss_kb\": [%ld, %ld, %ld], \"threads\": [%d, %d, %d], \"fds\": [%d, %d, %d], ", rss0, rss1, rss2, threads0, threads1,
               threads2, fds0, fds1, fds2);
        print_samples(&s_play);
        printf(", ");
        print_samples(&s_cancel);
        printf(", ");
        print_samples(&s_playing);
        printf(", ");
        print_samples(&s_callback);
        printf("}\n");
        if (opt.plays_out) {
                FILE *f = fopen(opt.plays_out, "w");
                for (int id = 1; f && id <= opt.plays; id++)
                        fprintf(f, "%d %d %llu %d %d %llu\n", id, recs[id].context, (unsigned long long) recs[id].call_ns, recs[id].ret,
                                atomic_load(&recs[id].code), (unsigned long long) atomic_load(&recs[id].callback_ns));
                if (f)
                        fclose(f);
        }
        free(recs);
        free(s_play.us);
        free(s_cancel.us);
        free(s_playing.us);
        free(s_callback.us);
        return 0;
}
