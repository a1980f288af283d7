#!/usr/bin/python3
"""The PipeWire section of `make bench`: trigger -> first sample at a null sink's
monitor, through a private PipeWire (dbus, pipewire with a timer-clocked null sink,
wireplumber, pipewire-pulse), for cued and the usual ways to play an event sound,
same run; mid-stream latency; and the sound server's own wakeups while cued idles.

Figures, not tests. bench.py calls run() and report(); run alone
(`python3 bench/pipewire_bench.py [--update BENCHMARKS.md]`) it prints the section,
and with --update replaces the section in that file.
"""
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import wave

from benchlib import Client, Stream, cue_set, log, noise, pct, release_dir, square, wait_answering, write_wav  # noqa: F401

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REL = release_dir(ROOT)
CUED, CUECTL = os.path.join(REL, "cued"), os.path.join(REL, "cuectl")
HEADING = "## Through PipeWire"
TOOLS = ["dbus-daemon", "pipewire", "wireplumber", "pipewire-pulse", "pactl", "parec", "pw-dump", "pw-play", "paplay", "aplay"]


# A session bus with no service directories: with dbus-daemon's standard session config,
# D-Bus activation would start the system's own services (feedbackd for org.sigxcpu.Feedback).
BUS_CONF = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=%s</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"""


class Stack:
    """Private PipeWire: every process killed by close(). `no_activation`: the session bus
    has no service directories (nothing is started by D-Bus activation)."""

    def __init__(self, tmp, no_activation=False):
        self.tmp = tmp
        self.rt = os.path.join(tmp, "rt")
        cfg = os.path.join(tmp, "cfg")
        os.makedirs(self.rt, mode=0o700)
        os.makedirs(os.path.join(cfg, "pipewire", "pipewire.conf.d"))
        os.makedirs(os.path.join(tmp, "home"))
        with open(os.path.join(cfg, "pipewire", "pipewire.conf.d", "10-nul.conf"), "w") as f:
            f.write("context.objects = [ { factory = adapter args = { factory.name = support.null-audio-sink "
                    "node.name = nul media.class = Audio/Sink object.linger = true audio.position = [ FL FR ] "
                    "audio.rate = 48000 priority.driver = 2000 priority.session = 2000 } } ]\n")
        env = dict(os.environ, XDG_RUNTIME_DIR=self.rt, PIPEWIRE_RUNTIME_DIR=self.rt, XDG_CONFIG_HOME=cfg,
                   HOME=os.path.join(tmp, "home"), DBUS_SESSION_BUS_ADDRESS="unix:path=%s/bus" % self.rt,
                   PULSE_SERVER="unix:%s/pulse/native" % self.rt)
        for k in ("PIPEWIRE_ALSA", "PULSE_PROP", "ALSA_CONFIG_PATH", "DISPLAY"):
            env.pop(k, None)
        self.env = env
        self.procs = []
        try:
            self._start(tmp, no_activation)
        except BaseException:
            self.close()  # what did start is killed (by its pid) before the error goes on
            raise

    def _start(self, tmp, no_activation):
        env = self.env
        if no_activation:
            conf = os.path.join(tmp, "bus.conf")
            with open(conf, "w") as f:
                f.write(BUS_CONF % os.path.join(self.rt, "bus"))
            self.spawn(["dbus-daemon", "--config-file=" + conf, "--nofork", "--nopidfile"])
        else:
            self.spawn(["dbus-daemon", "--session", "--address=unix:path=%s/bus" % self.rt, "--nofork", "--nopidfile"])
        for _ in range(200):
            if os.path.exists(os.path.join(self.rt, "bus")):
                break
            time.sleep(0.01)
        self.pipewire = self.spawn(["pipewire"])
        for _ in range(200):
            if os.path.exists(os.path.join(self.rt, "pipewire-0")):
                break
            time.sleep(0.02)
        self.spawn(["wireplumber"])
        self.pulse = self.spawn(["pipewire-pulse"])
        for _ in range(300):
            r = subprocess.run(["pactl", "get-default-sink"], env=env, capture_output=True, text=True)
            if r.stdout.strip() == "nul":
                break
            time.sleep(0.03)
        else:
            raise RuntimeError("private PipeWire did not come up")
        subprocess.run(["pactl", "set-sink-volume", "nul", "100%"], env=env, capture_output=True)

    def spawn(self, args, env=None, **kw):
        kw.setdefault("stdout", subprocess.DEVNULL)
        kw.setdefault("stderr", subprocess.DEVNULL)
        p = subprocess.Popen(args, env=env or self.env, **kw)
        self.procs.append(p)
        return p

    def monitor(self):
        p = self.spawn(["parec", "-d", "nul.monitor", "--raw", "--format=s16le", "--rate=48000", "--channels=2",
                        "--latency-msec=1"], stdout=subprocess.PIPE)
        time.sleep(0.3)
        return p

    def quantum(self):
        r = subprocess.run(["pw-metadata", "-n", "settings", "0", "clock.quantum"], env=self.env, capture_output=True, text=True)
        for tok in r.stdout.split("'"):
            if tok.isdigit():
                return int(tok)
        return 1024

    def close(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.kill()
                p.wait()


def measure(stream, trigger, after=None, trials=100, gap_s=0.12, warmup=3, threshold=0, before=None):
    out, misses = [], 0
    for i in range(trials + warmup):
        if before:
            before()
        stream.drain(threshold=threshold)
        time.sleep(gap_s)
        stream.drain(quiet_ms=3, threshold=threshold)
        t0 = time.monotonic_ns()
        token = trigger()
        t1 = stream.wait_loud(threshold=threshold)
        if after:
            after(token)
        if i < warmup:
            continue
        if t1 is None:
            misses += 1
        else:
            out.append((t1 - t0) / 1000.0)
    return out, misses


def start_cued(stack, name, sink, sounds, extra=()):
    sock = os.path.join(stack.tmp, name + ".sock")
    env = dict(stack.env, XDG_STATE_HOME=os.path.join(stack.tmp, "state-" + name),
               XDG_CONFIG_HOME=os.path.join(stack.tmp, "noconfig"))
    p = stack.spawn([CUED, "--socket", sock, "--sink", sink, "--sounds", sounds, "--log-level", "error", *extra], env=env)
    wait_answering(sock, name)
    return p, sock


def ctx_switches(pid):
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        total += int(line.split()[1])
        except FileNotFoundError:
            pass
    return total


def cpu_ticks(pid):
    """utime + stime of every thread of a process, in clock ticks."""
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except FileNotFoundError:
            pass
    return total


def server_wakeups(stack, seconds):
    """Context switches per second of pipewire + pipewire-pulse over `seconds`."""
    pids = [stack.pipewire.pid, stack.pulse.pid]
    a = sum(ctx_switches(p) for p in pids)
    time.sleep(seconds)
    b = sum(ctx_switches(p) for p in pids)
    return (b - a) / seconds


def fixtures(tmp):
    sounds = os.path.join(tmp, "sounds")
    # The probe: 100 ms (pw-play and play-sample skip 20 ms sounds).
    cue_set(sounds, square(4800))
    # A quiet bed for mid-stream: 10 s of noise at about -40 dBFS (|x| <= 300).
    write_wav(os.path.join(sounds, "bed.wav"), noise(480000, 300, 7))
    return sounds, os.path.join(sounds, "probe.wav")


# cued's outputs on PipeWire: its ALSA plugin, pipewire-pulse's, and the native stream.
CUED_SINKS = (("alsa:default", "pipewire"), ("alsa:pulse", "pulse"), ("pipewire", "native"))


def run(trials=None, idle_s=None, quick=False, cued_only=False):
    missing = [t for t in TOOLS if not shutil.which(t)]
    if missing:
        log("PipeWire section skipped: missing", " ".join(missing))
        return {"skipped": "missing " + " ".join(missing)}
    trials = trials or (30 if quick else 100)
    idle_s = idle_s or (5 if quick else 20)
    tmp = tempfile.mkdtemp(prefix="cued-pw.")
    stack = Stack(tmp)
    res = {"trials": trials, "idle_s": idle_s, "lat": {}, "mid": {}, "idle": {}}
    try:
        sounds, probe = fixtures(tmp)
        res["quantum"] = stack.quantum()
        env = stack.env
        subprocess.run(["pactl", "upload-sample", probe, "probe"], env=env, check=True, capture_output=True)

        # Idle cost first, with nothing recording (a monitor stream keeps the graph running).
        log("pipewire idle: no cued, %.0f s" % idle_s)
        res["idle"]["no cued"] = server_wakeups(stack, idle_s)
        for sink, label in (("alsa:default", "idle-pw"), ("alsa:pulse", "idle-pulse"), ("pipewire", "idle-native")):
            cued, sock = start_cued(stack, label, sink, sounds, ["--idle-close-s", "3600"])
            c = Client(sock)
            c.request("play probe")
            time.sleep(0.5)
            log("pipewire idle: cued on %s idle after a cue, %.0f s" % (sink, idle_s))
            res["idle"]["cued on `%s`, idle after a cue" % sink] = server_wakeups(stack, idle_s)
            c.s.close()
            cued.terminate()
            cued.wait()

        parec = stack.monitor()
        stream = Stream(parec.stdout.fileno())
        lat = res["lat"]

        def spawner(args, e=None):
            return lambda: subprocess.Popen(args, env=e or env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def reap(p):
            p.wait()

        for sink, label in CUED_SINKS:
            cued, sock = start_cued(stack, label, sink, sounds, ["--idle-close-s", "3600"])
            c = Client(sock)
            log("pipewire latency: cued on %s, kept connection" % sink)
            # Cues are sporadic: 0.5 s between triggers, so each finds the stream stopped.
            lat["cued `%s`, kept connection" % sink] = measure(stream, lambda: c.send("play probe"), lambda _: c.reply(), trials,
                                                             gap_s=0.5)
            status = json.loads(c.request("status")[3:])
            res.setdefault("status", {})[sink] = {"sink": status["sink"], "latency_us": status["latency_us"],
                                                  "stalls": status.get("stalls"), "xruns": status["xruns"],
                                                  "dropped": status["dropped"], "audio_thread": status.get("audio_thread")}
            if sink == "alsa:default" and not cued_only:
                log("pipewire latency: cuectl play")
                lat["`cuectl play` (cued on `%s`)" % sink] = measure(stream, spawner([CUECTL, "--socket", sock, "play", "probe"]), reap,
                                                                    trials, gap_s=0.5)
            # Mid-stream: the quiet bed plays; the loud probe is mixed in.
            log("pipewire mid-stream: cued on %s" % sink)

            def bed():
                c.request("mute")  # fades out the previous trial's bed
                c.request("unmute")
                c.request("play bed")
                time.sleep(0.15)

            res["mid"]["cued `%s`" % sink] = measure(stream, lambda: c.send("play probe"), lambda _: c.reply(), trials,
                                                    gap_s=0.05, threshold=2000, before=bed)
            # CPU while a cue plays: the whole daemon, 4 s into the 10 s bed.
            bed()
            time.sleep(0.5)
            hz = os.sysconf("SC_CLK_TCK")
            t0, w0 = cpu_ticks(cued.pid), time.monotonic()
            time.sleep(4)
            res.setdefault("playcpu", {})[sink] = (cpu_ticks(cued.pid) - t0) / hz / (time.monotonic() - w0) * 100
            c.request("mute")
            c.request("unmute")
            c.s.close()
            cued.terminate()
            cued.wait()

        if cued_only:  # BENCH_PW_CUED_ONLY=1: cued's rows only (working on a sink)
            return res
        log("pipewire latency: pactl play-sample")
        lat["`pactl play-sample`"] = measure(stream, spawner(["pactl", "play-sample", "probe", "nul"]), reap, trials)
        log("pipewire latency: paplay")
        lat["`paplay`"] = measure(stream, spawner(["paplay", probe]), reap, trials)
        log("pipewire latency: pw-play")
        lat["`pw-play`"] = measure(stream, spawner(["pw-play", probe]), reap, trials)
        log("pipewire latency: aplay -D pipewire")
        lat["`aplay -D pipewire`"] = measure(stream, spawner(["aplay", "-q", "-D", "pipewire", probe]), reap, trials)
        if shutil.which("canberra-gtk-play") and shutil.which("Xvfb"):
            xvfb = stack.spawn(["Xvfb", ":96", "-nolisten", "tcp"])
            time.sleep(1.0)
            cenv = dict(env, DISPLAY=":96", CANBERRA_DRIVER="pulse")
            log("pipewire latency: canberra-gtk-play")
            lat["`canberra-gtk-play -f` (pulse driver)"] = measure(stream, spawner(["canberra-gtk-play", "-f", probe], cenv), reap, trials)
            xvfb.kill()
            xvfb.wait()
        else:
            res["canberra"] = "canberra-gtk-play or Xvfb missing (make bench-deps installs gnome-session-canberra, xvfb)"
    finally:
        stack.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return res


def report(res):
    if "skipped" in res:
        return [HEADING, "", "Not measured: " + res["skipped"] + "."]
    q = res["quantum"]
    qms = q / 48.0
    st = res.get("status", {}).get("alsa:default", {})
    period = st.get("sink", {}).get("period_frames") or 256
    pms = period / 48.0
    md = [HEADING, "",
          "A private PipeWire 0.3.65 (dbus, pipewire with a timer-clocked `support.null-audio-sink`, wireplumber,",
          "pipewire-pulse), all in one run; latency is trigger → first non-zero sample read from the null sink's",
          "monitor with `parec --latency-msec=1` (its own buffering is in every figure alike). The probe is 100 ms",
          "(pw-play and play-sample skip 20 ms sounds). %d triggers each; a miss is a trigger never heard within 3 s." % res["trials"],
          "cued is triggered 0.5 s after the previous sound ended, so its stream is stopped each time (back-to-back",
          "cues find it running and are faster); the other contenders start afresh every time anyway (0.12 s apart).",
          "Graph quantum %d frames (%.1f ms); cued's period on the PipeWire plugin %d frames (%.1f ms)." % (q, qms, period, pms), "",
          "| contender | n | p50 µs | p90 µs | p99 µs | max µs | p50 ÷ cued | misses |", "|---|---|---|---|---|---|---|---|"]
    lat = res["lat"]
    ref = "cued `alsa:default`, kept connection"
    base = pct(lat[ref][0], .5) if lat.get(ref, ([], 0))[0] else None
    for name, (v, misses) in lat.items():
        if not v:
            md.append("| %s | 0 | - | - | - | - | - | %d |" % (name, misses))
            continue
        p50 = pct(v, .5)
        md.append("| %s | %d | %.0f | %.0f | %.0f | %.0f | %.2f× | %d |" % (
            name, len(v), p50, pct(v, .9), pct(v, .99), max(v), p50 / base if base else float("nan"), misses))
    md += ["", "Mid-stream: a quiet 10 s bed (|x| ≤ 300) plays; latency to the first sample of the loud probe (|x| > 2000).", "",
           "| cued on | n | p50 µs | p90 µs | p99 µs | max µs | misses |", "|---|---|---|---|---|---|---|"]
    for name, (v, misses) in res["mid"].items():
        if v:
            md.append("| %s | %d | %.0f | %.0f | %.0f | %.0f | %d |" % (name, len(v), pct(v, .5), pct(v, .9), pct(v, .99), max(v), misses))
        else:
            md.append("| %s | 0 | - | - | - | - | %d |" % (name, misses))
    if res.get("playcpu"):
        md += ["", "CPU of the whole cued process while a cue plays (4 s of the bed, one stream):", "",
               "| cued on | % of one core |", "|---|---|"]
        for sink, v in res["playcpu"].items():
            md.append("| `%s` | %.2f |" % (sink, v))
    md += ["", "What cued reported (`status`) after its triggers:", "",
           "| sink | kind | period / buffer frames | device delay µs | inside cued p50 / p99 µs | stalls | xruns | dropped | audio thread |",
           "|---|---|---|---|---|---|---|---|---|"]
    for sink, s in res.get("status", {}).items():
        k = s["sink"]
        md.append("| `%s` | %s | %s / %s | %s | %s / %s | %s | %s | %s | %s |" % (
            sink, k.get("kind"), k.get("period_frames"), k.get("buffer_frames"), k.get("device_delay_us"),
            s["latency_us"].get("p50"), s["latency_us"].get("p99"), s.get("stalls"), s["xruns"], s["dropped"], s.get("audio_thread")))
    md += ["", "Idle cost to the sound server: context switches per second of pipewire + pipewire-pulse over %.0f s," % res["idle_s"],
           "nothing recording, from 0.5 s after one cue (`--idle-close-s 3600`; cued closes a pulse PCM after 5 s idle anyway,",
           "after which the server is at 0.0/s: the pulse figure is mostly those first seconds).", "",
           "| situation | server wakeups / s |", "|---|---|"]
    for name, v in res["idle"].items():
        md.append("| %s | %.1f |" % (name, v))
    # The targets, as ratios within this run.
    alts = [pct(v, .5) for n, (v, _) in lat.items() if v and not n.startswith(("cued", "`cuectl"))]
    targets = []
    if base and alts:
        best = min(alts)
        targets.append(("cued p50 ≤ 0.5 × the best alternative's p50", "%.0f µs vs 0.5 × %.0f µs" % (base, best), base <= 0.5 * best))
        c99 = pct(lat[ref][0], .99)
        targets.append(("cued p99 ≤ one quantum + one period (%.1f ms)" % (qms + pms), "%.0f µs" % c99, c99 <= (qms + pms) * 1000))
    mid = res["mid"].get("cued `alsa:default`", ([], 0))[0]
    if mid:
        m99 = pct(mid, .99)
        targets.append(("mid-stream p99 ≤ one quantum + one period (%.1f ms)" % (qms + pms), "%.0f µs" % m99, m99 <= (qms + pms) * 1000))
    for sink, v in res.get("playcpu", {}).items():
        targets.append(("the audio thread does not spin while a cue plays on `%s` (cued ≤ 5 %% of a core)" % sink,
                        "%.2f %%" % v, v <= 5))
    total_misses = sum(m for _, (_, m) in lat.items()) + sum(m for _, (_, m) in res["mid"].items())
    cued_misses = sum(m for n, (_, m) in lat.items() if n.startswith(("cued", "`cuectl"))) + sum(m for _, (_, m) in res["mid"].items())
    targets.append(("0 misses for cued", "%d (all contenders: %d)" % (cued_misses, total_misses), cued_misses == 0))
    idle = res["idle"]
    if "no cued" in idle:
        for name, v in idle.items():
            if name != "no cued":
                targets.append(("server wakeups with %s ≈ with no cued (%.1f/s)" % (name, idle["no cued"]), "%.1f/s" % v,
                                v <= idle["no cued"] * 1.2 + 1))
    md += ["", "| target (PipeWire) | measured | |", "|---|---|---|"]
    for t, m, ok in targets:
        md.append("| %s | %s | %s |" % (t, m, "**met**" if ok else "**not met**"))
    if res.get("canberra"):
        md += ["", "canberra-gtk-play not measured: " + res["canberra"] + "."]
    return md


def update(path, md, heading=HEADING):
    text = open(path).read() if os.path.exists(path) else ""
    section = "\n".join(md) + "\n"
    if heading in text:
        head, rest = text.split(heading, 1)
        nxt = rest.find("\n## ")
        text = head + section + (rest[nxt + 1:] if nxt >= 0 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    with open(path, "w") as f:
        f.write(text)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    quick = os.environ.get("BENCH_QUICK") == "1"
    trials = int(os.environ["BENCH_PW_TRIALS"]) if "BENCH_PW_TRIALS" in os.environ else None
    result = run(trials=trials, quick=quick, cued_only=os.environ.get("BENCH_PW_CUED_ONLY") == "1")
    with open(os.path.join(tempfile.gettempdir(), "cued-bench-pipewire.json"), "w") as f:
        json.dump(result, f)
    md = report(result)
    print("\n".join(md))
    if len(sys.argv) == 3 and sys.argv[1] == "--update":
        update(sys.argv[2], md)
