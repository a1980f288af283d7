/* pw_onset: the PipeWire bench's recorder (bench/pipewire_bench.py compiles and runs it).

   A pw_stream capturing a sink's output (its monitor: target.object = the sink node,
   stream.capture.sink = true), RT_PROCESS, that stamps every captured frame on the graph's
   clock. A monitor is a link out of the graph's driver (the sink), written at the end of the
   driver's cycle, so a follower reads it at the start of the next cycle: the buffer captured in
   a cycle holds the frames the sink consumed in the cycle before (one quantum late, measured
   with --calibrate), and frame i of it is stamped  start of that previous cycle (pw_time.now as
   this stream saw it then, the driver's clock.nsec, CLOCK_MONOTONIC) + i / rate: the time the
   sink took it for playing. A real device adds its own delay after that, the same for every
   stream. It prints one line per onset: the first frame whose |sample| (16-bit scale, the
   louder channel) exceeds THRESHOLD after at least QUIET ms of graph time without one (frames
   below it, or no cycle at all: a stopped graph is quiet).

   Neutral by default: it asks for no quantum (no node.latency: the graph runs at its other
   nodes' smallest request, or its default when none asks) and its link is passive
   (node.passive: it does not keep the sink running; the graph stops between sounds as if
   nobody recorded). --latency N/RATE and --active change that (to show what they cost).

   Usage: pw_onset [--target NODE] [--threshold N] [--quiet-ms M] [--latency N/RATE] [--active]
                   [--calibrate]
   Output lines (stdout, one event a line, flushed):
     R <rate> <channels>                 the stream is capturing (format agreed)
     O <ns> <peak> <quantum> <cycle_ns> <arrival_ns>  an onset: the frame's CLOCK_MONOTONIC time on the
                                         graph's clock, its |sample|, the frames of that cycle, its start, and
                                         when this recorder's callback had it (what an app recording the
                                         monitor sees: a cycle later, and its own wake-up)
     E <onset_ns> <loud> <span>          the sound that began at onset_ns, once the next one begins: its
                                         frames over the threshold, and the frames captured from its first
                                         to its last (span - loud: frames under the threshold inside it,
                                         holes in what the sink consumed; counted in frames consumed, not
                                         in time: see `mismatched`)
     G <cycle_ns> <expected_ns> <quantum>  a cycle did not start where the last one ended
                                         (the graph stopped and restarted, or a cycle was lost)
     Q <quantum>:<cycles> ...            on the `q` command: cycles seen per quantum since the last `q`
     S <now_ns> <last_loud_ns> <last_cycle_ns> <cycles> <mismatched> <late>   on the `s` command
                                         (mismatched: buffers, in cycles that followed the last one,
                                         whose frames were not the length of the cycle they were
                                         consumed in: the null sink's cycle where the graph changes
                                         its quantum lasts the old one and consumes the new one, a
                                         stretch of silence or overlap in its timeline, not in the
                                         data; late: buffers of a cycle this stream had not
                                         run in, stamped from the cycle's own start, see on_capture)
     P <ns>                              --calibrate: the click's frame time, as the player stamped it
     C <cycle_ns> <frames> <peak> <duration>   after `d 1`: every cycle (its start, the frames captured
                                         (the previous cycle's), their peak, this cycle's clock.duration)
   Commands (stdin, one a line): q, s, `t THRESHOLD QUIET_MS`, `d 0|1`, c (--calibrate: a click), x (exit).
   EOF on stdin ends it too.

   --calibrate adds a playback stream (RT_PROCESS, same process, same sink) that on `c`
   writes a single loud frame at a random index of a cycle and prints the time it stamped it
   with (its own pw_time.now + index / rate). The recorder's O line for it minus that is the
   constant offset between "queued for the cycle starting at now" and "seen by the recorder"
   (0 if the monitor delivers a cycle's frames in that same cycle). */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pipewire/pipewire.h>
#include <spa/param/audio/format-utils.h>

#define RING 4096
enum { EV_ONSET = 1, EV_GAP, EV_CLICK, EV_CYCLE, EV_END };
struct event { int type; int64_t a, b, c, d, e; };

