/* libcanberra-cued.so: libcanberra's output through cued.
 *
 * With CANBERRA_DRIVER=cued, libcanberra (0.30) loads this file from its plug-in
 * directory and calls cued_driver_open, _play, _cancel, … for every ca_context of
 * the process. Each context gets one connection to cued's socket (protocol v1:
 * `app NAME via=libcanberra`, `events on`, `play NAME id`, `play-file PATH id`,
 * `preload NAME`, `stop id ID`) and one thread of its own, which reads cued's
 * replies and `end ID REASON` lines and calls the play_full callbacks: exactly once
 * per play that ca_context_play_full accepted, never from the caller's thread.
 *
 * It runs inside other people's processes (GNOME Shell, GTK apps), so:
 * - a call never waits on cued longer than CALL_BUDGET_NS: a play is sent and its
 *   reply awaited that long at most (its result then comes with the callback); a
 *   cued that leaves a request unanswered for STUCK_NS is treated as absent (what it
 *   was sent stays its own, so nothing plays twice);
 * - when cued is absent the call goes to the driver libcanberra would otherwise have
 *   used (pulse, then alsa: ca_driver_order, or the names after "cued," in
 *   CANBERRA_DRIVER), loaded the way libcanberra's own `multi` driver loads them,
 *   as a ca_context of their own; cued is tried again at the next call;
 * - plays cued took but did not answer before its connection ended (cued stopped
 *   or crashed) are handed to that driver too, if they are less than REPLAY_NS old;
 * - everything read is bounded (lines, requests in flight, plays), the socket is
 *   non-blocking, and only this thread closes a descriptor another thread may poll.
 * Plain C: libc, pthreads and libcanberra.so.0's exported helpers. */

#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "canberra-private.h"
#include "cued-wire.h"

#define EXPORT __attribute__((visibility("default")))
#define MS 1000000ull

enum {
        LINE_BYTES = CUED_LINE_BYTES,
        READ_BYTES = 4096,       /* longest reply line taken; a longer one ends the connection */
        MAX_PENDING = 256,       /* requests awaiting their reply on one connection */
        MAX_PLAYS = 512,         /* plays of one context not ended yet */
        LABEL_BYTES = CUED_LABEL_BYTES,
        PROP_BYTES = 4096,       /* a property value read at most (longer: treated as unusable) */
        MAX_FALLBACKS = 4,
};
static const uint64_t CALL_BUDGET_NS = 5 * MS;
static const uint64_t STUCK_NS = 250 * MS;      /* cued's own start deadline for a cue */
static const uint64_t DEAD_NS = 6000 * MS;      /* past cued's 5 s decoding deadline */
static const uint64_t REPLAY_NS = 1000 * MS;

/* One play ca_context_play_full accepted (or is deciding on). */
enum play_state { WAITING, PLAYING, DONE };
struct play {
        struct play *next;            /* in the active or the done list */
        uint32_t ca_id;
        uint64_t voice;               /* cued's voice id, from its `ok ID` */
        ca_finish_callback_t cb;
        void *userdata;
        enum play_state state;
        int result;                   /* the callback's code, once DONE */
        bool returned;                /* cued_driver_play has returned: the callback may run */
        bool delivered;               /* the callback ran (or never will) */
        bool replay;                  /* to be handed to the fallback driver */
        int in_flight;                /* replies still to come that refer to it */
        char *retry;                  /* the play-file line to send if the theme lacks the sound */
        ca_proplist *props;           /* a copy, for a replay, until cued answers */
};

/* A `preload` the caller may stop waiting for. */
struct waiter {
        bool done, abandoned;
        int result;
};

enum pending_kind { PEND_GREETING, PEND_APP, PEND_PLAY, PEND_STOP, PEND_PRELOAD };
struct pending {
        enum pending_kind kind;
        uint64_t sent_ns;
        struct play *play;
        struct waiter *waiter;
};

enum conn_state { DISCONNECTED, GREETING, READY };

struct private {
        ca_context *context;
        pthread_mutex_t lock;         /* everything below but the fallback's */
        pthread_cond_t changed;       /* a reply came, the connection changed */

        char socket_path[sizeof(((struct sockaddr_un *) 0)->sun_path)];
        int fd;
        uint64_t fd_generation;       /* moved on at every close: the reader never reads a reused number */
        enum conn_state state;
        int greeting_left;
        char app[LABEL_BYTES + 1];    /* the app the connection declared */
        char context_app[LABEL_BYTES + 1];
        struct pending ring[MAX_PENDING];
        unsigned head, count;
        char rbuf[READ_BYTES];
        size_t rlen;

        struct play *active, *done;
        unsigned nplays;

        int wakefd;
        pthread_t thread;
        bool thread_started, stopping;
        bool destroyed_here;          /* destroyed from a callback: the thread frees all as it ends */

        /* The drivers cued stands in for, opened when first needed. */
        pthread_mutex_t fb_lock;
        char fb_names[MAX_FALLBACKS][32];
        int fb_count;
        ca_context *fb[MAX_FALLBACKS];
        ca_proplist *props;           /* the context's properties, for opening them */
        char device[256];             /* the context's device ("" none) */
};

#define PRIVATE(c) ((struct private *) ((c)->private))

/* A copy of a property list (libcanberra has no copy; a merge with an empty list is one). */
static ca_proplist *copy_props(ca_proplist *src) {
        ca_proplist *empty = NULL, *copy = NULL;
        if (!src || ca_proplist_create(&empty) < 0)
                return NULL;
        if (ca_proplist_merge(&copy, empty, src) < 0)
                copy = NULL;
        ca_proplist_destroy(empty);
        return copy;
}

static uint64_t now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec;
}

static void debug(const char *what, const char *detail) {
        if (ca_debug())
                fprintf(stderr, "libcanberra-cued: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
}

/* ---- Names and values ---------------------------------------------------- */

/* cued's labels (cued-wire.h): letters, digits, . _ -; 1 to 64 bytes; not . or .. */
static bool is_label(const char *s) {
        size_t n = strlen(s);
        if (n == 0 || n > LABEL_BYTES || cued_label_refused(s))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!cued_label_byte((unsigned char) s[i]))
                        return false;
        return true;
}

/* An app name made a label as cuectl makes $CUED_APP one: "GNOME Shell" → "GNOME-Shell". */
static bool to_label(const char *s, char out[LABEL_BYTES + 1]) {
        size_t n = 0;
        for (; s[n] && n < LABEL_BYTES; n++)
                out[n] = cued_label_byte((unsigned char) s[n]) ? s[n] : '-';
        out[n] = 0;
        return is_label(out);
}

