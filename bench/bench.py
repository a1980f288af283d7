#!/usr/bin/python3
"""make bench: cued's benchmarks in one run. Prints tables, writes BENCHMARKS.md and
docs/latency.png. Figures only: nothing here passes or fails on a timing.

Trigger -> first sample: ALSA PCMs of `type file` over `null` write into a FIFO this
harness reads; latency = when the first non-zero sample arrives - when the trigger
happened (a socket write, or a process spawn). Through PulseAudio: the null sink's
monitor, read with parec, the same way. Every contender plays the same probe cue,
whose first sample is non-zero.

Environment: BENCH_TRIALS (default 200), BENCH_IDLE_S (60), BENCH_QUICK=1 (small runs).
BENCH_ONLY=SECTION runs one section and prints it (alsa, alsa-cued, idle, throughput, eventloop,
footprint, memory, mixer, pipewire, desktop, follow, canberra); BENCH_ONLY=desktop (feedbackd against cued,
and a notification sound; BENCH_DESKTOP_TRIALS, default 100), BENCH_ONLY=follow (the desktop's audio
changing under cued; BENCH_FOLLOW_TRIALS, default 10) and BENCH_ONLY=canberra (libcanberra's pulse driver
against cued's plug-in; BENCH_CANBERRA_TRIALS, default 100 a row) also replace their section in BENCHMARKS.md.
"""
import asyncio
import json
import math
import os
import platform
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import wave

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pipewire_bench  # noqa: E402
import desktop_bench  # noqa: E402
import canberra_bench  # noqa: E402
import follow_bench  # noqa: E402
import benchlib  # noqa: E402
from benchlib import Client, Fixture, Stream, cue_set, log, noise, pct, proc_cpu_ticks, release_dir, square, wait_answering, write_wav  # noqa: E402,F401
import daemon_bench  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REL = release_dir(ROOT)
CUED, CUECTL = os.path.join(REL, "cued"), os.path.join(REL, "cuectl")
QUICK = os.environ.get("BENCH_QUICK") == "1"
TRIALS = int(os.environ.get("BENCH_TRIALS", "30" if QUICK else "200"))
IDLE_S = float(os.environ.get("BENCH_IDLE_S", "5" if QUICK else "60"))
TMP = tempfile.mkdtemp(prefix="cued-bench.")
CHILDREN = []


def spawn(args, **kw):
    p = subprocess.Popen(args, **kw)
    CHILDREN.append(p)
    return p


# What the reliability harnesses start their daemons with (benchlib.Cued, Pinger, flood_row).
FIXTURE = Fixture(TMP, CUED, spawn)


def cleanup():
    for p in CHILDREN:
        if p.poll() is None:
            p.kill()
            p.wait()
    shutil.rmtree(TMP, ignore_errors=True)


# ---------------------------------------------------------------- fixtures

def make_fixtures():
    sounds = os.path.join(TMP, "sounds")
    # The probe: 20 ms; its first sample is non-zero.
    probe = square(960)
    cue_set(sounds, probe)
    # A 10 s quiet noise cue for the mixer's CPU figure (-30 dBFS, so 16 voices never clip).
    write_wav(os.path.join(sounds, "long.wav"), noise(480000, 1000, 1))
    raw = os.path.join(TMP, "probe.raw")
    with open(raw, "wb") as f:
        f.write(struct.pack("<%dh" % (len(probe) * 2), *[s for s in probe for _ in (0, 1)]))
    return sounds, os.path.join(sounds, "probe.wav"), raw


# ---------------------------------------------------------------- measuring

def measure(stream, trigger, after=None, trials=TRIALS, gap_s=0.03, warmup=3):
    """trigger() is called right after t0; returns an object passed to after()."""
    out, misses = [], 0
    for i in range(trials + warmup):
        stream.drain()
        time.sleep(gap_s)
        stream.drain(quiet_ms=2)
        t0 = time.monotonic_ns()
        token = trigger()
        t1 = stream.wait_nonzero()
        if after:
            after(token)
        if i < warmup:
            continue
        if t1 is None:
            misses += 1
        else:
            out.append((t1 - t0) / 1000.0)
    return out, misses


def start_cued(name, sink, sounds, extra=(), env=None):
    sock = os.path.join(TMP, name + ".sock")
    e = dict(os.environ if env is None else env)
    e.update(XDG_STATE_HOME=os.path.join(TMP, "state-" + name), XDG_CONFIG_HOME=os.path.join(TMP, "noconfig"))
    p = spawn([CUED, "--socket", sock, "--sink", sink, "--sounds", sounds, "--log-level", "error", *extra],
              env=e, stderr=subprocess.DEVNULL)
    wait_answering(sock, name)
    return p, sock


def proc_ctx_switches(pid):
    """Context switches per thread id (voluntary + involuntary)."""
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        total = 0
        try:
            with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        total += int(line.split()[1])
        except FileNotFoundError:
            continue
        out[tid] = total
    return out


