/* The context's reader thread: cued's lines, the watchdog, the callbacks.
 *
 * It reads and parses without ctx.lock, then takes it to apply at most LINES_PER_TURN lines
 * (one read of READ_BYTES a turn), and runs the callbacks that are due outside it.
 *
 * Every line must be owed: a reply to a request in the ring, or the end of a voice cued
 * started for us (one end each; an end may come before its play's reply, which can wait
 * behind an earlier one's decode). A line that is not (garbage, a NUL, a line over
 * READ_BYTES, an end for no voice, a second end, a reply to nothing) means the socket is not
 * an honest cued: the connection is broken (connection.c), so a flood costs one read.
 *
 * A cued that stops answering: once a request has waited SUSPECT_NS, the process listening
 * on the socket is looked at (/proc: stopped?) and asked `ping` on a connection of its own;
 * stopped, or no answer within PROBE_NS, or the request waiting HUNG_NS though cued answers
 * pings (a decode stuck on a file system that does not answer: a UI sound a second late is
 * better heard from the fallback), and the connection is broken as stalled. So too when an
 * open voice's end has not come by the time its sound must have ended (SOUND_MAX_NS +
 * VOICE_GRACE_NS after `ok N`), when cued's process is stopped while voices are open (looked
 * at every ALIVE_NS), or when cued claims more voices open than it can mix (MAX_VOICES).
 * Replies waiting on the socket are read before any of these verdicts. The last two, and a
 * send that could not go, find a cued that still reads the lines it was sent and plays them:
 * the connection is doomed instead (connection.c: conn_doom), its answers applied until its
 * end of file or DRAIN_NS, and only the plays left unanswered then are re-routed. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "driver.h"
#include "reply.h"

/* A voice's end: the play ends (or, if cued failed it, goes to the fallback). */
static void voice_end(struct ctx *x, struct play *pl, int reason) {
        voice_closed(x, pl);
        if (pl->state == PLAYING) {
                bool unheard = reason == CUED_END_REASON_LATE || now_ns() - pl->voice_ns < SOUNDED_NS;
                if (reroute_end(reason) && unheard)
                        play_reroute(x, pl, "cued did not sound it");
                else
                        play_finish(x, pl, end_code(reason));
        }
        play_release(x, pl);
}

static void on_end(struct ctx *x, const struct reply *r) {
        struct play *pl = play_of_voice(x, r->voice);
        if (pl) {
                voice_end(x, pl, r->reason);
                return;
        }
        /* Owed only if a play's reply is still to come, and not more of them than such plays. */
        if (x->nearly < x->plays_in_ring && x->nearly < sizeof x->early / sizeof x->early[0]) {
                x->early[x->nearly] = r->voice;
                x->early_reason[x->nearly++] = r->reason;
                return;
        }
        conn_break(x, "an end line for no voice of ours", true);
}

static void on_play_reply(struct ctx *x, struct play *pl, const struct reply *r) {
        pl->replies_owed--;
        if (r->kind == REPLY_OK && r->voice) {
                voice_opened(x, pl, r->voice);
                if (pl->state == SENT)
                        pl->state = PLAYING;
                else if (pl->state == DONE)
                        send_stop(x, r->voice);   /* canceled before cued said which voice it is */
                for (unsigned i = 0; i < x->nearly; i++)
                        if (x->early[i] == r->voice) {
                                int reason = x->early_reason[i];
                                x->early[i] = x->early[x->nearly - 1];
                                x->early_reason[i] = x->early_reason[--x->nearly];
                                voice_end(x, pl, reason);
                                return;
                        }
        } else if (pl->state != SENT) {
                /* canceled, or re-routed: nothing more to say */
        } else if (r->kind == REPLY_OK) {
                if (r->bare || r->word >= 0)   /* `ok muted`, `ok silent` as a muted server plays it; `ok disabled`: the theme says no */
                        play_finish(x, pl, r->word == CUED_NOT_SOUNDED_DISABLED ? CA_ERROR_DISABLED : CA_SUCCESS);
                else
                        conn_break(x, "cued answered a play with no voice", true);
        } else if (r->code == CUED_ERROR_UNKNOWN_CUE && pl->retry) {
                struct line l = { .n = 0 };
                put(&l, pl->retry);
                free(pl->retry);
                pl->retry = NULL;
                if (!send_request(x, &l, PEND_PLAY, pl) && pl->state == SENT)
                        play_reroute(x, pl, "its file not sent");   /* a failed send broke the connection, which re-routed the rest */
        } else if (reroute_error(r)) {
                play_reroute(x, pl, "cued could not play it");
        } else
                play_finish(x, pl, err_code(r));
        play_release(x, pl);
}