static bool utf8_valid(const unsigned char *s) {
        while (*s) {
                unsigned char b = *s;
                int extra = b < 0x80 ? 0 : (b & 0xE0) == 0xC0 ? 1 : (b & 0xF0) == 0xE0 ? 2 : (b & 0xF8) == 0xF0 ? 3 : -1;
                if (extra < 0 || (extra == 1 && b < 0xC2) || (b == 0xF4 && (s[1] & 0xF0) != 0x80) || b > 0xF4)
                        return false;
                uint32_t cp = extra == 0 ? b : b & (0x3F >> extra);
                for (int i = 1; i <= extra; i++) {
                        if ((s[i] & 0xC0) != 0x80)
                                return false;
                        cp = (cp << 6) | (s[i] & 0x3F);
                }
                if ((extra == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (extra == 3 && cp < 0x10000))
                        return false;
                s += extra + 1;
        }
        return true;
}

/* canberra.volume: dB as a decimal ("-6", "3.5"; a comma too, as printf writes it in
 * some locales), clamped to cued's -60…12, in hundredths. No strtod: it follows the
 * host's locale. */
static bool parse_volume(const char *s, long *centi) {
        bool neg = false, digits = false;
        long whole = 0, frac = 0, scale = 10;
        if (*s == '-' || *s == '+')
                neg = *s++ == '-';
        for (; *s >= '0' && *s <= '9'; s++) {
                digits = true;
                if (whole < 100000)
                        whole = whole * 10 + (*s - '0');
        }
        if (*s == '.' || *s == ',')
                for (s++; *s >= '0' && *s <= '9'; s++) {
                        digits = true;
                        if (scale > 0)
                                frac += (*s - '0') * scale;
                        scale /= 10;
                }
        if (!digits || *s)
                return false;
        long v = whole * 100 + frac;
        if (neg)
                v = -v;
        *centi = v < CUED_GAIN_MIN_DB * 100 ? CUED_GAIN_MIN_DB * 100 : v > CUED_GAIN_MAX_DB * 100 ? CUED_GAIN_MAX_DB * 100 : v;
        return true;
}

/* ---- Request lines --------------------------------------------------------- */

struct line {
        char s[LINE_BYTES + 2];
        size_t n;
        bool over;
};

static void put(struct line *l, const char *s) {
        size_t k = strlen(s);
        if (l->over || l->n + k > LINE_BYTES) {
                l->over = true;
                return;
        }
        memcpy(l->s + l->n, s, k);
        l->n += k;
        l->s[l->n] = 0;
}

/* A play-file path as one word: a space, %, a control byte or DEL as %XX (cued-wire.h). */
static void put_path(struct line *l, const char *path) {
        static const char hex[] = "0123456789ABCDEF";
        for (const unsigned char *b = (const unsigned char *) path; *b; b++) {
                char one[4] = { (char) *b, 0, 0, 0 };
                if (cued_path_escaped(*b)) {
                        one[0] = '%';
                        one[1] = hex[*b >> 4];
                        one[2] = hex[*b & 15];
                }
                put(l, one);
        }
}

static void put_gain(struct line *l, long centi) {
        char g[24];
        long a = centi < 0 ? -centi : centi;
        if (centi == 0)
                return;
        if (a % 100)
                snprintf(g, sizeof g, " %s%ld.%02ld", centi < 0 ? "-" : "", a / 100, a % 100);
        else
                snprintf(g, sizeof g, " %s%ld", centi < 0 ? "-" : "", a / 100);
        put(l, g);
}

/* A property as a string: the play's, else the context's. 1 found (copied into
 * `out`), 0 absent (or binary), -1 longer than `cap`. */
static int prop(ca_proplist *play, ca_proplist *ctx, const char *key, char *out, size_t cap) {
        ca_proplist *lists[2] = { play, ctx };
        for (int i = 0; i < 2; i++) {
                if (!lists[i])
                        continue;
                ca_mutex_lock(lists[i]->mutex);
                const char *v = ca_proplist_gets_unlocked(lists[i], key);
                int r = 0;
                if (v) {
                        size_t n = strnlen(v, cap);
                        r = n < cap ? 1 : -1;
                        if (r == 1)
                                memcpy(out, v, n + 1);
                }
                ca_mutex_unlock(lists[i]->mutex);
                if (r)
                        return r;
        }
        return 0;
}

/* The app a play counts under: application.name, else .id, else the process's name. */
static void app_of(ca_proplist *play, ca_proplist *ctx, char out[LABEL_BYTES + 1]) {
        char v[256];
        if (prop(play, ctx, CA_PROP_APPLICATION_NAME, v, sizeof v) == 1 && to_label(v, out))
                return;
        if (prop(play, ctx, CA_PROP_APPLICATION_ID, v, sizeof v) == 1 && to_label(v, out))
                return;
        if (to_label(program_invocation_short_name, out))
                return;
        strcpy(out, "libcanberra");
}

/* ` theme=NAME[:PROFILE]` from the xdg-theme properties: per request, as libcanberra
 * looks a sound up. A profile alone names libcanberra's default theme. */
static void put_theme(struct line *l, ca_proplist *play, ca_proplist *ctx) {
        char name[LABEL_BYTES + 2] = "", profile[LABEL_BYTES + 2] = "";
        bool has_name = prop(play, ctx, CA_PROP_CANBERRA_XDG_THEME_NAME, name, sizeof name) == 1 && is_label(name);
        bool has_profile = prop(play, ctx, CA_PROP_CANBERRA_XDG_THEME_OUTPUT_PROFILE, profile, sizeof profile) == 1 && is_label(profile);
        if (!has_name && !has_profile)
                return;
        put(l, " theme=");
        put(l, has_name ? name : "freedesktop");
        if (has_profile) {
                put(l, ":");
                put(l, profile);
        }
}

/* What a play or a cache asks of cued, or why not. */
enum verdict { SEND, FALLBACK };
struct request {
        struct line line;
        struct line retry;     /* play-file, if the theme has no such sound */
        bool has_retry;
        char app[LABEL_BYTES + 1];
};

static int file_line(struct line *l, const char *file, long centi) {
        char abs[PROP_BYTES + 2];
        if (file[0] != '/') {
                /* libcanberra opens a relative path from the working directory */
                if (!getcwd(abs, sizeof abs) || strlen(abs) + 1 + strlen(file) >= sizeof abs)
                        return FALLBACK;
                strcat(abs, "/");
                strcat(abs, file);
                file = abs;
        }
        if (!utf8_valid((const unsigned char *) file))
                return FALLBACK;   /* cued takes UTF-8 paths; the fallback opens any */
        put(l, "play-file ");
        put_path(l, file);
        put_gain(l, centi);
        put(l, " id");
        return l->over ? FALLBACK : SEND;   /* too long for a line: the fallback plays it */
}

/* Builds the request for a play (`cache` false) or a ca_context_cache. Returns SEND,
 * FALLBACK, or a canberra error. */
static int describe(ca_proplist *play, ca_proplist *ctx, bool cache, struct request *r) {
        char event[256], file[PROP_BYTES], vol[32];
        int has_event = prop(play, ctx, CA_PROP_EVENT_ID, event, sizeof event);
        int has_file = cache ? 0 : prop(play, ctx, CA_PROP_MEDIA_FILENAME, file, sizeof file);
        long centi = 0;
        int v = cache ? 0 : prop(play, ctx, CA_PROP_CANBERRA_VOLUME, vol, sizeof vol);

        memset(r, 0, sizeof *r);
        app_of(play, ctx, r->app);
        if (v < 0 || (v == 1 && !parse_volume(vol, &centi)))
                return CA_ERROR_INVALID;
        if (has_file < 0)
                return FALLBACK;   /* a path longer than any line: the fallback plays it */
        bool event_ok = has_event == 1 && is_label(event);
        if (event_ok) {
                put(&r->line, cache ? "preload " : "play ");
                put(&r->line, event);
                put_gain(&r->line, centi);
                if (!cache)
                        put(&r->line, " id");
                put_theme(&r->line, play, ctx);
                if (r->line.over)
                        return CA_ERROR_TOOBIG;
                if (has_file == 1) {
                        /* libcanberra's order: the theme's sound, else the file */
                        if (file_line(&r->retry, file, centi) != SEND)
                                return FALLBACK;
                        r->has_retry = true;
                }
                return SEND;
        }
        if (cache)
                return has_event ? CA_ERROR_NOTFOUND : CA_ERROR_INVALID;
        if (has_file == 1)
                return file_line(&r->line, file, centi);
        /* An event id cued cannot name (not a label): no theme has it. */
        return has_event ? CA_ERROR_NOTFOUND : CA_ERROR_INVALID;
}

/* ---- The connection (p->lock held) ---------------------------------------- */

static void wake(struct private *p) {
        uint64_t one = 1;
        ssize_t n = write(p->wakefd, &one, sizeof one);
        (void) n;   /* a full counter still wakes */
}

static void push(struct private *p, enum pending_kind kind, struct play *pl, struct waiter *w) {
        struct pending *e = &p->ring[(p->head + p->count) % MAX_PENDING];
        /* callers checked the room (send_request) */
        e->kind = kind;
        e->sent_ns = now_ns();
        e->play = pl;
        e->waiter = w;
        p->count++;
        if (pl)
                pl->in_flight++;
}

static void free_play(struct play *pl) {
        if (pl->props)
                ca_proplist_destroy(pl->props);
        free(pl->retry);
        free(pl);
}

/* Frees a play once its callback has run and no reply refers to it. */
static void release(struct play *pl) {
        if (pl->delivered && pl->in_flight == 0)
                free_play(pl);
}

static void unlink_play(struct play **list, struct play *pl) {
        for (struct play **q = list; *q; q = &(*q)->next)
                if (*q == pl) {
                        *q = pl->next;
                        pl->next = NULL;
                        return;
                }
}

/* A play's one end: its code, and its callback queued for the reader thread. */
static void finish(struct private *p, struct play *pl, int code) {
        if (pl->state == DONE)
                return;
        pl->state = DONE;
        pl->result = code;
        pl->replay = false;
        unlink_play(&p->active, pl);
        p->nplays--;
        pl->next = p->done;
        p->done = pl;
        if (pl->props) {
                ca_proplist_destroy(pl->props);
                pl->props = NULL;
        }
        pthread_cond_broadcast(&p->changed);
        wake(p);
}

static void waiter_done(struct waiter *w, int result) {
        if (w->abandoned) {
                free(w);
                return;
        }
        w->done = true;
        w->result = result;
}

/* Ends the connection: unanswered plays are replayed through the fallback (when
 * still timely) or ended, playing ones ended (no end line will come). */
static void disconnect(struct private *p, const char *why) {
        uint64_t now = now_ns();
        if (p->fd >= 0) {
                debug("connection to cued ended", why);
                close(p->fd);
        }
        p->fd = -1;
        p->fd_generation++;
        p->state = DISCONNECTED;
        p->rlen = 0;
        p->app[0] = 0;
        while (p->count) {
                struct pending e = p->ring[p->head];
                p->head = (p->head + 1) % MAX_PENDING;
                p->count--;
                if (e.kind == PEND_PLAY) {
                        struct play *pl = e.play;
                        pl->in_flight--;
                        if (pl->state == WAITING) {
                                if (pl->props && now - e.sent_ns < REPLAY_NS)
                                        pl->replay = true;
                                else
                                        finish(p, pl, CA_ERROR_DISCONNECTED);
                        }
                        release(pl);
                } else if (e.kind == PEND_PRELOAD)
                        waiter_done(e.waiter, CA_ERROR_DISCONNECTED);
        }
        for (struct play *pl = p->active, *n; pl; pl = n) {
                n = pl->next;
                if (pl->state == PLAYING)
                        finish(p, pl, CA_ERROR_DISCONNECTED);
        }
        pthread_cond_broadcast(&p->changed);
        wake(p);
}

/* One line, whole or not at all (a line cut in half would garble the next). */
static bool send_line(struct private *p, const struct line *l) {
        char buf[LINE_BYTES + 2];
        if (p->fd < 0 || l->over)
                return false;
        memcpy(buf, l->s, l->n);
        buf[l->n] = '\n';
        ssize_t n = send(p->fd, buf, l->n + 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n == (ssize_t) l->n + 1)
                return true;
        disconnect(p, n < 0 ? strerror(errno) : "cued is not reading");
        return false;
}

/* A request and the reply it awaits; a connection with MAX_PENDING unanswered is stuck. */
static bool send_request(struct private *p, const struct line *l, enum pending_kind kind, struct play *pl, struct waiter *w) {
        if (p->count == MAX_PENDING) {
                disconnect(p, "too many requests unanswered");
                return false;
        }
        if (!send_line(p, l))
                return false;
        push(p, kind, pl, w);
        return true;
}

static bool send_text(struct private *p, const char *text, enum pending_kind kind) {
        struct line l = { .n = 0 };
        put(&l, text);
        return send_request(p, &l, kind, NULL, NULL);
}

static bool declare_app(struct private *p, const char *app, enum pending_kind kind) {
        struct line l = { .n = 0 };
        put(&l, "app ");
        put(&l, app);
        put(&l, " via=libcanberra");
        if (!send_request(p, &l, kind, NULL, NULL))
                return false;
        snprintf(p->app, sizeof p->app, "%s", app);
        return true;
}

static bool send_stop(struct private *p, uint64_t voice) {
        char text[40];
        snprintf(text, sizeof text, "stop id %llu", (unsigned long long) voice);
        return send_text(p, text, PEND_STOP);
}

/* Connects without blocking and greets; the replies come to the reader thread. */
static void connect_to_cued(struct private *p) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (!p->socket_path[0])
                return;
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return;
        memcpy(sa.sun_path, p->socket_path, sizeof sa.sun_path);
        if (connect(fd, (struct sockaddr *) &sa, sizeof sa) < 0) {
                debug("cued not reachable", strerror(errno));
                close(fd);
                return;
        }
        p->fd = fd;
        p->fd_generation++;
        p->state = GREETING;
        p->greeting_left = 2;
        if (declare_app(p, p->context_app, PEND_GREETING))
                send_text(p, "events on", PEND_GREETING);
        wake(p);   /* the reader polls the new descriptor */
}

