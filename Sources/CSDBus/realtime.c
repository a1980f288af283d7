/* Asking RTKit or the Realtime portal for a real-time thread: see realtime.h. */
#include "realtime.h"
#include "csdbus.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

/* Every sd-bus call through the table libsystemd was loaded into (see csdbus.h). */
#define sd_bus_call_method_async (cued_sd()->sd_bus_call_method_async)
#define sd_bus_error_get_errno (cued_sd()->sd_bus_error_get_errno)
#define sd_bus_close_unref (cued_sd()->sd_bus_close_unref)
#define sd_bus_get_events (cued_sd()->sd_bus_get_events)
#define sd_bus_get_fd (cued_sd()->sd_bus_get_fd)
#define sd_bus_get_timeout (cued_sd()->sd_bus_get_timeout)
#define sd_bus_message_enter_container (cued_sd()->sd_bus_message_enter_container)
#define sd_bus_message_get_error (cued_sd()->sd_bus_message_get_error)
#define sd_bus_message_is_method_error (cued_sd()->sd_bus_message_is_method_error)
#define sd_bus_message_peek_type (cued_sd()->sd_bus_message_peek_type)
#define sd_bus_message_read_basic (cued_sd()->sd_bus_message_read_basic)
#define sd_bus_message_ref (cued_sd()->sd_bus_message_ref)
#define sd_bus_message_unref (cued_sd()->sd_bus_message_unref)
#define sd_bus_open_system_with_description (cued_sd()->sd_bus_open_system_with_description)
#define sd_bus_open_user_with_description (cued_sd()->sd_bus_open_user_with_description)
#define sd_bus_process (cued_sd()->sd_bus_process)

#define RTKIT_NAME "org.freedesktop.RealtimeKit1"
#define RTKIT_PATH "/org/freedesktop/RealtimeKit1"
#define PORTAL_NAME "org.freedesktop.portal.Desktop"
#define PORTAL_PATH "/org/freedesktop/portal/desktop"
#define PORTAL_INTERFACE "org.freedesktop.portal.Realtime"

struct exchange {
    sd_bus *bus;
    const char *name, *path, *interface;
    uint64_t deadline;  /* CLOCK_MONOTONIC µs */
    struct cued_rt_result *result;
};

struct pending {
    int done;
    sd_bus_message *reply;
};

static uint64_t now_usec(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static int on_reply(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)error;
    struct pending *p = userdata;
    p->reply = sd_bus_message_ref(m);
    p->done = 1;
    return 0;
}

/* Says why in result->why; returns `error`. */
static int fail(struct exchange *x, int error, int unreachable, const char *what, const char *detail) {
    x->result->error = error;
    x->result->unreachable = unreachable;
    snprintf(x->result->why, sizeof x->result->why, "%s%s%s", what, detail ? ": " : "", detail ? detail : "");
    return error;
}

/* Runs the bus until the reply has come or the deadline has passed (the bus's own
   authentication and Hello included: sd-bus would wait for those without a bound). */
static int wait_reply(struct exchange *x, struct pending *p) {
    while (!p->done) {
        int r = sd_bus_process(x->bus, NULL);
        if (r < 0)
            return r;
        if (r > 0)
            continue;
        uint64_t now = now_usec();
        if (now >= x->deadline)
            return -ETIMEDOUT;
        uint64_t until = x->deadline, bus_until = 0;
        if (sd_bus_get_timeout(x->bus, &bus_until) >= 0 && bus_until < until)
            until = bus_until;
        int events = sd_bus_get_events(x->bus);
        if (events < 0)
            return events;
        struct pollfd pfd = { .fd = sd_bus_get_fd(x->bus), .events = (short)events, .revents = 0 };
        int ms = until > now ? (int)((until - now + 999) / 1000) : 0;
        if (poll(&pfd, 1, ms) < 0 && errno != EINTR)
            return -errno;
    }
    return 0;
}

/* One method call on the service; the reply (NULL on failure, said in result). */
static sd_bus_message *call(struct exchange *x, const char *label, const char *interface, const char *member, const char *types,
                            uint64_t a, uint64_t b, uint64_t c, const char *s1, const char *s2) {
    struct pending p = { 0, NULL };
    int r;
    if (types[0] == 's')
        r = sd_bus_call_method_async(x->bus, NULL, x->name, x->path, interface, member, on_reply, &p, types, s1, s2);
    else if (types[2] == 'u')
        r = sd_bus_call_method_async(x->bus, NULL, x->name, x->path, interface, member, on_reply, &p, types, a, b, (uint32_t)c);
    else
        r = sd_bus_call_method_async(x->bus, NULL, x->name, x->path, interface, member, on_reply, &p, types, a, b, (int32_t)c);
    if (r >= 0)
        r = wait_reply(x, &p);
    if (r < 0) {
        /* The connection itself: no bus, or no answer in time. */
        fail(x, r, 1, label, r == -ETIMEDOUT ? "no answer in time" : strerror(-r));
        if (p.reply)
            sd_bus_message_unref(p.reply);
        return NULL;
    }
    if (sd_bus_message_is_method_error(p.reply, NULL)) {
        const sd_bus_error *e = sd_bus_message_get_error(p.reply);
        int err = -sd_bus_error_get_errno(e);
        const char *name = e && e->name ? e->name : "an error";
        /* The service is not on the bus: as unreachable as a missing bus. */
        int absent = strcmp(name, "org.freedesktop.DBus.Error.ServiceUnknown") == 0
                     || strcmp(name, "org.freedesktop.DBus.Error.NameHasNoOwner") == 0
                     || strcmp(name, "org.freedesktop.DBus.Error.NoReply") == 0;
        char detail[200];
        snprintf(detail, sizeof detail, "%s (%s)", e && e->message ? e->message : strerror(err ? -err : EIO), name);
        fail(x, err ? err : -EIO, absent, label, detail);
        sd_bus_message_unref(p.reply);
        return NULL;
    }
    return p.reply;
}