static void on_line(struct ctx *x, const struct reply *r) {
        if (r->kind == REPLY_BAD) {
                conn_break(x, "cued said something unexpected", true);
                return;
        }
        if (r->kind == REPLY_END) {
                on_end(x, r);
                return;
        }
        if (x->count == 0) {
                conn_break(x, "a reply to nothing", true);
                return;
        }
        struct pending e = x->ring[x->head];
        x->head = (x->head + 1) % MAX_PENDING;
        x->count--;
        switch (e.kind) {
        case PEND_GREETING:
                /* an older cued may refuse `via=`: the events line is what matters */
                if (--x->greeting_left == 0) {
                        if (r->kind == REPLY_ERR) {
                                conn_break(x, "cued refused `events on`", false);
                                return;
                        }
                        x->greeted = true;
                        x->on_probation = false;
                        x->backoff_ns = 0;
                }
                break;
        case PEND_APP:
        case PEND_STOP:
        case PEND_PRELOAD:
                break;   /* ca_context_cache did not wait for it */
        case PEND_PLAY:
                x->plays_in_ring--;
                on_play_reply(x, e.play, r);
                if (x->nearly > x->plays_in_ring)
                        conn_break(x, "an end line for no voice of ours", true);
                break;
        }
        /* cued closes these connections; at its connection cap, or to another user, not again at once */
        if (r->kind == REPLY_ERR && (r->code == CUED_ERROR_BUSY || r->code == CUED_ERROR_FORBIDDEN || r->code == CUED_ERROR_LINE_TOO_LONG))
                conn_break(x, cued_error_word((enum cued_error) r->code), r->code != CUED_ERROR_LINE_TOO_LONG);
}

/* ---- The watchdog ---- */

/* A `ping` on a connection of its own: whether cued's event loop answers at all. */
struct probe {
        int fd;
        uint64_t sent_ns, ok_ns;   /* sent, not answered yet; last answered */
        char buf[64];
        size_t len;
};

static const uint64_t REPROBE_NS = 500 * MS;

static void probe_close(struct probe *pr) {
        if (pr->fd >= 0)
                close(pr->fd);
        pr->fd = -1;
        pr->len = 0;
}

/* False if cued's socket refuses connections (nothing listens: cued is gone). */
static bool probe_start(struct probe *pr, const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        memcpy(sa.sun_path, path, sizeof sa.sun_path);
        probe_close(pr);
        pr->sent_ns = now_ns();
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return true;
        if (connect(fd, (struct sockaddr *) &sa, sizeof sa) < 0) {
                int e = errno;
                close(fd);
                return e == EAGAIN;   /* a full backlog: no answer, as from a stopped cued */
        }
        ssize_t n = send(fd, "ping\n", 5, MSG_NOSIGNAL | MSG_DONTWAIT);
        (void) n;
        pr->fd = fd;
        return true;
}