def ctx_delta(before, after):
    """Switches in between: threads alive at both ends count their difference, new
    threads all of theirs (a thread that exited in between is not counted)."""
    return sum(c - before.get(tid, 0) for tid, c in after.items())


def proc_rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])


# ---------------------------------------------------------------- sections

MIDSTREAM = "cued, mid-stream (a bed playing)"
MIDSTREAM_HANDED = "cued, mid-stream: its write to ALSA (from the FIFO)"
LOUD = 8000  # the probe (±16384) over the bed (noise within ±1000)


def midstream_alsa(sounds, stream, env, results):
    """A cue while another plays, on plain ALSA (the file PCM): a quiet 10 s bed (noise
    within ±1000, played again every 8 s) keeps the stream running; each trigger comes a
    random 0–1 period after the last probe has passed (not in step with cued's writer);
    latency = trigger -> the first sample louder than the bed arriving at the FIFO. A
    daemon of its own, so its `status` latency covers these cues (and the beds) only."""
    import random
    rng = random.Random(18)
    p, sock = start_cued("mid", "alsa:benchsink", sounds, ["--idle-close-s", "3600"], env)
    c = Client(sock)
    c.request("play long")
    bed_at = time.monotonic()
    stream.drain(quiet_ms=30, threshold=LOUD)
    sink = json.loads(c.request("status")[3:])["sink"]  # open now: the sizes cued got
    period_s, buffer = sink["period_frames"] / sink["rate"], sink["buffer_frames"]
    out, handed, misses, dry = [], [], 0, 0
    for i in range(TRIALS + 3):
        if time.monotonic() - bed_at > 8.0:
            c.request("play long")
            bed_at = time.monotonic()
            stream.drain(quiet_ms=30, threshold=LOUD)
        stream.drain(quiet_ms=15, threshold=LOUD)  # the last probe has passed
        time.sleep(rng.uniform(0, period_s))
        flowing = stream.last_data is not None and time.monotonic() - stream.last_data < 0.02
        t0 = time.monotonic_ns()
        c.send("play probe")
        got = stream.wait_loud_at(LOUD)
        c.reply()
        if i < 3:
            continue
        if not flowing:
            dry += 1  # no bed data in the last 20 ms: not a mid-stream trigger; counted, kept
        if got is None:
            misses += 1
            continue
        t1, first, reads = got
        out.append((t1 - t0) / 1000.0)
        # The file plugin keeps the last `buffer` frames it was given and passes on the rest,
        # so the write that carried frame `first` is the first read to reach past first - buffer.
        t_w = next((t for t, upto in reads if upto > first - buffer), t1)
        handed.append((t_w - t0) / 1000.0)
    st = json.loads(c.request("status")[3:])
    results[MIDSTREAM] = (out, misses)
    results[MIDSTREAM_HANDED] = (handed, misses)
    results["_midstream"] = {"inside": st.get("latency_us", {}), "dry": dry, "sink": st.get("sink", {}),
                             "xruns": st.get("xruns"), "period_s": period_s}
    p.terminate()
    p.wait()


