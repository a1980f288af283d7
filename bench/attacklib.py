"""What the reliability scenarios share (bench/reliability.py and the attack_*.py modules): the
rows they write, each tagged with its concern, a cued of a scenario's own, another client
pinging, floods, and a hung mount. Imports benchlib and harness only."""
import json
import os
import signal
import subprocess
import sys
import threading
import time

from benchlib import Client, log, pct, proc_cpu_ticks
from harness import CUED, TMP, spawn

# The concerns RELIABILITY.md is grouped by, in its order, and what each covers.
CONCERNS = {
    "input": "Input: the protocol and its requests",
    "clients": "Clients: misbehaving clients, floods, lock-out",
    "files": "Files: sound files, configs, themes, hung mounts",
    "devices": "Devices: the audio output failing",
    "signals": "Signals: kills, stray signals, restarts, stderr",
    "resources": "Resources: memory, descriptors, disk",
    "canberra": "The libcanberra plug-in inside its host",
}

ROWS = []  # (concern, attack, how it is run, figure, held)
CURRENT = ["input"]  # the concern of the scenario running now (set by reliability.py)


def row(scenario, how, figure, ok, concern=None):
    """One attack's row: named by what it attacks; `concern` where it is not its scenario's."""
    ROWS.append((concern or CURRENT[0], scenario, how, figure, ok))
    log("%s: %s — %s" % ("ok  " if ok else "FAIL", scenario, figure))


def pipeline(c, payload, n):
    """Writes `payload` from a thread while reading `n` reply lines: cued stops
    reading a connection whose replies are not read (back-pressure), so a client
    that wrote everything before reading would wait on itself."""
    w = threading.Thread(target=c.s.sendall, args=(payload,))
    w.start()
    replies = [c.reply() for _ in range(n)]
    w.join()
    return replies


def declare_apps(c, n_play, n_mute):
    """One connection declares `n_play` apps that each play `probe` once, then mutes `n_mute`
    others (`mute app mN`); returns how many of the mutes were accepted (the rest `err too-many`)."""
    payload = "".join("app p%d\nplay probe\n" % i for i in range(n_play)) + "".join(
        "mute app m%d\n" % i for i in range(n_mute))
    replies = pipeline(c, payload.encode(), 2 * n_play + n_mute)
    return sum(r.startswith("ok muted") for r in replies[2 * n_play:])


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


def load_note():
    """The machine's load while a timing row ran (2 cores, shared): a figure, not an excuse."""
    return "1-min load average at the end %.1f" % os.getloadavg()[0]


def met(ok):
    return "met" if ok else "not met"


class Cued:
    """A cued of its own: socket, config home, state dir and a stderr log in the run's temp dir."""

    def __init__(self, name, sounds, extra=(), config=None, launcher=(), level="error", env=None, wait=True,
                 stderr=None, **popen):
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
    mnt = os.path.join(TMP, name)
    os.makedirs(mnt, exist_ok=True)
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hungfs.py")
    log_path = os.path.join(TMP, name + ".log")
    fs = spawn(["/usr/bin/python3", script, mnt], stderr=open(log_path, "w"))
    end = time.monotonic() + 10
    while not os.path.exists(os.path.join(mnt, "hang1.wav")) and time.monotonic() < end:
        time.sleep(0.02)
    if not os.path.exists(os.path.join(mnt, "hang1.wav")):
        kill_all(fs)
        raise RuntimeError("the FUSE file system did not come up: %s" % open(log_path).read()[-200:])
    return mnt, fs


PINGER = r"""
import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); f = s.makefile("rb")
out = open(sys.argv[2], "w")
while True:
    t = time.monotonic_ns(); s.sendall(b"ping\n"); r = f.readline()
    if r != b"ok pong\n": out.write("bad %r\n" % r); out.flush(); break
    out.write("%d %d\n" % (t, (time.monotonic_ns() - t) // 1000)); out.flush()
    time.sleep(0.005)
"""


class Pinger:
    """Another client, in a process of its own, pinging every 5 ms; each ping is
    recorded with its send time (CLOCK_MONOTONIC, comparable across processes)."""

    def __init__(self, sock):
        self.file = os.path.join(TMP, "pings-%d.txt" % time.monotonic_ns())
        self.p = spawn([sys.executable, "-c", PINGER, sock, self.file])
        time.sleep(0.3)

    def stop(self):
        time.sleep(0.1)
        self.p.kill()
        self.p.wait()
        self.pings = []
        for line in open(self.file):
            parts = line.split()
            if len(parts) == 2 and parts[0].isdigit():
                self.pings.append((int(parts[0]), int(parts[1])))
        return self

    def window(self, t0, t1):
        """Latencies (µs) of the pings sent in [t0, t1] (monotonic seconds)."""
        return [us for t, us in self.pings if t0 * 1e9 <= t <= t1 * 1e9]

    def answered_within(self, t0, t1):
        return sum(1 for t, us in self.pings if t0 * 1e9 <= t and t + us * 1000 <= t1 * 1e9)


