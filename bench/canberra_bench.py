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

Figures, not tests: bench.py calls run() and report(); BENCH_ONLY=canberra python3
bench/bench.py runs it alone and replaces its section of BENCHMARKS.md.
Environment: BENCH_CANBERRA_TRIALS (default 100 a row; BENCH_QUICK=1: 20).
"""
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time

import desktop_bench
from benchlib import (cue_set, cued_status, loadavg, log, pct, not_measured, release_dir, replace_section, skipped,
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


def measure_long(rec, client, ids, rng):
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
        acc = {(d, w): {"lat": [], "misses": 0, "calls": [], "refused": 0, "failed": 0, "callbacks": {}, "from_call": []} for d, w, _ in rows}
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
                        v, m, calls, refused = measure_long(rec, client, ids, rng)
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
    return md + targets_table(30, targets)


if __name__ == "__main__":
    quick = os.environ.get("BENCH_QUICK") == "1"
    n = int(os.environ["BENCH_CANBERRA_TRIALS"]) if "BENCH_CANBERRA_TRIALS" in os.environ else None
    result = run(trials=n, quick=quick)
    md = report(result)
    print("\n".join(md))
    if len(sys.argv) == 3 and sys.argv[1] == "--update":
        replace_section(sys.argv[2], HEADING, md)