static void wait_until(struct private *p, uint64_t deadline) {
        struct timespec ts = { .tv_sec = (time_t) (deadline / 1000000000ull), .tv_nsec = (long) (deadline % 1000000000ull) };
        pthread_cond_timedwait(&p->changed, &p->lock, &ts);
}

/* Whether to send to cued: connected (a connect that succeeded means cued, or systemd
 * for it, listens; the request goes behind the greeting, not waiting for it), and no
 * request left unanswered for STUCK_NS. A cued that stopped answering is passed over
 * from then on, but what it was sent stays its own: never played twice. */
static bool cued_usable(struct private *p) {
        if (p->state == DISCONNECTED)
                connect_to_cued(p);
        if (p->state == DISCONNECTED || p->count + 4 > MAX_PENDING)
                return false;
        return !(p->count && now_ns() - p->ring[p->head].sent_ns > STUCK_NS);
}

/* Takes the lock if cued is to be sent the call (see cued_usable); else leaves it free. */
static bool lock_if_usable(struct private *p) {
        pthread_mutex_lock(&p->lock);
        if (cued_usable(p))
                return true;
        pthread_mutex_unlock(&p->lock);
        return false;
}

/* ---- Replies (reader thread, p->lock held) -------------------------------- */

/* The callback's code for a voice's end reason (protocol v1's end lines, cued-wire.h). */
static int end_code(const char *reason) {
        int r = cued_end_reason_of(reason, strlen(reason));
        if (r < 0)
                return CA_ERROR_IO;
        switch ((enum cued_end_reason) r) {
        case CUED_END_REASON_PLAYED:
                return CA_SUCCESS;
        case CUED_END_REASON_STOPPED_BY_ID:
        case CUED_END_REASON_STOPPED_BY_OWNER:
        case CUED_END_REASON_STOPPED_ALL:
        case CUED_END_REASON_STOLEN:
        case CUED_END_REASON_MUTED:
        case CUED_END_REASON_DISCONNECTED:
                return CA_ERROR_CANCELED;
        case CUED_END_REASON_BUSY:
                return CA_ERROR_NOTAVAILABLE;
        case CUED_END_REASON_SHUTDOWN:
                return CA_ERROR_DESTROYED;
        case CUED_END_REASON_LATE:
        case CUED_END_REASON_CUT:
                return CA_ERROR_IO;   /* the device did not play it */
        }
        return CA_ERROR_IO;
}

