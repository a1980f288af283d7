#!/usr/bin/python3
"""A libcanberra client through libcanberra.so.0 itself (ctypes): one long-lived context,
as GNOME Shell's and GSound's, driven by a script of steps. The tests of cued's libcanberra
plug-in and `make bench` run it; it prints one JSON object: what each call returned and how
long it took, and every play_full callback (its id, code and whether it ran on the caller's
thread).

  canberra_client.py STEPS-JSON        STEPS: a list of steps, each a list:
    ["props", {key: value}]            ca_context_change_props (values str, {"hex": "…"} for bytes,
                                       or {"repeat": "a", "times": N})
    ["open"]                           ca_context_open
    ["play", ID, {props}]              ca_context_play_full with a callback
    ["play_nocb", ID, {props}]         … without one
    ["cache", {props}]                 ca_context_cache_full
    ["cancel", ID]                     ca_context_cancel
    ["playing", ID]                    ca_context_playing (recorded)
    ["wait_callbacks", N, SECONDS]     until N callbacks in all, at most SECONDS
    ["sleep", SECONDS]
    ["touch", PATH]                    create a file (a signal to the test)
    ["wait_file", PATH, SECONDS]       until PATH exists (the test's signal)
    ["burst", N, ID0, {props}, GAP_S]  N plays with ids ID0, ID0+1…, GAP_S apart
    ["contexts", N, {props}]           N more contexts at once, opened, then one play each (ids 1…N), then
                                       wait for their callbacks (5 s) and destroy them
    ["destroy"]                        ca_context_destroy (callbacks still due come now)
    ["fds"]                            record the process's open descriptors and threads
    ["destroy_in_callback", ID, {props}]  another context, whose play's callback destroys it (on the
                                       driver's own thread), then waits for that (5 s)

  canberra_client.py --serve PROPS-JSON   for `make bench`: one context, a play of PROPS for each
                                          line `p ID` read (`q` ends): prints `P ID T0 RET` (T0 the
                                          monotonic ns just before ca_context_play_full) and, per
                                          callback, `C ID CODE`
"""
import ctypes
import faulthandler
import json
import os
import sys
import threading
import time

ca = ctypes.CDLL("libcanberra.so.0")
CB = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_void_p)
ca.ca_context_create.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
for name in ["ca_context_destroy", "ca_context_open"]:
    getattr(ca, name).argtypes = [ctypes.c_void_p]
ca.ca_context_play_full.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p, CB, ctypes.c_void_p]
ca.ca_context_change_props_full.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
ca.ca_context_cache_full.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
ca.ca_context_cancel.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
ca.ca_context_playing.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.POINTER(ctypes.c_int)]
ca.ca_proplist_create.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
ca.ca_proplist_destroy.argtypes = [ctypes.c_void_p]
ca.ca_proplist_set.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
ca.ca_strerror.restype = ctypes.c_char_p

faulthandler.enable()  # a crash prints every thread's stack (a test shows the client's stderr)
main_thread = threading.get_ident()
lock = threading.Condition()
callbacks = []  # (context index, id, code, on the caller's thread, monotonic s)


def on_finish(ctx, cid, code, userdata):
    with lock:
        callbacks.append((userdata or 0, cid, code, threading.get_ident() == main_thread, time.monotonic()))
        lock.notify_all()


FINISH = CB(on_finish)


def proplist(props):
    p = ctypes.c_void_p()
    ca.ca_proplist_create(ctypes.byref(p))
    for k, v in props.items():
        if isinstance(v, dict) and "repeat" in v:
            data = v["repeat"].encode() * v["times"] + b"\0"
        else:
            data = bytes.fromhex(v["hex"]) if isinstance(v, dict) else v.encode() + b"\0"
        ca.ca_proplist_set(p, k.encode(), data, len(data))
    return p


def context():
    c = ctypes.c_void_p()
    r = ca.ca_context_create(ctypes.byref(c))
    assert r == 0, r
    return c


def timed(f):
    t = time.monotonic()
    r = f()
    return r, (time.monotonic() - t) * 1000


def play(ctx, op, cid, props, cb):
    """One ca_context_play_full, timed: what the call returned and how long it took."""
    p = proplist(props)
    r, ms = timed(lambda: ca.ca_context_play_full(ctx, cid, p, cb, None))
    ca.ca_proplist_destroy(p)
    return {"op": op, "id": cid, "ret": r, "ms": ms, "t": time.monotonic()}