def lat_summary(lat):
    if not lat:
        return "no pings"
    return "p50 %.2f ms, p99 %.2f ms, max %.1f ms (%d pings)" % (pct(lat, .5) / 1000, pct(lat, .99) / 1000, max(lat) / 1000,
                                                               len(lat))


FLOOD = r"""
import asyncio, json, sys, time
sock, clients, per, verb, limit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], float(sys.argv[5])
lines = verb.count("\n") + 1  # a unit of several lines (e.g. `play X` + `status wait`) gets a reply each
st = {"replies": 0, "bad": 0, "example": "", "t0": 0.0, "t1": 0.0, "finished": True, "closed": 0}
async def one():
    try:
        await session()
    except OSError:  # reset or refused by cued (e.g. `err busy` at its cap, then closed)
        st["closed"] += 1
async def session():
    r, w = await asyncio.open_unix_connection(sock)
    if verb == "threshold":
        w.write(b"".join(b"threshold %d\n" % k for k in range(1, per + 1)))
        for k in range(1, per + 1):
            line = await r.readline()
            if not line:
                st["closed"] += 1
                break
            st["replies"] += 1
            if line != b"ok %d\n" % k:
                st["bad"] += 1
                st["example"] = st["example"] or line.decode(errors="replace").strip()[:80]
    else:
        w.write((verb + "\n").encode() * per)
        got, rest = 0, b""
        while got < per * lines:
            chunk = await r.read(1 << 16)
            if not chunk:
                st["closed"] += 1
                break
            parts = (rest + chunk).split(b"\n")
            rest = parts.pop()
            for line in parts:
                if not line.startswith(b"ok"):
                    st["bad"] += 1
                    st["example"] = st["example"] or line.decode(errors="replace").strip()[:80]
            got += len(parts)
        st["replies"] += got
    w.close()
async def main():
    st["t0"] = time.monotonic()
    try:
        await asyncio.wait_for(asyncio.gather(*[one() for _ in range(clients)]), limit)
    except asyncio.TimeoutError:
        st["finished"] = False
    st["t1"] = time.monotonic()
asyncio.run(main())
print(json.dumps(st))
"""


def flood_row(label, sounds, clients, per, verb, how, extra=(), require_all=True, rounds=1):
    """`clients` connections (a process of their own) each pipeline `per` times `verb` (one line, or
    several) and read the replies, while another process pings: a row with its ping p99 against
    the 10 ms target. require_all: every reply must be `ok` (False where cued refuses some at its cap).
    rounds: the flood runs that many times on the same daemon, a second apart, and the pings during
    them are taken together (a flood of a second gives too few pings for a p99)."""
    q = Cued("fair-" + verb.split()[0], sounds, list(extra))
    pinger = flood = None
    try:
        pinger = Pinger(q.sock)
        time.sleep(1.0)
        t_idle = time.monotonic()
        c0 = proc_cpu_ticks(q.pid)
        runs = []
        for _ in range(rounds):
            flood = spawn([sys.executable, "-c", FLOOD, q.sock, str(clients), str(per), verb, "240"],
                             stdout=subprocess.PIPE, text=True)
            try:
                runs.append(json.loads(flood.communicate(timeout=300)[0]))
            except (subprocess.TimeoutExpired, ValueError):
                runs.append({"replies": 0, "bad": 0, "example": "", "t0": t_idle, "t1": time.monotonic(), "finished": False,
                             "closed": 0})
            if rounds > 1:
                time.sleep(1.0)
        dt = sum(r["t1"] - r["t0"] for r in runs)
        cpu = proc_cpu_ticks(q.pid) - c0
        pinger.stop()
        during = [us for r in runs for us in pinger.window(r["t0"], r["t1"])]
        idle = pinger.window(t_idle - 1.0, t_idle)
        target = bool(during) and pct(during, .99) <= 10_000
        alive = q.alive()
        total = clients * per * (verb.count("\n") + 1)
        replies, bad, closed = (sum(r[k] for r in runs) for k in ("replies", "bad", "closed"))
        example = next((r["example"] for r in runs if r["example"]), "")
        finished = all(r["finished"] for r in runs)
        row(label, how + "; another process pings every 5 ms%s; target: its ping p99 ≤ 10 ms"
            % (" (the flood %d times, a second apart, the pings during them taken together)" % rounds if rounds > 1 else ""),
            "%s of %s replies in %.1f s%s, %d not `ok`%s%s; cued's CPU %.0f %% of a core; other client's ping during "
            "the flood: %s, idle just before: %s; target %s; %s"
            % ("{:,}".format(replies), "{:,}".format(total * rounds), dt, "" if finished else " (stopped at the limit)",
               bad, " (e.g. `%s`)" % example if example else "",
               ", %d connections closed by cued" % closed if closed else "",
               100.0 * cpu / os.sysconf("SC_CLK_TCK") / max(dt, 1e-9), lat_summary(during), lat_summary(idle),
               met(target), load_note()),
            target and alive and (not require_all or (finished and replies == total * rounds and bad == 0)))
        q.term()
    finally:
        kill_all(flood, pinger and pinger.p, q)