/* The machine word that follows some codes (`err bad-file not-found …`), as a canberra code. */
static int file_problem_code(const char *word) {
        int w = cued_file_problem_of(word, strlen(word));
        if (w < 0)
                return CA_ERROR_CORRUPT;   /* an older cued: no word */
        switch ((enum cued_file_problem) w) {
        case CUED_FILE_PROBLEM_NOT_FOUND:
                return CA_ERROR_NOTFOUND;
        case CUED_FILE_PROBLEM_DENIED:
                return CA_ERROR_ACCESS;
        case CUED_FILE_PROBLEM_OVER_BUDGET:
                return CA_ERROR_NOTAVAILABLE;
        case CUED_FILE_PROBLEM_TIMED_OUT:
        case CUED_FILE_PROBLEM_NOT_TRIED:
                return CA_ERROR_IO;
        case CUED_FILE_PROBLEM_NOT_REGULAR:
        case CUED_FILE_PROBLEM_UNREADABLE:
                return CA_ERROR_CORRUPT;
        }
        return CA_ERROR_CORRUPT;
}

/* An `err CODE [WORD] MESSAGE` reply as a canberra code; `word` is the message's first word. */
static int err_code(int code, const char *word) {
        if (code < 0)
                return CA_ERROR_INTERNAL;   /* a code this build does not know */
        switch ((enum cued_error) code) {
        case CUED_ERROR_UNKNOWN_CUE:
                return CA_ERROR_NOTFOUND;
        case CUED_ERROR_BAD_FILE:
                return file_problem_code(word);
        case CUED_ERROR_BAD_ARGUMENT:
                return CA_ERROR_INVALID;
        case CUED_ERROR_RATE_LIMITED:
        case CUED_ERROR_TOO_MANY:
        case CUED_ERROR_BUSY:
                return CA_ERROR_NOTAVAILABLE;
        case CUED_ERROR_LINE_TOO_LONG:
                return CA_ERROR_TOOBIG;
        case CUED_ERROR_UNKNOWN_VERB:
                return CA_ERROR_NOTSUPPORTED;
        case CUED_ERROR_NOT_PLAYED:
                return CA_ERROR_IO;
        case CUED_ERROR_FORBIDDEN:
                return CA_ERROR_ACCESS;
        case CUED_ERROR_RELOAD_FAILED:
        case CUED_ERROR_INTERNAL:
                return CA_ERROR_INTERNAL;
        }
        return CA_ERROR_INTERNAL;
}

/* Errors after which the sound is better played by the fallback than not at all:
 * cued is stopping (a restart), or refused the connection. */
