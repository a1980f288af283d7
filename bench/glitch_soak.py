#!/usr/bin/python3
"""Soak of cued on PipeWire's ALSA plugin (`--sink alsa:default`), every cue checked
sample-exact at the null sink's monitor (issue 20, item 5).

A private PipeWire (bench/pipewire_bench.py's Stack: dbus, pipewire with a timer-clocked
null sink `nul`, wireplumber, pipewire-pulse) runs with its graph quantum forced
(`pw-metadata -n settings 0 clock.force-quantum Q`; pw-profiler's cycle length is printed).
Each round a quiet 9 s bed plays and pops are asked for at random moments over it (each is
mixed into frames the plugin gives back: a rewind; `status` counts them), then ten pops each
from a stopped stream. Bed and pop are noise: no two cycles alike, the bed never zero.

Two recorders of the monitor that share nothing but the sink: parec (through pipewire-pulse,
SCHED_FIFO 10, 50 ms, as the tests record) and pw-record (PipeWire's own capture stream).
Each recording is cut into the graph's cycles (the stream starts on one) and every cycle is
said for what it holds: in place, displaced by k cycles ("early k": content due later, "late
k"), Z (silence where sound was due) or ?; a displacement is followed, so a recorder or a
stream that slipped a cycle for good is one event. Then:
- an event both recorders have (same cycle of the stream, within 2) is the sink's: a glitch,
  unless the machine stopped for a cycle or more within 100 ms of it (bench/stallwatch.c: a
  SCHED_FIFO 99 thread per CPU, notes wakes 1 ms late or more; the tests' StallWatch);
- an event one recorder has and the other has not is that recorder's own (reported apart).
The issue's glitch is the shape "early 1, Z, in place": a quantum's worth early, then a
quantum of zeros, then in place again.

    /usr/bin/python3 bench/glitch_soak.py [--quanta 256,128] [--cues 2000] [--latency-ms N]
        [--gap-ms 120,300] [--bin DIR | --bin A=DIR,B=DIR] [--tee] [--trace] [--profile]
        [--laggard recorder|server|pulse:MS] [--parec-latency-ms 50] [--parec-plain] [--keep]

--bin: where cued is (default: the newer of .build/release and .build/debug), or
LABEL=DIR,LABEL=DIR: an A/B, each its own cued on the same stack, rounds alternating.
--tee: cued plays through an ALSA `file` plugin over `pipewire` that keeps what cued handed
the plugin, checked the same way over the bed (a difference there is cued's own).
--trace: the plugin's per-cycle log (hw and appl pointers) and libpipewire's info lines in
cued's process (PIPEWIRE_LOG): the file writes from the real-time thread make holes of their
own, so not for counting. --laggard: stop WHO for MS every 0.3-0.7 s, to see what a late part
of the graph makes of the audio. Every server's log is kept (pipewire at info level: "client
too slow!", rate-limited to one in 2 s).
About 14 s a round of ~50 cues: 2,000 cues ≈ 9 minutes per quantum. Run by hand or with
`make glitch-soak`, not from `make test`. Exit status 1 if a glitch was the sink's and not
the machine's.
"""
import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import wave

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import Client, log, wait_answering  # noqa: E402
from pwstack import Stack  # noqa: E402
from glitch_analysis import POP_FRAMES, RATE, blocks, clock_offsets, expected_of, load, shape_of  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BED_SECONDS = 9           # cued plays sounds of at most 10 s
GAP_S = (0.12, 0.30)       # between pops asked for over the bed
STOPPED_PER_ROUND = 10     # pops from a stopped stream after each bed
STOPPED_GAP_S = 0.35       # long enough for the stream to drain and stop between them


def log_line(*a):
    log(time.strftime("%H:%M:%S"), *a)


