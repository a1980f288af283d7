/* fake-cued: a stand-in for cued on a Unix socket, honest or hostile, for the plug-in's
 * stress (canberra/stress/host.c starts it). One poll loop, any number of connections.
 *
 *   fake-cued SOCKET MODE [END_MS]
 *
 * honest          answers as cued does: `ok NAME`, `ok events on`, `ok ID` then `end ID played`
 *                 END_MS later (default 30), at most 256 voices (a new one steals the oldest:
 *                 `end ID stolen`), `stop id N` → `ok 1` + `end N stopped-id`; a sound
 *                 named missing* is `err unknown-cue`, a file path with "missing" in it
 *                 `err bad-file not-found`
 * garbage         random bytes, newlines among them, as soon as a connection opens
 * long-line       a 1 MiB line without a newline after the greeting's replies
 * nul             replies with NUL bytes inside the line
 * fake-ends       honest, plus an `end` for a voice never started after each reply
 * dup-ends        honest, each `end` line sent twice
 * end-flood       after the greeting, `end 1 played` lines as fast as the socket takes them
 * silent          reads everything, never answers
 * deaf            never reads, never answers
 * reply-hang      answers the greeting and the first play, then reads and says nothing
 * close-mid-line  answers the greeting, then `ok 1` without its newline, and closes
 * not-played      plays are answered `err not-played shutdown cued is stopping`
 * no-end          honest but never sends an `end` line (a voice acked `ok N` that never ends)
 * unknown-retry   reads the greeting and the first play, answers the greeting, stops
 *                 reading; once the client's unread bytes stop growing (its socket buffer
 *                 full) answers the play `err unknown-cue`: the client's retry cannot be sent
 *
 * FAKE_CUED_LOG=PATH: each play answered with a voice appends its line's sound name there (the
 * host names each play's sound after its id, so a play cued took and the fallback played too is
 * seen). Plain C, no dependencies; exits on SIGTERM. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

enum { MAX_CONNS = 512, IN_BYTES = 8192 };

enum mode { HONEST, GARBAGE, LONG_LINE, NUL, FAKE_ENDS, DUP_ENDS, END_FLOOD, SILENT, DEAF, REPLY_HANG, CLOSE_MID_LINE, NOT_PLAYED, UNKNOWN_RETRY, NO_END };
static const char *const mode_names[] = { "honest", "garbage", "long-line", "nul", "fake-ends", "dup-ends", "end-flood", "silent", "deaf",
                                          "reply-hang", "close-mid-line", "not-played", "unknown-retry", "no-end" };

struct end { uint64_t due, voice; };
struct conn {
        int fd;
        char in[IN_BYTES];
        size_t inlen;
        unsigned lines, plays;
        bool mute, reading;
        struct end ends[2048];
        int nends;
        size_t queued;       /* unknown-retry: the client's unread bytes, last seen */
        uint64_t queued_at;
};

static enum mode mode;
static FILE *voice_log;
static uint64_t end_ns = 30000000ull, next_voice = 1;
static struct conn conns[MAX_CONNS];
static volatile sig_atomic_t quit;

static uint64_t now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec;
}

static void drop(struct conn *c) {
        close(c->fd);
        c->fd = -1;
}

/* Writes it all or drops the connection (a client that does not read is its own problem here). */
static void say(struct conn *c, const char *s, size_t n) {
        while (n && c->fd >= 0) {
                ssize_t k = send(c->fd, s, n, MSG_NOSIGNAL);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0) {
                        drop(c);
                        return;
                }
                s += k;
                n -= (size_t) k;
        }
}