static bool fallback_error(int code) {
        return code == CUED_ERROR_NOT_PLAYED || code == CUED_ERROR_BUSY || code == CUED_ERROR_FORBIDDEN;
}

static bool parse_u64(const char *s, uint64_t *v) {
        uint64_t x = 0;
        if (!*s || strlen(s) > 16)
                return false;
        for (; *s; s++) {
                if (*s < '0' || *s > '9')
                        return false;
                x = x * 10 + (uint64_t) (*s - '0');
        }
        *v = x;
        return true;
}

/* `ok disabled`: the theme's .disabled, as libcanberra's own lookup says. */
static bool is_disabled(const char *payload) {
        return !strcmp(payload, cued_not_sounded_word(CUED_NOT_SOUNDED_DISABLED));
}

static void on_play_reply(struct private *p, struct play *pl, bool ok, const char *payload, int code, const char *word) {
        uint64_t voice;
        pl->in_flight--;
        if (ok && parse_u64(payload, &voice)) {
                if (pl->state == DONE) {
                        /* canceled before cued said which voice it is */
                        send_stop(p, voice);
                } else {
                        pl->voice = voice;
                        pl->state = PLAYING;
                        pthread_cond_broadcast(&p->changed);
                        if (pl->props) {
                                ca_proplist_destroy(pl->props);
                                pl->props = NULL;
                        }
                }
        } else if (pl->state == DONE) {
                /* canceled: nothing more to say */
        } else if (ok) {
                /* `ok muted`, `ok silent`: as a muted sound server plays it; `ok disabled`:
                 * the theme's .disabled, as libcanberra's own lookup says */
                finish(p, pl, is_disabled(payload) ? CA_ERROR_DISABLED : CA_SUCCESS);
        } else if (code == CUED_ERROR_UNKNOWN_CUE && pl->retry) {
                struct line l = { .n = 0 };
                put(&l, pl->retry);
                free(pl->retry);
                pl->retry = NULL;
                send_request(p, &l, PEND_PLAY, pl, NULL);
        } else if (fallback_error(code) && pl->props) {
                pl->replay = true;
                pthread_cond_broadcast(&p->changed);
        } else {
                finish(p, pl, err_code(code, word));
        }
        release(pl);
}

static void on_end(struct private *p, const char *rest) {
        char idtext[24];
        const char *sp = strchr(rest, ' ');
        uint64_t voice;
        if (!sp || (size_t) (sp - rest) >= sizeof idtext)
                return;
        memcpy(idtext, rest, (size_t) (sp - rest));
        idtext[sp - rest] = 0;
        if (!parse_u64(idtext, &voice))
                return;
        for (struct play *pl = p->active; pl; pl = pl->next)
                if (pl->state == PLAYING && pl->voice == voice) {
                        finish(p, pl, end_code(sp + 1));
                        return;
                }
}

/* One line from cued: a reply to the oldest request, or an end line. */
static void on_line(struct private *p, char *line) {
        if (!strncmp(line, "end ", 4)) {
                on_end(p, line + 4);
                return;
        }
        bool ok = !strcmp(line, "ok") || !strncmp(line, "ok ", 3);
        if ((!ok && strncmp(line, "err ", 4)) || p->count == 0) {
                disconnect(p, "cued said something unexpected");
                return;
        }
        int code = -1;
        char word[32] = "";
        const char *payload = ok ? (line[2] ? line + 3 : "") : line + 4;
        if (!ok) {
                size_t n = strcspn(payload, " ");
                code = cued_error_of(payload, n);
                payload += n + (payload[n] ? 1 : 0);
                n = strcspn(payload, " ");
                snprintf(word, sizeof word, "%.*s", (int) (n < sizeof word ? n : sizeof word - 1), payload);
        }
        struct pending e = p->ring[p->head];
        p->head = (p->head + 1) % MAX_PENDING;
        p->count--;
        switch (e.kind) {
        case PEND_GREETING:
                /* an older cued may refuse `via=`: the events line is what matters */
                if (--p->greeting_left == 0 && p->state == GREETING) {
                        p->state = ok ? READY : DISCONNECTED;
                        if (!ok)
                                disconnect(p, "cued refused `events on`");
                        pthread_cond_broadcast(&p->changed);
                }
                break;
        case PEND_APP:
        case PEND_STOP:
                break;
        case PEND_PLAY:
                on_play_reply(p, e.play, ok, payload, code, word);
                break;
        case PEND_PRELOAD:
                waiter_done(e.waiter, ok ? (is_disabled(payload) ? CA_ERROR_DISABLED : CA_SUCCESS) : err_code(code, word));
                pthread_cond_broadcast(&p->changed);
                break;
        }
        if (!ok && (code == CUED_ERROR_BUSY || code == CUED_ERROR_FORBIDDEN || code == CUED_ERROR_LINE_TOO_LONG))
                disconnect(p, cued_error_word((enum cued_error) code));   /* cued closes these connections */
}

/* Reads what is there; whole lines are handled, a line over READ_BYTES ends the connection. */
static void read_socket(struct private *p) {
        for (;;) {
                ssize_t n = recv(p->fd, p->rbuf + p->rlen, sizeof p->rbuf - p->rlen, MSG_DONTWAIT);
                if (n == 0) {
                        disconnect(p, "cued closed the connection");
                        return;
                }
                if (n < 0) {
                        if (errno != EAGAIN && errno != EINTR)
                                disconnect(p, strerror(errno));
                        return;
                }
                p->rlen += (size_t) n;
                char *start = p->rbuf, *nl;
                uint64_t generation = p->fd_generation;
                while (p->fd_generation == generation && (nl = memchr(start, '\n', p->rlen - (size_t) (start - p->rbuf)))) {
                        *nl = 0;
                        if (nl > start && nl[-1] == '\r')
                                nl[-1] = 0;
                        on_line(p, start);
                        start = nl + 1;
                }
                if (p->fd_generation != generation)
                        return;   /* a line ended the connection */
                p->rlen -= (size_t) (start - p->rbuf);
                memmove(p->rbuf, start, p->rlen);
                if (p->rlen == sizeof p->rbuf) {
                        disconnect(p, "a line from cued too long");
                        return;
                }
        }
}

/* ---- The fallback: the driver libcanberra would have used ------------------- */

struct closure {
        ca_context *context;
        ca_finish_callback_t cb;
        void *userdata;
};

static void call_closure(ca_context *sub, uint32_t id, int code, void *userdata) {
        struct closure *k = userdata;
        (void) sub;
        k->cb(k->context, id, code, k->userdata);
        free(k);
}

