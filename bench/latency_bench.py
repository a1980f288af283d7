"""Trigger -> first sample (make bench's first table): ALSA PCMs of `type file` over `null`
write into a FIFO this harness reads; latency = when the first non-zero sample arrives - when
the trigger happened (a socket write, or a process spawn). Through PulseAudio: the null sink's
monitor, read with parec, the same way. Every contender plays the same probe cue, whose first
sample is non-zero. BENCH_ONLY=alsa (every contender) or alsa-cued (cued's rows only) prints it."""
import json
import os
import shutil
import subprocess
import time

import daemon_bench
from benchlib import Client, Stream, log, pct
from harness import CUECTL, TMP, TRIALS, measure, spawn, start_cued

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


def report(lat, plotted):
    """The trigger -> first sample section of BENCHMARKS.md (and its PulseAudio table)."""
    def row(name, base):
        v, misses = lat[name]
        return lat_row(name, v, misses, base)

    ref = "cued, kept connection (warm)"
    base = pct(lat[ref][0], .5) if lat.get(ref, ([], 0))[0] else None
    md = ["## Trigger → first sample", "",
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
    return md