/* An integer property of the service's (its type i or x). */
static int property(struct exchange *x, const char *name, long long *value) {
    sd_bus_message *m = call(x, name, "org.freedesktop.DBus.Properties", "Get", "ss", 0, 0, 0, x->interface, name);
    if (m == NULL)
        return x->result->error;
    char type = 0;
    const char *contents = NULL;
    int r = sd_bus_message_peek_type(m, &type, &contents);
    if (r > 0 && type == 'v' && contents && (contents[0] == 'i' || contents[0] == 'x')
        && (r = sd_bus_message_enter_container(m, 'v', contents)) >= 0) {
        if (contents[0] == 'i') {
            int32_t v = 0;
            if ((r = sd_bus_message_read_basic(m, 'i', &v)) >= 0)
                *value = v;
        } else {
            int64_t v = 0;
            if ((r = sd_bus_message_read_basic(m, 'x', &v)) >= 0)
                *value = v;
        }
    } else if (r >= 0) {
        r = -EBADMSG;
    }
    sd_bus_message_unref(m);
    return r < 0 ? fail(x, r, 0, name, strerror(-r)) : 0;
}

/* RLIMIT_RTTIME within `most` µs, only ever lowered: RTKit checks the hard limit. The soft limit
   is half of it: the kernel sends SIGXCPU there (cued drops the thread to normal scheduling)
   before it kills at the hard one. */
static long long limit_rttime(long long most) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_RTTIME, &rl) != 0)
        return -1;
    if (most > 0) {
        if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max > (rlim_t)most)
            rl.rlim_max = (rlim_t)most;
        if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > rl.rlim_max / 2)
            rl.rlim_cur = rl.rlim_max / 2;
        if (setrlimit(RLIMIT_RTTIME, &rl) != 0)
            return -1;
    }
    return rl.rlim_max == RLIM_INFINITY ? -1 : (long long)rl.rlim_max;
}

static int ask(struct exchange *x, const struct cued_rt_request *q) {
    struct cued_rt_result *res = x->result;
    long long max_priority = 0, min_nice = 0, rttime = 0;
    if (property(x, "MaxRealtimePriority", &max_priority) < 0)
        return res->error;
    /* Older services lack these two: no lower nice than asked, and RTKit's own default limit. */
    if (property(x, "MinNiceLevel", &min_nice) < 0 && res->unreachable)
        return res->error;
    if (property(x, "RTTimeUSecMax", &rttime) < 0 && res->unreachable)
        return res->error;
    res->error = 0;
    res->why[0] = 0;
    res->rttime_usec = limit_rttime(rttime > 0 ? rttime : 200000);
    int priority = q->priority < (int)max_priority ? q->priority : (int)max_priority;
    if (priority < 1)
        priority = 1;
    sd_bus_message *m = call(x, "MakeThreadRealtimeWithPID", x->interface, "MakeThreadRealtimeWithPID", "ttu", q->pid, q->tid, (uint64_t)priority, NULL, NULL);
    if (m != NULL) {
        sd_bus_message_unref(m);
        res->priority = priority;
        res->error = 0;
        return 0;
    }
    if (res->unreachable || q->nice == 0)
        return res->error;
    /* Real time refused: a nice level instead, keeping why real time was refused. */
    struct cued_rt_result refused = *res;
    int nice = q->nice > (int)min_nice ? q->nice : (int)min_nice;
    m = call(x, "MakeThreadHighPriorityWithPID", x->interface, "MakeThreadHighPriorityWithPID", "tti", q->pid, q->tid, (uint64_t)(int64_t)nice, NULL, NULL);
    *res = refused;
    if (m == NULL)
        return res->error;
    sd_bus_message_unref(m);
    res->nice = nice;
    return 0;
}

int cued_rt_ask(const struct cued_rt_request *q, struct cued_rt_result *res) {
    memset(res, 0, sizeof *res);
    res->rttime_usec = -1;
    struct exchange x = { NULL, q->portal ? PORTAL_NAME : RTKIT_NAME, q->portal ? PORTAL_PATH : RTKIT_PATH,
                          q->portal ? PORTAL_INTERFACE : RTKIT_NAME,
                          now_usec() + (uint64_t)(q->timeout_ms > 0 ? q->timeout_ms : 0) * 1000u, res };
    const char *why = cued_sd_load();
    if (why != NULL)
        return fail(&x, -ENOSYS, 1, "sd-bus", why);
    int r = q->portal ? sd_bus_open_user_with_description(&x.bus, "cued-rt")
                      : sd_bus_open_system_with_description(&x.bus, "cued-rt");
    if (r < 0)
        return fail(&x, r, 1, q->portal ? "the session bus" : "the system bus", strerror(-r));
    r = ask(&x, q);
    sd_bus_close_unref(x.bus);  /* not flushed: that waits on the peer without a bound */
    return r;
}
