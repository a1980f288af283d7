"""Helpers shared by every bench module and reliability scenario: percentiles, fixtures, a line
client for cued's socket, an audio byte stream watched for the first sound, /proc figures, and
the one writer of a BENCHMARKS.md or RELIABILITY.md section (replace_section). Imports no other
bench module; no side effects on import."""
import json
import os
import select
import socket
import struct
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
    def __init__(self, path=None, sock=None):
        """On cued's socket at `path`, or on `sock`, connected already (as another user: desktopuser)."""
        self.s = sock or socket.socket(socket.AF_UNIX)
        if sock is None:
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


def proc_cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime, in clock ticks


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


def rss_kib(pid):
    for line in open("/proc/%d/smaps_rollup" % pid):
        if line.startswith("Rss:"):
            return int(line.split()[1])


def mib(kib):
    return "%.1f MiB" % (kib / 1024)


# How bench.py's and reliability.py's reports end: where the decisions behind the figures are.
DECISIONS_MD = ["## Why it is built this way", "",
                "The decisions these figures led to, each with its context and figures: "
                "[docs/decisions/](docs/decisions/)."]


def replace_section(path, heading, md, before=None):
    """The one writer of a section of BENCHMARKS.md or RELIABILITY.md: replaces the section
    `heading` (up to the next `## `) with `md`; a section not there yet goes before the section
    `before` if given and present, else before the closing DECISIONS_MD section, else at the end.
    The closing section is refreshed."""
    text = open(path).read() if os.path.exists(path) else ""
    notes = "\n".join(DECISIONS_MD) + "\n"
    notes_head = "\n" + DECISIONS_MD[0] + "\n"
    section = "\n".join(md) + "\n"
    if heading in text:
        head, rest = text.split(heading, 1)
        nxt = rest.find("\n## ")
        text = head + section + ("\n" + rest[nxt + 1:] if nxt >= 0 else "")
    elif before and ("\n" + before + "\n") in text:
        i = text.index("\n" + before + "\n") + 1
        text = text[:i] + section + "\n" + text[i:]
    elif notes_head in text:
        i = text.index(notes_head) + 1
        text = text[:i] + section + "\n" + text[i:]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    if notes_head in text:
        text = text[:text.index(notes_head) + 1] + notes
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


def section_main(name, run, report, heading, before=None):
    """A bench module run as a script: `python3 bench/NAME_bench.py [--update BENCHMARKS.md]`
    runs its section once, keeps the figures in $TMPDIR/cued-bench-NAME.json, prints the
    section and, with --update, writes it into that file."""
    import signal
    import tempfile
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    result = run()
    with open(os.path.join(tempfile.gettempdir(), "cued-bench-%s.json" % name), "w") as f:
        json.dump(result, f)
    md = report(result)
    print("\n".join(md))
    if len(sys.argv) == 3 and sys.argv[1] == "--update":
        replace_section(sys.argv[2], heading, md, before=before)
