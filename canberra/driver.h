/* libcanberra-cued.so's shared state: one `struct ctx` per libcanberra context.
 *
 * Threads: the host's (libcanberra calls the entry points, entry.c, one at a time per
 * context: libcanberra holds the context's own lock around each), the context's reader
 * (reader.c: reads cued's lines, watches for a stalled cued, keeps every play's deadline,
 * calls the app back), fallback workers (fallback.c: the only threads that call the fallback
 * drivers, whose calls may block; one per context while it has jobs, at most MAX_WORKERS in
 * the process) and, with CANBERRA_DEBUG, one debug writer for the process (connection.c).
 *
 * The lock rule. `ctx.lock` guards everything here but the fallback's queue. It is held for
 * table work and, when a caller sends, across one non-blocking send of one line (or, the
 * connection doomed, the shutdown of its write side, which does not block either); never
 * across a read, a parse, a connect, a wait, a callback, a write to stderr (debug() only
 * buffers) or a call into another driver. So a caller waits for it at most for another
 * thread's table work, which is bounded (MAX_PLAYS, LINES_PER_TURN). The order: ctx.lock,
 * then a fallback's own lock, then the process's fallback pool lock or the debug lock
 * (leaves: table work only); never the other way. A fallback driver's callback takes only
 * its fallback's lock. */
#ifndef CUED_DRIVER_H
#define CUED_DRIVER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/un.h>

#include "canberra-private.h"
#include "cued-wire.h"

#define MS 1000000ull

enum {
        READ_BYTES = 4096,       /* the longest line taken from cued; a longer one ends the connection */
        MAX_PENDING = 256,       /* requests awaiting their reply on one connection */
        MAX_PLAYS = 2048,        /* plays of one context not ended yet (a play is ~200 bytes, its properties' copy more) */
        LINES_PER_TURN = 64,     /* lines handled per hold of the lock: a caller waits for at most this many */
        PROP_BYTES = 4096,       /* a property value read at most (longer: treated as unusable) */
        MAX_FALLBACKS = 4,
        MAX_VOICES = 512,        /* voices cued says are open for one context: it mixes at most 256, the rest it must have ended */
        DRAIN_READS = 16,        /* reads of what waits on the socket before a verdict on cued (64 KiB) */
        FALLBACK_QUEUE = MAX_PLAYS,   /* jobs waiting for the fallback worker: every play can be one */
        MAX_WORKERS = 8,         /* fallback workers in the process, across all its contexts (fallback.c) */
};

/* How long cued may take, then what is done (see connection.c's watchdog). */
static const uint64_t SUSPECT_NS = 20 * MS;      /* a request unanswered this long: is cued running? */
static const uint64_t PROBE_NS = 250 * MS;       /* a ping on a connection of its own unanswered this long: stalled */
static const uint64_t HUNG_NS = 1000 * MS;       /* unanswered this long though cued answers pings: stuck for us */
static const uint64_t SOUND_MAX_NS = 10000 * MS; /* cued's longest sound (it refuses longer files; the plug-in never loops) */
static const uint64_t VOICE_GRACE_NS = 1500 * MS; /* a voice's end later than its sound could last plus this: cued failed us */
static const uint64_t ALIVE_NS = 250 * MS;       /* while voices are open, how often the reader looks whether cued is stopped */
static const uint64_t REROUTE_NS = 2000 * MS;    /* a play older than this is not played late through the fallback */
static const uint64_t DRAIN_NS = 250 * MS;       /* a cued given up on while it reads: its answers to what it was sent, awaited
                                                  * this long at most (until its end of file) before the rest is re-routed */
static const uint64_t SOUNDED_NS = 300 * MS;     /* a voice started this long ago was heard: not played again */
static const uint64_t BACKOFF_MIN_NS = 1000 * MS, BACKOFF_MAX_NS = 30000 * MS;
static const uint64_t FALLBACK_LATE_NS = 2500 * MS; /* a play the fallback has not taken this long after it was asked: dropped */
static const uint64_t FALLBACK_HUNG_NS = 1000 * MS; /* a driver's open or play in progress this long: others skip that driver */
static const uint64_t FALLBACK_IDLE_NS = 5000 * MS; /* a worker with no job this long ends, its drivers closed */