#define NHIST 32
struct rec {
    struct pw_main_loop *main;
    struct pw_loop *loop;
    struct pw_context *context;
    struct pw_core *core;
    struct pw_stream *cap, *play;
    struct spa_hook cap_listener, play_listener, core_listener;
    struct spa_source *wake, *in;
    uint32_t rate, channels;
    int ready;

    _Atomic int64_t threshold;   /* 16-bit scale */
    _Atomic int64_t quiet_ns;
    _Atomic int64_t last_loud;   /* frame time of the last loud frame */
    _Atomic int64_t last_cycle;  /* start of the last cycle captured */
    _Atomic uint64_t cycles;
    int64_t expect_next;         /* RT: where the next cycle should start */
    int64_t prev_start;          /* RT: the start of the previous cycle the stream ran in */
    int64_t prev_duration;       /* RT: its quantum (the driver's clock.duration), 0: unknown */
    int64_t prev_position;       /* RT: the driver's clock.position then */
    int64_t captured;            /* RT: frames captured so far */
    int64_t sound_onset;         /* RT: the current sound's onset (frame time), 0: none yet */
    int64_t sound_first;         /* RT: its first frame's index among the frames captured */
    int64_t sound_last;          /* RT: its last loud frame's index */
    int64_t sound_loud;          /* RT: its loud frames */
    _Atomic uint64_t mismatched; /* buffers whose frames were not the previous cycle's quantum */
    _Atomic uint64_t late;       /* buffers whose cycle this stream had not run in (see on_capture) */
    struct spa_io_position *position;

    /* Cycles per quantum, RT-written; the main thread prints deltas. */
    _Atomic uint32_t hist_q[NHIST];
    _Atomic uint64_t hist_n[NHIST];
    uint64_t hist_seen[NHIST];

    /* RT -> main: single producer (the data thread), single consumer. */
    struct event ring[RING];
    _Atomic uint32_t head, tail;

    /* --calibrate */
    _Atomic int click;           /* a click asked for */
    _Atomic int trace;           /* `d 1`: a C line per cycle */
    uint32_t seed;
    char line[256];
    size_t line_len;
    int64_t arrival;             /* when the capture callback that found an event ran */
};

static int64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void push(struct rec *r, int type, int64_t a, int64_t b, int64_t c, int64_t d) {
    uint32_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    if (h - atomic_load_explicit(&r->tail, memory_order_acquire) >= RING)
        return; /* the main thread is far behind: drop */
    r->ring[h % RING] = (struct event){ type, a, b, c, d, r->arrival };
    atomic_store_explicit(&r->head, h + 1, memory_order_release);
    pw_loop_signal_event(r->loop, r->wake);
}

static void count_quantum(struct rec *r, uint32_t q) {
    for (int i = 0; i < NHIST; i++) {
        uint32_t k = atomic_load_explicit(&r->hist_q[i], memory_order_acquire);
        if (k == q) {
            atomic_fetch_add_explicit(&r->hist_n[i], 1, memory_order_relaxed);
            return;
        }
        if (k == 0) {
            atomic_store_explicit(&r->hist_q[i], q, memory_order_release);
            atomic_fetch_add_explicit(&r->hist_n[i], 1, memory_order_relaxed);
            return;
        }
    }
}