/* The i-th fallback driver, opened the first time it is needed; NULL if it does not open. */
static ca_context *fallback_context(struct private *p, int i) {
        ca_context *sub = NULL;
        pthread_mutex_lock(&p->fb_lock);
        if (!(sub = p->fb[i]) && ca_context_create(&sub) == CA_SUCCESS) {
                if (ca_context_set_driver(sub, p->fb_names[i]) < 0 || (p->props && ca_context_change_props_full(sub, p->props) < 0)
                    || ca_context_change_device(sub, p->device[0] ? p->device : NULL) < 0 || ca_context_open(sub) < 0) {
                        ca_context_destroy(sub);
                        sub = NULL;
                } else {
                        debug("fallback opened", p->fb_names[i]);
                        p->fb[i] = sub;
                }
        }
        pthread_mutex_unlock(&p->fb_lock);
        return sub;
}

/* multi.c's rule: the first driver that plays it takes it; the first failure is returned. */
static int fallback_play(struct private *p, uint32_t id, ca_proplist *pl, ca_finish_callback_t cb, void *userdata) {
        int ret = CA_ERROR_NODRIVER;
        bool first = true;
        debug("cued absent; playing through the fallback", NULL);
        for (int i = 0; i < p->fb_count; i++) {
                ca_context *sub = fallback_context(p, i);
                if (!sub)
                        continue;
                struct closure *k = NULL;
                if (cb) {
                        if (!(k = malloc(sizeof *k)))
                                return CA_ERROR_OOM;
                        *k = (struct closure) { p->context, cb, userdata };
                }
                int r = ca_context_play_full(sub, id, pl, k ? call_closure : NULL, k);
                if (r == CA_SUCCESS)
                        return r;
                free(k);
                if (first)
                        ret = r;
                first = false;
                if (r == CA_ERROR_NOTFOUND || r == CA_ERROR_DISABLED || r == CA_ERROR_INVALID)
                        break;   /* another driver would not find it either */
        }
        return ret;
}

static int fallback_cache(struct private *p, ca_proplist *pl) {
        int ret = CA_ERROR_NODRIVER;
        for (int i = 0; i < p->fb_count; i++) {
                ca_context *sub = fallback_context(p, i);
                if (sub && (ret = ca_context_cache_full(sub, pl)) == CA_SUCCESS)
                        break;
        }
        return ret;
}

/* The fallback drivers opened so far (they stay until the context is destroyed). */
static int opened_fallbacks(struct private *p, ca_context *out[MAX_FALLBACKS]) {
        int n = 0;
        pthread_mutex_lock(&p->fb_lock);
        for (int i = 0; i < p->fb_count; i++)
                if (p->fb[i])
                        out[n++] = p->fb[i];
        pthread_mutex_unlock(&p->fb_lock);
        return n;
}

/* The names after "cued" in CANBERRA_DRIVER ("cued,alsa"), else libcanberra's own order. */
static void fallback_names(struct private *p, const char *driver) {
        const char *rest = driver ? driver + strcspn(driver, ",:") : "";
        bool explicit = *rest != 0;
        size_t i = 0;
        for (;;) {
                const char *name;
                size_t n;
                if (explicit) {
                        if (!*rest)
                                break;
                        rest++;
                        name = rest;
                        n = strcspn(rest, ",:");
                        rest += n;
                } else {
                        if (!ca_driver_order[i])
                                break;
                        name = ca_driver_order[i++];
                        n = strlen(name);
                }
                if (n == 0 || n >= sizeof p->fb_names[0] || (n == 4 && !strncmp(name, "cued", 4)) || (n == 5 && !strncmp(name, "multi", 5)))
                        continue;
                if (p->fb_count == MAX_FALLBACKS)
                        break;
                memcpy(p->fb_names[p->fb_count], name, n);
                p->fb_names[p->fb_count++][n] = 0;
        }
}

/* ---- The reader thread -------------------------------------------------------- */

static void free_private(struct private *p);

/* Callbacks of ended plays, and replays, outside the lock (a callback may take its
 * own locks, or another thread of the app may be in a call waiting for ours). */
static void run_deliveries(struct private *p) {
        for (;;) {
                struct play *ready = NULL, *replays = NULL;
                for (struct play **q = &p->done; *q;) {
                        struct play *pl = *q;
                        if (pl->returned) {
                                *q = pl->next;
                                pl->next = ready;
                                ready = pl;
                        } else
                                q = &pl->next;
                }
                for (struct play **q = &p->active; *q;) {
                        struct play *pl = *q;
                        if (pl->replay && pl->returned && pl->state == WAITING) {
                                *q = pl->next;
                                p->nplays--;
                                pl->next = replays;
                                replays = pl;
                        } else
                                q = &pl->next;
                }
                if (!ready && !replays)
                        return;
                pthread_mutex_unlock(&p->lock);
                for (struct play *pl = replays; pl; pl = pl->next) {
                        int r = fallback_play(p, pl->ca_id, pl->props, pl->cb, pl->userdata);
                        pl->result = r;
                }
                for (struct play *pl = ready; pl; pl = pl->next)
                        if (pl->cb)
                                pl->cb(p->context, pl->ca_id, pl->result, pl->userdata);
                for (struct play *pl = replays; pl; pl = pl->next)
                        if (pl->result < 0 && pl->cb)
                                pl->cb(p->context, pl->ca_id, pl->result, pl->userdata);
                pthread_mutex_lock(&p->lock);
                for (struct play *lists[2] = { ready, replays }, **l = lists; l < lists + 2; l++)
                        for (struct play *pl = *l, *n; pl; pl = n) {
                                n = pl->next;
                                pl->delivered = true;
                                pl->state = DONE;
                                release(pl);
                        }
        }
}

