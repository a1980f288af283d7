"""Voices (issue 33) in `make bench` (BENCH_ONLY=voices): what a resampled voice costs, and
what a burst of key clicks does to the output. Figures only, nothing asserted.

- CPU per resampled voice: N voices of a 10 s quiet noise cue looping, `rate=1` (read as
  recorded) against `rate=1.5` (interpolated), on `--sink null` (paced at the real rate);
  cued's utime+stime from /proc/PID/stat over a fixed wall time, less the same daemon idle
  for as long, divided by N: % of one core per voice.
- A burst: 100 `play tick` (the shipped detent click, its three variants) in one second (one
  every 10 ms, or all in one write) on `--sink wav:FILE` with the shipped Sounds/, `status` polled by another connection meanwhile
  for the most voices sounding; then the capture's peak in dBFS and its samples at full scale.
  Once with the shipped config (no limit on tick) and once with `max_voices = 4` for it.
"""
import json
import math
import os
import struct
import subprocess
import threading
import time
import wave

from benchlib import Client, cued_status, log, proc_cpu_ticks, wait_answering
from harness import CUED, ROOT, TMP, spawn, start_cued

HEADING = "## Voices: resampling and a burst of clicks"
VOICES = 8
BURST = 100


def core_percent(pid, seconds):
    """cued's CPU over `seconds` of wall time, in % of one core."""
    hz = os.sysconf("SC_CLK_TCK")
    t0, w0 = proc_cpu_ticks(pid), time.monotonic()
    time.sleep(seconds)
    return (proc_cpu_ticks(pid) - t0) / hz / (time.monotonic() - w0) * 100


def resampled_cpu(sounds, seconds):
    """% of a core: idle, and N voices looping at each rate (each rate on a fresh daemon)."""
    out = {"voices": VOICES, "seconds": seconds}
    for rate in ("1", "1.5"):
        p, sock = start_cued("rate" + rate, "null", sounds, ["--voices", "32"])
        c = Client(sock)
        c.request("play probe")  # opens the sink: the idle figure is of an open, silent stream
        time.sleep(0.5)
        idle = core_percent(p.pid, seconds)
        replies = [c.request("play long loop rate=%s" % rate) for _ in range(VOICES)]
        time.sleep(0.3)
        sounding = cued_status(sock).get("voices_active")
        busy = core_percent(p.pid, seconds)
        out[rate] = {"idle": idle, "busy": busy, "per_voice": (busy - idle) / VOICES, "sounding": sounding,
                     "refused": [r for r in replies if r != "ok"]}
        log("voices: rate=%s, %d voices: %.2f %% of a core (idle %.2f %%), %d sounding"
            % (rate, VOICES, busy, idle, sounding or -1))
        p.terminate()
        p.wait()
    return out


def capture_peak(path):
    """(peak dBFS, samples at full scale, frames) of a 16-bit WAV capture."""
    with wave.open(path, "rb") as w:
        data = w.readframes(w.getnframes())
        frames = w.getnframes()
    n = len(data) // 2
    peak, clipped = 0, 0
    for v in struct.unpack("<%dh" % n, data[:2 * n]):
        a = abs(v)
        if a > peak:
            peak = a
        if a >= 32767:
            clipped += 1
    return (20 * math.log10(peak / 32768) if peak else float("-inf")), clipped, frames