/* One play ca_context_play_full accepted. Its callback runs exactly once, from the reader. */
enum play_state {
        SENT,         /* sent to cued; its reply not read yet */
        PLAYING,      /* cued's voice `voice`; its end line comes */
        FALLBACK,     /* handed to the fallback driver, whose callback ends it */
        DONE,         /* ended with `result`; its callback is due (`due`) or ran */
};
struct play {
        struct play *next, *prev;     /* the context's plays */
        struct play *next_due;        /* the callbacks due, in the order they became due */
        uint32_t ca_id;
        uint64_t serial;              /* unique in the context: the fallback's callbacks name it so */
        enum play_state state;
        int result;
        bool due;             /* DONE and its callback not run yet */
        bool voice_open;      /* cued started `voice` and its end line has not come: kept until it does, or
                               * until the voice is overdue (voice_ns + SOUND_MAX_NS + VOICE_GRACE_NS) */
        int replies_owed;     /* requests in flight that refer to it (the play, its retry) */
        uint64_t voice;
        uint64_t born_ns, voice_ns;   /* asked for; cued said which voice */
        uint64_t fb_due_ns;           /* FALLBACK: taken by its driver by then (born + FALLBACK_LATE_NS), or, once
                                       * taken, called back by then: else ended by the reader */
        bool fb_taken;                /* its driver took it */
        ca_finish_callback_t cb;
        void *userdata;
        char *retry;          /* the play-file line, if the theme has no such sound */
        ca_proplist *props;   /* a copy, to re-route it to the fallback while it has not sounded */
};

enum pending_kind { PEND_GREETING, PEND_APP, PEND_PLAY, PEND_STOP, PEND_PRELOAD };
struct pending {
        enum pending_kind kind;
        uint64_t sent_ns;
        struct play *play;
};

/* DOWN: no connection (`retry_ns`: not before then). UP: connected, the greeting sent
 * (`greeted` once answered). BROKEN: given up; the reader closes the descriptor. */
enum conn_state { DOWN, UP, BROKEN };

struct fallback;

struct ctx {
        ca_context *context;
        pthread_mutex_t lock;

        /* The connection. The reader alone closes `fd` (and only once it is BROKEN). */
        char socket_path[sizeof(((struct sockaddr_un *) 0)->sun_path)];
        enum conn_state state;
        int fd;
        uint64_t generation;          /* moved on at every connection */
        bool greeted;                 /* cued answered the greeting on this connection */
        bool on_probation;            /* after a stall or a lie: plays go to the fallback until cued greets */
        const char *doomed;           /* given up on (why): nothing more is sent, the socket is half-closed, and the
                                       * reader applies cued's answers until its end of file or drain_due_ns, then
                                       * breaks the connection (doomed_stalled): see conn_doom */
        bool doomed_stalled;
        uint64_t drain_due_ns;
        uint64_t retry_ns, backoff_ns;
        pid_t peer;                   /* the listening process (SO_PEERCRED), 0 unknown */
        char app[CUED_LABEL_BYTES + 1];          /* the app the connection declared */
        char context_app[CUED_LABEL_BYTES + 1];  /* the app the context's properties name */
        struct pending ring[MAX_PENDING];
        unsigned head, count;
        unsigned plays_in_ring;       /* PEND_PLAY entries: each may have its end line come before its reply */
        int greeting_left;
        uint64_t early[16];           /* end lines read before their play's `ok ID` (that reply waited behind */
        int early_reason[16];         /* an earlier one, a decode): matched when it comes */
        unsigned nearly;
        unsigned nvoices;             /* plays with voice_open */
        uint64_t voice_due_ns;        /* no open voice is due before this (0: none open): the oldest's deadline */
        uint64_t alive_check_ns;      /* when the reader next looks whether cued is stopped, while voices are open */
        uint64_t fb_due_ns;           /* no play in the fallback is due before this (0: none) */
        bool sweep;                   /* plays to free: the connection was given up */

