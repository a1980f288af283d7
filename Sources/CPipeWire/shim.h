#pragma once
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <pipewire/pipewire.h>
#include <spa/param/audio/format-utils.h>
#include "props.h"

/* What cued needs of libpipewire that Swift cannot call: the loop's methods and
   the pod builder are static inline/macros, pw_properties_new is variadic, and
   event listeners are C structs of function pointers. The listeners only record
   what happened in `struct cued_pw_events`; the Swift side (PipeWireSink) reads
   it after each pw_loop_iterate and decides. Everything runs on the thread that
   entered the loops (cued's audio thread, which also drives the context's data
   loop in place of libpipewire's own data thread): no locking.

   libpipewire is not linked: it is loaded (dlopen) the first time a PipeWire output is
   opened (`cued_pw_load`), so that a cued that never plays through PipeWire (a machine
   without it, --sink null or alsa:…) does not load it, its dependencies and its
   relocations at every start. Its functions are called through `cued_pw()`'s table,
   each typed from libpipewire's own prototype.

   The stream is RT_PROCESS: its process callback runs inside the graph's cycle (in
   cued_pw_loop_iterate of the data loop), when the graph needs the stream's next
   buffer and none is queued. It queues the one buffer cued prepared (`ready`), which
   the graph then plays in that same cycle; with none ready the cycle is silence. So
   a buffer stays cued's, and can be given back and mixed again (a rewind), until
   the cycle that plays it. */

#define CUED_PW_FUNCTIONS(X) \
    X(pw_init) X(pw_loop_new) X(pw_loop_destroy) X(pw_properties_new) X(pw_properties_set) \
    X(pw_context_new) X(pw_context_destroy) X(pw_context_connect) X(pw_context_get_data_loop) \
    X(pw_data_loop_get_loop) X(pw_data_loop_stop) X(pw_core_disconnect) X(pw_stream_new) X(pw_stream_destroy) \
    X(pw_stream_add_listener) X(pw_stream_connect) X(pw_stream_set_active) X(pw_stream_flush) \
    X(pw_stream_dequeue_buffer) X(pw_stream_queue_buffer) X(pw_stream_get_time_n) X(pw_stream_state_as_string) \
    X(pw_stream_update_properties) X(pw_stream_get_node_id)

struct cued_pw_api {
#define CUED_PW_FIELD(name) __typeof__(name) *name;
    CUED_PW_FUNCTIONS(CUED_PW_FIELD)
#undef CUED_PW_FIELD
};

struct cued_pw_loader {
    pthread_once_t once;
    struct cued_pw_api api;
    const char *error;  /* NULL: loaded */
    char message[256];
};

static inline struct cued_pw_loader *cued_pw_loader(void) {
    static struct cued_pw_loader loader = { PTHREAD_ONCE_INIT, { 0 }, "not loaded", { 0 } };
    return &loader;
}

