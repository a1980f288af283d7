#!/usr/bin/python3
"""libcanberra in `make bench`: the same `bell` played through libcanberra's pulse driver
and through cued's plug-in (libcanberra-cued.so), on the private PipeWire of
pipewire_bench, first sample at the null sink's monitor (bench/pw_onset).

Two ways an app plays: a long-lived context (bench/canberra_client.py --serve, libcanberra
through ctypes: one context for the whole run, as GNOME Shell's, GSound's and feedbackd's),
and `canberra-gtk-play -i bell` (a process per sound, under Xvfb; also timed from its own
ca_context_play_full call, stamped by bench/canberra_stamp.c preloaded). Every client runs in a
mount namespace of its own where a copy of libcanberra's driver directory holding the pulse
driver and the freshly built plug-in is bind-mounted over the system's (unshare -m; the
machine's directory is never written): the pulse rows too, so that both pay the same
namespace set-up in the process-per-sound rows. CANBERRA_DRIVER picks the driver.

Latency: long-lived, from just before ca_context_play_full (stamped in the client) to the
first non-zero sample as the sink consumed it; canberra-gtk-play, from just before the
process is spawned. Before each trigger the sink has been silent for GAP_S, then a random
0-6 ms wait (random phase against the graph's cycle). A miss: no sound within 3 s. Each
long-lived play's callback is counted (exactly one is libcanberra's contract); a
canberra-gtk-play that exits non-zero got an error in its callback. Rounds alternate
pulse and cued, so that a machine whose load drifts weighs on both alike.

BENCHMARKS.md's 7 lost plays (e596f53, 2026-11-27: 7 of 100 long-lived plays through cued's plug-in
unheard within 3 s, and 1 of 100 through pulse with cache-control=permanent, the first run on a new
VM host): every one was called back with success and cued counted it played (status: cued-bench 106
of 106 via libcanberra, dropped 0, xruns 0), so the plug-in had handed each to cued; what was lost, if
anything, was after cued's count (stream, graph) or in the recorder (an onset stamped more than 50 ms
before its call is skipped as earlier). Not reproduced: the same section on 207a8e2's plug-in heard
100 of 100 (2026-11-28), the soak 10,000 of 10,000; that run kept nothing per miss, so the cause was
not found. Each long-lived miss now says which side it was on (miss_kind: a loud frame after the
call that no onset matched, or nothing at all). The soak's own first detector lost 68 % of plays
that were at the monitor (a fade window between its two levels restarted the quiet count): the
bench's misses are to be read against the recorder too.

Figures, not tests: bench.py calls run() and report(); BENCH_ONLY=canberra python3
bench/bench.py runs it alone and replaces its section of BENCHMARKS.md.
Then issue 37's soak (bench/canberra_soak.py: 10,000 plays from 20 contexts, cued killed and
started again every 1,000, every play looked for at the monitor), reported in the same section.
Environment: BENCH_CANBERRA_TRIALS (default 100 a row; BENCH_QUICK=1: 20), BENCH_CANBERRA_SOAK
(plays, default 10,000; BENCH_QUICK=1: 1,000; 0: no soak).
"""
import json
import os
import random
import shutil
import subprocess
import threading
import time

import canberra_soak
import desktop_bench
from benchlib import (cue_set, cued_status, loadavg, log, pct, not_measured, release_dir, section_main, skipped,
                      square, targets_table, wait_answering)
from pwstack import Recorder, build_recorder, private_stack

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REL = release_dir(ROOT)
CUED = os.path.join(REL, "cued")
PLUGIN = os.path.join(ROOT, ".build", "canberra", "libcanberra-cued.so")
CLIENT = os.path.join(ROOT, "bench", "canberra_client.py")
HEADING = "## libcanberra: its pulse driver and cued's plug-in"
TOOLS = ["dbus-daemon", "pipewire", "wireplumber", "pipewire-pulse", "pactl", "cc", "pkg-config", "unshare", "Xvfb", "canberra-gtk-play"]
EVENT = "bell"
GAP_S = 0.5
ROUNDS = 2
WARMUP = 3  # unmeasured plays at the start of each row of each round
LONG, GTK = "long-lived context", "canberra-gtk-play -i bell"
PROPS = {"event.id": EVENT, "event.description": "cued bench", "application.name": "cued-bench"}


