"""Helpers shared by the benchmark scripts (bench.py, pipewire_bench.py, reliability.py,
attack_memory.py): percentiles, fixtures, a line client for cued's socket, an audio byte
stream watched for the first sound, a cued of its own for a reliability row, and the rows.
No side effects on import."""
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import time
import wave


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def release_dir(root):
    """Where the cued and cuectl to measure are: $BENCH_BIN_DIR if set (to measure another
    build, e.g. an older commit's worktree, with this harness), else root/.build/release."""
    return os.environ.get("BENCH_BIN_DIR") or os.path.join(root, ".build", "release")


def pct(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, int(len(v) * q))] if v else float("nan")


def square(frames):
    """A 1 kHz square at -6 dBFS, 48 kHz: the probe every latency figure waits for."""
    return [16384 if (i // 24) % 2 == 0 else -16384 for i in range(frames)]


def noise(frames, amplitude, seed):
    """Deterministic noise in [-amplitude, amplitude]."""
    out = []
    for _ in range(frames):
        seed = (seed * 1103515245 + 12345) & 0x7FFFFFFF
        out.append((seed >> 16) % (2 * amplitude + 1) - amplitude)
    return out


def cue_set(directory, probe):
    """psst1, psst2, pop and `probe`, all the probe: whichever a contender plays is measured."""
    os.makedirs(directory)
    for name in ("probe", "psst1", "psst2", "pop"):
        write_wav(os.path.join(directory, name + ".wav"), probe)


def write_wav(path, samples, channels=1):
    with wave.open(path, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(48000)
        w.writeframes(struct.pack("<%dh" % len(samples), *samples))


class Stream:
    """A byte stream of 16-bit audio (a FIFO, or parec's stdout), watched for the first
    samples louder than a threshold (0: any non-zero sample)."""

    def __init__(self, fd):
        self.fd = fd
        os.set_blocking(fd, False)
        self.carry = b""
        self.last_data = None  # monotonic s of the last read that returned any bytes
        self.total = 0  # bytes read since the stream was opened

    def _read(self, timeout):
        r, _, _ = select.select([self.fd], [], [], timeout)
        if not r:
            return None
        data = os.read(self.fd, 1 << 16)
        if data:
            self.last_data = time.monotonic()
            self.total += len(data)
        return data

    def drain(self, quiet_ms=40, limit_s=3.0, threshold=0):
        end = time.monotonic() + limit_s
        last = time.monotonic()
        while time.monotonic() < end:
            data = self._read(quiet_ms / 1000)
            if data is None:
                return
            if self._loud(data, threshold):
                last = time.monotonic()
            elif time.monotonic() - last > quiet_ms / 1000:
                return

    def _loud(self, data, threshold):
        data = self.carry + data
        n = len(data) // 2
        self.carry = data[2 * n:]
        if threshold == 0:
            return any(data[:2 * n])
        return any(abs(v) > threshold for v in struct.unpack("<%dh" % n, data[:2 * n]))

    def wait_loud(self, timeout_s=3.0, threshold=0):
        end = time.monotonic() + timeout_s
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return None
            data = self._read(left)
            if data is not None:
                t = time.monotonic_ns()
                if self._loud(data, threshold):
                    return t


    def wait_loud_at(self, threshold, frame_bytes=4, timeout_s=3.0):
        """Like wait_loud, also where: returns (ns of the read, the first loud frame's index
        in the stream, [(ns, frames read so far) for every read meanwhile]) or None."""
        end = time.monotonic() + timeout_s
        reads = []
        while time.monotonic() < end:
            data = self._read(end - time.monotonic())
            if data is None:
                continue
            t = time.monotonic_ns()
            reads.append((t, self.total // frame_bytes))
            data = self.carry + data
            n = len(data) // 2
            self.carry = data[2 * n:]
            for i, v in enumerate(struct.unpack("<%dh" % n, data[:2 * n])):
                if abs(v) > threshold:
                    start = self.total - len(self.carry) - 2 * n
                    return t, (start + 2 * i) // frame_bytes, reads
        return None

    def wait_nonzero(self, timeout_s=3.0):
        return self.wait_loud(timeout_s)


class Client:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.connect(path)
        self.f = self.s.makefile("rb")

    def send(self, line):
        self.s.sendall(line.encode() + b"\n")

    def reply(self):
        return self.f.readline().decode().strip()

    def request(self, line):
        self.send(line)
        return self.reply()


def wait_answering(sock, name, tries=2000):
    """Waits until a cued answers `ping` on `sock` (10 s at most)."""
    for _ in range(tries):
        try:
            if Client(sock).request("ping") == "ok pong":
                return
        except OSError:
            pass
        time.sleep(0.005)
    raise RuntimeError("cued %s did not start" % name)


def loadavg():
    """The 1/5/15-minute load averages, as /proc/loadavg says them."""
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def cued_status(sock):
    """cued's `status`, parsed, over a connection of its own."""
    c = Client(sock)
    try:
        return json.loads(c.request("status")[3:])
    finally:
        c.s.close()


# ---------------------------------------------------------------- reliability rows

ROWS = []


def row(scenario, how, figure, ok):
    ROWS.append((scenario, how, figure, ok))
    log("%s: %s — %s" % ("ok  " if ok else "FAIL", scenario, figure))


def rss_kib(pid):
    for line in open("/proc/%d/smaps_rollup" % pid):
        if line.startswith("Rss:"):
            return int(line.split()[1])


def mib(kib):
    return "%.1f MiB" % (kib / 1024)


def kill_all(*procs):
    """Kills what a section started and is still running (a row that fails half-way must
    not leave a daemon, a flood or a file system behind for the next one); never waits
    forever (a process stuck in the kernel on a hung mount is not reaped)."""
    for p in procs:
        p = getattr(p, "p", p)
        if p is None or p.poll() is not None:
            continue
        p.kill()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            log("pid %d not reaped 10 s after SIGKILL" % p.pid)


class Cued:
    """A cued of its own: socket, config home, state dir and a stderr log in TMP."""

    def __init__(self, name, sounds, extra=(), config=None, launcher=(), level="error", env=None, wait=True,
                 stderr=None, **popen):
        import bench  # bench imports this module: its temp dir, daemon and process list are taken at run time
        TMP, CUED, spawn = bench.TMP, bench.CUED, bench.spawn
        self.name, self.sounds = name, sounds
        run = os.path.join(TMP, "run")
        os.makedirs(run, mode=0o700, exist_ok=True)
        self.sock = os.path.join(run, name + ".sock")
        self.config_home = os.path.join(TMP, "config-" + name)
        self.config = os.path.join(self.config_home, "cued", "cued.toml")
        self.state = os.path.join(TMP, "state-" + name)
        self.log = os.path.join(TMP, name + ".log")
        os.makedirs(os.path.dirname(self.config), exist_ok=True)
        if config is not None:
            self.write_config(config)
        e = dict(os.environ)
        e.update(XDG_STATE_HOME=self.state, XDG_CONFIG_HOME=self.config_home, XDG_DATA_HOME=os.path.join(TMP, "data"))
        e.pop("JOURNAL_STREAM", None)
        e.update(env or {})
        self.args = [*launcher, CUED, "--socket", self.sock, "--sink", "null", "--sounds", sounds, "--log-level", level,
                     *extra]
        self.p = spawn(self.args, env=e, stderr=open(self.log, "w") if stderr is None else stderr, **popen)
        self.pid = self.p.pid
        if wait:
            self.wait_answering()

    def write_config(self, text):
        tmp = self.config + ".new"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, self.config)

    def wait_answering(self, limit=15.0):
        end = time.monotonic() + limit
        while time.monotonic() < end:
            if self.p.poll() is not None:
                raise RuntimeError("cued %s exited %s: %s" % (self.name, self.p.returncode, self.stderr()[-300:]))
            try:
                if Client(self.sock).request("ping") == "ok pong":
                    return
            except OSError:
                pass
            time.sleep(0.005)
        raise RuntimeError("cued %s did not answer" % self.name)

    def client(self, timeout=10):
        c = Client(self.sock)
        c.s.settimeout(timeout)
        return c

    def request(self, line):
        return self.client().request(line)

    def alive(self):
        try:
            return self.p.poll() is None and self.request("ping") == "ok pong"
        except OSError:
            return False

    def stderr(self):
        try:
            return open(self.log, errors="replace").read()
        except OSError:
            return ""

    def term(self, limit=10.0):
        """SIGTERM; returns (exit status, seconds to exit)."""
        t = time.monotonic()
        self.p.send_signal(signal.SIGTERM)
        try:
            rc = self.p.wait(limit)
        except subprocess.TimeoutExpired:
            self.p.kill()
            rc = self.p.wait()
            return "killed after %.0f s" % limit, limit
        return rc, time.monotonic() - t


def hung_mount_unavailable():
    """Why a hung mount cannot be made here, or None."""
    if os.getuid() != 0:
        return "needs root (FUSE mount)"
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    if not os.path.exists("/usr/lib/python3/dist-packages/fusepy.py"):
        return "python3-fusepy is not installed"
    return None


def mount_hung_for(scenario, name):
    """`mount_hung(name)` for the row `scenario`; where no hung mount can be made here, that
    row says why (not held) and the answer is None."""
    why = hung_mount_unavailable()
    if why:
        row(scenario, "-", "not run: " + why, False)
        return None
    return mount_hung(name)


def mount_hung(name):
    """Mounts bench/hungfs.py (reads that never return) at TMP/name: (the mount point, its
    server's process). The caller kills the process and `umount -l`s the mount point."""
    import bench  # bench imports this module: its temp dir and process list are taken at run time
    mnt = os.path.join(bench.TMP, name)
    os.makedirs(mnt, exist_ok=True)
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hungfs.py")
    log_path = os.path.join(bench.TMP, name + ".log")
    fs = bench.spawn(["/usr/bin/python3", script, mnt], stderr=open(log_path, "w"))
    end = time.monotonic() + 10
    while not os.path.exists(os.path.join(mnt, "hang1.wav")) and time.monotonic() < end:
        time.sleep(0.02)
    if not os.path.exists(os.path.join(mnt, "hang1.wav")):
        kill_all(fs)
        raise RuntimeError("the FUSE file system did not come up: %s" % open(log_path).read()[-200:])
    return mnt, fs


def replace_section(path, heading, md):
    """Replaces the section `heading` in a BENCHMARKS.md (or puts it before bench/NOTES.md's copy at
    the end, where bench.py puts it), and refreshes that copy of the notes."""
    text = open(path).read() if os.path.exists(path) else ""
    notes_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "NOTES.md")
    notes = open(notes_path).read().rstrip() + "\n" if os.path.exists(notes_path) else ""
    notes_head = notes.split("\n", 1)[0] if notes else None
    section = "\n".join(md) + "\n"
    if heading in text:
        head, rest = text.split(heading, 1)
        nxt = rest.find("\n## ")
        text = head + section + ("\n" + rest[nxt + 1:] if nxt >= 0 else "")
    elif notes_head and ("\n" + notes_head + "\n") in text:
        i = text.index("\n" + notes_head + "\n") + 1
        text = text[:i] + section + "\n" + text[i:]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    if notes_head and ("\n" + notes_head + "\n") in text:
        text = text[:text.index("\n" + notes_head + "\n") + 1] + notes
    with open(path, "w") as f:
        f.write(text)


def targets_table(issue, targets):
    """A section's targets as markdown rows: (target, what was measured, met) each."""
    md = ["", "| target (issue %s) | measured | |" % issue, "|---|---|---|"]
    for t, m, ok in targets:
        md.append("| %s | %s | %s |" % (t, m, "**met**" if ok else "**not met**"))
    return md


def skipped(section, missing, hint):
    """A section that cannot run here: logged, and its result says what is missing."""
    log("%s section skipped: missing" % section, " ".join(missing))
    return {"skipped": "missing " + " ".join(missing) + " (" + hint + ")"}


def not_measured(heading, res):
    """A section's whole report when it did not run (skipped, or failed), else None."""
    if "skipped" in res:
        return [heading, "", "Not measured: " + res["skipped"] + "."]
    if "failed" in res:
        return [heading, "", "Not measured: " + res["failed"]]
    return None