def latency_alsa(sounds, probe_wav, probe_raw, results, cued_only=False):
    fifo = os.path.join(TMP, "alsa.fifo")
    os.mkfifo(fifo)
    conf = os.path.join(TMP, "bench-alsa.conf")
    with open(conf, "w") as f:
        f.write('pcm.benchsink { type file slave.pcm "null" file "%s" format "raw" }\n' % fifo)
    # canberra plays on "default". A config of its own, not added to alsa.conf: alsa.conf's
    # hooks load /etc/alsa/conf.d last, where pipewire-alsa's 99-pipewire-default.conf
    # would take `default` back.
    conf_default = os.path.join(TMP, "bench-alsa-default.conf")
    with open(conf_default, "w") as f:
        f.write('pcm.!default { type file slave.pcm { type null } file "%s" format "raw" }\n' % fifo)
    env = dict(os.environ, ALSA_CONFIG_PATH="/usr/share/alsa/alsa.conf:" + conf)
    stream = Stream(os.open(fifo, os.O_RDWR))  # our own writer end: reads block, never EOF

    warm, wsock = start_cued("warm", "alsa:benchsink", sounds, ["--idle-close-s", "3600"], env)
    cold, csock = start_cued("cold", "alsa:benchsink", sounds, ["--idle-close-s", "0"], env)
    kept = Client(wsock)
    coldc = Client(csock)

    def kept_trigger(c, line):
        return lambda: c.send(line)

    def read_reply(c):
        return lambda _: c.reply()

    log("latency: cued kept connection (warm)")
    results["cued, kept connection (warm)"] = measure(stream, kept_trigger(kept, "play probe"), read_reply(kept))
    inside = json.loads(kept.request("status")[3:])["latency_us"]
    results["_inside_cued"] = inside  # cued's own figure: request read -> first frame handed to ALSA
    log("latency: cued kept connection (cold device)")
    results["cued, kept connection (cold)"] = measure(stream, kept_trigger(coldc, "play probe"), read_reply(coldc), gap_s=0.08)

    def prewarmed():
        coldc.request("state idle quiet")
        coldc.request("drag 5")  # the first pull: cued opens and prepares the device
        time.sleep(0.05)
        stream.drain(quiet_ms=2)
        return None

    log("latency: cued kept connection (pre-warmed by drag)")
    pre = []
    misses = 0
    for i in range(TRIALS + 3):
        stream.drain()
        time.sleep(0.08)
        prewarmed()
        t0 = time.monotonic_ns()
        coldc.send("drag 80")  # crosses the threshold: psst1 (the probe)
        t1 = stream.wait_nonzero()
        coldc.reply()
        if i >= 3:
            if t1 is None:
                misses += 1
            else:
                pre.append((t1 - t0) / 1000.0)
    results["cued, kept connection (pre-warmed)"] = (pre, misses)
    if cued_only:
        for p in (warm, cold):
            p.terminate()
            p.wait()
        log("latency: cued mid-stream (a bed playing)")
        midstream_alsa(sounds, stream, env, results)
        return

    line = os.path.join(TMP, "line.txt")
    with open(line, "w") as f:
        f.write("play probe\n")

    def spawner(args, env=None, stdin_path=None):
        def trig():
            stdin = open(stdin_path) if stdin_path else subprocess.DEVNULL
            return spawn(args, env=env, stdin=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return trig

    def reap(p):
        p.wait()

    log("latency: cuectl play")
    results["cuectl play"] = measure(stream, spawner([CUECTL, "--socket", wsock, "play", "probe"]), reap)
    log("latency: socat one-shot")
    results["socat one-shot"] = measure(stream, spawner(["socat", "-", "UNIX-CONNECT:" + wsock], stdin_path=line), reap)
    log("latency: aplay per event")
    results["aplay -D PCM file"] = measure(stream, spawner(["aplay", "-q", "-D", "benchsink", probe_wav], env), reap)
    log("latency: sox play")
    results["sox play"] = measure(stream, spawner(["play", "-q", probe_wav], dict(env, AUDIODRIVER="alsa", AUDIODEV="benchsink")), reap)

    xvfb = None
    if shutil.which("canberra-gtk-play") and shutil.which("Xvfb"):
        xvfb = spawn(["Xvfb", ":97", "-nolisten", "tcp"], stderr=subprocess.DEVNULL)
        time.sleep(1.0)
        cenv = dict(os.environ, DISPLAY=":97", CANBERRA_DRIVER="alsa",
                    ALSA_CONFIG_PATH=conf_default)
        log("latency: canberra-gtk-play")
        results["canberra-gtk-play -f"] = measure(stream, spawner(["canberra-gtk-play", "-f", probe_wav], cenv), reap)
        xvfb.kill()

    lb_sock = os.path.join(TMP, "lowerbound.sock")
    lb = spawn([os.path.join(TMP, "lowerbound"), "benchsink", lb_sock, probe_raw], env=env, stderr=subprocess.DEVNULL)
    for _ in range(500):
        if os.path.exists(lb_sock):
            break
        time.sleep(0.01)
    lbc = Client(lb_sock)
    log("latency: C lower bound")
    results["C lower bound (kept PCM)"] = measure(stream, kept_trigger(lbc, "x"), read_reply(lbc))
    results["_theme"] = daemon_bench.theme_latency(stream, env, sounds)
    for p in (warm, cold, lb):
        p.terminate()
        p.wait()
    # Last, alone on the FIFO: with the warm and cold daemons still open on it, both were
    # found exited (zombies) after this section in one run, and every later row missed.
    log("latency: cued mid-stream (a bed playing)")
    midstream_alsa(sounds, stream, env, results)


def latency_pulse(sounds, probe_wav, results):
    if not (shutil.which("pulseaudio") and shutil.which("parec")):
        log("pulseaudio not installed: skipping the sound-server section")
        return
    home = os.path.join(TMP, "pulse-home")
    run = os.path.join(TMP, "pulse-run")
    os.makedirs(home)
    os.makedirs(run, mode=0o700)
    psock = os.path.join(run, "native")
    env = dict(os.environ, HOME=home, XDG_RUNTIME_DIR=run, PULSE_SERVER="unix:" + psock)
    env.pop("ALSA_CONFIG_PATH", None)
    pa = spawn(["pulseaudio", "--daemonize=no", "-n", "--exit-idle-time=-1", "--disable-shm=yes",
                "--load=module-null-sink sink_name=bench rate=48000 channels=2",
                "--load=module-native-protocol-unix socket=%s auth-anonymous=1" % psock],
               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(500):
        if subprocess.run(["pactl", "info"], env=env, capture_output=True).returncode == 0:
            break
        time.sleep(0.02)
    subprocess.run(["pactl", "set-default-sink", "bench"], env=env, capture_output=True)
    subprocess.run(["pactl", "upload-sample", probe_wav, "probe"], env=env, check=True, capture_output=True)
    parec = spawn(["parec", "-d", "bench.monitor", "--raw", "--format=s16le", "--rate=48000", "--channels=2",
                   "--latency-msec=1"], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    stream = Stream(parec.stdout.fileno())
    time.sleep(0.3)

    def spawner(args):
        return lambda: spawn(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def reap(p):
        p.wait()

    log("latency (PulseAudio): pactl play-sample")
    results["PA: pactl play-sample"] = measure(stream, spawner(["pactl", "play-sample", "probe", "bench"]), reap, gap_s=0.05)
    log("latency (PulseAudio): paplay")
    results["PA: paplay"] = measure(stream, spawner(["paplay", "-d", "bench", probe_wav]), reap, gap_s=0.05)
    cued, sock = start_cued("pulse", "alsa:pulse", sounds, ["--idle-close-s", "3600"], env)
    c = Client(sock)
    log("latency (PulseAudio): cued on ALSA's pulse PCM")
    results["PA: cued (alsa:pulse), kept connection"] = measure(stream, lambda: c.send("play probe"), lambda _: c.reply(), gap_s=0.05)
    for p in (cued, parec, pa):
        p.terminate()
        p.wait()


def idle_cost(sounds):
    p, sock = start_cued("idle", "alsa:null", sounds)
    hz = os.sysconf("SC_CLK_TCK")
    out = {}
    for label, prelude in (("after start", None), ("after a cue", "play probe")):
        if prelude:
            Client(sock).request(prelude)
            time.sleep(0.2)  # let the cue finish and the stream stop
        t0, c0 = proc_cpu_ticks(p.pid), proc_ctx_switches(p.pid)
        log("idle: %s, %.0f s" % (label, IDLE_S))
        time.sleep(IDLE_S)
        t1, c1 = proc_cpu_ticks(p.pid), proc_ctx_switches(p.pid)
        out[label] = (t1 - t0, ctx_delta(c0, c1) / IDLE_S)
    p.terminate()
    p.wait()
    return out, hz


def throughput(sounds):
    # Raw capacity: the per-connection rate limit and the connection cap are lifted.
    p, sock = start_cued("flood", "null", sounds, ["--voices", "16", "--rate-limit", "0", "--max-clients", "4096"])
    out = {}
    # One pipelined connection: a writer thread streams requests, this thread reads replies.
    n = 100_000 if QUICK else 500_000
    c = Client(sock)
    payload = b"play probe\n" * 1000
    ok = err = 0

    def writer():
        for _ in range(n // 1000):
            c.s.sendall(payload)

    t0 = time.monotonic()
    w = threading.Thread(target=writer)
    w.start()
    for _ in range(n):
        r = c.f.readline()
        if r.startswith(b"ok"):
            ok += 1
        else:
            err += 1
    dt = time.monotonic() - t0
    w.join()
    out["pipelined"] = {"requests": n, "seconds": dt, "rps": n / dt, "ok": ok, "err": err}
    log("throughput: one pipelined connection: %.0f req/s (%d ok, %d err)" % (n / dt, ok, err))

    async def flood(conns, per_conn):
        lat, pings = [], []
        done = asyncio.Event()

        async def one():
            r, w = await asyncio.open_unix_connection(sock)
            for _ in range(per_conn):
                t = time.monotonic_ns()
                w.write(b"play probe\n")
                await r.readline()
                lat.append((time.monotonic_ns() - t) / 1000)
            w.close()

        async def pinger():
            r, w = await asyncio.open_unix_connection(sock)
            while not done.is_set():
                t = time.monotonic_ns()
                w.write(b"ping\n")
                await r.readline()
                pings.append((time.monotonic_ns() - t) / 1000)
                await asyncio.sleep(0.002)
            w.close()

        pt = asyncio.create_task(pinger())
        t0 = time.monotonic()
        await asyncio.gather(*[one() for _ in range(conns)])
        dt = time.monotonic() - t0
        done.set()
        await pt
        return {"connections": conns, "requests": conns * per_conn, "seconds": dt, "rps": conns * per_conn / dt,
                "reply_p99_us": pct(lat, 0.99), "ping_p99_us": pct(pings, 0.99), "pings": len(pings)}

    for conns, per in ((100, 200 if QUICK else 1000), (1000, 20 if QUICK else 100)):
        r = asyncio.run(flood(conns, per))
        out["%d connections" % conns] = r
        log("throughput: %d connections: %.0f req/s, reply p99 %.0f us, ping p99 %.0f us"
            % (conns, r["rps"], r["reply_p99_us"], r["ping_p99_us"]))
    p.terminate()
    p.wait()
    return out


def memory_and_startup(sounds):
    out = {}
    p, sock = start_cued("mem", "null", sounds, ["--rate-limit", "0"])
    time.sleep(0.3)
    out["rss_start_kib"] = proc_rss_kib(p.pid)
    c = Client(sock)
    n = 100_000 if QUICK else 1_000_000
    lines = [b"play probe\n", b"ping\n", b"state release\n", b"state idle\n", b"status\n"]
    payload = b"".join(lines[i % len(lines)] for i in range(1000))

    def writer():
        for _ in range(n // 1000):
            c.s.sendall(payload)

    w = threading.Thread(target=writer)
    w.start()
    for _ in range(n):
        c.f.readline()
    w.join()
    time.sleep(0.5)
    out["requests"] = n
    out["rss_after_kib"] = proc_rss_kib(p.pid)
    p.terminate()
    p.wait()

    # exec -> first `ok pong`, and exec -> READY=1 (a fake NOTIFY_SOCKET).
    pongs, readies = [], []
    for i in range(10 if QUICK else 30):
        nsock = os.path.join(TMP, "notify%d" % i)
        ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        ns.bind(nsock)
        sock = os.path.join(TMP, "start%d.sock" % i)
        env = dict(os.environ, NOTIFY_SOCKET=nsock, XDG_STATE_HOME=os.path.join(TMP, "st"),
                   XDG_CONFIG_HOME=os.path.join(TMP, "noconfig"))
        t0 = time.monotonic_ns()
        q = spawn([CUED, "--socket", sock, "--sink", "null", "--sounds", sounds, "--log-level", "error"], env=env,
                  stderr=subprocess.DEVNULL)
        ready = None
        while True:
            r, _, _ = select.select([ns], [], [], 0.0002)
            if r and b"READY=1" in ns.recv(4096) and ready is None:
                ready = time.monotonic_ns()
            try:
                cl = Client(sock)
                if cl.request("ping") == "ok pong":
                    pongs.append((time.monotonic_ns() - t0) / 1e6)
                    break
            except OSError:
                pass
        while ready is None:
            if b"READY=1" in ns.recv(4096):
                ready = time.monotonic_ns()
        readies.append((ready - t0) / 1e6)
        q.terminate()
        q.wait()
        ns.close()
    out["exec_to_pong_ms"] = (pct(pongs, 0.5), max(pongs))
    out["exec_to_ready_ms"] = (pct(readies, 0.5), max(readies))
    return out


def mixer_cpu(sounds):
    p, sock = start_cued("mix", "null", sounds, ["--voices", "16"])
    hz = os.sysconf("SC_CLK_TCK")
    out = {}
    for voices in (1, 16):
        c = Client(sock)
        t0 = proc_cpu_ticks(p.pid)
        w0 = time.monotonic()
        for _ in range(voices):
            c.request("play long")
        time.sleep(10.5)
        t1 = proc_cpu_ticks(p.pid)
        out[voices] = (t1 - t0) / hz / (time.monotonic() - w0) * 100  # % of one core
        log("mixer: %d voices: %.2f %% of a core" % (voices, out[voices]))
    p.terminate()
    p.wait()
    return out


# ---------------------------------------------------------------- report

def machine():
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    swift = subprocess.run(["swift", "--version"], capture_output=True, text=True).stdout.splitlines()
    return "%s, %d cores, %s; %s; %s" % (cpu, os.cpu_count(), platform.platform(), swift[0] if swift else "swift ?",
                                          "no sound card (ALSA null/file PCMs, PulseAudio null sink)")


def plot(results, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib missing: no plot")
        return False
    names = [n for n in results if not n.startswith("_") and results[n][0]]
    data = [[v / 1000 for v in results[n][0]] for n in names]
    fig, ax = plt.subplots(figsize=(10, 0.45 * len(names) + 1.5))
    ax.boxplot(data, vert=False, labels=names, showfliers=True, whis=(1, 99))
    ax.set_xscale("log")
    ax.set_xlabel("trigger → first sample (ms, log scale); whiskers p1–p99")
    ax.set_title("cued vs the alternatives, same machine, same run (%d triggers each)" % TRIALS)
    ax.grid(True, axis="x", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def lat_row(name, v, misses, base):
    """One row of a trigger -> first sample table (µs)."""
    if not v:
        return "| %s | 0 | - | - | - | - | - | %d |" % (name, misses)
    p50 = pct(v, .5)
    return "| %s | %d | %.0f | %.0f | %.0f | %.0f | %.2f× | %d |" % (
        name, len(v), p50, pct(v, .9), pct(v, .99), max(v), p50 / base if base else float("nan"), misses)


def midstream_note(lat):
    m = lat.get("_midstream")
    if not m:
        return []
    i = m["inside"]
    return ["", "*mid-stream*: a quiet 10 s bed plays (cued's own daemon, the same file PCM); each probe is",
            "triggered a random 0–1 period (%.1f ms) after the last one has passed, so triggers fall at every" % (m["period_s"] * 1000),
            "phase of cued's writer; latency = trigger → the first sample louder than the bed at the FIFO.",
            "Triggers with no bed data in the 20 ms before them: %d; device xruns: %s. cued's own figure for" % (m["dry"], m["xruns"]),
            "that daemon (request read → first frame handed to ALSA): p50 %s µs, p99 %s µs. The file plugin" % (i.get("p50"), i.get("p99")),
            "holds the last buffer (%d frames) it was given, so the probe reaches the FIFO only once cued has" % m["sink"].get("buffer_frames", 0),
            "written a buffer more, in real time: *its write to ALSA* is when the write that carried the probe's",
            "first frame happened, read from the FIFO (the first read that reached past that frame less a buffer).",
            "See *The file plugin mid-stream* in the notes."]


def report(lat, idle, hz, thr, mem, mix, plotted, extra_targets=()):
    def row(name, base):
        v, misses = lat[name]
        return lat_row(name, v, misses, base)

    ref = "cued, kept connection (warm)"
    base = pct(lat[ref][0], .5) if lat.get(ref, ([], 0))[0] else None
    md = ["# cued benchmarks", "",
          "Generated by `make bench` (bench/bench.py); figures, not tests: nothing here fails on a timing.", "",
          "**Machine**: " + machine() + ".  ", "**Run**: %s, %d triggers per contender%s." % (
              time.strftime("%Y-%m-%d"), TRIALS, " (BENCH_QUICK)" if QUICK else ""), "",
          "## Trigger → first sample", "",
          "An ALSA PCM of `type file` over `null` writes into a FIFO the harness reads; latency is the time",
          "from the trigger (a client's socket write, or a process spawn) to the first non-zero sample",
          "arriving. Every contender plays the same 20 ms probe (first sample non-zero). *warm*: the PCM",
          "is open and prepared; *cold*: closed (`--idle-close-s 0`), cued opens it for the cue;",
          "*pre-warmed*: cold, but a `drag 5` opened it 50 ms before the `drag 80` that plays the cue.",
          "The file plugin holds the last buffer it was given and writes on to the FIFO only what is",
          "queued beyond it (all of it at drain or close), the same for every ALSA contender.", "",
          "| contender | n | p50 µs | p90 µs | p99 µs | max µs | p50 ÷ cued warm | misses |", "|---|---|---|---|---|---|---|---|"]
    for name in lat:
        if not name.startswith(("PA:", "_")):
            md.append(row(name, base))
    if "_inside_cued" in lat:
        i = lat["_inside_cued"]
        md += ["", "Of cued's warm latency, the part inside cued (its own `status` figure: request line read →",
               "first frame handed to ALSA) was p50 %s µs, p99 %s µs over the same triggers." % (i["p50"], i["p99"])]
    md += midstream_note(lat)
    if any(n.startswith("PA:") for n in lat):
        pa_ref = "PA: cued (alsa:pulse), kept connection"
        pbase = pct(lat[pa_ref][0], .5) if lat.get(pa_ref, ([], 0))[0] else None
        md += ["", "### Through a sound server (PulseAudio, `module-null-sink`, measured at its monitor with `parec`)", "",
               "| contender | n | p50 µs | p90 µs | p99 µs | max µs | p50 ÷ cued | misses |", "|---|---|---|---|---|---|---|---|"]
        for name in lat:
            if name.startswith("PA:"):
                md.append(row(name, pbase))
    else:
        md += ["", "Sound servers: see *Through PipeWire* below (PipeWire and its PulseAudio server, the stack",
               "Debian 12 installs). The standalone PulseAudio daemon is not measured here: Debian's `pulseaudio`",
               "package conflicts with `pipewire-alsa`, which the tests need."]
    if plotted:
        md += ["", "![latency distribution](docs/latency.png)"]

    ticks_start, cs_start = idle["after start"]
    ticks_cue, cs_cue = idle["after a cue"]
    md += ["", "## Idle cost", "",
           "cued on `alsa:null`, idle for %.0f s after start, then for %.0f s after one cue (utime+stime from" % (IDLE_S, IDLE_S),
           "/proc, in clock ticks of 1/%d s; context switches summed over all threads)." % hz, "",
           "| period | CPU ticks | context switches / s |", "|---|---|---|",
           "| after start | %d | %.3f |" % (ticks_start, cs_start), "| after a cue | %d | %.3f |" % (ticks_cue, cs_cue)]

    pl = thr["pipelined"]
    md += ["", "## Throughput", "", "`--sink null`, 16 voices (plays beyond 16 steal the oldest voice), `--rate-limit 0`",
           "and `--max-clients 4096` (by default one connection may start 200 cues a second and 256 may connect).", "",
           "| load | requests | req/s | reply p99 µs | ping p99 µs during |", "|---|---|---|---|---|",
           "| one pipelined connection | %d | %.0f | - | - |" % (pl["requests"], pl["rps"])]
    for k in ("100 connections", "1000 connections"):
        r = thr[k]
        md.append("| %s (request/reply each) | %d | %.0f | %.0f | %.0f |" % (k, r["requests"], r["rps"], r["reply_p99_us"], r["ping_p99_us"]))
    md += ["", "The concurrent rows are driven by one Python asyncio client, which is the bottleneck there;",
           "they show that every connection is served and how `ping` fares meanwhile, not cued's ceiling.", ""]

    md += ["## Memory and start-up", "",
           "| figure | value |", "|---|---|",
           "| RSS after start | %.1f MiB |" % (mem["rss_start_kib"] / 1024),
           "| RSS after %d requests | %.1f MiB |" % (mem["requests"], mem["rss_after_kib"] / 1024),
           "| exec → first `ok pong` (p50 / max) | %.1f / %.1f ms |" % mem["exec_to_pong_ms"],
           "| exec → `READY=1` (p50 / max) | %.1f / %.1f ms |" % mem["exec_to_ready_ms"], "",
           "## Mixer", "", "CPU of the whole daemon per second of output (`--sink null`, a 10 s cue played by N voices).", "",
           "| voices | % of one core |", "|---|---|"]
    for v in (1, 16):
        md.append("| %d | %.2f |" % (v, mix[v]))

    def met(ok):
        return "**met**" if ok else "**not met**"

    lb = pct(lat["C lower bound (kept PCM)"][0], .99) if lat.get("C lower bound (kept PCM)", ([], 0))[0] else None
    cp99 = pct(lat[ref][0], .99) if base else None
    cuectl50 = pct(lat["cuectl play"][0], .5)
    aplay50 = pct(lat["aplay -D PCM file"][0], .5)
    targets = []
    if lb and cp99:
        targets.append(("cued kept connection p99 ≤ 2 × C lower bound p99", "%.0f µs vs 2 × %.0f µs" % (cp99, lb), cp99 <= 2 * lb))
    if lat.get(MIDSTREAM, ([], 0))[0]:
        m99 = pct(lat[MIDSTREAM][0], .99)
        targets.append(("mid-stream on plain ALSA (file PCM, a bed playing): p99 ≤ 1.5 ms", "%.2f ms (p50 %.2f ms, %d misses)"
                        % (m99 / 1000, pct(lat[MIDSTREAM][0], .5) / 1000, lat[MIDSTREAM][1]), m99 <= 1500))
    targets.append(("`cuectl play` p50 ≤ 0.6 × aplay p50", "%.0f µs vs 0.6 × %.0f µs" % (cuectl50, aplay50), cuectl50 <= 0.6 * aplay50))
    if "PA: pactl play-sample" in lat and lat["PA: pactl play-sample"][0] and lat.get("PA: cued (alsa:pulse), kept connection", ([], 0))[0]:
        a, b = pct(lat["PA: cued (alsa:pulse), kept connection"][0], .5), pct(lat["PA: pactl play-sample"][0], .5)
        targets.append(("through PulseAudio: cued p50 < `pactl play-sample` p50", "%.0f µs vs %.0f µs" % (a, b), a < b))
    targets.append(("idle: 0 CPU ticks and < 1 context switch/s over %.0f s" % IDLE_S,
                    "%d + %d ticks, %.3f and %.3f switches/s" % (ticks_start, ticks_cue, cs_start, cs_cue),
                    ticks_start == 0 and ticks_cue == 0 and cs_start < 1 and cs_cue < 1))
    targets.append(("≥ 100,000 play requests/s on one connection", "%.0f req/s" % pl["rps"], pl["rps"] >= 100_000))
    targets.append(("1,000 concurrent clients served", "%d requests answered" % thr["1000 connections"]["requests"], True))
    targets.append(("RSS stays flat under load", "%.1f MiB after start, %.1f MiB after %d requests (with a 10 s test cue loaded)"
                    % (mem["rss_start_kib"] / 1024, mem["rss_after_kib"] / 1024, mem["requests"]),
                    mem["rss_after_kib"] - mem["rss_start_kib"] <= 2048))
    targets += list(extra_targets)
    targets.append(("16-voice mix ≤ 1 % of a core", "%.2f %%" % mix[16], mix[16] <= 1))
    md += ["", "## Targets", "", "| target | measured | |", "|---|---|---|"]
    for t, m, ok in targets:
        md.append("| %s | %s | %s |" % (t, m, met(ok)))
    return md, targets


def desktop_trials():
    return int(os.environ["BENCH_DESKTOP_TRIALS"]) if "BENCH_DESKTOP_TRIALS" in os.environ else None


def canberra_trials():
    return int(os.environ["BENCH_CANBERRA_TRIALS"]) if "BENCH_CANBERRA_TRIALS" in os.environ else None


def follow_trials():
    return int(os.environ["BENCH_FOLLOW_TRIALS"]) if "BENCH_FOLLOW_TRIALS" in os.environ else None


def main():
    daemon_bench.bench = sys.modules[__name__]
    os.chdir(ROOT)
    sounds, probe_wav, probe_raw = make_fixtures()
    only = os.environ.get("BENCH_ONLY")
    if only in ("alsa", "alsa-cued"):
        # The trigger -> first sample table (alsa-cued: cued's rows only, warm, cold,
        # pre-warmed and mid-stream), printed; with BENCH_BIN_DIR, to A/B two builds.
        log("cued: %s" % CUED)
        if only == "alsa":
            subprocess.run(["gcc", "-O2", "-o", os.path.join(TMP, "lowerbound"), "bench/lowerbound.c", "-lasound"], check=True)
        lat = {}
        latency_alsa(sounds, probe_wav, probe_raw, lat, cued_only=only == "alsa-cued")
        lat.pop("_theme", None)
        ref = "cued, kept connection (warm)"
        base = pct(lat[ref][0], .5) if lat.get(ref, ([], 0))[0] else None
        print("\n".join(["| contender | n | p50 µs | p90 µs | p99 µs | max µs | p50 ÷ cued warm | misses |", "|---|---|---|---|---|---|---|---|"]
                        + [lat_row(n, lat[n][0], lat[n][1], base) for n in lat if not n.startswith("_")] + midstream_note(lat)))
        print(json.dumps({n: v for n, v in lat.items() if n.startswith("_")}))
        return
    if only == "desktop":  # the desktop event sources: printed, and its section of BENCHMARKS.md replaced
        res = desktop_bench.run(trials=desktop_trials(), quick=QUICK)
        with open(os.path.join(tempfile.gettempdir(), "cued-bench-desktop.json"), "w") as f:
            json.dump(res, f)
        md = desktop_bench.report(res)
        print("\n".join(md))
        desktop_bench.update(os.path.join(ROOT, "BENCHMARKS.md"), md)
        return
    if only == "canberra":  # libcanberra's pulse driver against cued's plug-in: printed, and its section replaced
        res = canberra_bench.run(trials=canberra_trials(), quick=QUICK)
        md = canberra_bench.report(res)
        print("\n".join(md))
        canberra_bench.update(os.path.join(ROOT, "BENCHMARKS.md"), md)
        return
    if only == "follow":  # the desktop's audio changing under cued: printed, and its section replaced
        res = follow_bench.run(trials=follow_trials(), quick=QUICK)
        md = follow_bench.report(res)
        print("\n".join(md))
        follow_bench.update(os.path.join(ROOT, "BENCHMARKS.md"), md)
        return
    if only:  # run one section, print its figures (for working on the harness)
        print({"idle": lambda: idle_cost(sounds), "throughput": lambda: throughput(sounds),
               "eventloop": lambda: daemon_bench.event_loop(), "footprint": lambda: daemon_bench.footprint(sounds),
               "memory": lambda: memory_and_startup(sounds), "mixer": lambda: mixer_cpu(sounds),
               "pipewire": lambda: "\n".join(pipewire_bench.report(pipewire_bench.run(quick=QUICK)))}[only]())
        return
    subprocess.run(["gcc", "-O2", "-o", os.path.join(TMP, "lowerbound"), "bench/lowerbound.c", "-lasound"], check=True)
    lat = {}
    latency_alsa(sounds, probe_wav, probe_raw, lat)
    latency_pulse(sounds, probe_wav, lat)
    idle, hz = idle_cost(sounds)
    thr = throughput(sounds)
    mem = memory_and_startup(sounds)
    mix = mixer_cpu(sounds)
    ev = daemon_bench.event_loop()
    fp = daemon_bench.footprint(sounds)
    pw = pipewire_bench.run(quick=QUICK)
    fo = follow_bench.run(trials=follow_trials(), quick=QUICK)
    dk = desktop_bench.run(trials=desktop_trials(), quick=QUICK)
    cb = canberra_bench.run(trials=canberra_trials(), quick=QUICK)
    theme = lat.pop("_theme", {})
    plotted = plot(lat, os.path.join(ROOT, "docs", "latency.png"))
    md, targets = report(lat, idle, hz, thr, mem, mix, plotted, daemon_bench.targets(ev, fp))
    md += daemon_bench.report(ev, fp, theme)
    md += [""] + pipewire_bench.report(pw)
    md += [""] + follow_bench.report(fo)
    md += [""] + desktop_bench.report(dk)
    md += [""] + canberra_bench.report(cb)
    md += [""] + benchlib.DECISIONS_MD
    text = "\n".join(md) + "\n"
    with open(os.path.join(ROOT, "BENCHMARKS.md"), "w") as f:
        f.write(text)
    with open(os.path.join(TMP, "..", "cued-bench-last.json"), "w") as f:
        json.dump({"latency": lat, "throughput": thr, "memory": mem, "mixer": mix}, f)
    print(text)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        main()
    finally:
        cleanup()