        /* The plays not freed yet: sent, playing, in the fallback, or ended with a callback due
         * (or a voice whose end has not come). */
        struct play *plays;
        unsigned nplays;
        struct play *due_head, *due_tail;
        uint64_t next_serial;

        int wakefd;                   /* wakes the reader */
        pthread_t reader;
        bool reader_started, stopping, destroyed_on_reader;

        struct fallback *fb;          /* created when first needed */
        ca_proplist *props;           /* the context's properties (for the fallback's contexts) */
        char device[256];
        char fb_names[MAX_FALLBACKS][32];
        int fb_count;
};

#define CTX(c) ((struct ctx *) ((c)->private))

uint64_t now_ns(void);
void debug(const char *what, const char *detail);   /* buffered, any thread, any lock held: its own thread writes */
ca_proplist *copy_props(ca_proplist *src);
void wake_reader(struct ctx *x);

/* request.c: what a play or a cache asks of cued. */
struct line {
        char s[CUED_LINE_BYTES + 2];
        size_t n;
        bool over;
};
enum verdict { SEND = 1, FALLBACK_ONLY = 2 };
struct request {
        struct line line;
        struct line retry;     /* play-file, if the theme has no such sound */
        bool has_retry;
        char app[CUED_LABEL_BYTES + 1];
};
void put(struct line *l, const char *s);
int describe(ca_proplist *play, ca_proplist *ctx_props, bool cache, struct request *r);
void app_of(ca_proplist *play, ca_proplist *ctx_props, char out[CUED_LABEL_BYTES + 1]);

/* plays.c: the table (ctx.lock held). */
struct play *play_new(struct ctx *x, uint32_t id, ca_finish_callback_t cb, void *userdata, ca_proplist *props, const char *retry);
void play_finish(struct ctx *x, struct play *pl, int code);
void play_reroute(struct ctx *x, struct play *pl, const char *why);
void play_release(struct ctx *x, struct play *pl);
void plays_sweep(struct ctx *x);
struct play *play_of_voice(struct ctx *x, uint64_t voice);
void voice_opened(struct ctx *x, struct play *pl, uint64_t voice);
void voice_closed(struct ctx *x, struct play *pl);
void run_callbacks(struct ctx *x);   /* takes and gives back ctx.lock around each callback */
void end_all(struct ctx *x, int code);

/* connection.c: cued (ctx.lock held unless said). */
bool cued_takes_plays(struct ctx *x);
bool send_request(struct ctx *x, const struct line *l, enum pending_kind kind, struct play *pl);
bool declare_app(struct ctx *x, const char *app, enum pending_kind kind);
void send_stop(struct ctx *x, uint64_t voice);
void conn_break(struct ctx *x, const char *why, bool stalled);
void conn_doom(struct ctx *x, const char *why, bool stalled);   /* cued reads: what it was sent is answered, then conn_break */
void connect_if_due(struct ctx *x);                          /* not held */

/* reader.c: the reader thread. */
void *reader_main(void *arg);

/* entry.c */
void ctx_free(struct ctx *x);                                /* once the reader has ended */

/* fallback.c: the driver cued stands in for. */
void fallback_names(struct ctx *x, const char *driver);
bool fallback_play(struct ctx *x, struct play *pl);          /* ctx.lock held; false: its queue is full */
void fallback_cache(struct ctx *x, ca_proplist *props);      /* ctx.lock held; takes `props` */
void fallback_cancel(struct ctx *x, uint32_t id);            /* ctx.lock held */
void fallback_change(struct ctx *x);                         /* ctx.lock held: props or device changed */
void fallback_collect(struct ctx *x);                        /* ctx.lock held: the callbacks that came end their plays */
int fallback_deadlines(struct ctx *x);                       /* ctx.lock held: ends overdue plays; ms to the next (-1 none) */
void fallback_close(struct ctx *x);                          /* not held; the worker ends on its own */

#endif
