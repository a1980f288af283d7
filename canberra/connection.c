/* The connection to cued: connecting, sending, giving it up.
 *
 * Callers send: one non-blocking send of one line, under ctx.lock; they never read, never
 * wait for a reply, and connect outside the lock. The reader's verdict on a cued that is gone,
 * stopped or lies in its lines (reader.c: a stall, a garbled line, an end of file) breaks the
 * connection at once: every play cued has not answered with a voice is re-routed to the
 * fallback (plays.c), the rest end, and the reader closes the descriptor. A cued that is given
 * up on while it still reads (a send that cannot go, a full ring of unanswered requests, more
 * voices claimed than it mixes, a voice never ended) is doomed first: nothing more is sent,
 * the socket is half-closed, and its answers to what it was sent are applied until its end of
 * file (DRAIN_NS at most); only the plays still unanswered then are re-routed, since cued reads
 * and plays the lines it has (re-routed at once, they were heard twice). After a stall or a lie
 * the next connection waits a backoff (1 s, doubling to 30 s) and is on probation: plays go to
 * the fallback until cued answers its greeting. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "driver.h"
#include "reply.h"

uint64_t now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec;
}

/* CANBERRA_DEBUG's lines wait in a buffer of the process's (its own lock, a leaf: held for a
 * copy, never across I/O) and one thread of the plug-in's, started at the first line, writes
 * them: stderr may be a pipe or a terminal slow to take them. Written under ctx.lock, or on a
 * host thread inside libcanberra's context lock, they held up the host's other calls (issue 46:
 * 25-37 ms with CANBERRA_DEBUG=1; with stderr a pipe read 1 KiB per 10 ms, 309 ms), and written
 * by the reader they held up its verdicts. A line that does not fit is lost. */
static pthread_mutex_t debug_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t debug_more = PTHREAD_COND_INITIALIZER;
static pthread_once_t debug_once = PTHREAD_ONCE_INIT;
static bool debug_writer;
static char debug_buf[8192];
static size_t debug_len;

static void *debug_write(void *arg) {
        char out[sizeof debug_buf];
        (void) arg;
        pthread_mutex_lock(&debug_lock);
        for (;;) {
                while (!debug_len)
                        pthread_cond_wait(&debug_more, &debug_lock);
                size_t len = debug_len;
                memcpy(out, debug_buf, len);
                debug_len = 0;
                pthread_mutex_unlock(&debug_lock);
                for (size_t off = 0; off < len;) {
                        ssize_t n = write(STDERR_FILENO, out + off, len - off);
                        if (n <= 0)
                                break;   /* EINTR or a closed stderr: what is left is dropped */
                        off += (size_t) n;
                }
                pthread_mutex_lock(&debug_lock);
        }
        return NULL;
}

static void debug_start(void) {
        pthread_t t;
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);   /* the host's signals are not its */
        debug_writer = pthread_create(&t, NULL, debug_write, NULL) == 0;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (debug_writer)
                pthread_detach(t);
}