/* The data thread, inside the graph's cycle. */
static void on_capture(void *data) {
    ((struct rec *)data)->arrival = mono_ns();
    struct rec *r = data;
    struct pw_buffer *b = pw_stream_dequeue_buffer(r->cap);
    if (b == NULL)
        return;
    struct spa_data *d = &b->buffer->datas[0];
    struct pw_time t;
    if (d->data == NULL || d->chunk == NULL || pw_stream_get_time_n(r->cap, &t, sizeof t) < 0 || t.rate.denom == 0) {
        pw_stream_queue_buffer(r->cap, b);
        return;
    }
    uint32_t stride = sizeof(float) * r->channels;
    uint32_t off = SPA_MIN(d->chunk->offset, d->maxsize);
    uint32_t frames = SPA_MIN(d->chunk->size, d->maxsize - off) / stride;
    const float *s = SPA_PTROFF(d->data, off, const float);
    /* The sink's monitor is a link out of the driver, and the driver's outputs are written at the
       end of its cycle, after every follower ran: a follower reading them gets them at the start of
       the next cycle. So the frames captured in this cycle are those the sink consumed in the
       cycle before (--calibrate: exactly one cycle late, at every quantum), and they are stamped
       with that cycle's start:
       - this stream ran in it (the driver's position moved by just this cycle's duration since):
         its start as this stream saw it then. That is also right when the graph had stopped in
         between (the first cycle of a run reads what the monitor held from the run before);
       - this stream did not run in it (a passive follower is sometimes added back to a restarting
         graph one cycle late): the monitor still holds that cycle's frames, which began `frames`
         before this cycle (the null sink's cycles follow each other exactly). Counted (`late`). */
    int64_t now = t.now;
    uint32_t rate = t.rate.denom; /* rate = 1/denom: frames at the graph's rate */
    struct spa_io_position *pos = r->position;
    /* This cycle's length, as the driver set it when the cycle began (next_nsec - nsec; the null
       sink's cycles follow each other exactly). Not position.clock.duration: the context writes the
       next quantum there as soon as it decides it, within the cycle before it runs. */
    int64_t duration = pos && pos->clock.next_nsec > pos->clock.nsec
        ? (int64_t)llround((double)(pos->clock.next_nsec - pos->clock.nsec) * rate / 1e9) : 0;
    int64_t position = pos ? (int64_t)pos->clock.position : 0;
    int contiguous = pos && r->prev_start != 0 && position - r->prev_position == duration;
    int64_t start = contiguous ? r->prev_start : now - (int64_t)frames * 1000000000LL / rate;
    if (r->prev_start != 0 && !contiguous)
        atomic_fetch_add_explicit(&r->late, 1, memory_order_relaxed);
    if (r->expect_next != 0 && llabs(now - r->expect_next) > 100000)
        push(r, EV_GAP, now, r->expect_next, frames, 0);
    else if (r->prev_duration != 0 && r->prev_duration != (int64_t)frames)
        atomic_fetch_add_explicit(&r->mismatched, 1, memory_order_relaxed);
    r->expect_next = now + (duration ? duration : (int64_t)frames) * 1000000000LL / rate;
    r->prev_start = now;
    r->prev_duration = duration;
    r->prev_position = position;
    atomic_store_explicit(&r->last_cycle, now, memory_order_relaxed);
    atomic_fetch_add_explicit(&r->cycles, 1, memory_order_relaxed);
    count_quantum(r, frames);

    float cycle_peak = 0;
    int64_t thr = atomic_load_explicit(&r->threshold, memory_order_relaxed);
    int64_t quiet = atomic_load_explicit(&r->quiet_ns, memory_order_relaxed);
    int64_t last = atomic_load_explicit(&r->last_loud, memory_order_relaxed);
    for (uint32_t i = 0; i < frames; i++) {
        float peak = 0;
        for (uint32_t c = 0; c < r->channels; c++)
            peak = fmaxf(peak, fabsf(s[i * r->channels + c]));
        cycle_peak = fmaxf(cycle_peak, peak);
        /* 16-bit scale, as the probe was written: a 16-bit sample x is x / 32768 here. */
        double v = peak * 32768.0;
        if (v > (double)thr) {
            int64_t ft = start + (int64_t)i * 1000000000LL / rate;
            if (last == 0 || ft - last >= quiet) {
                if (r->sound_onset != 0)
                    push(r, EV_END, r->sound_onset, r->sound_loud, r->sound_last - r->sound_first + 1, 0);
                push(r, EV_ONSET, ft, (int64_t)llround(v), frames, start);
                r->sound_onset = ft;
                r->sound_first = r->captured + i;
                r->sound_loud = 0;
            }
            r->sound_loud++;
            r->sound_last = r->captured + i;
            last = ft;
        }
    }
    atomic_store_explicit(&r->last_loud, last, memory_order_relaxed);
    r->captured += frames;
    if (atomic_load_explicit(&r->trace, memory_order_relaxed))
        push(r, EV_CYCLE, now, frames, (int64_t)llround(cycle_peak * 32768.0), duration);
    pw_stream_queue_buffer(r->cap, b);
}

