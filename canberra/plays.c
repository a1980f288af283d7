/* The play table of a context: every play ca_context_play_full accepted, from its request to
 * its callback, which runs exactly once, from the reader thread (run_callbacks), never from
 * the caller's. A play is freed once its callback ran, no reply refers to it any more, and
 * cued's voice for it has ended (its end line is cued's account of the voice: one that never
 * comes, or comes twice, is a lie). All with ctx.lock held but run_callbacks' calls. */
#include <stdlib.h>
#include <string.h>

#include "driver.h"

struct play *play_new(struct ctx *x, uint32_t id, ca_finish_callback_t cb, void *userdata, ca_proplist *props, const char *retry) {
        struct play *pl = calloc(1, sizeof *pl);
        if (!pl || (retry && !(pl->retry = strdup(retry)))) {
                free(pl);
                return NULL;
        }
        pl->ca_id = id;
        pl->serial = ++x->next_serial;
        pl->cb = cb;
        pl->userdata = userdata;
        pl->props = props;
        pl->born_ns = now_ns();
        pl->state = SENT;
        pl->next = x->plays;
        if (x->plays)
                x->plays->prev = pl;
        x->plays = pl;
        x->nplays++;
        return pl;
}

static void drop_props(struct play *pl) {
        if (pl->props) {
                ca_proplist_destroy(pl->props);
                pl->props = NULL;
        }
}

/* A play's one end: its code, and its callback due (the reader runs it). */
void play_finish(struct ctx *x, struct play *pl, int code) {
        if (pl->state == DONE)
                return;
        pl->state = DONE;
        pl->result = code;
        pl->due = true;
        pl->next_due = NULL;
        if (x->due_tail)
                x->due_tail->next_due = pl;
        else
                x->due_head = pl;
        x->due_tail = pl;
        drop_props(pl);
        free(pl->retry);
        pl->retry = NULL;
        wake_reader(x);
}

/* Not sounded through cued (it failed, or went away): through the fallback while it is
 * still timely, else ended. */
void play_reroute(struct ctx *x, struct play *pl, const char *why) {
        if (pl->state == DONE || pl->state == FALLBACK)
                return;
        if (x->stopping) {
                play_finish(x, pl, CA_ERROR_DESTROYED);   /* the app is destroying the context */
                return;
        }
        if (pl->props && now_ns() - pl->born_ns < REROUTE_NS) {
                debug("playing through the fallback", why);
                if (fallback_play(x, pl))
                        return;
        }
        play_finish(x, pl, CA_ERROR_DISCONNECTED);
}

/* Frees it once nothing refers to it any more. */
void play_release(struct ctx *x, struct play *pl) {
        if (pl->state != DONE || pl->due || pl->voice_open || pl->replies_owed > 0)
                return;
        if (pl->prev)
                pl->prev->next = pl->next;
        else
                x->plays = pl->next;
        if (pl->next)
                pl->next->prev = pl->prev;
        x->nplays--;
        drop_props(pl);
        free(pl->retry);
        free(pl);
}

/* Frees every play nothing refers to any more (after conn_break, which frees none). */
void plays_sweep(struct ctx *x) {
        x->sweep = false;
        for (struct play *pl = x->plays, *n; pl; pl = n) {
                n = pl->next;
                play_release(x, pl);
        }
}

/* The voice cued started for it: its deadline kept as the reader's next one when it is the oldest. */
void voice_opened(struct ctx *x, struct play *pl, uint64_t voice) {
        pl->voice = voice;
        pl->voice_ns = now_ns();
        if (pl->voice_open)
                return;
        pl->voice_open = true;
        if (x->nvoices++ == 0) {
                x->voice_due_ns = pl->voice_ns + SOUND_MAX_NS + VOICE_GRACE_NS;
                x->alive_check_ns = pl->voice_ns + ALIVE_NS;
                wake_reader(x);   /* it may sleep with no deadline: now there is one */
        }
}

/* Its end came, or was given up on. voice_due_ns may then be early: the reader's walk moves it on. */
void voice_closed(struct ctx *x, struct play *pl) {
        if (!pl->voice_open)
                return;
        pl->voice_open = false;
        if (--x->nvoices == 0)
                x->voice_due_ns = 0;
}

struct play *play_of_voice(struct ctx *x, uint64_t voice) {
        for (struct play *pl = x->plays; pl; pl = pl->next)
                if (pl->voice_open && pl->voice == voice)
                        return pl;
        return NULL;
}

/* Every play ends now with `code` (the context goes away): no end line or fallback
 * callback will reach them any more. */
void end_all(struct ctx *x, int code) {
        for (struct play *pl = x->plays, *n; pl; pl = n) {
                n = pl->next;
                voice_closed(x, pl);
                pl->replies_owed = 0;
                play_finish(x, pl, code);
                play_release(x, pl);
        }
}

/* The callbacks that are due, one at a time, outside ctx.lock: a callback may call
 * libcanberra again (cancel, play, even destroy this context), take the app's own locks, or
 * wait for a thread that is in a call of ours. Before each, libcanberra's own lock of the
 * context is taken and given back: the call that made the play has then left libcanberra
 * (which unlocks that lock after the driver returns), so a callback that destroys the
 * context cannot free the lock under that call. */
void run_callbacks(struct ctx *x) {
        for (;;) {
                if (x->destroyed_on_reader)
                        return;   /* a callback destroyed the context: the rest were called in its destroy */
                struct play *pl = x->due_head;
                if (!pl)
                        return;
                if (!(x->due_head = pl->next_due))
                        x->due_tail = NULL;
                pl->due = false;
                ca_finish_callback_t cb = pl->cb;
                void *userdata = pl->userdata;
                uint32_t id = pl->ca_id;
                int code = pl->result;
                play_release(x, pl);
                if (!cb)
                        continue;
                ca_context *c = x->context;
                pthread_mutex_unlock(&x->lock);
                ca_mutex_lock(c->mutex);
                ca_mutex_unlock(c->mutex);
                cb(c, id, code, userdata);
                pthread_mutex_lock(&x->lock);
        }
}
