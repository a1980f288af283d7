/* Tells the machine's stalls from a program's: one SCHED_FIFO 99 thread pinned to
 * each CPU wakes every half millisecond and prints how late it woke when that is
 * 1 ms or more. Nothing but the kernel with interrupts off or a hypervisor that
 * does not run the virtual CPU keeps such a thread from running, so a late wake is
 * a stall every thread on that CPU suffered (the tests' StallWatch, in C for the
 * Python soak: a Python thread would wait on the interpreter's lock).
 *
 *   stallwatch            prints "CPU AT_NS LATE_NS" lines (CLOCK_MONOTONIC), until killed;
 *                         the first line is "realtime N" (threads that got SCHED_FIFO 99).
 *
 * Build: gcc -O2 -pthread -o stallwatch bench/stallwatch.c
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#define PERIOD_NS 500000ULL
#define NOTE_NS 1000000ULL

static atomic_int started, realtime;
static pthread_mutex_t out = PTHREAD_MUTEX_INITIALIZER;

static uint64_t now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void *watch(void *arg) {
    int cpu = (int)(intptr_t)arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    struct sched_param p = { .sched_priority = 99 };
    if (sched_setaffinity(0, sizeof set, &set) == 0 && sched_setscheduler(0, SCHED_FIFO, &p) == 0)
        atomic_fetch_add(&realtime, 1);
    atomic_fetch_add(&started, 1);
    uint64_t next = now();
    for (;;) {
        next += PERIOD_NS;
        struct timespec ts = { .tv_sec = next / 1000000000ULL, .tv_nsec = next % 1000000000ULL };
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0) {}
        uint64_t woke = now();
        if (woke > next + NOTE_NS) {
            pthread_mutex_lock(&out);
            printf("%d %llu %llu\n", cpu, (unsigned long long)next, (unsigned long long)(woke - next));
            fflush(stdout);
            pthread_mutex_unlock(&out);
            next = woke;
        }
    }
    return NULL;
}

int main(void) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus < 1) cpus = 1;
    for (long c = 0; c < cpus; c++) {
        pthread_t t;
        pthread_create(&t, NULL, watch, (void *)(intptr_t)c);
    }
    while (atomic_load(&started) < cpus) usleep(1000);
    pthread_mutex_lock(&out);
    printf("realtime %d\n", atomic_load(&realtime));
    fflush(stdout);
    pthread_mutex_unlock(&out);
    for (;;) pause();
}
