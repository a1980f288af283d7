/* canberra-host: cued under the host, real or fake: started, stopped (SIGSTOP) and restarted. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "host.h"

extern char **environ;

int spawn_cued(void) {
        char *argv[64];
        int n = 0;
        char *copy = NULL;
        if (opt.fake) {
                argv[n++] = (char *) opt.fake_bin;
                argv[n++] = (char *) opt.socket;
                argv[n++] = (char *) opt.fake;
        } else {
                /* One word a line: a path may hold a space (a checkout's does). */
                copy = strdup(opt.cued);
                for (char *save = NULL, *w = strtok_r(copy, "\n", &save); w && n < 60; w = strtok_r(NULL, "\n", &save))
                        argv[n++] = w;
                argv[n++] = "--socket";
                argv[n++] = (char *) opt.socket;
        }
        argv[n] = NULL;
        pid_t pid;
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        int r = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        if (r) {
                fprintf(stderr, "canberra-host: cannot start %s: %s\n", argv[0], strerror(r));
                exit(1);
        }
        free(copy);  /* after the message: argv's words are in it */
        return pid;
}

/* Until the socket accepts (at most 10 s). */
bool wait_listening(void) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", opt.socket);
        for (int i = 0; i < 2000; i++) {
                int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                bool ok = connect(fd, (struct sockaddr *) &sa, sizeof sa) == 0;
                close(fd);
                if (ok)
                        return true;
                usleep(5000);
        }
        return false;
}

void stop_cued(int sig) {
        pid_t pid = atomic_exchange(&cued_pid, 0);
        if (pid > 0) {
                kill(pid, SIGCONT);
                kill(pid, sig);
                waitpid(pid, NULL, 0);
        }
}

atomic_int host_timers;   /* the stop's own thread, while it sleeps: not counted among the plug-in's threads */

void *resume_later(void *arg) {
        if (!opt.stop_ms)
                return NULL;
        usleep((useconds_t) opt.stop_ms * 1000);
        pid_t pid = atomic_load(&cued_pid);
        if (pid > 0)
                kill(pid, SIGCONT);
        if (arg)
                atomic_fetch_sub(&host_timers, 1);
        return NULL;
}

/* --stop-delay-ms: cued stopped that long after the play (its voice sounding, nothing unanswered). */
static void *stop_later(void *arg) {
        usleep((useconds_t) opt.stop_delay_ms * 1000);
        pid_t pid = atomic_load(&cued_pid);
        if (pid > 0)
                kill(pid, SIGSTOP);
        return resume_later(arg);
}

/* What happens to cued at the k-th play. */
void events_at(int k) {
        if (opt.restart_every && k % opt.restart_every == 0) {
                stop_cued(atomic_fetch_add(&restarts, 1) % 2 ? SIGTERM : SIGKILL);
                atomic_store(&cued_pid, spawn_cued());
        }
        if (opt.stop_at && k == opt.stop_at) {
                pthread_t t;
                if (!opt.stop_delay_ms)
                        kill(atomic_load(&cued_pid), SIGSTOP);
                atomic_fetch_add(&host_timers, 1);
                pthread_create(&t, NULL, opt.stop_delay_ms ? stop_later : resume_later, (void *) 1);
                pthread_detach(t);
        }
}

