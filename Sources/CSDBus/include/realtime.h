// Asking the desktop for a real-time audio thread, as PipeWire's module-rt does (0.3.65):
// RTKit (org.freedesktop.RealtimeKit1) on the system bus, or the Realtime portal
// (org.freedesktop.portal.Realtime) on the session bus where cued runs sandboxed. Through
// sd-bus (csdbus.h's loader: libsystemd is loaded on the first ask). Blocking on the caller's
// thread, which is never the audio thread, and bounded: the whole exchange, the bus's connect
// and authentication included, ends by its deadline.
#ifndef CUED_REALTIME_H
#define CUED_REALTIME_H

#include <stdint.h>

struct cued_rt_request {
    int portal;          /* 0: RTKit on the system bus; 1: the Realtime portal on the session bus */
    uint64_t pid, tid;   /* the process and the thread to raise (the audio thread's tid) */
    int priority;        /* the real-time priority wanted (lowered to the service's MaxRealtimePriority) */
    int nice;            /* the nice level wanted if real time is refused (raised to its MinNiceLevel); 0: none */
    int timeout_ms;      /* the whole exchange */
};

struct cued_rt_result {
    int priority;        /* the real-time priority granted (SCHED_RR), 0: none */
    int nice;            /* the nice level granted when real time was refused, 0: none */
    int error;           /* why real time was not granted: a negative errno (0: it was) */
    int unreachable;     /* the error is the bus or the service missing or not answering in time */
    long long rttime_usec;   /* the process's RLIMIT_RTTIME hard limit after the exchange (-1: unlimited) */
    char why[256];       /* the error in words: the D-Bus error's name and message, or the step that failed */
};

/* Asks once: the service's limits (MaxRealtimePriority, MinNiceLevel, RTTimeUSecMax), the
   process's RLIMIT_RTTIME lowered within RTTimeUSecMax (RTKit refuses a process without it:
   soft half the hard limit, so that SIGXCPU comes before the kernel's SIGKILL), then
   MakeThreadRealtimeWithPID, and if that is refused MakeThreadHighPriorityWithPID. Returns 0
   if real time or a nice level was granted, else result->error. */
int cued_rt_ask(const struct cued_rt_request *request, struct cued_rt_result *result);

#endif