/* --calibrate: the data thread, inside the cycle; the buffer queued here is played in it. */
static void on_play(void *data) {
    struct rec *r = data;
    struct pw_buffer *b = pw_stream_dequeue_buffer(r->play);
    if (b == NULL)
        return;
    struct spa_data *d = &b->buffer->datas[0];
    uint32_t stride = sizeof(float) * r->channels;
    uint32_t frames = d->maxsize / stride;
    if (b->requested)
        frames = SPA_MIN(frames, (uint32_t)b->requested);
    memset(d->data, 0, (size_t)frames * stride);
    if (atomic_exchange(&r->click, 0)) {
        struct pw_time t;
        if (pw_stream_get_time_n(r->play, &t, sizeof t) == 0 && t.rate.denom) {
            r->seed = r->seed * 1103515245u + 12345u;
            uint32_t i = (r->seed >> 8) % frames;
            float *f = d->data;
            for (uint32_t c = 0; c < r->channels; c++)
                f[i * r->channels + c] = 0.5f;
            push(r, EV_CLICK, t.now + (int64_t)i * 1000000000LL / t.rate.denom, i, frames, t.now);
        }
    }
    d->chunk->offset = 0;
    d->chunk->stride = stride;
    d->chunk->size = frames * stride;
    pw_stream_queue_buffer(r->play, b);
}

static void drain_events(void *data, uint64_t count) {
    struct rec *r = data;
    (void)count;
    uint32_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
    uint32_t h = atomic_load_explicit(&r->head, memory_order_acquire);
    for (; t != h; t++) {
        struct event *e = &r->ring[t % RING];
        switch (e->type) {
        case EV_ONSET: printf("O %lld %lld %lld %lld %lld\n", (long long)e->a, (long long)e->b, (long long)e->c, (long long)e->d, (long long)e->e); break;
        case EV_GAP: printf("G %lld %lld %lld\n", (long long)e->a, (long long)e->b, (long long)e->c); break;
        case EV_END: printf("E %lld %lld %lld\n", (long long)e->a, (long long)e->b, (long long)e->c); break;
        case EV_CYCLE: printf("C %lld %lld %lld %lld\n", (long long)e->a, (long long)e->b, (long long)e->c, (long long)e->d); break;
        case EV_CLICK: printf("P %lld %lld %lld %lld\n", (long long)e->a, (long long)e->b, (long long)e->c, (long long)e->d); break;
        }
    }
    atomic_store_explicit(&r->tail, t, memory_order_release);
    fflush(stdout);
}

static void command(struct rec *r, char *line) {
    if (line[0] == 'q') {
        printf("Q");
        for (int i = 0; i < NHIST; i++) {
            uint32_t q = atomic_load(&r->hist_q[i]);
            if (q == 0)
                break;
            uint64_t n = atomic_load(&r->hist_n[i]);
            if (n != r->hist_seen[i])
                printf(" %u:%llu", q, (unsigned long long)(n - r->hist_seen[i]));
            r->hist_seen[i] = n;
        }
        printf("\n");
    } else if (line[0] == 's') {
        printf("S %lld %lld %lld %llu %llu %llu\n", (long long)mono_ns(), (long long)atomic_load(&r->last_loud),
               (long long)atomic_load(&r->last_cycle), (unsigned long long)atomic_load(&r->cycles),
               (unsigned long long)atomic_load(&r->mismatched), (unsigned long long)atomic_load(&r->late));
    } else if (line[0] == 't') {
        long long thr = 0;
        double ms = 0;
        if (sscanf(line + 1, "%lld %lf", &thr, &ms) == 2) {
            atomic_store(&r->threshold, thr);
            atomic_store(&r->quiet_ns, (int64_t)(ms * 1e6));
        }
        printf("T %lld %g\n", thr, ms);
    } else if (line[0] == 'd') {
        atomic_store(&r->trace, atoi(line + 1));
    } else if (line[0] == 'c') {
        atomic_store(&r->click, 1);
    } else if (line[0] == 'x') {
        pw_main_loop_quit(r->main);
    }
    fflush(stdout);
}

