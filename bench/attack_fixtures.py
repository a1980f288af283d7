"""What several reliability scenarios build or read: crafted and noise WAVs, small sound
sets, forty 10 s cues, /proc figures (anonymous memory, descriptors, threads, CPU), a private
session bus, and a wait for a line in a file."""
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import wave
from benchlib import noise, write_wav
from harness import TMP, spawn


def anon_kib(pid):
    for line in open("/proc/%d/smaps_rollup" % pid):
        if line.startswith("Anonymous:"):
            return int(line.split()[1])


def fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


MIB = 1024


def vm_kib(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmSize:"):
            return int(line.split()[1])


def le(v, n):
    return int(v & ((1 << (8 * n)) - 1)).to_bytes(n, "little")


def wav_fmt(channels, rate, bits=16):
    block = channels * bits // 8
    return b"fmt " + le(16, 4) + le(1, 2) + le(channels, 2) + le(rate, 4) + le(rate * block, 4) + le(block, 2) + le(bits, 2)


def crafted_wav(channels, rate, data_bytes):
    """A 16-bit PCM WAV header whose data chunk claims `data_bytes` (as Tests/TestSupport/CraftedWAV)."""
    return (b"RIFF" + le(min(36 + data_bytes, 0xFFFFFFFF), 4) + b"WAVE" + wav_fmt(channels, rate) + b"data"
            + le(min(data_bytes, 0xFFFFFFFF), 4))


def crafted_rf64(channels, rate, data_bytes):
    frames = data_bytes // (channels * 2)
    return (b"RF64" + le(0xFFFFFFFF, 4) + b"WAVE" + b"ds64" + le(28, 4) + le(data_bytes + 72, 8) + le(data_bytes, 8)
            + le(frames, 8) + le(0, 4) + wav_fmt(channels, rate) + b"data" + le(0xFFFFFFFF, 4))


def write_sparse(path, header, size):
    if os.path.lexists(path):
        os.remove(path)
    with open(path, "wb") as f:
        f.write(header)
    os.truncate(path, size)


def write_noise_wav(path, seconds, rate, channels, noise=None):
    frames = int(seconds * rate)
    with wave.open(path, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(noise[:frames * channels * 2] if noise else os.urandom(frames * channels * 2))


def small_sounds(sounds, name):
    """A sounds directory of its own with the short fixture cues (no 10 s cue)."""
    d = os.path.join(TMP, "sounds-" + name)
    os.makedirs(d)
    for f in ("probe", "psst1", "psst2", "pop"):
        shutil.copy(os.path.join(sounds, f + ".wav"), d)
    return d


_forty = []


def forty_cues():
    """40 legitimate 10 s cues, stereo 44.1 kHz (so each is resampled to 48 kHz):
    written once, in a directory of their own, then moved into a daemon's sounds
    directory after it started (a start-up with them would take as long as the reload)."""
    if not _forty:
        d = os.path.join(TMP, "forty")
        os.makedirs(d)
        noise = os.urandom(441000 * 4)
        for i in range(40):
            write_noise_wav(os.path.join(d, "long%02d.wav" % i), 10, 44100, 2, noise)
        _forty.append(d)
    return _forty[0]


# Forty 10 s stereo cues decode to 154 MB, past the default 64 MiB budget for decoded sound
# (issue 29): a scenario about a slow but legitimate reload of them starts cued with this.
FORTY_BUDGET = ["--sound-budget-mb", "256"]


def add_forty(sounds_dir):
    src = forty_cues()
    for f in sorted(os.listdir(src)):
        os.link(os.path.join(src, f), os.path.join(sounds_dir, f))


def read_all(s, limit=3.0):
    s.settimeout(limit)
    data = b""
    try:
        while True:
            chunk = s.recv(4096)
            if not chunk:
                return data, "eof"
            data += chunk
    except ConnectionResetError:
        return data, "reset"
    except socket.timeout:
        return data, "open"
    except OSError as e:
        return data, e.__class__.__name__


# Issue 19, problem 3: C libraries write to descriptor 2 themselves.
def damaged_mp3(path, seed, frames=200):
    """MPEG-1 layer III frame headers with random bodies: libsndfile opens it through
    mpg123, which prints a few hundred error lines (tens of KB) to fd 2 per decode."""
    import random
    r = random.Random(seed)
    with open(path, "wb") as f:
        for _ in range(frames):
            f.write(bytes([0xFF, 0xFB, 0x90, 0xC4]) + bytes(r.randrange(256) for _ in range(413)))


def small_wav(path, seed, frames=960):
    """A 20 ms stereo 48 kHz WAV of noise (distinct per seed: distinct files to the cache)."""
    write_wav(path, noise(frames * 2, 8000, seed), channels=2)
    return path


def wait_file_line(path, line, limit, present=True):
    """Polls `path` (1 ms) until it has `line` as a whole line (or, present=False, no longer
    has it); seconds taken, or None."""
    t = time.monotonic()
    while time.monotonic() - t < limit:
        try:
            with open(path) as f:
                if (line in f.read().splitlines()) == present:
                    return time.monotonic() - t
        except OSError:
            pass
        time.sleep(0.001)
    return None


def threads_of(pid):
    """{tid: (state, wchan)} of a process's threads."""
    out = {}
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return out
    for tid in tids:
        try:
            st = open("/proc/%d/task/%s/stat" % (pid, tid)).read().rsplit(")", 1)[1].split()[0]
            wchan = open("/proc/%d/task/%s/wchan" % (pid, tid)).read().strip() or "-"
            out[int(tid)] = (st, wchan)
        except OSError:
            pass
    return out


def describe_threads(ts):
    kinds = {}
    for st, wchan in ts.values():
        kinds["%s in %s" % (st, wchan)] = kinds.get("%s in %s" % (st, wchan), 0) + 1
    return ", ".join("%d %s" % (v, k) for k, v in sorted(kinds.items())) or "none"


def private_bus():
    """A session bus of its own (no service directories: nothing is activated), for
    rows that check cued with and without a bus. Returns (process, address)."""
    d = tempfile.mkdtemp(prefix="bus.", dir=TMP)
    conf = os.path.join(d, "bus.conf")
    addr = "unix:path=%s/bus" % d
    with open(conf, "w") as f:
        f.write('<busconfig><type>session</type><listen>%s</listen><auth>EXTERNAL</auth>'
                '<policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/>'
                '<allow own="*"/></policy></busconfig>' % addr)
    p = spawn(["dbus-daemon", "--config-file=" + conf, "--nofork", "--nopidfile"])
    for _ in range(500):
        if os.path.exists(os.path.join(d, "bus")):
            break
        time.sleep(0.01)
    return p, addr


def proc_cpu_s(pid):
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def malloc_in_use(q):
    """malloc's bytes in use, all arenas: what a leak grows, unlike RSS, which also
    holds what malloc keeps for reuse. gdb calls malloc_stats() with cued's
    descriptor 2 pointed at a file for the call (cued's own stderr is a pipe it
    drains into its log, rate-limited: the totals would be cut). None without gdb."""
    if not shutil.which("gdb"):
        return None
    out = os.path.join(TMP, "malloc-stats-%d.txt" % q.pid)
    cmds = ['set $old = (int)dup(2)', 'set $f = (int)open("%s", 577, 384)' % out, 'call (int)dup2($f, 2)',
            'call (void)malloc_stats()', 'call (int)dup2($old, 2)', 'call (int)close($f)', 'call (int)close($old)']
    args = ["gdb", "-p", str(q.pid), "-batch"]
    for c in cmds:
        args += ["-ex", c]
    subprocess.run(args, capture_output=True, timeout=60)
    try:
        text = open(out).read()
    except OSError:
        return None
    total = text.split("Total (incl. mmap):")
    found = re.findall(r"in use bytes\s*=\s*(\d+)", total[-1]) if len(total) > 1 else []
    return int(found[0]) if found else None
