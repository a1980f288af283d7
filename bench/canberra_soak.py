#!/usr/bin/python3
"""The libcanberra plug-in's soak: 10,000 plays from 20 contexts of one host process
(canberra/stress/host.c on real libcanberra, CANBERRA_DRIVER=cued,pulse) on a private PipeWire,
cued killed and started again every 1,000 plays (SIGKILL and SIGTERM in turn), and every play
looked for at the null sink's monitor: heard through cued or through the fallback (libcanberra's
pulse driver, pipewire-pulse), once called back, the host's RSS, threads and descriptors flat.

Each context plays a sound of its own, a 40 ms tone at 500 × (context + 1) Hz (sound-theme
names soak-0 … soak-19), every 200 ms, the contexts 10 ms apart: 100 plays a second. The monitor
is recorded whole (parec) and each tone's band measured on 20 ms windows, 5 ms apart (the 20
frequencies are whole cycles of a window, so the bands do not leak into each other); a play is
heard if its band rises in [call − 100 ms, call + 2 s], each rise taken by one play, in order.

canberra_bench.py runs it (BENCH_ONLY=canberra) and reports it in its section;
`python3 bench/canberra_soak.py [PLAYS]` runs it alone and prints the result.
"""
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import threading
import time
import wave

from benchlib import log, release_dir
from pwstack import private_stack

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOST = os.path.join(ROOT, ".build", "canberra", "stress", "plain", "canberra-host")
PLUGIN = os.path.join(ROOT, ".build", "canberra", "libcanberra-cued.so")
SANDBOX = os.path.join(ROOT, "canberra", "stress", "sandbox.sh")
CONTEXTS, GAP_US, RESTART_EVERY = 20, 200_000, 1000
RATE, WINDOW, HOP = 48000, 960, 240
TONE_S, AMPLITUDE = 0.040, 0.15
WINDOW_BEFORE_NS, WINDOW_AFTER_NS = 100_000_000, 2_000_000_000


def freq(k):
    return 500 * (k + 1)