def plugin_dir():
    """The directory libcanberra loads drivers from, read from libcanberra.so.0 (it is compiled in)."""
    for lib in ("/usr/lib/%s-linux-gnu/libcanberra.so.0" % os.uname().machine, "/usr/lib64/libcanberra.so.0", "/usr/lib/libcanberra.so.0"):
        try:
            data = open(lib, "rb").read()
        except OSError:
            continue
        i = data.find(b"/libcanberra-%s")
        if i > 0:
            return data[data.rfind(b"\0", 0, i) + 1:i].decode()
    return None


class Sandbox:
    """libcanberra's drivers plus cued's plug-in, bind-mounted over the system's directory for
    the processes it starts only."""

    def __init__(self, tmp, system):
        self.system = system
        self.drivers = os.path.join(tmp, "drivers")
        os.makedirs(self.drivers)
        for name in os.listdir(system):
            if name != "libcanberra-cued.so":
                shutil.copy(os.path.join(system, name), self.drivers)
        shutil.copy(PLUGIN, self.drivers)
        flags = ["-m"] if os.getuid() == 0 else ["-r", "-m"]
        self.prefix = ["unshare", *flags, "--propagation", "private", "/bin/sh", "-c",
                       'mount --bind "$1" "$2" && shift 2 && exec "$@"', "sh", self.drivers, system]

    def argv(self, args):
        return self.prefix + list(args)