def main():
    steps = json.loads(sys.argv[1])
    ctx = context()
    calls = []
    for step in steps:
        op = step[0]
        if op in ("props", "cache"):
            p = proplist(step[1])
            f = ca.ca_context_change_props_full if op == "props" else ca.ca_context_cache_full
            r, ms = timed(lambda: f(ctx, p))
            ca.ca_proplist_destroy(p)
            calls.append({"op": op, "ret": r, "ms": ms})
        elif op == "open":
            r, ms = timed(lambda: ca.ca_context_open(ctx))
            calls.append({"op": op, "ret": r, "ms": ms})
        elif op in ("play", "play_nocb"):
            calls.append(play(ctx, op, step[1], step[2], FINISH if op == "play" else CB()))
        elif op == "burst":
            n, first, props, gap = step[1], step[2], step[3], step[4]
            for i in range(n):
                calls.append(play(ctx, "play", first + i, props, FINISH))
                time.sleep(gap)
        elif op == "cancel":
            r, ms = timed(lambda: ca.ca_context_cancel(ctx, step[1]))
            calls.append({"op": op, "id": step[1], "ret": r, "ms": ms})
        elif op == "playing":
            x = ctypes.c_int(-1)
            r = ca.ca_context_playing(ctx, step[1], ctypes.byref(x))
            calls.append({"op": op, "id": step[1], "ret": r, "playing": x.value})
        elif op == "wait_callbacks":
            deadline = time.monotonic() + step[2]
            with lock:
                while len(callbacks) < step[1] and time.monotonic() < deadline:
                    lock.wait(max(0.0, deadline - time.monotonic()))
        elif op == "sleep":
            time.sleep(step[1])
        elif op == "touch":
            open(step[1], "w").close()
        elif op == "wait_file":
            deadline = time.monotonic() + step[2]
            while not os.path.exists(step[1]) and time.monotonic() < deadline:
                time.sleep(0.01)
        elif op == "contexts":
            n, props = step[1], step[2]
            many = [context() for _ in range(n)]
            for c in many:
                ca.ca_context_open(c)  # as an app does at its start: each connects now
            rets = []
            t = time.monotonic()
            for i, c in enumerate(many):
                p = proplist(props)
                rets.append(ca.ca_context_play_full(c, i + 1, p, FINISH, ctypes.c_void_p(i + 1)))
                ca.ca_proplist_destroy(p)
            ms = (time.monotonic() - t) * 1000
            deadline = time.monotonic() + 5
            with lock:
                while sum(1 for cb in callbacks if cb[0]) < n and time.monotonic() < deadline:
                    lock.wait(max(0.0, deadline - time.monotonic()))
            for c in many:
                ca.ca_context_destroy(c)
            calls.append({"op": op, "rets": rets, "ms": ms, "ret": min(rets)})
        elif op == "destroy_in_callback":
            other = context()
            gone = threading.Event()

            def destroy(c, cid, code, userdata):
                on_finish(c, cid, code, 99)
                ca.ca_context_destroy(other)
                gone.set()

            keep = CB(destroy)
            p = proplist(step[2])
            r = ca.ca_context_play_full(other, step[1], p, keep, None)
            ca.ca_proplist_destroy(p)
            calls.append({"op": op, "id": step[1], "ret": r, "ms": 0})
            if r != 0:
                ca.ca_context_destroy(other)
            elif not gone.wait(30):
                # Never called back: say so (the test fails on the count), and do not leave a
                # context whose callback would come into a finishing interpreter.
                calls.append({"op": "destroy_in_callback_timeout", "id": step[1], "ret": -1, "ms": 30000})
                ca.ca_context_destroy(other)
            else:
                time.sleep(0.2)  # the driver's thread ends after the callback
        elif op == "fds":
            calls.append({"op": op, "fds": len(os.listdir("/proc/self/fd")), "tasks": len(os.listdir("/proc/self/task"))})
        elif op == "destroy":
            r, ms = timed(lambda: ca.ca_context_destroy(ctx))
            ctx = None
            calls.append({"op": op, "ret": r, "ms": ms})
        else:
            raise SystemExit("unknown step %r" % op)
    if ctx is not None:
        ca.ca_context_destroy(ctx)
    with lock:
        cbs = [{"context": c, "id": i, "code": code, "caller_thread": same, "t": t} for c, i, code, same, t in callbacks]
    print(json.dumps({"calls": calls, "callbacks": cbs, "threads": threading.active_count()}))


def serve(props):
    """One long-lived context for the bench: a play per `p ID` line, timed by the caller."""
    ctx = context()
    out_lock = threading.Lock()

    def say(line):
        with out_lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    def done(c, cid, code, userdata):
        say("C %d %d" % (cid, code))

    cb = CB(done)
    p = proplist(props)
    for line in sys.stdin:
        f = line.split()
        if not f or f[0] == "q":
            break
        cid = int(f[1])
        t0 = time.monotonic_ns()
        r = ca.ca_context_play_full(ctx, cid, p, cb, None)
        say("P %d %d %d %d" % (cid, t0, r, time.monotonic_ns() - t0))
    ca.ca_proplist_destroy(p)
    ca.ca_context_destroy(ctx)


if __name__ == "__main__":
    if sys.argv[1] == "--serve":
        serve(json.loads(sys.argv[2]))
    else:
        main()