def fixtures(directory, seed=20):
    """A pop of distinct samples (no two quanta alike: a displaced quantum shows) and a
    quiet bed that is never zero (a hole in it shows), both stereo, L and R unalike."""
    rng = np.random.default_rng(seed)
    pop = rng.integers(-8000, 8001, size=(POP_FRAMES, 2)).astype(np.int16)
    pop[pop == 0] = 1
    bed = rng.integers(1, 101, size=(BED_SECONDS * RATE, 2)).astype(np.int16)
    bed *= rng.choice(np.array([-1, 1], dtype=np.int16), size=bed.shape)
    os.makedirs(directory, exist_ok=True)
    # cued requires psst1 and psst2 besides pop: copies of the pop.
    for name, data in (("pop", pop), ("bed", bed), ("psst1", pop), ("psst2", pop)):
        with wave.open(os.path.join(directory, name + ".wav"), "wb") as w:
            w.setnchannels(2)
            w.setsampwidth(2)
            w.setframerate(RATE)
            w.writeframes(data.astype("<i2").tobytes())
    return pop, bed


class LoggedStack(Stack):
    """The bench's private PipeWire, with each server's log kept in its directory
    (pipewire at info level: it says "client too slow!" when a client missed a cycle)."""

    def spawn(self, args, env=None, **kw):
        if args[0] in ("pipewire", "wireplumber", "pipewire-pulse") and "stderr" not in kw:
            kw["stderr"] = open(os.path.join(self.tmp, args[0] + ".log"), "w")
            if args[0] == "pipewire":
                env = dict(env or self.env, PIPEWIRE_DEBUG="3")
        return super().spawn(args, env=env, **kw)