class LongLived:
    """canberra_client.py --serve: one context; plays on request, stamps, callbacks counted."""

    def __init__(self, stack, sandbox, env, props):
        self.p = stack.spawn(sandbox.argv(["/usr/bin/python3", CLIENT, "--serve", json.dumps(props)]), env=env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.cond = threading.Condition()
        self.played = {}  # id -> (t0 ns, ret, call ns)
        self.callbacks = {}  # id -> [codes]
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for raw in self.p.stdout:
            f = raw.decode().split()
            with self.cond:
                if f and f[0] == "P":
                    self.played[int(f[1])] = (int(f[2]), int(f[3]), int(f[4]))
                elif f and f[0] == "C":
                    self.callbacks.setdefault(int(f[1]), []).append(int(f[2]))
                self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    def play(self, i):
        """Asks for play `i`; returns (t0, ret, call ns) once ca_context_play_full returned."""
        self.p.stdin.write(b"p %d\n" % i)
        self.p.stdin.flush()
        with self.cond:
            if not self.cond.wait_for(lambda: i in self.played or self.p.poll() is not None, 10):
                raise RuntimeError("the libcanberra client did not play %d" % i)
            if i not in self.played:
                raise RuntimeError("the libcanberra client exited (%s)" % self.p.returncode)
            return self.played[i]

    def close(self):
        try:
            self.p.stdin.write(b"q\n")
            self.p.stdin.flush()
            self.p.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.p.kill()
            self.p.wait()


def miss_kind(rec, t0):
    """What the recorder heard around a miss: "heard" (a loud frame at or after the call that no onset
    matched: the recorder's stamps or its onset rule, not the sound, failed) or "silent" (nothing loud
    since the call: the sound never reached the sink)."""
    last = rec.status()["last_loud"]
    return "heard" if last and last >= t0 else "silent"


def measure_long(rec, client, ids, rng, kinds=None):
    lat, misses, calls, refused = [], 0, [], 0
    for i in ids:
        rec.wait_quiet(GAP_S)
        time.sleep(rng.uniform(0, 0.006))
        t0, ret, call_ns = client.play(i)
        calls.append(call_ns / 1000.0)
        if ret != 0:
            refused += 1
        o = rec.onset_after(t0)
        if o is None:
            misses += 1
            if kinds is not None:
                kinds.append(miss_kind(rec, t0))
        else:
            lat.append((o[0] - t0) / 1000.0)
    return lat, misses, calls, refused


def measure_gtk(rec, stack, sandbox, env, n, rng, stamp):
    """Spawn -> first sample, and (bench/canberra_stamp.c preloaded) the program's
    ca_context_play_full -> first sample: the driver's part, loading and connecting included."""
    lat, from_call, misses, failed = [], [], 0, 0
    for _ in range(n):
        rec.wait_quiet(GAP_S)
        time.sleep(rng.uniform(0, 0.006))
        if os.path.exists(stamp):
            os.unlink(stamp)
        t0 = time.monotonic_ns()
        p = stack.spawn(sandbox.argv(["canberra-gtk-play", "-i", EVENT]), env=env)
        o = rec.onset_after(t0)
        try:
            rc = p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = p.wait()
        if rc != 0:
            failed += 1
        if o is None:
            misses += 1
            continue
        lat.append((o[0] - t0) / 1000.0)
        try:
            with open(stamp) as f:
                from_call.append((o[0] - int(f.read())) / 1000.0)
        except (OSError, ValueError):
            pass
    return lat, misses, failed, from_call


def build_stamp(tmp):
    """bench/canberra_stamp.c as a shared object to preload."""
    out = os.path.join(tmp, "canberra_stamp.so")
    r = subprocess.run(["cc", "-O2", "-Wall", "-shared", "-fPIC", "-o", out, os.path.join(ROOT, "bench", "canberra_stamp.c"), "-ldl"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("cc canberra_stamp.c: " + r.stderr.strip())
    return out


def start_xvfb(stack, tmp):
    out = os.path.join(tmp, "xvfb.out")
    with open(out, "w") as f:
        stack.spawn(["Xvfb", "-displayfd", "1", "-nolisten", "tcp", "-screen", "0", "320x240x24"], stdout=f)
    for _ in range(500):
        with open(out) as f:
            d = f.read().strip()
        if d:
            return ":" + d
        time.sleep(0.01)
    raise RuntimeError("Xvfb did not start")


def run(trials=None, quick=False):
    res = run_drivers(trials, quick)
    plays = int(os.environ.get("BENCH_CANBERRA_SOAK", 1000 if quick else 10000))
    if "skipped" not in res and plays > 0:
        res["soak"] = canberra_soak.run(plays)
    return res


def run_drivers(trials, quick):
    system = plugin_dir()
    missing = [t for t in TOOLS if not shutil.which(t)]
    if system is None:
        missing.append("libcanberra0")
    elif not os.path.exists(os.path.join(system, "libcanberra-pulse.so")):
        missing.append("libcanberra-pulse")
    if not os.path.exists(PLUGIN):
        missing.append(PLUGIN + " (make build)")
    if missing:
        return skipped("canberra", missing, "make bench-deps installs them")
    trials = trials or (20 if quick else 100)
    rng = random.Random(30)
    tmp, stack = private_stack("cued-canberra.")
    res = {"trials": trials, "warmup": WARMUP, "gap_s": GAP_S, "system": system, "load": {"start": loadavg()}, "lat": {}}
    rec = None
    try:
        env = dict(stack.env, GSETTINGS_BACKEND="memory", XDG_CACHE_HOME=os.path.join(tmp, "cache"))
        env.pop("CANBERRA_DEVICE", None)
        res["quantum"] = stack.quantum()
        rec = Recorder(stack, build_recorder(), quiet_ms=40)
        sandbox = Sandbox(tmp, system)
        sounds = os.path.join(tmp, "sounds")
        cue_set(sounds, square(4800))
        cenv = dict(stack.env, XDG_STATE_HOME=os.path.join(tmp, "state"), XDG_CONFIG_HOME=os.path.join(tmp, "noconfig"))
        clog = os.path.join(tmp, "cued.log")
        with open(clog, "w") as f:
            cued = stack.spawn([CUED, "--sounds", sounds, "--idle-close-s", "3600", "--log-level", "info"], env=cenv, stderr=f)
        sock = os.path.join(stack.rt, "cued", "cued.sock")
        wait_answering(sock, "canberra")
        res["cued_sink"] = (cued_status(sock).get("sink") or {}).get("spec")
        env["DISPLAY"] = start_xvfb(stack, tmp)
        stamp = os.path.join(tmp, "stamp")
        genv = dict(env, LD_PRELOAD=build_stamp(tmp), CANBERRA_STAMP=stamp)
        rows = [("pulse", LONG, {}), ("cued", LONG, {}), ("pulse", GTK, {}), ("cued", GTK, {}),
                ("pulse", LONG + ", cache-control=permanent", {"canberra.cache-control": "permanent"})]
        acc = {(d, w): {"lat": [], "misses": 0, "miss_kinds": [], "calls": [], "refused": 0, "failed": 0, "callbacks": {}, "from_call": []} for d, w, _ in rows}
        per_round = [trials // ROUNDS + (1 if r < trials % ROUNDS else 0) for r in range(ROUNDS)]
        next_id = 1
        for r, n in enumerate(per_round):
            for driver, way, extra in rows:
                denv = dict(env, CANBERRA_DRIVER=driver)
                a = acc[(driver, way)]
                log("canberra round %d: %s through %s, %d plays" % (r + 1, way, driver, n))
                if way.startswith(LONG):
                    client = LongLived(stack, sandbox, denv, dict(PROPS, **extra))
                    try:
                        warm = list(range(next_id, next_id + WARMUP))
                        ids = list(range(next_id + WARMUP, next_id + WARMUP + n))
                        next_id += WARMUP + n
                        measure_long(rec, client, warm, rng)
                        v, m, calls, refused = measure_long(rec, client, ids, rng, a["miss_kinds"])
                        rec.wait_quiet(GAP_S)
                        time.sleep(0.3)  # the last callbacks
                        with client.cond:
                            for i in ids:
                                a["callbacks"][i] = list(client.callbacks.get(i, []))
                    finally:
                        client.close()
                    a["calls"] += calls
                    a["refused"] += refused
                else:
                    genv["CANBERRA_DRIVER"] = driver
                    measure_gtk(rec, stack, sandbox, genv, WARMUP, rng, stamp)
                    v, m, failed, from_call = measure_gtk(rec, stack, sandbox, genv, n, rng, stamp)
                    a["failed"] += failed
                    a["from_call"] += from_call
                a["lat"] += v
                a["misses"] += m
            res.setdefault("rounds", []).append({"n": n, "load": loadavg()})
        st = cued_status(sock)
        res["cued_status"] = {k: st.get(k) for k in ("played", "dropped", "xruns", "stalls", "latency_us")}
        res["cued_apps"] = {k: v for k, v in (st.get("apps") or {}).items()}
        for (driver, way), a in acc.items():
            cbs = a["callbacks"]
            res["lat"][driver + " | " + way] = {
                "lat": a["lat"], "misses": a["misses"], "refused": a["refused"], "failed": a["failed"],
                "miss_kinds": {k: a["miss_kinds"].count(k) for k in ("heard", "silent")},
                "call_p50_us": pct(a["calls"], .5) if a["calls"] else None, "call_max_us": max(a["calls"]) if a["calls"] else None,
                "plays": len(cbs), "one_callback": sum(1 for c in cbs.values() if len(c) == 1), "from_call": a["from_call"],
                "callback_codes": sorted({x for c in cbs.values() for x in c}),
            }
        res["load"]["end"] = loadavg()
        cued.terminate()
        cued.wait()
        with open(clog, errors="replace") as f:
            res["cued_log"] = [ln.strip() for ln in f if "warn" in ln.lower() or "error" in ln.lower()][-5:]
        return res
    except RuntimeError as e:
        log("canberra section failed:", e)
        res["failed"] = str(e)
        return res
    finally:
        if rec is not None:
            rec.close()
        stack.close()
        shutil.rmtree(tmp, ignore_errors=True)


def row(name, r):
    return desktop_bench.row(name, r["lat"], r["misses"])


def report(res):
    if not_measured(HEADING, res):
        return not_measured(HEADING, res)
    lat = res["lat"]
    md = [HEADING, "",
          "The same `bell` (the freedesktop theme's `bell.oga`, 0.14 s at 44.1 kHz, its first frame non-zero) played",
          "through libcanberra (Debian 12's 0.30) with `CANBERRA_DRIVER=pulse` (libcanberra-pulse: a new stream",
          "through pipewire-pulse per sound) and with `CANBERRA_DRIVER=cued` (cued's plug-in, cued on `--sink %s`)," % res.get("cued_sink"),
          "on a private PipeWire as in the sections above (default quantum %d frames). Two ways an app plays: a" % res["quantum"],
          "long-lived context (one `ca_context` for the run, as GNOME Shell's, GSound's and feedbackd's: libcanberra",
          "driven through ctypes by `bench/canberra_client.py --serve`) and `canberra-gtk-play -i bell` (a process per",
          "sound, under Xvfb). Each client runs in a mount namespace of its own where a copy of libcanberra's",
          "driver directory (%s) holding the pulse driver and the plug-in is bind-mounted over the system's" % res["system"],
          "(`unshare -m`; the pulse rows too, so both pay the same set-up). Latency: from just before",
          "`ca_context_play_full` (stamped in the client), or before the process is spawned, to the first non-zero",
          "sample as the null sink consumed it (`bench/pw_onset.c` on its monitor). Each trigger comes once the sink",
          "has been silent %.1f s, after a random 0–6 ms wait (random phase against the graph's cycle); %d rounds" % (res["gap_s"], len(res.get("rounds", []))),
          "alternate the drivers, %d plays a row in all (%d unmeasured at the start of each). A miss: no sound within 3 s." % (
              res["trials"], res["warmup"]),
          "",
          "| driver, way | n | p50 µs | p90 µs | p99 µs | max µs | misses |", "|---|---|---|---|---|---|---|"]
    order = [("pulse", LONG), ("cued", LONG), ("pulse", LONG + ", cache-control=permanent"), ("pulse", GTK), ("cued", GTK)]
    for d, w in order:
        r = lat.get(d + " | " + w)
        if r:
            md.append(row("%s: %s" % ("libcanberra's pulse driver" if d == "pulse" else "cued's plug-in", w), r))
    md += ["", "A process per sound starts first (GTK, the X connection, the namespace), the same for both drivers;",
           "then its `ca_context_play_full` loads the driver, connects and plays. That part alone, from the",
           "call (stamped by `bench/canberra_stamp.c`, preloaded into canberra-gtk-play) to the first sample:", "",
           "| driver, way | n | p50 µs | p90 µs | p99 µs | max µs | misses |", "|---|---|---|---|---|---|---|"]
    for d in ("pulse", "cued"):
        r = lat.get(d + " | " + GTK)
        if r:
            md.append(row("%s: canberra-gtk-play, from its ca_context_play_full" % ("libcanberra's pulse driver" if d == "pulse" else "cued's plug-in"),
                          {"lat": r.get("from_call") or [], "misses": r["misses"]}))
    md += ["", "The calls and callbacks (long-lived rows: `ca_context_play_full`'s own time in the app, and how many plays",
           "got exactly one callback; canberra-gtk-play rows: runs that exited non-zero, i.e. got an error):", "",
           "| driver, way | call p50 µs | call max µs | refused | plays with exactly one callback | callback codes | failed runs |",
           "|---|---|---|---|---|---|---|"]
    for d, w in order:
        r = lat.get(d + " | " + w)
        if not r:
            continue
        if w.startswith(LONG):
            md.append("| %s: %s | %.0f | %.0f | %d | %d of %d | %s | - |" % (d, w, r["call_p50_us"] or 0, r["call_max_us"] or 0, r["refused"],
                                                                       r["one_callback"], r["plays"], ", ".join(map(str, r["callback_codes"])) or "-"))
        else:
            md.append("| %s: %s | - | - | - | - | - | %d |" % (d, w, r["failed"]))
    kinds = [(d, w, lat[d + " | " + w].get("miss_kinds") or {}) for d, w in order if w.startswith(LONG) and lat.get(d + " | " + w)]
    if any(sum(k.values()) for _, _, k in kinds):
        md += ["", "Each long-lived miss by what the recorder heard after the call: a loud frame no onset matched (the",
               "recorder's stamps or onset rule failed, not the sound) or nothing (the sound never reached the sink): " +
               "; ".join("%s, %s: %d heard, %d silent" % (d, w, k.get("heard", 0), k.get("silent", 0)) for d, w, k in kinds) + "."]
    apps = res.get("cued_apps") or {}
    cs = res.get("cued_status") or {}
    md += ["", "cued's `status` at the end: played %s (apps: %s); dropped %s, xruns %s, stalls %s; inside cued (request → first"
           % (cs.get("played"), ", ".join("%s %s via %s" % (k, v.get("played"), "/".join(v.get("via") or []) or "-") for k, v in sorted(apps.items())),
              cs.get("dropped"), cs.get("xruns"), cs.get("stalls")),
           "frame to the device) p50 / p99 %s / %s µs. Load average (1/5/15 min) at the start and the end: %s; %s (2 cores, shared)."
           % ((cs.get("latency_us") or {}).get("p50"), (cs.get("latency_us") or {}).get("p99"), res["load"]["start"], res["load"].get("end"))]
    if res.get("cued_log"):
        md += ["", "cued's warnings and errors in this run (last 5):", ""] + ["    " + ln for ln in res["cued_log"]]
    targets = []
    for w, key, what in ((LONG, "lat", LONG), (GTK, "lat", GTK + ", spawn to sound"), (GTK, "from_call", GTK + ", its play call to sound")):
        p, c = lat.get("pulse | " + w), lat.get("cued | " + w)
        if p and c and p.get(key) and c.get(key):
            ratio = pct(c[key], .5) / pct(p[key], .5)
            targets.append(("%s: cued's plug-in p50 ≤ 0.2 × the pulse driver's" % what,
                            "%.0f µs vs 0.2 × %.0f µs (ratio %.3f)" % (pct(c[key], .5), pct(p[key], .5), ratio), ratio <= 0.2))
    cm = sum(lat[k]["misses"] for k in lat if k.startswith("cued |"))
    targets.append(("0 misses through cued's plug-in", "%d (pulse: %d)" % (cm, sum(lat[k]["misses"] for k in lat if k.startswith("pulse |"))), cm == 0))
    c = lat.get("cued | " + LONG)
    if c:
        targets.append(("one callback per play (long-lived, cued)", "%d of %d" % (c["one_callback"], c["plays"]), c["one_callback"] == c["plays"]))
    return md + targets_table(30, targets) + report_soak(res.get("soak"))


def report_soak(s):
    """Issue 37's soak: its paragraph, its figures and its targets."""
    if not s:
        return []
    md = ["", "### The plug-in's soak (issue 37)", ""]
    if "skipped" in s or "failed" in s:
        return md + ["Not measured: %s." % (s.get("skipped") or s.get("failed"))]
    h = s["host"]
    fig = s.get("figures") or []
    md += ["`bench/canberra_soak.py`: %d plays from %d contexts of one host process (`canberra/stress/host.c` on real" % (s["plays"], s["contexts"]),
           "libcanberra, `CANBERRA_DRIVER=cued,pulse`: pulse through pipewire-pulse is the fallback), each context a 40 ms tone of",
           "its own every 200 ms (100 plays a second), on a private PipeWire; cued (release, `--sink pipewire`) killed and",
           "started again every %d plays (SIGKILL and SIGTERM in turn, %d restarts). The null sink's monitor is recorded" % (s["restart_every"], h["restarts"]),
           "whole and each tone's band measured on 20 ms windows: a play is heard if its band rises within",
           "[call − 0.1 s, call + 2 s], each rise taken by one play. A miss: an accepted play not heard.", "",
           "| plays | accepted | heard | misses | extra sounds | exactly one callback | called back only at destroy | call p50 / p99.9 / max µs |",
           "|---|---|---|---|---|---|---|---|",
           "| %d | %d | %d | %d | %d | %d | %d | %.0f / %.0f / %.0f |" % (
               s["plays"], s["accepted"], s["heard"], s["misses"], s["extra_rises"], h["callbacks_once"], h["pending_at_destroy"],
               h["play"]["p50_us"], h["play"]["p999_us"], h["play"]["max_us"]), ""]
    if fig:
        sel = fig[:: max(1, len(fig) // 5)]
        sel += [fig[-1]] if sel[-1] != fig[-1] else []
        md += ["The host's own figures (after so many plays: RSS KiB, threads, descriptors): " +
               "; ".join("%d: %d, %d, %d" % tuple(f) for f in sel) + "."]
    t = [("the soak: every accepted play heard", "%d of %d (misses %d)" % (s["heard"], s["accepted"], s["misses"]), s["misses"] == 0),
         ("the soak: one callback per play, none at destroy", "%d of %d, %d at destroy" % (h["callbacks_once"], h["accepted"], h["pending_at_destroy"]),
          h["callbacks_once"] == h["accepted"] and h["pending_at_destroy"] == 0)]
    if len(fig) >= 4:
        half = fig[len(fig) // 2]
        t.append(("the soak: host RSS, threads, fds flat (second half)", "RSS %d → %d KiB, threads %d → %d, fds ≤ %d → ≤ %d" % (
            half[1], fig[-1][1], half[2], fig[-1][2], max(f[3] for f in fig[:len(fig) // 2]), max(f[3] for f in fig[len(fig) // 2:])),
            fig[-1][1] - half[1] <= 1024 and fig[-1][2] <= half[2]))
    return md + targets_table(37, t)


if __name__ == "__main__":
    section_main("canberra", lambda: run(trials=int(os.environ["BENCH_CANBERRA_TRIALS"]) if "BENCH_CANBERRA_TRIALS" in os.environ else None,
                                          quick=os.environ.get("BENCH_QUICK") == "1"), report, HEADING)