static void on_stdin(void *data, int fd, uint32_t mask) {
    struct rec *r = data;
    char buf[256];
    ssize_t n = (mask & SPA_IO_IN) ? read(fd, buf, sizeof buf) : 0;
    if (n <= 0) {
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            return;
        pw_main_loop_quit(r->main);
        return;
    }
    for (ssize_t i = 0; i < n; i++) {
        if (buf[i] == '\n') {
            r->line[r->line_len] = 0;
            command(r, r->line);
            r->line_len = 0;
        } else if (r->line_len < sizeof r->line - 1) {
            r->line[r->line_len++] = buf[i];
        }
    }
}

static void on_cap_param(void *data, uint32_t id, const struct spa_pod *param) {
    struct rec *r = data;
    struct spa_audio_info_raw info;
    if (param == NULL || id != SPA_PARAM_Format)
        return;
    if (spa_format_audio_raw_parse(param, &info) < 0)
        return;
    r->rate = info.rate;
    r->channels = info.channels;
    printf("R %u %u\n", info.rate, info.channels);
    fflush(stdout);
}

/* The driver's position (its clock: nsec, duration): read in the cycle. */
static void on_io_changed(void *data, uint32_t id, void *area, uint32_t size) {
    struct rec *r = data;
    if (id == SPA_IO_Position)
        r->position = (area && size >= sizeof(struct spa_io_position)) ? area : NULL;
}

static void on_state(void *data, enum pw_stream_state old, enum pw_stream_state state, const char *error) {
    struct rec *r = data;
    (void)old;
    if (state == PW_STREAM_STATE_ERROR || state == PW_STREAM_STATE_UNCONNECTED) {
        fprintf(stderr, "pw_onset: stream %s%s%s\n", pw_stream_state_as_string(state), error ? ": " : "", error ? error : "");
        pw_main_loop_quit(r->main);
    }
}

static void on_core_error(void *data, uint32_t id, int seq, int res, const char *message) {
    struct rec *r = data;
    (void)seq;
    fprintf(stderr, "pw_onset: core error %u: %s (%s)\n", id, message ? message : "", strerror(-res));
    if (id == PW_ID_CORE)
        pw_main_loop_quit(r->main);
}

static const struct pw_stream_events cap_events = {
    PW_VERSION_STREAM_EVENTS, .state_changed = on_state, .param_changed = on_cap_param, .io_changed = on_io_changed,
    .process = on_capture,
};
static const struct pw_stream_events play_events = {
    PW_VERSION_STREAM_EVENTS, .state_changed = on_state, .process = on_play,
};
static const struct pw_core_events core_events = { PW_VERSION_CORE_EVENTS, .error = on_core_error };

static const struct spa_pod *format(uint8_t *buf, size_t size) {
    struct spa_pod_builder b = SPA_POD_BUILDER_INIT(buf, size);
    struct spa_audio_info_raw info = { 0 };
    info.format = SPA_AUDIO_FORMAT_F32;
    info.rate = 48000;
    info.channels = 2;
    info.position[0] = SPA_AUDIO_CHANNEL_FL;
    info.position[1] = SPA_AUDIO_CHANNEL_FR;
    return spa_format_audio_raw_build(&b, SPA_PARAM_EnumFormat, &info);
}

static void do_quit(void *data, int sig) { (void)sig; pw_main_loop_quit(((struct rec *)data)->main); }

