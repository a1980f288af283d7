"""One benchmark run's place and processes: the binaries measured, a temp dir, every process
started (killed by cleanup()), the probe fixtures, a cued of the run's own, and the trigger ->
first sample loop. Imported by the bench modules and the reliability scenarios; imports none of
them (benchlib only). Creates the run's temp dir on import: one per process."""
import os
import platform
import shutil
import struct
import subprocess
import tempfile
import time

from benchlib import cue_set, noise, release_dir, square, wait_answering, write_wav

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


def ctx_delta(before, after):
    """Switches in between: threads alive at both ends count their difference, new
    threads all of theirs (a thread that exited in between is not counted)."""
    return sum(c - before.get(tid, 0) for tid, c in after.items())


def proc_rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])


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