def write_tones(dirname):
    """soak-K.wav in a freedesktop theme directory: 40 ms at freq(K), 5 ms fades."""
    os.makedirs(dirname, exist_ok=True)
    n, fade = int(TONE_S * RATE), int(0.005 * RATE)
    for k in range(CONTEXTS):
        frames = bytearray()
        for i in range(n):
            g = min(1.0, i / fade, (n - 1 - i) / fade)
            frames += struct.pack("<h", int(32767 * AMPLITUDE * g * math.sin(2 * math.pi * freq(k) * i / RATE)))
        with wave.open(os.path.join(dirname, "soak-%d.wav" % k), "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(RATE)
            w.writeframes(bytes(frames))


class Capture:
    """parec of the null sink's monitor into a file, with the monotonic time of its first sample."""

    def __init__(self, stack, path):
        self.p = stack.monitor()
        self.f = open(path, "wb")
        self.t0 = None
        self.bytes = 0
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        while True:
            chunk = self.p.stdout.read1(65536) if hasattr(self.p.stdout, "read1") else self.p.stdout.read(4096)
            if not chunk:
                break
            if self.t0 is None:
                self.t0 = time.monotonic_ns() - len(chunk) // 4 * 1_000_000_000 // RATE
            self.f.write(chunk)
            self.bytes += len(chunk)

    def close(self):
        self.p.kill()
        self.p.wait()
        self.thread.join(5)
        self.f.close()


def onsets(path, t0):
    """Per band: the monotonic ns where its tone rises (above a third of a full window's level
    after 60 ms below a sixth of it; a window in between, the tone's fade, does not restart the
    60 ms: a rise through it was missed when it did)."""
    import numpy as np
    raw = np.fromfile(path, dtype="<i2")
    left = raw[0::2].astype(np.float32) / 32768.0
    nframes = (len(left) - WINDOW) // HOP
    if nframes <= 0:
        return {k: [] for k in range(CONTEXTS)}
    t = np.arange(WINDOW) / RATE
    basis = np.stack([np.exp(-2j * np.pi * freq(k) * t) for k in range(CONTEXTS)], axis=1).astype(np.complex64)
    full = AMPLITUDE * WINDOW / 2
    out = {k: [] for k in range(CONTEXTS)}
    below = {k: 1 << 30 for k in range(CONTEXTS)}
    for start in range(0, nframes, 20000):
        idx = np.arange(start, min(nframes, start + 20000))
        frames = left[idx[:, None] * HOP + np.arange(WINDOW)[None, :]]
        mags = np.abs(frames @ basis)
        for k in range(CONTEXTS):
            for i, m in zip(idx, mags[:, k]):
                if m < full / 6:
                    below[k] += 1
                elif m > full / 3:
                    if below[k] * HOP >= 0.060 * RATE:
                        out[k].append(t0 + int((i * HOP + WINDOW // 2) * 1e9 / RATE))
                    below[k] = 0
                # between the two: a tone's fade in or out, which neither arms nor disarms a rise
    return out


def match(plays, heard):
    """Each play (in call order, per context) takes the first rise in its window; the rest are extra."""
    misses, lat, extra = [], [], 0
    for k in range(CONTEXTS):
        mine = sorted((p for p in plays if p["context"] == k), key=lambda p: p["call_ns"])
        rises, j = heard.get(k, []), 0
        for p in mine:
            while j < len(rises) and rises[j] < p["call_ns"] - WINDOW_BEFORE_NS:
                j += 1
                extra += 1
            if j < len(rises) and rises[j] <= p["call_ns"] + WINDOW_AFTER_NS:
                lat.append((rises[j] - p["call_ns"]) / 1e6)
                j += 1
            else:
                misses.append(p)
        extra += len(rises) - j
    return misses, lat, extra


def run(plays=10000):
    missing = [x for x in (HOST, PLUGIN) if not os.path.exists(x)]
    if missing:
        return {"skipped": "not built: %s (make canberra-stress)" % ", ".join(missing)}
    tmp, stack = private_stack("cued-canberra-soak.")
    res = {"plays": plays, "contexts": CONTEXTS, "restart_every": RESTART_EVERY}
    cap = None
    try:
        data = os.path.join(tmp, "data")
        write_tones(os.path.join(data, "sounds", "freedesktop", "stereo"))
        env = dict(stack.env, XDG_DATA_HOME=data, XDG_STATE_HOME=os.path.join(tmp, "state"), XDG_CONFIG_HOME=os.path.join(tmp, "config"),
                   XDG_CACHE_HOME=os.path.join(tmp, "cache"), HOST_DRIVER="cued,pulse")
        env.pop("CANBERRA_DRIVER", None)
        # One word a line (canberra-host splits it there): the paths may hold a space.
        cued = "\n".join([os.path.join(release_dir(ROOT), "cued"), "--sink", "pipewire", "--sounds", os.path.join(ROOT, "Sounds"), "--idle-close-s", "3600"])
        out = os.path.join(tmp, "plays.txt")
        cap = Capture(stack, os.path.join(tmp, "monitor.raw"))
        log("canberra soak: %d plays from %d contexts, cued restarted every %d" % (plays, CONTEXTS, RESTART_EVERY))
        p = subprocess.run([SANDBOX, PLUGIN, "--", HOST, "--cued", cued, "--socket", os.path.join(tmp, "cued.sock"), "--plays", str(plays),
                            "--threads", str(CONTEXTS), "--contexts", str(CONTEXTS), "--own-context", "1", "--gap-us", str(GAP_US),
                            "--restart-every", str(RESTART_EVERY), "--event", "soak-%d", "--settle", "10", "--figures-every", "500",
                            "--plays-out", out], env=env, capture_output=True, text=True, errors="backslashreplace", timeout=plays * GAP_US / CONTEXTS / 1e6 * 3 + 120)
        time.sleep(2.5)  # the last sounds reach the monitor (a fixed wait: the recording has no end to wait on)
        cap.close()
        host = json.loads(p.stdout.strip().splitlines()[-1])
        res["host"] = {k: v for k, v in host.items() if k not in ("figures",)}
        res["figures"] = host.get("figures")
        rows = [ln.split() for ln in open(out)]
        plist = [{"id": int(r[0]), "context": int(r[1]), "call_ns": int(r[2]), "ret": int(r[3]), "code": int(r[4])} for r in rows]
        heard = onsets(os.path.join(tmp, "monitor.raw"), cap.t0)
        misses, lat, extra = match([x for x in plist if x["ret"] == 0], heard)
        res.update(accepted=sum(1 for x in plist if x["ret"] == 0), heard=len(lat), misses=len(misses), extra_rises=extra,
                   miss_codes=sorted({m["code"] for m in misses}), lat_ms=sorted(lat), recorded_s=cap.bytes / 4 / RATE,
                   miss_samples=[(m["id"], m["context"], m["code"]) for m in misses[:10]],
                   misses_by_context=[sum(1 for m in misses if m["context"] == k) for k in range(CONTEXTS)],
                   rises_by_context=[len(heard.get(k, [])) for k in range(CONTEXTS)])
        return res
    except (RuntimeError, OSError, ValueError, subprocess.TimeoutExpired) as e:
        log("canberra soak failed:", e)
        res["failed"] = str(e)
        return res
    finally:
        if cap is not None and cap.p.poll() is None:
            cap.close()
        stack.close()
        if os.environ.get("CANBERRA_SOAK_KEEP"):
            log("canberra soak: kept", tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    r = run(int(sys.argv[1]) if len(sys.argv) > 1 else 10000)
    r.pop("lat_ms", None)
    print(json.dumps(r, indent=1))