/* Any whole line is an answer: the loop runs (`ok pong`, or `err busy` at its cap). */
static void probe_read(struct probe *pr) {
        ssize_t n = recv(pr->fd, pr->buf + pr->len, sizeof pr->buf - pr->len, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (n > 0)
                pr->len += (size_t) n;
        if (n > 0 && memchr(pr->buf, '\n', pr->len)) {
                pr->ok_ns = now_ns();
                pr->sent_ns = 0;
        }
        if (n <= 0 || pr->ok_ns >= pr->sent_ns || pr->len == sizeof pr->buf)
                probe_close(pr);   /* answered, or closed without a word (then the deadline decides) */
}

/* Whether the process listening on cued's socket is stopped (SIGSTOP, a debugger). */
static bool peer_stopped(pid_t pid) {
        char path[40], buf[512];
        if (pid <= 0)
                return false;
        snprintf(path, sizeof path, "/proc/%d/stat", (int) pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return false;
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n <= 0)
                return false;
        buf[n] = 0;
        char *paren = strrchr(buf, ')');
        return paren && paren[1] == ' ' && (paren[2] == 'T' || paren[2] == 't');
}

static void sooner(int *timeout, uint64_t deadline, uint64_t now) {
        int ms = deadline <= now ? 0 : (int) ((deadline - now) / MS) + 1;
        if (*timeout < 0 || ms < *timeout)
                *timeout = ms;
}

/* Breaks a connection that stalled; the poll timeout until the next deadline (-1 none);
 * `*suspect`: a request waits too long, look at cued (outside the lock); `*look`: voices are
 * open, see whether cued's process is stopped. ctx.lock held. */
static int watchdog(struct ctx *x, struct probe *pr, bool *suspect, bool *look) {
        uint64_t now = now_ns();
        int timeout = -1;
        *suspect = false;
        *look = false;
        if (x->state != UP)
                return -1;
        /* Doomed (connection.c: conn_doom): cued's answers to what it was sent are applied until its
         * end of file (read_lines breaks the connection then) or this deadline; no other verdict. */
        if (x->doomed) {
                if (now >= x->drain_due_ns) {
                        conn_break(x, x->doomed, x->doomed_stalled);
                        return 0;
                }
                sooner(&timeout, x->drain_due_ns, now);
                return timeout;
        }
        if (x->nvoices > MAX_VOICES) {
                conn_doom(x, "cued claims more voices open than it mixes", true);
                return 0;
        }
        if (x->count) {
                uint64_t sent = x->ring[x->head].sent_ns;
                if (now - sent >= HUNG_NS || (pr->sent_ns && now - pr->sent_ns >= PROBE_NS)) {
                        conn_break(x, now - sent >= HUNG_NS ? "cued left a request unanswered for 1 s" : "cued does not answer", true);
                        return 0;
                }
                if (now - sent < SUSPECT_NS)
                        sooner(&timeout, sent + SUSPECT_NS, now);
                else if (pr->sent_ns)
                        sooner(&timeout, pr->sent_ns + PROBE_NS, now);
                else if (now - pr->ok_ns >= REPROBE_NS)
                        *suspect = true;
                else
                        sooner(&timeout, pr->ok_ns + REPROBE_NS, now);
                sooner(&timeout, sent + HUNG_NS, now);
        }
        /* Every open voice ends by its deadline, or cued has failed us (it acked `ok N` and never
         * said `end`, or its audio is stuck): given up, the plays called back now with the reason. */
        if (x->nvoices && now >= x->voice_due_ns) {
                uint64_t due = UINT64_MAX;
                for (struct play *pl = x->plays; pl; pl = pl->next)
                        if (pl->voice_open) {
                                uint64_t d = pl->voice_ns + SOUND_MAX_NS + VOICE_GRACE_NS;
                                if (d <= now) {
                                        conn_doom(x, "cued never ended a voice (11.5 s)", true);
                                        return 0;
                                }
                                due = d < due ? d : due;
                        }
                x->voice_due_ns = due;
        }
        if (x->nvoices) {
                sooner(&timeout, x->voice_due_ns, now);
                if (now >= x->alive_check_ns) {
                        x->alive_check_ns = now + ALIVE_NS;
                        *look = true;   /* a stopped cued ends no voice: seen within ALIVE_NS, not at the deadline */
                }
                sooner(&timeout, x->alive_check_ns, now);
        }
        return timeout;
}

/* ---- The thread ---- */

/* One read, its lines applied LINES_PER_TURN at a time. Called without ctx.lock; returns
 * with it held, and whether there was anything to read. */
static bool read_lines(struct ctx *x, int fd, uint64_t gen, char *buf, size_t *len) {
        ssize_t n = recv(fd, buf + *len, READ_BYTES - *len, MSG_DONTWAIT);
        if (n <= 0) {
                int e = errno;
                pthread_mutex_lock(&x->lock);
                /* doomed: cued has answered what it was sent (or is gone); the verdict is the doom's */
                if (gen == x->generation && (n == 0 || (e != EAGAIN && e != EINTR)))
                        conn_break(x, x->doomed ? x->doomed : n == 0 ? "cued closed the connection" : strerror(e),
                                   x->doomed ? x->doomed_stalled : false);
                return false;
        }
        *len += (size_t) n;
        size_t off = 0;
        for (;;) {
                struct reply batch[LINES_PER_TURN];
                size_t used, ll;
                int k = 0;
                while (k < LINES_PER_TURN && (used = next_line(buf + off, *len - off, &ll))) {
                        batch[k++] = parse_reply(buf + off, ll);
                        off += used;
                }
                pthread_mutex_lock(&x->lock);
                for (int i = 0; i < k && x->generation == gen && x->state == UP; i++)
                        on_line(x, &batch[i]);
                if (k < LINES_PER_TURN || x->generation != gen || x->state != UP)
                        break;
                pthread_mutex_unlock(&x->lock);   /* a caller may get in between turns */
        }
        if (x->generation != gen || x->state != UP) {
                *len = 0;
                return true;
        }
        *len -= off;
        memmove(buf, buf + off, *len);
        if (*len == READ_BYTES)
                conn_break(x, "a line from cued too long", true);
        return true;
}

void *reader_main(void *arg) {
        struct ctx *x = arg;
        char buf[READ_BYTES];
        size_t len = 0;
        uint64_t gen = 0;
        struct probe pr = { .fd = -1 };
        pthread_mutex_lock(&x->lock);
        while (!x->stopping) {
                if (x->sweep)
                        plays_sweep(x);
                fallback_collect(x);
                run_callbacks(x);
                if (x->stopping)
                        break;
                if (x->state == BROKEN) {
                        int fd = x->fd;
                        x->fd = -1;
                        x->state = DOWN;
                        pthread_mutex_unlock(&x->lock);
                        close(fd);
                        probe_close(&pr);
                        pr.sent_ns = 0;
                        pthread_mutex_lock(&x->lock);
                        continue;
                }
                if (x->generation != gen) {
                        gen = x->generation;
                        len = 0;
                        probe_close(&pr);
                        pr.sent_ns = pr.ok_ns = 0;
                }
                /* What cued already said is read before any verdict on it: the app's callbacks
                 * above may have kept this thread from the socket for seconds. */
                for (int reads = 0; x->state == UP && gen == x->generation && reads < DRAIN_READS; reads++) {
                        int fd = x->fd;
                        pthread_mutex_unlock(&x->lock);
                        if (!read_lines(x, fd, gen, buf, &len))
                                break;
                }
                if (x->state != UP && x->state != DOWN)
                        continue;
                bool suspect, look;
                int timeout = watchdog(x, &pr, &suspect, &look);
                if (x->state == BROKEN)
                        continue;
                int fb_timeout = fallback_deadlines(x);
                if (fb_timeout >= 0 && (timeout < 0 || fb_timeout < timeout))
                        timeout = fb_timeout;
                int fd = x->state == UP ? x->fd : -1;
                pid_t peer = x->peer;
                pthread_mutex_unlock(&x->lock);

                if (look && !suspect && peer_stopped(peer)) {
                        pthread_mutex_lock(&x->lock);
                        if (gen == x->generation)
                                conn_break(x, "cued is stopped, its voices with it", true);
                        continue;
                }
                if (suspect) {
                        bool stopped = peer_stopped(peer), refused = !stopped && !probe_start(&pr, x->socket_path);
                        if (stopped || refused) {
                                pthread_mutex_lock(&x->lock);
                                if (gen == x->generation)
                                        conn_break(x, stopped ? "cued is stopped" : "cued's socket refuses connections", stopped);
                                continue;
                        }
                        timeout = (int) (PROBE_NS / MS) + 1;
                }
                struct pollfd fds[3] = { { .fd = x->wakefd, .events = POLLIN }, { .fd = fd, .events = POLLIN }, { .fd = pr.fd, .events = POLLIN } };
                int n = poll(fds, 3, timeout);
                if (n > 0 && fds[0].revents) {
                        uint64_t v;
                        ssize_t r = read(x->wakefd, &v, sizeof v);
                        (void) r;
                }
                if (n > 0 && pr.fd >= 0 && fds[2].revents)
                        probe_read(&pr);
                if (n > 0 && fd >= 0 && fds[1].revents)
                        read_lines(x, fd, gen, buf, &len);
                else
                        pthread_mutex_lock(&x->lock);
        }
        /* Destroyed: nothing more will come; every play left ends now, here (unless a callback
         * destroyed the context: its destroy ended them, on this thread). */
        bool self = x->destroyed_on_reader;
        if (!self) {
                end_all(x, CA_ERROR_DESTROYED);
                run_callbacks(x);
        }
        int fd = x->fd;
        x->fd = -1;
        pthread_mutex_unlock(&x->lock);
        if (fd >= 0)
                close(fd);
        probe_close(&pr);
        if (self)
                ctx_free(x);
        return NULL;
}