static void *reader(void *arg) {
        struct private *p = arg;
        pthread_mutex_lock(&p->lock);
        while (!p->stopping) {
                run_deliveries(p);
                if (p->stopping)
                        break;
                int fd = p->fd;
                uint64_t generation = p->fd_generation;
                int timeout = -1;
                if (p->count) {
                        uint64_t age = now_ns() - p->ring[p->head].sent_ns;
                        if (age >= DEAD_NS) {
                                disconnect(p, "cued did not answer for 6 s");
                                continue;
                        }
                        timeout = (int) ((DEAD_NS - age) / MS) + 1;
                }
                pthread_mutex_unlock(&p->lock);
                struct pollfd fds[2] = { { .fd = p->wakefd, .events = POLLIN }, { .fd = fd, .events = POLLIN } };
                int n = poll(fds, fd >= 0 ? 2 : 1, timeout);
                pthread_mutex_lock(&p->lock);
                if (n < 0)
                        continue;
                if (fds[0].revents) {
                        uint64_t v;
                        ssize_t r = read(p->wakefd, &v, sizeof v);
                        (void) r;
                }
                if (fd >= 0 && fds[1].revents && p->fd_generation == generation)
                        read_socket(p);
        }
        /* Destroyed: nothing more will come; every play left ends now, here. */
        disconnect(p, NULL);
        for (struct play *pl = p->active, *n; pl; pl = n) {
                n = pl->next;
                finish(p, pl, CA_ERROR_DESTROYED);
        }
        run_deliveries(p);
        bool self = p->destroyed_here;
        pthread_mutex_unlock(&p->lock);
        if (self)
                free_private(p);
        return NULL;
}

/* ---- libcanberra's entry points ---------------------------------------------------- */

EXPORT int cued_driver_destroy(ca_context *c);

/* Keeps this module loaded for the life of the process: a context destroyed from its own
 * callback leaves the thread running this code for a moment after libcanberra has
 * closed the module. */
static void pin_module(void) {
        Dl_info info;
        if (dladdr((void *) cued_driver_destroy, &info) && info.dli_fname)
                dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}

EXPORT int cued_driver_open(ca_context *c) {
        struct private *p;
        pthread_condattr_t ca;
        sigset_t all, old;
        const char *d = c ? c->driver : NULL;

        if (!c)
                return CA_ERROR_INVALID;
        if (d && (strncmp(d, "cued", 4) || (d[4] && d[4] != ',' && d[4] != ':')))
                return CA_ERROR_NODRIVER;
        if (c->private)
                return CA_ERROR_STATE;
        static pthread_once_t pinned = PTHREAD_ONCE_INIT;
        pthread_once(&pinned, pin_module);
        if (!(p = calloc(1, sizeof *p)))
                return CA_ERROR_OOM;
        p->context = c;
        p->fd = -1;
        p->wakefd = -1;
        pthread_mutex_init(&p->lock, NULL);
        pthread_mutex_init(&p->fb_lock, NULL);
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&p->changed, &ca);
        pthread_condattr_destroy(&ca);
        c->private = p;

        const char *s = getenv("CUED_SOCKET"), *rt = getenv("XDG_RUNTIME_DIR");
        if (s && *s)
                snprintf(p->socket_path, sizeof p->socket_path, "%s", s);
        else if (rt && *rt && strlen(rt) + sizeof "/cued/cued.sock" <= sizeof p->socket_path)
                snprintf(p->socket_path, sizeof p->socket_path, "%s/cued/cued.sock", rt);
        if (strlen(p->socket_path) + 1 >= sizeof p->socket_path)
                p->socket_path[0] = 0;   /* too long for a socket address: cued is out of reach */
        fallback_names(p, d);
        app_of(NULL, c->props, p->context_app);
        p->props = copy_props(c->props);
        if (c->device)
                snprintf(p->device, sizeof p->device, "%s", c->device);

        if ((p->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
                cued_driver_destroy(c);
                return CA_ERROR_SYSTEM;
        }
        /* The thread takes none of the host's signals. */
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        int r = pthread_create(&p->thread, NULL, reader, p);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (r) {
                cued_driver_destroy(c);
                return CA_ERROR_OOM;
        }
        p->thread_started = true;
        pthread_mutex_lock(&p->lock);
        connect_to_cued(p);
        pthread_mutex_unlock(&p->lock);
        return CA_SUCCESS;
}

EXPORT int cued_driver_destroy(ca_context *c) {
        struct private *p;
        if (!c || !(p = PRIVATE(c)))
                return CA_ERROR_STATE;
        c->private = NULL;
        if (p->thread_started && pthread_equal(pthread_self(), p->thread)) {
                /* From a callback, on the thread itself: it cannot wait for itself. It ends
                 * once the callback returns, and frees what is left (its code stays loaded:
                 * the module is pinned at the first open). */
                pthread_mutex_lock(&p->lock);
                p->stopping = true;
                p->destroyed_here = true;
                pthread_mutex_unlock(&p->lock);
                pthread_detach(p->thread);
                return CA_SUCCESS;
        }
        if (p->thread_started) {
                pthread_mutex_lock(&p->lock);
                p->stopping = true;
                wake(p);
                pthread_mutex_unlock(&p->lock);
                pthread_join(p->thread, NULL);
        } else {
                pthread_mutex_lock(&p->lock);
                disconnect(p, NULL);
                pthread_mutex_unlock(&p->lock);
        }
        free_private(p);
        return CA_SUCCESS;
}

/* What is left once the thread has ended: ended plays, the fallback's contexts, the rest. */
static void free_private(struct private *p) {
        for (struct play *pl = p->done, *n; pl; pl = n) {
                n = pl->next;
                free_play(pl);
        }
        for (int i = 0; i < MAX_FALLBACKS; i++)
                if (p->fb[i])
                        ca_context_destroy(p->fb[i]);
        if (p->props)
                ca_proplist_destroy(p->props);
        if (p->wakefd >= 0)
                close(p->wakefd);
        pthread_cond_destroy(&p->changed);
        pthread_mutex_destroy(&p->lock);
        pthread_mutex_destroy(&p->fb_lock);
        free(p);
}

EXPORT int cued_driver_change_device(ca_context *c, const char *device) {
        struct private *p;
        if (!c || !(p = PRIVATE(c)))
                return CA_ERROR_STATE;
        /* cued has one output, its own: a device is the fallback's business */
        pthread_mutex_lock(&p->fb_lock);
        snprintf(p->device, sizeof p->device, "%s", device ? device : "");
        pthread_mutex_unlock(&p->fb_lock);
        ca_context *subs[MAX_FALLBACKS];
        for (int i = 0, n = opened_fallbacks(p, subs); i < n; i++)
                ca_context_change_device(subs[i], device);
        return CA_SUCCESS;
}