int main(int argc, char **argv) {
    static struct rec r;
    const char *target = "nul", *latency = NULL;
    int active = 0, calibrate = 0;
    double quiet_ms = 50;
    long long threshold = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--target") && i + 1 < argc) target = argv[++i];
        else if (!strcmp(argv[i], "--threshold") && i + 1 < argc) threshold = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--quiet-ms") && i + 1 < argc) quiet_ms = atof(argv[++i]);
        else if (!strcmp(argv[i], "--latency") && i + 1 < argc) latency = argv[++i];
        else if (!strcmp(argv[i], "--active")) active = 1;
        else if (!strcmp(argv[i], "--calibrate")) calibrate = 1;
        else {
            fprintf(stderr, "usage: pw_onset [--target NODE] [--threshold N] [--quiet-ms M] [--latency N/RATE] [--active] [--calibrate]\n");
            return 2;
        }
    }
    atomic_store(&r.threshold, threshold);
    atomic_store(&r.quiet_ns, (int64_t)(quiet_ms * 1e6));
    r.channels = 2;
    r.rate = 48000;
    r.seed = (uint32_t)mono_ns();

    pw_init(NULL, NULL);
    r.main = pw_main_loop_new(NULL);
    r.loop = pw_main_loop_get_loop(r.main);
    pw_loop_add_signal(r.loop, SIGINT, do_quit, &r);
    pw_loop_add_signal(r.loop, SIGTERM, do_quit, &r);
    r.wake = pw_loop_add_event(r.loop, drain_events, &r);
    r.in = pw_loop_add_io(r.loop, 0, SPA_IO_IN | SPA_IO_HUP | SPA_IO_ERR, false, on_stdin, &r);

    /* client-rt.conf: the data thread (where the process callbacks run) asks for RT scheduling. */
    r.context = pw_context_new(r.loop, pw_properties_new(PW_KEY_CONFIG_NAME, "client-rt.conf", NULL), 0);
    if (r.context == NULL) { perror("pw_context_new"); return 1; }
    r.core = pw_context_connect(r.context, NULL, 0);
    if (r.core == NULL) { perror("pw_context_connect"); return 1; }
    pw_core_add_listener(r.core, &r.core_listener, &core_events, &r);

    struct pw_properties *props = pw_properties_new(
        PW_KEY_MEDIA_TYPE, "Audio", PW_KEY_MEDIA_CATEGORY, "Capture", PW_KEY_MEDIA_ROLE, "Production",
        PW_KEY_NODE_NAME, "cued-bench-onset", PW_KEY_APP_NAME, "pw_onset",
        PW_KEY_TARGET_OBJECT, target, PW_KEY_STREAM_CAPTURE_SINK, "true",
        PW_KEY_NODE_DONT_RECONNECT, "true", NULL);
    if (!active)
        pw_properties_set(props, PW_KEY_NODE_PASSIVE, "true");
    if (latency)
        pw_properties_set(props, PW_KEY_NODE_LATENCY, latency);
    r.cap = pw_stream_new(r.core, "pw_onset", props);
    pw_stream_add_listener(r.cap, &r.cap_listener, &cap_events, &r);
    uint8_t buf[1024];
    const struct spa_pod *params[1] = { format(buf, sizeof buf) };
    if (pw_stream_connect(r.cap, PW_DIRECTION_INPUT, PW_ID_ANY,
                          PW_STREAM_FLAG_AUTOCONNECT | PW_STREAM_FLAG_MAP_BUFFERS | PW_STREAM_FLAG_RT_PROCESS,
                          params, 1) < 0) {
        fprintf(stderr, "pw_onset: cannot connect the capture stream\n");
        return 1;
    }
    if (calibrate) {
        struct pw_properties *pp = pw_properties_new(
            PW_KEY_MEDIA_TYPE, "Audio", PW_KEY_MEDIA_CATEGORY, "Playback", PW_KEY_MEDIA_ROLE, "Production",
            PW_KEY_NODE_NAME, "cued-bench-click", PW_KEY_TARGET_OBJECT, target, NULL);
        if (latency)
            pw_properties_set(pp, PW_KEY_NODE_LATENCY, latency);
        r.play = pw_stream_new(r.core, "pw_onset click", pp);
        pw_stream_add_listener(r.play, &r.play_listener, &play_events, &r);
        uint8_t pbuf[1024];
        const struct spa_pod *pparams[1] = { format(pbuf, sizeof pbuf) };
        pw_stream_connect(r.play, PW_DIRECTION_OUTPUT, PW_ID_ANY,
                          PW_STREAM_FLAG_AUTOCONNECT | PW_STREAM_FLAG_MAP_BUFFERS | PW_STREAM_FLAG_RT_PROCESS,
                          pparams, 1);
    }
    pw_main_loop_run(r.main);
    if (r.play) pw_stream_destroy(r.play);
    pw_stream_destroy(r.cap);
    pw_core_disconnect(r.core);
    pw_context_destroy(r.context);
    pw_main_loop_destroy(r.main);
    pw_deinit();
    return 0;
}
