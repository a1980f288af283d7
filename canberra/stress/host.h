/* canberra-host's parts (host.c drives the contexts; cued-control.c starts, stops and restarts
 * cued; figures.c times the calls and reads the process's own figures). */
#ifndef CANBERRA_HOST_H
#define CANBERRA_HOST_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct rec {
        atomic_int callbacks;
        atomic_int code;
        int ret, context;
        uint64_t call_ns;
        _Atomic uint64_t callback_ns;
        bool accepted;
        atomic_bool destroyed_with;   /* its context was destroyed while it was pending */
};

struct samples {
        pthread_mutex_t lock;
        double *us;
        size_t n, cap;
        const char *name;
};

struct options {
        const char *fake, *fake_bin, *cued, *socket, *event, *file, *plays_out;
        int plays, threads, contexts, gap_us, cancel_pct, playing_pct, file_pct, missing_pct, restart_every, stop_at, stop_ms,
            recreate_every, destroy_in_callback, own_context, figures_every, no_cued, event_per_play, slow_at, slow_ms, stop_delay_ms;
        double settle;
};
extern struct options opt;
extern atomic_int cued_pid, restarts, host_timers;

/* cued-control.c */
int spawn_cued(void);
bool wait_listening(void);
void stop_cued(int sig);
void *resume_later(void *arg);
void events_at(int k);

/* figures.c */
uint64_t now_ns(void);
double now_us(void);
void add(struct samples *s, double us);
void print_samples(struct samples *s);
void self_figures(long *rss_kb, int *threads, int *fds);
void sample_figures(int k);
void print_figures(void);
int fallback_plays(void);
int played_twice(void);
int fallback_opens(void);

#endif