def burst(label, config, at_once):
    """100 `play tick` on a WAV sink, one every 10 ms or all in one write; `status` polled meanwhile."""
    name = "burst-%s-%s" % (label, "once" if at_once else "even")
    wav = os.path.join(TMP, name + ".wav")
    conf_home = os.path.join(TMP, "config-" + name)
    os.makedirs(os.path.join(conf_home, "cued"))
    with open(os.path.join(conf_home, "cued", "cued.toml"), "w") as f:
        f.write(config)
    sock = os.path.join(TMP, name + ".sock")
    env = dict(os.environ, XDG_STATE_HOME=os.path.join(TMP, "state-" + name), XDG_CONFIG_HOME=conf_home)
    p = spawn([CUED, "--socket", sock, "--sink", "wav:" + wav, "--sounds", os.path.join(ROOT, "Sounds"),
               "--log-level", "error"], env=env, stderr=subprocess.DEVNULL)
    wait_answering(sock, name)
    seen, done = [], threading.Event()

    def poll():
        q = Client(sock)
        while not done.is_set():
            st = q.request("status")
            if st.startswith("ok {"):
                seen.append(json.loads(st[3:]).get("voices_active", 0))
            time.sleep(0.002)

    poller = threading.Thread(target=poll)
    poller.start()
    c = Client(sock)
    replies = {}
    time.sleep(0.1)  # the poller has a baseline
    t0 = time.monotonic()
    if at_once:  # pipelined: cued reads them all in a few reads
        c.send("\n".join(["play tick"] * BURST))
        for _ in range(BURST):
            r = c.reply()
            replies[r] = replies.get(r, 0) + 1
    for i in range(0 if at_once else BURST):
        # Evenly over one second: play i at t0 + i/100 s.
        delay = t0 + i / BURST - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        r = c.request("play tick")
        replies[r] = replies.get(r, 0) + 1
    spread = time.monotonic() - t0
    time.sleep(0.5)  # the last clicks (16 ms each) have sounded
    done.set()
    poller.join()
    st = cued_status(sock)
    p.terminate()
    p.wait()
    peak, clipped, frames = capture_peak(wav)
    res = {"label": label, "at_once": at_once, "spread_s": spread, "replies": replies, "peak_voices": max(seen) if seen else None,
           "polls": len(seen), "stolen": st.get("voices_stolen"), "played": st.get("played"),
           "cued_clipped": st.get("clipped_samples"), "peak_dbfs": peak, "clipped": clipped, "frames": frames}
    log("voices: burst (%s, %s): peak %d voices over %d polls, capture peak %.1f dBFS, %d samples at full scale"
        % (label, "at once" if at_once else "even", res["peak_voices"] or -1, len(seen), peak, clipped))
    return res


def run(sounds, quick=False):
    return {"cpu": resampled_cpu(sounds, 3.0 if quick else 10.0),
            "bursts": [burst(label, config, at_once) for at_once in (False, True) for label, config in (
                ("shipped", "# the shipped cues, no limits of its own\n"), ("max4", "[cues.tick]\nmax_voices = 4\n"))]}


def report(res):
    cpu = res["cpu"]
    md = [HEADING, "",
          "*CPU per resampled voice*: %d voices of a 10 s noise cue looping on `--sink null` (paced at the" % cpu["voices"],
          "real rate), `rate=1` (read as recorded) against `rate=1.5` (interpolated); cued's utime+stime from",
          "/proc/PID/stat over %.0f s of wall time, less the same daemon idle after a cue, as long, ÷ %d."
          % (cpu["seconds"], cpu["voices"]), "",
          "| rate | voices sounding | cued, idle (% of a core) | cued, voices playing | per voice |", "|---|---|---|---|---|"]
    for rate in ("1", "1.5"):
        r = cpu[rate]
        md.append("| %s | %s | %.2f | %.2f | %.3f |" % (rate, r["sounding"], r["idle"], r["busy"], r["per_voice"]))
    md += ["", "*A burst*: %d `play tick` (the shipped detent click, 16 ms, its three variants) on one connection," % BURST,
           "one every 10 ms over a second, or all in one write; `--sink wav:FILE` with the shipped Sounds/ (16 voices,",
           "the default `--rate-limit 200`: a burst of 200, 200 a second); another connection polls `status`",
           "meanwhile (the most voices it saw sounding); then the capture's peak and its samples at full scale",
           "(|s| ≥ 32767), and cued's own `clipped_samples`.", "",
           "| burst | config | replies | peak voices seen (polls) | stolen | capture peak dBFS | samples at full scale | cued's clipped_samples |",
           "|---|---|---|---|---|---|---|---|"]
    for b in res["bursts"]:
        cfg = "shipped (tick unlimited)" if b["label"] == "shipped" else "`[cues.tick] max_voices = 4`"
        replies = ", ".join("%d `%s`" % (n, r) for r, n in sorted(b["replies"].items()))
        md.append("| %s | %s | %s in %.2f s | %s (%d) | %s | %.1f | %d | %s |" % (
            "all in one write" if b["at_once"] else "one every 10 ms", cfg, replies, b["spread_s"], b["peak_voices"], b["polls"], b["stolen"], b["peak_dbfs"], b["clipped"],
            b["cued_clipped"]))
    md += ["", "Measured %s, 1-min load average %.1f at the end (2 shared cores)." % (time.strftime("%Y-%m-%d"),
                                                                                     os.getloadavg()[0])]
    return md