EXPORT int cued_driver_change_props(ca_context *c, ca_proplist *changed, ca_proplist *merged) {
        struct private *p;
        ca_proplist *copy;
        if (!c || !changed || !merged || !(p = PRIVATE(c)))
                return CA_ERROR_INVALID;
        /* The app and theme are read from the properties at each play. */
        if (!(copy = copy_props(merged)))
                return CA_ERROR_OOM;
        pthread_mutex_lock(&p->fb_lock);
        if (p->props)
                ca_proplist_destroy(p->props);
        p->props = copy;
        pthread_mutex_unlock(&p->fb_lock);
        char app[LABEL_BYTES + 1];
        app_of(NULL, merged, app);
        pthread_mutex_lock(&p->lock);
        snprintf(p->context_app, sizeof p->context_app, "%s", app);
        pthread_mutex_unlock(&p->lock);
        ca_context *subs[MAX_FALLBACKS];
        for (int i = 0, n = opened_fallbacks(p, subs); i < n; i++)
                ca_context_change_props_full(subs[i], changed);
        return CA_SUCCESS;
}

EXPORT int cued_driver_play(ca_context *c, uint32_t id, ca_proplist *proplist, ca_finish_callback_t cb, void *userdata) {
        struct private *p;
        struct request req;
        if (!c || !proplist || (userdata && !cb) || !(p = PRIVATE(c)))
                return CA_ERROR_INVALID;
        int v = describe(proplist, c->props, false, &req);
        if (v == FALLBACK)
                return fallback_play(p, id, proplist, cb, userdata);
        if (v < 0)
                return v;

        uint64_t deadline = now_ns() + CALL_BUDGET_NS;
        if (!lock_if_usable(p))
                return fallback_play(p, id, proplist, cb, userdata);
        if (p->nplays >= MAX_PLAYS) {
                pthread_mutex_unlock(&p->lock);
                return CA_ERROR_NOTAVAILABLE;
        }
        struct play *pl = calloc(1, sizeof *pl);
        if (!pl || (req.has_retry && !(pl->retry = strdup(req.retry.s)))) {
                free(pl);
                pthread_mutex_unlock(&p->lock);
                return CA_ERROR_OOM;
        }
        pl->ca_id = id;
        pl->cb = cb;
        pl->userdata = userdata;
        pl->props = copy_props(proplist);   /* without it, not replayed but ended if cued goes away */
        if (strcmp(req.app, p->app) && !declare_app(p, req.app, PEND_APP)) {
                free_play(pl);
                pthread_mutex_unlock(&p->lock);
                return fallback_play(p, id, proplist, cb, userdata);
        }
        if (!send_request(p, &req.line, PEND_PLAY, pl, NULL)) {
                free_play(pl);
                pthread_mutex_unlock(&p->lock);
                return fallback_play(p, id, proplist, cb, userdata);
        }
        pl->next = p->active;
        p->active = pl;
        p->nplays++;

        /* Its reply, within the budget: a sound cued has decoded answers in well under a
         * millisecond; one it decodes first answers later, through the callback. */
        while (pl->state == WAITING && !pl->replay && now_ns() < deadline)
                wait_until(p, deadline);
        if (pl->replay && pl->state == WAITING) {
                /* cued is stopping or went away before it answered */
                unlink_play(&p->active, pl);
                p->nplays--;
                pl->delivered = true;
                pl->state = DONE;
                release(pl);
                pthread_mutex_unlock(&p->lock);
                return fallback_play(p, id, proplist, cb, userdata);
        }
        if (pl->state == DONE && pl->result < 0) {
                /* refused at once: said by the return value, and no callback (libcanberra's rule) */
                int code = pl->result;
                unlink_play(&p->done, pl);
                pl->delivered = true;
                release(pl);
                pthread_mutex_unlock(&p->lock);
                return code;
        }
        pl->returned = true;
        if (pl->state == DONE || pl->replay)
                wake(p);
        pthread_mutex_unlock(&p->lock);
        return CA_SUCCESS;
}

EXPORT int cued_driver_cancel(ca_context *c, uint32_t id) {
        struct private *p;
        if (!c || !(p = PRIVATE(c)))
                return CA_ERROR_STATE;
        pthread_mutex_lock(&p->lock);
        for (struct play *pl = p->active, *n; pl; pl = n) {
                n = pl->next;
                if (pl->ca_id != id)
                        continue;
                if (pl->state == PLAYING)
                        send_stop(p, pl->voice);
                /* the voice may yet sound its last milliseconds; the play is over for the app */
                if (pl->state != DONE)
                        finish(p, pl, CA_ERROR_CANCELED);
                /* `n` may have been ended by a failed send: start over from the list's head */
                n = p->active;
        }
        pthread_mutex_unlock(&p->lock);
        ca_context *subs[MAX_FALLBACKS];
        for (int i = 0, n = opened_fallbacks(p, subs); i < n; i++)
                ca_context_cancel(subs[i], id);
        return CA_SUCCESS;
}

EXPORT int cued_driver_cache(ca_context *c, ca_proplist *proplist) {
        struct private *p;
        struct request req;
        if (!c || !proplist || !(p = PRIVATE(c)))
                return CA_ERROR_INVALID;
        int v = describe(proplist, c->props, true, &req);
        if (v < 0)
                return v;
        uint64_t deadline = now_ns() + CALL_BUDGET_NS;
        if (!lock_if_usable(p))
                return fallback_cache(p, proplist);
        struct waiter *w = calloc(1, sizeof *w);
        if (!w) {
                pthread_mutex_unlock(&p->lock);
                return CA_ERROR_OOM;
        }
        if ((strcmp(req.app, p->app) && !declare_app(p, req.app, PEND_APP)) || !send_request(p, &req.line, PEND_PRELOAD, NULL, w)) {
                free(w);
                pthread_mutex_unlock(&p->lock);
                return fallback_cache(p, proplist);
        }
        while (!w->done && now_ns() < deadline)
                wait_until(p, deadline);
        /* Not decoded yet: cued goes on, and the first play finds it ready or waits for it. */
        int r = w->done ? w->result : CA_SUCCESS;
        if (w->done)
                free(w);
        else
                w->abandoned = true;
        pthread_mutex_unlock(&p->lock);
        return r;
}

EXPORT int cued_driver_playing(ca_context *c, uint32_t id, int *playing) {
        struct private *p;
        if (!c || !playing || !(p = PRIVATE(c)))
                return CA_ERROR_INVALID;
        *playing = 0;
        pthread_mutex_lock(&p->lock);
        for (struct play *pl = p->active; pl; pl = pl->next)
                if (pl->ca_id == id)
                        *playing = 1;
        pthread_mutex_unlock(&p->lock);
        ca_context *subs[MAX_FALLBACKS];
        for (int i = 0, n = opened_fallbacks(p, subs); i < n && !*playing; i++) {
                int x = 0;
                if (ca_context_playing(subs[i], id, &x) == CA_SUCCESS && x)
                        *playing = 1;
        }
        return CA_SUCCESS;
}