static void sayf(struct conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sayf(struct conn *c, const char *fmt, ...) {
        char buf[1024];
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(buf, sizeof buf, fmt, ap);
        va_end(ap);
        if (n > 0)
                say(c, buf, (size_t) n < sizeof buf ? (size_t) n : sizeof buf - 1);
}

static void send_end(struct conn *c, uint64_t voice, const char *reason);

/* As cued's mixer: at most MIX_VOICES at once, the oldest stolen for a new one (`end N stolen`). */
enum { MIX_VOICES = 256 };
static void end_later(struct conn *c, uint64_t voice, uint64_t after) {
        if (c->nends >= MIX_VOICES) {
                int oldest = 0;
                for (int i = 1; i < c->nends; i++)
                        if (c->ends[i].due < c->ends[oldest].due)
                                oldest = i;
                uint64_t v = c->ends[oldest].voice;
                c->ends[oldest] = c->ends[--c->nends];
                send_end(c, v, "stolen");
        }
        c->ends[c->nends++] = (struct end) { now_ns() + after, voice };
}

static void send_end(struct conn *c, uint64_t voice, const char *reason) {
        sayf(c, "end %llu %s\n", (unsigned long long) voice, reason);
        if (mode == DUP_ENDS)
                sayf(c, "end %llu %s\n", (unsigned long long) voice, reason);
}

static void answer(struct conn *c, char *line) {
        bool greeting = !strncmp(line, "app ", 4) || !strcmp(line, "events on");
        bool play = !strncmp(line, "play ", 5) || !strncmp(line, "play-file ", 10);
        c->lines++;
        if (mode == SILENT || (mode == REPLY_HANG && c->mute))
                return;
        if (mode == UNKNOWN_RETRY) {
                if (greeting)
                        sayf(c, "ok\n");
                else if (play) {
                        c->reading = false;   /* the play is answered once the client's buffer is full */
                        c->queued_at = now_ns();
                }
                return;
        }
        if (mode == CLOSE_MID_LINE && play) {
                say(c, "ok 1", 4);
                drop(c);
                return;
        }
        if (!strncmp(line, "app ", 4)) {
                sayf(c, "ok %.*s\n", (int) strcspn(line + 4, " "), line + 4);
        } else if (!strcmp(line, "events on")) {
                sayf(c, "ok events on\n");
                if (mode == END_FLOOD)
                        c->mute = true;   /* the flood starts */
        } else if (!strcmp(line, "ping")) {
                sayf(c, "ok pong\n");
        } else if (play) {
                c->plays++;
                if (mode == NOT_PLAYED) {
                        sayf(c, "err not-played shutdown cued is stopping\n");
                } else if (!strncmp(line, "play missing", 12)) {
                        sayf(c, "err unknown-cue no cue or theme sound named 'missing'\n");
                } else if (!strncmp(line, "play-file ", 10) && strstr(line, "missing")) {
                        sayf(c, "err bad-file not-found %.*s: no such file\n", (int) strcspn(line + 10, " "), line + 10);
                } else {
                        uint64_t v = next_voice++;
                        if (mode == NUL) {
                                char buf[64];
                                int n = snprintf(buf, sizeof buf, "ok %llu", (unsigned long long) v);
                                buf[2] = 0;   /* "ok\0N" */
                                say(c, buf, (size_t) n);
                                say(c, "\n", 1);
                        } else
                                sayf(c, "ok %llu\n", (unsigned long long) v);
                        if (voice_log) {
                                const char *name = line + strcspn(line, " ") + 1;
                                fprintf(voice_log, "%.*s\n", (int) strcspn(name, " "), name);
                                fflush(voice_log);
                        }
                        if (mode != NO_END)
                                end_later(c, v, end_ns);
                }
                if (mode == REPLY_HANG)
                        c->mute = true;
        } else if (!strncmp(line, "stop id ", 8)) {
                uint64_t v = strtoull(line + 8, NULL, 10);
                int found = 0;
                for (int i = 0; i < c->nends; i++)
                        if (c->ends[i].voice == v) {
                                c->ends[i] = c->ends[--c->nends];
                                found = 1;
                                break;
                        }
                sayf(c, "ok %d\n", found);
                if (found)
                        send_end(c, v, "stopped-id");
        } else if (!strncmp(line, "preload ", 8)) {
                sayf(c, "ok\n");
        } else {
                sayf(c, "err unknown-verb '%.32s' is not a verb\n", line);
        }
        if (mode == FAKE_ENDS && c->fd >= 0)
                sayf(c, "end %llu played\n", (unsigned long long) (1000000 + rand()));
}

static void on_open(struct conn *c) {
        if (mode == GARBAGE) {
                char junk[4096];
                for (size_t i = 0; i < sizeof junk; i++)
                        junk[i] = (char) (rand() % 7 == 0 ? '\n' : rand());
                say(c, junk, sizeof junk);
        }
}

static void after_greeting(struct conn *c) {
        if (mode == LONG_LINE && c->lines == 2) {
                static char big[1 << 20];
                memset(big, 'x', sizeof big);
                say(c, big, sizeof big);
        }
}

static void read_conn(struct conn *c) {
        ssize_t n = recv(c->fd, c->in + c->inlen, sizeof c->in - c->inlen, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
                drop(c);
                return;
        }
        if (n < 0)
                return;
        c->inlen += (size_t) n;
        char *start = c->in, *nl;
        while (c->fd >= 0 && c->reading && (nl = memchr(start, '\n', c->inlen - (size_t) (start - c->in)))) {
                *nl = 0;
                answer(c, start);
                after_greeting(c);
                start = nl + 1;
        }
        if (c->fd < 0)
                return;
        c->inlen -= (size_t) (start - c->in);
        memmove(c->in, start, c->inlen);
        if (c->inlen == sizeof c->in)
                c->inlen = 0;   /* a line too long for a fake: forgotten */
}

static void tick(struct conn *c, uint64_t now) {
        if (mode == END_FLOOD && c->mute) {
                static char flood[65536];
                static size_t len;
                if (!len)
                        for (; len + 16 < sizeof flood; len += 13)
                                memcpy(flood + len, "end 1 played\n", 13);
                ssize_t k = send(c->fd, flood, len, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (k < 0 && errno != EAGAIN)
                        drop(c);
                return;
        }
        if (mode == UNKNOWN_RETRY && !c->reading && c->queued_at) {
                int q = 0;
                ioctl(c->fd, FIONREAD, &q);
                if ((size_t) q != c->queued) {
                        c->queued = (size_t) q;
                        c->queued_at = now;
                } else if (now - c->queued_at > 300000000ull) {
                        sayf(c, "err unknown-cue no cue or theme sound named 'x'\n");
                        c->queued_at = 0;
                }
                return;
        }
        for (int i = 0; i < c->nends && c->fd >= 0;)
                if (c->ends[i].due <= now) {
                        uint64_t v = c->ends[i].voice;
                        c->ends[i] = c->ends[--c->nends];
                        send_end(c, v, "played");
                } else
                        i++;
}

static void on_term(int sig) {
        (void) sig;
        quit = 1;
}

int main(int argc, char **argv) {
        if (argc < 3) {
                fprintf(stderr, "usage: fake-cued SOCKET MODE [END_MS]\n");
                return 64;
        }
        int m = -1;
        for (int i = 0; i < (int) (sizeof mode_names / sizeof mode_names[0]); i++)
                if (!strcmp(argv[2], mode_names[i]))
                        m = i;
        if (m < 0) {
                fprintf(stderr, "fake-cued: no mode %s\n", argv[2]);
                return 64;
        }
        mode = (enum mode) m;
        if (argc > 3)
                end_ns = strtoull(argv[3], NULL, 10) * 1000000ull;
        /* A host that crashes leaves no fake behind holding its pipes (the run then waited out its
         * timeout): the loop ends when the parent has gone. */
        pid_t parent = getppid();
        if (getenv("FAKE_CUED_LOG"))
                voice_log = fopen(getenv("FAKE_CUED_LOG"), "a");
        signal(SIGTERM, on_term);
        signal(SIGPIPE, SIG_IGN);
        srand(1);
        int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", argv[1]);
        unlink(sa.sun_path);
        if (lfd < 0 || bind(lfd, (struct sockaddr *) &sa, sizeof sa) < 0 || listen(lfd, 128) < 0) {
                perror("fake-cued: listen");
                return 1;
        }
        for (int i = 0; i < MAX_CONNS; i++)
                conns[i].fd = -1;
        while (!quit && getppid() == parent) {
                struct pollfd fds[MAX_CONNS + 1];
                int idx[MAX_CONNS + 1], n = 0;
                fds[n] = (struct pollfd) { .fd = lfd, .events = POLLIN };
                idx[n++] = -1;
                for (int i = 0; i < MAX_CONNS; i++)
                        if (conns[i].fd >= 0) {
                                short ev = (mode != DEAF && conns[i].reading) ? POLLIN : 0;
                                if (mode == END_FLOOD && conns[i].mute)
                                        ev |= POLLOUT;
                                fds[n] = (struct pollfd) { .fd = conns[i].fd, .events = ev };
                                idx[n++] = i;
                        }
                if (poll(fds, (nfds_t) n, 5) < 0 && errno != EINTR)
                        break;
                uint64_t now = now_ns();
                for (int k = 0; k < n; k++) {
                        if (idx[k] < 0) {
                                if (!(fds[k].revents & POLLIN))
                                        continue;
                                int fd;
                                while ((fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0) {
                                        int slot = -1;
                                        for (int i = 0; i < MAX_CONNS && slot < 0; i++)
                                                if (conns[i].fd < 0)
                                                        slot = i;
                                        if (slot < 0) {
                                                close(fd);
                                                continue;
                                        }
                                        conns[slot] = (struct conn) { .fd = fd, .reading = true };
                                        on_open(&conns[slot]);
                                }
                                continue;
                        }
                        struct conn *c = &conns[idx[k]];
                        if (c->fd >= 0 && (fds[k].revents & (POLLIN | POLLHUP | POLLERR)) && c->reading && mode != DEAF)
                                read_conn(c);
                        else if (c->fd >= 0 && (fds[k].revents & (POLLHUP | POLLERR)))
                                drop(c);   /* gone, while not read */
                }
                for (int i = 0; i < MAX_CONNS; i++)
                        if (conns[i].fd >= 0)
                                tick(&conns[i], now);
        }
        unlink(sa.sun_path);
        return 0;
}