void debug(const char *what, const char *detail) {
        if (!ca_debug())
                return;
        pthread_once(&debug_once, debug_start);
        pthread_mutex_lock(&debug_lock);
        size_t room = sizeof debug_buf - debug_len;
        int n = debug_writer ? snprintf(debug_buf + debug_len, room, "libcanberra-cued: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "") : 0;
        if (n > 0 && (size_t) n < room) {
                debug_len += (size_t) n;
                pthread_cond_signal(&debug_more);
        }
        pthread_mutex_unlock(&debug_lock);
}

void wake_reader(struct ctx *x) {
        uint64_t one = 1;
        ssize_t n = write(x->wakefd, &one, sizeof one);
        (void) n;   /* a full counter still wakes */
}

/* ---- Sending (ctx.lock held) ---- */

void conn_break(struct ctx *x, const char *why, bool stalled) {
        if (x->state != UP)
                return;
        debug("connection to cued given up", why);
        uint64_t now = now_ns();
        x->state = BROKEN;
        x->doomed = NULL;
        x->voice_due_ns = 0;
        if (stalled) {
                x->backoff_ns = x->backoff_ns ? x->backoff_ns * 2 : BACKOFF_MIN_NS;
                if (x->backoff_ns > BACKOFF_MAX_NS)
                        x->backoff_ns = BACKOFF_MAX_NS;
                x->retry_ns = now + x->backoff_ns;
                x->on_probation = true;
        } else
                x->retry_ns = now;   /* cued went away or refused: the next call tries again */
        x->count = 0;
        x->plays_in_ring = 0;
        x->nearly = 0;
        /* A play cued answered with a voice is never played again through the fallback: cued may
         * well have sounded it (issue 46: a reader held up by the app's callback judged a healthy
         * cued, and 15 of 100 sounds were heard twice). Its voice is cut, or cued is gone. */
        for (struct play *pl = x->plays, *n; pl; pl = n) {
                n = pl->next;
                pl->replies_owed = 0;
                if (pl->state == SENT)
                        play_reroute(x, pl, why);
                else if (pl->state == PLAYING)
                        play_finish(x, pl, CA_ERROR_DISCONNECTED);
                voice_closed(x, pl);
        }
        /* Not freed here: the caller may hold a play it is still using. The reader sweeps. */
        x->sweep = true;
        wake_reader(x);
}

/* Given up on a cued that is alive and reads (a send failed, it lies about its voices, it never
 * ended one): cued has read, or will read, the plays sent before, and plays them, so breaking now
 * would re-route plays it took, heard twice (no-end32: up to 14 of 800 under load). So nothing
 * more is sent, the write side is shut (cued answers what it has, sees the end of file and
 * closes: cued's Connection answers a half-closed client's lines, then closes), and the reader
 * applies those answers, a play answered with a voice being cued's, until cued's end of file
 * or DRAIN_NS; then it breaks the connection (reader.c: watchdog, read_lines). The caller may
 * be a host thread: the shutdown does not block. */
void conn_doom(struct ctx *x, const char *why, bool stalled) {
        if (x->state != UP || x->doomed)
                return;
        debug("giving up the connection to cued once it has answered", why);
        x->doomed = why;
        x->doomed_stalled = stalled;
        x->drain_due_ns = now_ns() + DRAIN_NS;
        shutdown(x->fd, SHUT_WR);
        wake_reader(x);
}

/* One line, whole or not at all (a line cut in half would garble the next). */
static bool send_line(struct ctx *x, const struct line *l) {
        char buf[CUED_LINE_BYTES + 2];
        if (x->state != UP || x->doomed || l->over)
                return false;
        memcpy(buf, l->s, l->n);
        buf[l->n] = '\n';
        ssize_t n = send(x->fd, buf, l->n + 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n == (ssize_t) l->n + 1)
                return true;
        bool full = n >= 0 || errno == EAGAIN;
        if (n > 0)
                conn_break(x, "cued is not reading (a line cut)", true);   /* the next line would be garbled, and a drain
                                                                                     * would have cued read the half line at its EOF: at once */
        else
                conn_doom(x, full ? "cued is not reading" : strerror(errno), full);
        return false;
}

bool send_request(struct ctx *x, const struct line *l, enum pending_kind kind, struct play *pl) {
        if (x->count == MAX_PENDING) {
                conn_doom(x, "too many requests unanswered", true);
                return false;
        }
        if (!send_line(x, l))
                return false;
        x->ring[(x->head + x->count++) % MAX_PENDING] = (struct pending) { kind, now_ns(), pl };
        if (pl) {
                pl->replies_owed++;
                x->plays_in_ring++;
        }
        if (x->count == 1)
                wake_reader(x);   /* it sleeps with no deadline while nothing is unanswered: now there is one */
        return true;
}

bool declare_app(struct ctx *x, const char *app, enum pending_kind kind) {
        struct line l = { .n = 0 };
        put(&l, "app ");
        put(&l, app);
        put(&l, " via=libcanberra");
        if (!send_request(x, &l, kind, NULL))
                return false;
        snprintf(x->app, sizeof x->app, "%s", app);
        return true;
}

void send_stop(struct ctx *x, uint64_t voice) {
        struct line l = { .n = 0 };
        char text[40];
        snprintf(text, sizeof text, "stop id %llu", (unsigned long long) voice);
        put(&l, text);
        send_request(x, &l, PEND_STOP, NULL);
}

/* Whether a play is to be sent to cued now (else the fallback plays it). */
bool cued_takes_plays(struct ctx *x) {
        return x->state == UP && !x->doomed && (x->greeted || !x->on_probation) && x->count + 4 <= MAX_PENDING;
}

/* Connects, if it is time to, outside ctx.lock (the entry points call it, one at a time per
 * context); the greeting goes behind it, and plays behind the greeting. */
void connect_if_due(struct ctx *x) {
        pthread_mutex_lock(&x->lock);
        bool due = x->state == DOWN && x->socket_path[0] && !x->stopping && now_ns() >= x->retry_ns;
        pthread_mutex_unlock(&x->lock);
        if (!due)
                return;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        memcpy(sa.sun_path, x->socket_path, sizeof sa.sun_path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return;
        if (connect(fd, (struct sockaddr *) &sa, sizeof sa) < 0) {
                debug("cued not reachable", strerror(errno));
                close(fd);
                return;
        }
        struct ucred cred = { 0 };
        socklen_t len = sizeof cred;
        getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len);
        pthread_mutex_lock(&x->lock);
        if (x->state != DOWN || x->stopping) {
                pthread_mutex_unlock(&x->lock);
                close(fd);
                return;
        }
        x->fd = fd;
        x->state = UP;
        x->doomed = NULL;
        x->generation++;
        x->greeted = false;
        x->greeting_left = 2;
        x->peer = cred.pid;
        x->app[0] = 0;
        struct line events = { .n = 0 };
        put(&events, "events on");
        if (declare_app(x, x->context_app, PEND_GREETING))
                send_request(x, &events, PEND_GREETING, NULL);
        pthread_mutex_unlock(&x->lock);
        wake_reader(x);   /* it polls the new descriptor */
}
