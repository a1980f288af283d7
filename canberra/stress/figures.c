/* canberra-host: the calls' times and the process's own figures (RSS, threads, descriptors). */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "host.h"

uint64_t now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec;
}

double now_us(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

void add(struct samples *s, double us) {
        pthread_mutex_lock(&s->lock);
        if (s->n == s->cap) {
                s->cap = s->cap ? s->cap * 2 : 4096;
                s->us = realloc(s->us, s->cap * sizeof *s->us);
        }
        s->us[s->n++] = us;
        pthread_mutex_unlock(&s->lock);
}

static int cmp(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return x < y ? -1 : x > y;
}

void print_samples(struct samples *s) {
        if (s->n)
                qsort(s->us, s->n, sizeof *s->us, cmp);
#define AT(q) (s->n ? s->us[(size_t) ((q) * (double) (s->n - 1))] : 0)
        printf("\"%s\": {\"n\": %zu, \"p50_us\": %.1f, \"p99_us\": %.1f, \"p999_us\": %.1f, \"max_us\": %.1f}", s->name, s->n, AT(0.5), AT(0.99),
               AT(0.999), s->n ? s->us[s->n - 1] : 0);
#undef AT
}

/* --figures-every: (play, RSS KiB, threads, descriptors) while it runs. */
static struct { pthread_mutex_t lock; long (*rows)[4]; int n; } figures = { PTHREAD_MUTEX_INITIALIZER, NULL, 0 };

void sample_figures(int k) {
        long rss;
        int threads, fds;
        self_figures(&rss, &threads, &fds);
        pthread_mutex_lock(&figures.lock);
        figures.rows = realloc(figures.rows, (size_t) (figures.n + 1) * sizeof *figures.rows);
        figures.rows[figures.n][0] = k;
        figures.rows[figures.n][1] = rss;
        figures.rows[figures.n][2] = threads;
        figures.rows[figures.n++][3] = fds;
        pthread_mutex_unlock(&figures.lock);
}

void print_figures(void) {
        printf("[");
        for (int i = 0; i < figures.n; i++)
                printf("%s[%ld, %ld, %ld, %ld]", i ? ", " : "", figures.rows[i][0], figures.rows[i][1], figures.rows[i][2], figures.rows[i][3]);
        printf("]");
        free(figures.rows);
}

void self_figures(long *rss_kb, int *threads, int *fds) {
        char line[256];
        FILE *f = fopen("/proc/self/status", "r");
        *rss_kb = 0;
        *threads = 0;
        while (f && fgets(line, sizeof line, f)) {
                sscanf(line, "VmRSS: %ld", rss_kb);
                sscanf(line, "Threads: %d", threads);
        }
        if (f)
                fclose(f);
        *threads -= atomic_load(&host_timers);
        *fds = 0;
        DIR *d = opendir("/proc/self/fd");
        for (struct dirent *e; d && (e = readdir(d));)
                *fds += e->d_name[0] != '.';
        if (d)
                closedir(d);
        (*fds)--;   /* the directory's own */
}

/* The ids in a log, one a line after `prefix` (marks `bit` in seen[id]); how many. */
static int read_ids(const char *log, const char *prefix, char *seen, char bit) {
        FILE *f = log ? fopen(log, "r") : NULL;
        char line[128];
        int n = 0;
        size_t k = strlen(prefix);
        while (f && fgets(line, sizeof line, f)) {
                unsigned id;
                if (strncmp(line, prefix, k) || sscanf(line + k, "%u", &id) != 1 || id < 1 || id > (unsigned) opt.plays || (seen[id] & bit))
                        continue;
                seen[id] |= bit;
                n++;
        }
        if (f)
                fclose(f);
        return n;
}

/* The plays of this run the fallback driver (libcanberra-stressfb.so) took, from its log. */
int fallback_plays(void) {
        char *seen = calloc((size_t) opt.plays + 2, 1);
        int n = read_ids(getenv("STRESSFB_LOG"), "", seen, 1);
        free(seen);
        return n;
}

/* The fallback driver's opens tried (its log's `open` lines). */
int fallback_opens(void) {
        const char *log = getenv("STRESSFB_LOG");
        FILE *f = log ? fopen(log, "r") : NULL;
        char line[128];
        int n = 0;
        while (f && fgets(line, sizeof line, f))
                n += !strcmp(line, "open\n");
        if (f)
                fclose(f);
        return n;
}

/* Plays the fake cued started a voice for (FAKE_CUED_LOG, with --event-per-play) that the
 * fallback played too: heard twice. */
int played_twice(void) {
        char *seen = calloc((size_t) opt.plays + 2, 1);
        read_ids(getenv("STRESSFB_LOG"), "", seen, 1);
        read_ids(getenv("FAKE_CUED_LOG"), "p", seen, 2);
        int n = 0;
        for (int id = 1; id <= opt.plays; id++)
                n += seen[id] == 3;
        free(seen);
        return n;
}