static void cued_pw_load_once(void) {
    struct cued_pw_loader *l = cued_pw_loader();
    void *lib = dlopen("libpipewire-0.3.so.0", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        snprintf(l->message, sizeof l->message, "cannot load libpipewire (install libpipewire-0.3-0): %s", dlerror());
        l->error = l->message;
        return;
    }
#define CUED_PW_LOOKUP(name) \
    if ((l->api.name = (__typeof__(name) *)dlsym(lib, #name)) == NULL) { \
        snprintf(l->message, sizeof l->message, "libpipewire has no %s: %s", #name, dlerror()); \
        l->error = l->message; \
        return; \
    }
    CUED_PW_FUNCTIONS(CUED_PW_LOOKUP)
#undef CUED_PW_LOOKUP
    l->api.pw_init(NULL, NULL);
    l->error = NULL;
}

/* Loads libpipewire once (any thread); NULL, or why it cannot be used. */
static inline const char *cued_pw_load(void) {
    struct cued_pw_loader *l = cued_pw_loader();
    pthread_once(&l->once, cued_pw_load_once);
    return l->error;
}

/* The functions, once `cued_pw_load` returned NULL. */
static inline const struct cued_pw_api *cued_pw(void) { return &cued_pw_loader()->api; }

static inline struct pw_loop *cued_pw_loop_new(void) { return cued_pw()->pw_loop_new(NULL); }
static inline void cued_pw_loop_destroy(struct pw_loop *loop) { cued_pw()->pw_loop_destroy(loop); }
static inline struct pw_properties *cued_pw_properties_new(void) { return cued_pw()->pw_properties_new(NULL, NULL); }
static inline int cued_pw_properties_set(struct pw_properties *p, const char *key, const char *value) {
    return cued_pw()->pw_properties_set(p, key, value);
}
static inline struct pw_context *cued_pw_context_new(struct pw_loop *loop, struct pw_properties *props) {
    return cued_pw()->pw_context_new(loop, props, 0);
}
static inline void cued_pw_context_destroy(struct pw_context *c) { cued_pw()->pw_context_destroy(c); }
static inline struct pw_core *cued_pw_context_connect(struct pw_context *c) { return cued_pw()->pw_context_connect(c, NULL, 0); }
static inline void cued_pw_core_disconnect(struct pw_core *core) { cued_pw()->pw_core_disconnect(core); }
static inline struct pw_stream *cued_pw_stream_new(struct pw_core *core, const char *name, struct pw_properties *props) {
    return cued_pw()->pw_stream_new(core, name, props);
}
static inline void cued_pw_stream_destroy(struct pw_stream *s) { cued_pw()->pw_stream_destroy(s); }
static inline int cued_pw_stream_set_active(struct pw_stream *s, bool active) { return cued_pw()->pw_stream_set_active(s, active); }
static inline int cued_pw_stream_flush(struct pw_stream *s) { return cued_pw()->pw_stream_flush(s, false); }
static inline uint32_t cued_pw_stream_node_id(struct pw_stream *s) { return cued_pw()->pw_stream_get_node_id(s); }
static inline struct pw_buffer *cued_pw_stream_dequeue_buffer(struct pw_stream *s) { return cued_pw()->pw_stream_dequeue_buffer(s); }
static inline int cued_pw_stream_get_time(struct pw_stream *s, struct pw_time *t) {
    return cued_pw()->pw_stream_get_time_n(s, t, sizeof *t);
}
static inline const char *cued_pw_stream_state_string(int state) {
    return cued_pw()->pw_stream_state_as_string((enum pw_stream_state)state);
}
/* Asks the graph for cycles of num/denom s (node.latency), while the stream runs. */
static inline int cued_pw_stream_set_latency(struct pw_stream *s, unsigned num, unsigned denom) {
    char value[32];
    snprintf(value, sizeof value, "%u/%u", num, denom);
    struct spa_dict_item items[1] = { SPA_DICT_ITEM_INIT(PW_KEY_NODE_LATENCY, value) };
    struct spa_dict dict = SPA_DICT_INIT(items, 1);
    return cued_pw()->pw_stream_update_properties(s, &dict);
}

struct cued_pw_events {
    int state;            /* enum pw_stream_state, last seen */
    int failed;           /* the stream went to ERROR, or the core reported an error */
    char error[256];      /* why, for SinkError */
    int format_ready;     /* the server accepted a format (param_changed Format) */
    int buffers;          /* buffers the stream has now */
    struct pw_stream *stream;
    /* The buffer cued holds (dequeued, being filled) and the one ready for the next cycle:
       set by the Swift side (GraphSlot's), cleared if the stream takes its buffers away
       (remove_buffer), and `ready` by the process callback once it queued it. */
    struct pw_buffer *held, *ready;
    int buffers_changed;  /* one of them was taken away: what cued holds is gone */
    unsigned long long queued_frames; /* frames queued to the stream (pw_buffer.size) since the last reset */
    unsigned long long last_took;     /* frames the last cycle took (0: it found none ready) */
    struct spa_io_position *position; /* the graph's position, written by its driver each cycle */
    unsigned long long quantum;       /* the frames of the last cycle the stream was asked for a buffer in */
    struct cued_pw_props props;       /* the stream's Props as the graph set them (props.h) */
    struct spa_hook core_listener;
    struct spa_hook stream_listener;
};

static inline int cued_pw_loop_get_fd(struct pw_loop *loop) { return pw_loop_get_fd(loop); }
/* Run on the data thread by cued_pw_take_data_loop: says which thread ran it. */
static int cued_pw_mark_thread(struct spa_loop *loop, bool async, uint32_t seq, const void *data, size_t size,
                               void *user_data) {
    (void)loop; (void)async; (void)seq; (void)data; (void)size;
    __atomic_store_n((pthread_t *)user_data, pthread_self(), __ATOMIC_RELEASE);
    return 0;
}
/* Stops the context's data thread (libpipewire starts one in pw_context_new) and makes
   the calling thread its loop's: the caller iterates it (its fd in the caller's poll),
   and the stream's RT process callback runs there, in the graph's cycle.
   Only once that thread runs its loop: pw_data_loop_stop asks the loop to stop with
   pw_loop_invoke, which runs the request in the caller instead when the loop has no
   thread yet; a thread starting at that moment (it has entered the loop and read
   `running` before the caller clears it) then waits in epoll for a wake-up that never
   comes, and the join in pw_data_loop_stop waits for it forever (libpipewire 0.3.65:
   about 1 context in 1,000 right after pw_context_new). So a marker is invoked first,
   until it runs on the data thread itself. `slot` must live until the context is
   destroyed (a marker still queued writes it). Returns NULL, errno ETIMEDOUT, if the
   thread did not run it within timeout_ms; the context is still whole then. */
static inline struct pw_loop *cued_pw_take_data_loop(struct pw_context *context, pthread_t *slot, int timeout_ms) {
    struct pw_data_loop *dl = cued_pw()->pw_context_get_data_loop(context);
    if (dl == NULL) {
        errno = ENOENT;
        return NULL;
    }
    struct pw_loop *loop = cued_pw()->pw_data_loop_get_loop(dl);
    pthread_t self = pthread_self();
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        __atomic_store_n(slot, (pthread_t)0, __ATOMIC_RELEASE);
        pw_loop_invoke(loop, cued_pw_mark_thread, 0, NULL, 0, false, slot);
        for (;;) {
            pthread_t who = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
            if (who != 0 && !pthread_equal(who, self)) {
                cued_pw()->pw_data_loop_stop(dl);
                pw_loop_enter(loop);
                return loop;
            }
            clock_gettime(CLOCK_MONOTONIC, &now);
            if ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 > timeout_ms) {
                errno = ETIMEDOUT;
                return NULL;
            }
            usleep(100);
            if (who != 0)
                break;  /* it ran here, inline: the thread has not entered its loop yet; again */
        }
    }
}
static inline void cued_pw_loop_enter(struct pw_loop *loop) { pw_loop_enter(loop); }
static inline void cued_pw_loop_leave(struct pw_loop *loop) { pw_loop_leave(loop); }
/* Dispatches what is ready, waiting up to timeout_ms (0: not at all). */
static inline int cued_pw_loop_iterate(struct pw_loop *loop, int timeout_ms) { return pw_loop_iterate(loop, timeout_ms); }

static void cued_pw_on_core_error(void *data, uint32_t id, int seq, int res, const char *message) {
    struct cued_pw_events *ev = data;
    (void)seq;
    /* Errors on other objects (a rejected param) are not the connection's; a core
       error (the server went away: -EPIPE) ends everything. */
    if (id != PW_ID_CORE && res != -EPIPE)
        return;
    ev->failed = 1;
    snprintf(ev->error, sizeof ev->error, "PipeWire: %s (%s)", message ? message : "core error", strerror(-res));
}

static void cued_pw_on_state_changed(void *data, enum pw_stream_state old, enum pw_stream_state state, const char *error) {
    struct cued_pw_events *ev = data;
    (void)old;
    ev->state = state;
    if (state == PW_STREAM_STATE_ERROR) {
        ev->failed = 1;
        snprintf(ev->error, sizeof ev->error, "PipeWire stream error: %s", error ? error : "unknown");
    } else if (state == PW_STREAM_STATE_UNCONNECTED && !ev->failed) {
        ev->failed = 1;
        snprintf(ev->error, sizeof ev->error, "PipeWire stream disconnected%s%s", error ? ": " : "", error ? error : "");
    }
}

static void cued_pw_on_param_changed(void *data, uint32_t id, const struct spa_pod *param) {
    struct cued_pw_events *ev = data;
    if (id == SPA_PARAM_Format)
        ev->format_ready = param != NULL;
    if (id == SPA_PARAM_Props)
        cued_pw_props_read(&ev->props, param);
}

static void cued_pw_on_control_info(void *data, uint32_t id, const struct pw_stream_control *control) {
    if (control != NULL)
        cued_pw_props_control(&((struct cued_pw_events *)data)->props, id, control->values, control->n_values);
}

static void cued_pw_on_add_buffer(void *data, struct pw_buffer *buffer) { (void)buffer; ((struct cued_pw_events *)data)->buffers++; }
static void cued_pw_on_remove_buffer(void *data, struct pw_buffer *buffer) {
    struct cued_pw_events *ev = data;
    ev->buffers--;
    if (ev->held == buffer) { ev->held = NULL; ev->buffers_changed = 1; }
    if (ev->ready == buffer) { ev->ready = NULL; ev->buffers_changed = 1; }
}
static void cued_pw_on_io_changed(void *data, uint32_t id, void *area, uint32_t size) {
    struct cued_pw_events *ev = data;
    if (id == SPA_IO_Position)
        ev->position = area != NULL && size >= sizeof(struct spa_io_position) ? area : NULL;
}
/* Inside the graph's cycle (RT_PROCESS): hand over the buffer cued prepared. The adapter's
   converter takes a cycle's frames from as many buffers as it needs, asking again within the
   cycle, and cued has one ready: a buffer shorter than the cycle loses the cycle (the converter
   gives up: silence). So cued fills each to at least the cycle, which is noted here. */
static void cued_pw_on_process(void *data) {
    struct cued_pw_events *ev = data;
    if (ev->position != NULL)
        ev->quantum = ev->position->clock.duration;
    struct pw_buffer *b = ev->ready;
    if (b == NULL) {
        ev->last_took = 0;
        return;
    }
    ev->ready = NULL;
    ev->queued_frames += b->size;
    ev->last_took = b->size;
    cued_pw()->pw_stream_queue_buffer(ev->stream, b);
}

static const struct pw_core_events cued_pw_core_events = {
    PW_VERSION_CORE_EVENTS,
    .error = cued_pw_on_core_error,
};

static const struct pw_stream_events cued_pw_stream_events = {
    PW_VERSION_STREAM_EVENTS,
    .state_changed = cued_pw_on_state_changed,
    .control_info = cued_pw_on_control_info,
    .param_changed = cued_pw_on_param_changed,
    .add_buffer = cued_pw_on_add_buffer,
    .remove_buffer = cued_pw_on_remove_buffer,
    .io_changed = cued_pw_on_io_changed,
    .process = cued_pw_on_process,
};

static inline void cued_pw_listen(struct cued_pw_events *ev, struct pw_core *core, struct pw_stream *stream) {
    ev->stream = stream;
    pw_core_add_listener(core, &ev->core_listener, &cued_pw_core_events, ev);
    cued_pw()->pw_stream_add_listener(stream, &ev->stream_listener, &cued_pw_stream_events, ev);
}

static inline void cued_pw_unlisten(struct cued_pw_events *ev) {
    spa_hook_remove(&ev->stream_listener);
    spa_hook_remove(&ev->core_listener);
}

/* A buffer's memory, and the frames of `stride` bytes it holds at most. */
static inline void *cued_pw_buffer_data(struct pw_buffer *b) { return b->buffer->datas[0].data; }
static inline int cued_pw_buffer_capacity(struct pw_buffer *b, int stride) { return (int)(b->buffer->datas[0].maxsize / stride); }
/* Its chunk: `frames` frames from its start (what the graph plays of it). */
static inline void cued_pw_buffer_seal(struct pw_buffer *b, int frames, int stride) {
    struct spa_chunk *chunk = b->buffer->datas[0].chunk;
    chunk->offset = 0;
    chunk->stride = stride;
    chunk->size = (uint32_t)(frames * stride);
    b->size = (uint64_t)frames;
}

/* The buffers cued's stream needs: two at least, one the graph plays in its cycle and one
   cued fills for the next (GraphSlot holds at most one). A stream that says nothing gets what
   the converter offers: 2 on PipeWire 0.3.65, 1 since 0.3.83 (commit 11320cf20, "tweak number
   of buffers"), and with one buffer the stream can never have the next cycle's ready: it took no
   frame at all (`no free buffers`). More than two would only sit in the stream's queue. */
#define CUED_PW_BUFFERS_MIN 2
#define CUED_PW_BUFFERS_MAX 8

/* Connects a playback stream offering one format: interleaved S16LE (f32 = 0) or
   F32LE (f32 = 1), `channels` at `rate` (FL FR for stereo), and asking for its buffers. */
static inline int cued_pw_stream_connect(struct pw_stream *stream, int f32, uint32_t rate, uint32_t channels,
                                         enum pw_stream_flags flags) {
    uint8_t buffer[1024];
    struct spa_pod_builder b = SPA_POD_BUILDER_INIT(buffer, sizeof(buffer));
    struct spa_audio_info_raw info = { 0 };
    info.format = f32 ? SPA_AUDIO_FORMAT_F32_LE : SPA_AUDIO_FORMAT_S16_LE;
    info.rate = rate;
    info.channels = channels;
    if (channels == 2) {
        info.position[0] = SPA_AUDIO_CHANNEL_FL;
        info.position[1] = SPA_AUDIO_CHANNEL_FR;
    }
    const struct spa_pod *params[2];
    params[0] = spa_format_audio_raw_build(&b, SPA_PARAM_EnumFormat, &info);
    params[1] = spa_pod_builder_add_object(&b, SPA_TYPE_OBJECT_ParamBuffers, SPA_PARAM_Buffers,
        SPA_PARAM_BUFFERS_buffers, SPA_POD_CHOICE_RANGE_Int(CUED_PW_BUFFERS_MIN, CUED_PW_BUFFERS_MIN, CUED_PW_BUFFERS_MAX),
        SPA_PARAM_BUFFERS_blocks, SPA_POD_Int(1));
    return cued_pw()->pw_stream_connect(stream, PW_DIRECTION_OUTPUT, PW_ID_ANY, flags, params, 2);
}