class Soak:
    def __init__(self, args):
        self.args = args
        self.tmp = tempfile.mkdtemp(prefix="cued-glitch.")
        self.stack = None
        self.watch = None
        self.results = []

    # --- the machine's stalls ---

    def start_watch(self):
        exe = os.path.join(self.tmp, "stallwatch")
        subprocess.run(["gcc", "-O2", "-pthread", "-o", exe, os.path.join(ROOT, "bench", "stallwatch.c")], check=True)
        self.watch_log = os.path.join(self.tmp, "stalls.txt")
        self.watch = subprocess.Popen([exe], stdout=open(self.watch_log, "w"))
        time.sleep(0.2)

    def stalls(self):
        out = []
        try:
            with open(self.watch_log) as f:
                for line in f:
                    p = line.split()
                    if len(p) == 3:
                        out.append((int(p[1]), int(p[2]), int(p[0])))
        except OSError:
            pass
        return out

    def watch_realtime(self):
        with open(self.watch_log) as f:
            first = f.readline().split()
        return len(first) == 2 and first[0] == "realtime" and int(first[1]) == os.cpu_count()

    # --- the stack and cued ---

    def start_stack(self, quantum):
        self.stack = LoggedStack(os.path.join(self.tmp, "q%d" % quantum))
        env = self.stack.env
        subprocess.run(["pw-metadata", "-n", "settings", "0", "clock.force-quantum", str(quantum)], env=env,
                       capture_output=True, check=True)
        return env

    def profile(self, seconds=2.0):
        """The graph's cycle durations in µs (pw-profiler, column 4), while something plays."""
        d = os.path.join(self.stack.tmp, "prof")
        os.makedirs(d, exist_ok=True)
        p = subprocess.Popen(["pw-profiler"], cwd=d, env=self.stack.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(seconds)
        p.send_signal(signal.SIGINT)  # it writes its log out as it exits
        p.wait()
        durs = []
        try:
            with open(os.path.join(d, "profiler.log")) as f:
                for line in f:
                    p = line.split()
                    if len(p) > 4:
                        try:
                            durs.append(int(p[3]))
                        except ValueError:
                            pass
        except OSError:
            pass
        return durs

    def start_cued(self, label, bin_dir):
        """A cued on the stack (its own socket and state), the device opened; its client."""
        a = self.args
        d = os.path.join(self.stack.tmp, label)
        os.makedirs(d, exist_ok=True)
        env = dict(self.stack.env, XDG_STATE_HOME=os.path.join(d, "state"), XDG_CONFIG_HOME=os.path.join(d, "noconfig"))
        sink = "alsa:default"
        if a.tee:
            # An ALSA `file` plugin in front of pipewire keeps what cued handed it (handed.raw).
            conf = os.path.join(d, "tee.conf")
            with open(conf, "w") as f:
                f.write('pcm.pwtee { type file slave.pcm "pipewire" file "%s" format "raw" }\n' % os.path.join(d, "handed.raw"))
            env["ALSA_CONFIG_PATH"] = "/usr/share/alsa/alsa.conf:" + conf
            sink = "alsa:pwtee"
        if a.trace:
            env["PIPEWIRE_DEBUG"] = "3,alsa.pcm:T"  # info: "client missed N wakeups"
            env["PIPEWIRE_LOG"] = os.path.join(d, "plugin.log")
        sock = os.path.join(d, "cued.sock")
        cmd = [os.path.join(bin_dir, "cued"), "--socket", sock, "--sink", sink, "--sounds", self.sounds,
               "--log-level", a.log_level, "--idle-close-s", "3600"]
        if a.latency_ms:
            cmd += ["--latency-ms", str(a.latency_ms)]
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=open(os.path.join(d, "cued.log"), "w"))
        self.stack.procs.append(p)  # killed (by its pid) with the stack
        wait_answering(sock, label)
        c = Client(sock)
        c.request("play pop")  # the device opens before the rounds
        time.sleep(0.5)
        return c

    def start_laggard(self):
        """A part of the graph late on purpose (--laggard WHO:MS): stopped with SIGSTOP for MS
        at random moments. Returns an Event that ends it."""
        import threading
        who, ms = self.args.laggard.split(":")
        if who == "recorder":
            p = self.stack.spawn(["pw-record", "--target", "nul", "-P", "{ stream.capture.sink = true }", "--latency", "256", "-"])
            time.sleep(0.5)
        elif who == "server":
            p = self.stack.pipewire
        elif who == "pulse":
            p = self.stack.pulse  # pipewire-pulse: parec's side of the graph, nothing else's
        else:
            raise SystemExit("--laggard: recorder, server or pulse")
        done = threading.Event()

        def lag():
            rnd = random.Random(5)
            while not done.wait(rnd.uniform(0.3, 0.7)):
                if p.poll() is not None:
                    return
                p.send_signal(signal.SIGSTOP)
                time.sleep(float(ms) / 1000)
                p.send_signal(signal.SIGCONT)
            p.send_signal(signal.SIGCONT)

        threading.Thread(target=lag, daemon=True).start()
        return done

    def status(self, c):
        return json.loads(c.request("status")[3:])

    def record(self, path, native=False):
        """The null sink's monitor, recorded by parec (through pipewire-pulse, raw) or by pw-record
        (PipeWire's own capture stream, a WAV): two recorders that share nothing but the sink."""
        if native:
            args = ["pw-record", "--target", "nul", "-P", "{ stream.capture.sink = true }", "--format", "s16",
                    "--rate", "48000", "--channels", "2", "--latency", "1024", path]
            out = subprocess.DEVNULL
        else:
            args = ["parec", "-d", "nul.monitor", "--raw", "--format=s16le", "--rate=48000", "--channels=2",
                    "--latency-msec=%g" % self.args.parec_latency_ms]
            out = open(path, "wb")
        if (native or not self.args.parec_plain) and subprocess.run(["chrt", "-f", "10", "true"], capture_output=True).returncode == 0:
            args = ["chrt", "-f", "10"] + args  # a recorder at normal priority fell behind under load
        p = subprocess.Popen(args, env=self.stack.env, stdout=out, stderr=subprocess.DEVNULL)
        for _ in range(300):
            if os.path.exists(path) and os.path.getsize(path) > (4096 if native else 0):
                break
            time.sleep(0.01)
        return p

    # --- one round ---

    def round(self, c, label, n, quantum, pop, bed):
        handed = os.path.join(self.stack.tmp, label, "handed.raw")
        handed_from = os.path.getsize(handed) if self.args.tee and os.path.exists(handed) else 0
        paths = {"parec": os.path.join(self.stack.tmp, "round%d.raw" % n),
                 "pw-record": os.path.join(self.stack.tmp, "round%d.wav" % n)}
        recorders = [self.record(paths["parec"]), self.record(paths["pw-record"], native=True)]
        time.sleep(0.2)
        asked = []  # (kind, monotonic ns)
        t_bed = time.monotonic_ns()
        r = c.request("play bed")
        assert r.startswith("ok"), r
        end = t_bed + (BED_SECONDS - 0.4) * 1e9
        rnd = random.Random(n * 7919 + quantum)
        while True:
            time.sleep(rnd.uniform(*self.args.gap))
            t = time.monotonic_ns()
            if t >= end:
                break
            c.send("play pop")
            asked.append(("mid", t))
            c.reply()
        while time.monotonic_ns() < t_bed + (BED_SECONDS + 0.4) * 1e9:
            time.sleep(0.05)
        for _ in range(STOPPED_PER_ROUND):
            time.sleep(STOPPED_GAP_S)
            t = time.monotonic_ns()
            c.send("play pop")
            asked.append(("stopped", t))
            c.reply()
        time.sleep(0.5)
        for p in recorders:
            p.send_signal(signal.SIGINT)  # pw-record finishes its WAV header
        for p in recorders:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        st = self.status(c)
        res = {"round": n, "asked": len(asked), "mid": sum(1 for k, _ in asked if k == "mid")}
        res["status"] = {k: st.get(k) for k in ("played", "xruns", "rewinds", "stalls", "dropped", "missed_cycles")}
        checks = {name: self.check(load(path), pop, bed, asked, quantum) for name, path in paths.items()}
        res["found"] = {name: ch.get("found") for name, ch in checks.items()}
        # A difference both recorders have (at the same place in the stream: relative to the
        # bed's start) reached the sink; one that only one recorder has is that recorder's.
        res["glitches"], res["recorder_holes"] = [], []
        for name, ch in checks.items():
            other = checks["pw-record" if name == "parec" else "parec"]
            for g in ch["glitches"]:
                both = "cycle" in g and any("cycle" in h and abs(h["cycle"] - g["cycle"]) <= 2 for h in other["glitches"])
                if both:
                    if name == "parec":
                        res["glitches"].append(dict(g, seen_by="both"))
                else:
                    res["recorder_holes"].append(dict(g, seen_by=name))
        if self.args.tee:
            # What cued handed the plugin this round (the file plugin keeps a buffer back: what
            # it wrote by now), checked the same way: a difference there is cued's own.
            with open(handed, "rb") as f:
                f.seek(handed_from)
                data = f.read()
            mine = np.frombuffer(data[:len(data) // 4 * 4], dtype="<i2").reshape(-1, 2)
            ch = self.check(mine, pop, bed, [], quantum)
            res["cued_output"], res["found"]["cued's own output"] = ch["glitches"], ch.get("found")
            res["glitches"] += [dict(g, seen_by="cued's own output") for g in res["cued_output"]
                                if "cycle" in g and g["cycle"] * quantum < len(bed) - RATE]
        res["ok"] = not res["glitches"] and not res["recorder_holes"]
        if res["ok"] and not self.args.keep:
            for path in paths.values():
                os.unlink(path)
        return res

    def check(self, rec, pop, bed, asked, quantum):
        """Where `rec` differs from the bed plus every pop, cycle by cycle."""
        res = {"glitches": []}
        b0, expected, pops = expected_of(rec, pop, bed, quantum)
        if b0 is None:
            res["glitches"].append({"what": "the bed is not in the recording"})
            return res
        res["found"] = len(pops)
        # Where each pop landed (frames) against when it was asked for (ns): the recording's clock.
        offsets = clock_offsets(pops, asked)
        for cycle, kinds in blocks(rec, expected, b0, len(bed), quantum):
            a = b0 + cycle * quantum
            g = {"cycle": cycle, "shape": shape_of(kinds[:8]) + (" …" if len(kinds) > 8 else ""),
                 "in_pop": any(p <= a < p + POP_FRAMES for p in pops), "in_bed": 0 <= cycle * quantum < len(bed)}
            if offsets:
                # The moment on the monotonic clock (to a few ms), against the machine's stalls.
                t_ns = int((a / RATE - float(np.median(offsets))) * 1e9)
                g["at_ns"] = t_ns
                near = [(at, late) for at, late, _ in self.stalls() if at - 100e6 <= t_ns <= at + late + 100e6]
                g["stalls_near_ms"] = [round(late / 1e6, 1) for _, late in near]
                g["machine"] = any(late >= (quantum / RATE * 1e9 - 0.5e6) for _, late in near)
                # Not used to excuse anything, but said: the most stall time one CPU had within
                # 20 ms of the event (a burst of 1 ms stalls on both CPUs slows every thread too).
                burst = {}
                for at, late, cpu in self.stalls():
                    if abs(at - t_ns) <= 20e6:
                        burst[cpu] = burst.get(cpu, 0) + late
                g["stall_ms_within_20ms"] = round(max(burst.values(), default=0) / 1e6, 1)
            res["glitches"].append(g)
        if len(pops) != len(asked) and not res["glitches"]:
            res["glitches"].append({"what": "%d pops found of %d asked" % (len(pops), len(asked))})
        return res

    def run(self):
        a = self.args
        self.start_watch()
        if not self.watch_realtime():
            log_line("stall watch: no SCHED_FIFO 99 here; every hole counts as cued's")
        summary = []
        try:
            for quantum in a.quanta:
                self.start_stack(quantum)
                self.sounds = os.path.join(self.stack.tmp, "sounds")
                pop, bed = fixtures(self.sounds)
                # Each variant its own cued on the same stack; rounds alternate between them
                # (an A/B under the same load, the stream of the one resting stopped).
                clients = [(label, self.start_cued(label, bin_dir)) for label, bin_dir in a.variants]
                c = clients[0][1]
                c.request("play bed")
                time.sleep(0.3)
                durs = self.profile(1.5)  # the quantum the graph really runs, while cued plays
                c.request("mute")
                c.request("unmute")
                time.sleep(0.5)
                prof = None
                if a.profile:
                    prof = subprocess.Popen(["pw-profiler"], cwd=self.stack.tmp, env=self.stack.env,
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    self.stack.procs.append(prof)
                cyc = sorted(durs)[len(durs) // 2] if durs else None
                laggard = self.start_laggard() if a.laggard else None
                rows = {}
                for label, c in clients:
                    st0 = self.status(c)
                    rows[label] = {"variant": label, "quantum": quantum, "latency_ms": a.latency_ms, "cues": 0, "rounds": 0,
                                   "glitches": 0, "machine_holes": 0, "recorder_holes": 0, "events": {}, "st0": st0,
                                   "t0": time.monotonic(), "load_start": [round(x, 2) for x in os.getloadavg()]}
                log_line("quantum %d: pw-profiler cycles %d, median %s µs (%.1f expected); sink %s"
                         % (quantum, len(durs), cyc, quantum / RATE * 1e6, json.dumps(self.status(clients[0][1]).get("sink"))))
                n = 0
                while any(r["cues"] < a.cues for r in rows.values()):
                    label, c = clients[n % len(clients)]
                    row = rows[label]
                    res = self.round(c, label, n, quantum, pop, bed)
                    n += 1
                    row["rounds"] += 1
                    row["cues"] += res["asked"]
                    mine = [g for g in res["glitches"] if not g.get("machine")]
                    row["glitches"] += len(mine)
                    row["machine_holes"] += len(res["glitches"]) - len(mine)
                    row["recorder_holes"] += len(res["recorder_holes"])
                    for g in res["glitches"] + res["recorder_holes"]:
                        key = "%s | %s | %s" % (g.get("seen_by"), g.get("shape", g.get("what")),
                                                "machine" if g.get("machine") else "not the machine's" if "machine" in g else "?")
                        row["events"][key] = row["events"].get(key, 0) + 1
                    log_line("q%d %s round %d: %d cues (%d mid-stream), found %s; %s; glitches %s; recorders' own %s; load %.2f"
                             % (quantum, label, n, res["asked"], res["mid"], res.get("found"), res["status"],
                                json.dumps(res["glitches"]) if res["glitches"] else 0,
                                json.dumps(res["recorder_holes"]) if res["recorder_holes"] else 0, os.getloadavg()[0]))
                    self.results.append(dict(res, quantum=quantum, variant=label))
                for label, c in clients:
                    row = rows[label]
                    st, st0 = self.status(c), row.pop("st0")
                    row.update({"xruns": st["xruns"] - st0["xruns"], "rewinds": st["rewinds"] - st0["rewinds"],
                                "stalls": st["stalls"], "dropped": st["dropped"], "profiler_median_us": cyc,
                                "minutes": round((time.monotonic() - row.pop("t0")) / 60, 1),
                                "load_end": [round(x, 2) for x in os.getloadavg()],
                                "period": st["sink"].get("period_frames"), "buffer": st["sink"].get("buffer_frames"),
                                "machine_stalls_ge_5ms": sum(1 for _, late, _ in self.stalls() if late >= 5e6)})
                    summary.append(row)
                    log_line("SUMMARY " + json.dumps(row))
                    c.s.close()
                if prof:
                    prof.send_signal(signal.SIGINT)
                    prof.wait()
                if laggard:
                    laggard.set()
                self.stack.close()
                self.stack = None
        finally:
            if self.stack:
                self.stack.close()
            if self.watch:
                self.watch.kill()
                self.watch.wait()
            with open(os.path.join(self.tmp, "results.json"), "w") as f:
                json.dump({"summary": summary, "rounds": self.results}, f, indent=1)
            log_line("results: " + os.path.join(self.tmp, "results.json"))
            if not a.keep and all(r["glitches"] == 0 for r in summary) and len(summary) == len(a.quanta) * len(a.variants):
                shutil.rmtree(self.tmp, ignore_errors=True)
        print(json.dumps(summary, indent=1))
        return 0 if all(r["glitches"] == 0 for r in summary) else 1


TOOLS = ["dbus-daemon", "pipewire", "wireplumber", "pipewire-pulse", "pactl", "parec", "pw-record",
         "pw-metadata", "pw-profiler", "gcc", "chrt"]


def main():
    missing = [t for t in TOOLS if not shutil.which(t)]
    if missing:
        sys.exit("glitch_soak: missing %s (make deps bench-deps)" % " ".join(missing))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quanta", default="256,128")
    ap.add_argument("--cues", type=int, default=2000, help="at least this many per quantum")
    ap.add_argument("--latency-ms", type=int, default=None)
    ap.add_argument("--gap-ms", default="%d,%d" % (GAP_S[0] * 1000, GAP_S[1] * 1000),
                    help="pops over the bed this far apart (uniform); 55,80 rewinds about 15 times a second")
    ap.add_argument("--bin", default=None,
                    help="DIR holding cued, or LABEL=DIR,LABEL=DIR,…: an A/B, rounds alternating between them")
    ap.add_argument("--tee", action="store_true")
    ap.add_argument("--trace", action="store_true")
    ap.add_argument("--laggard", default=None, metavar="WHO:MS",
                    help="stop (SIGSTOP) WHO for MS milliseconds every 0.3-0.7 s, on purpose: 'recorder' (a third "
                         "recorder of the monitor: another client of the graph late), 'server' (pipewire itself: "
                         "its data thread late, as when the machine stops), 'pulse' (pipewire-pulse: parec's way in)")
    ap.add_argument("--parec-latency-ms", type=float, default=50,
                    help="parec's --latency-msec (the tests use 50; the old bench's monitor used 1)")
    ap.add_argument("--parec-plain", action="store_true", help="parec at normal priority (not SCHED_FIFO 10)")
    ap.add_argument("--profile", action="store_true", help="pw-profiler through every round (profiler.log)")
    ap.add_argument("--keep", action="store_true", help="keep every recording and the temp dir")
    ap.add_argument("--log-level", default="error")
    a = ap.parse_args()
    a.quanta = [int(q) for q in a.quanta.split(",")]
    a.gap = [float(x) / 1000 for x in a.gap_ms.split(",")]
    if a.bin is None:
        # The newer of this tree's builds (a release build left from an older commit is not what was just changed).
        builds = [os.path.join(ROOT, ".build", k) for k in ("release", "debug")]
        builds = [b for b in builds if os.path.exists(os.path.join(b, "cued"))]
        if not builds:
            sys.exit("no cued built here: swift build (or make build), or --bin DIR")
        a.bin = max(builds, key=lambda b: os.path.getmtime(os.path.join(b, "cued")))
    a.variants = []
    for i, item in enumerate(a.bin.split(",")):
        label, _, d = item.rpartition("=")
        a.variants.append((label or "cued%s" % ("" if i == 0 else i + 1), d))
        exe = os.path.join(d, "cued")
        log_line("cued %s: %s (built %s)" % (a.variants[-1][0], exe, time.ctime(os.path.getmtime(exe))))
    sys.exit(Soak(a).run())


if __name__ == "__main__":
    main()
