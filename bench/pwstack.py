"""A private PipeWire for the benches (pipewire_bench, follow_bench, desktop_bench,
canberra_bench, glitch_soak): its own session bus, pipewire, wireplumber and pipewire-pulse
(Stack), the recorder bench/pw_onset.c (built here into .build/bench) that stamps each captured
frame of the sink's monitor on the graph's clock (Recorder), the trigger -> onset loop
(measure), a cued on it, and process figures (CPU, context switches, the server's wakeups)."""
import collections
import os
import random
import shutil
import subprocess
import tempfile
import threading
import time

import desktopuser
from benchlib import Client, proc_ctx_switches, release_dir, wait_answering

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REL = release_dir(ROOT)
CUED, CUECTL = os.path.join(REL, "cued"), os.path.join(REL, "cuectl")
HEADING = "## Through PipeWire"
TOOLS = ["dbus-daemon", "pipewire", "wireplumber", "pipewire-pulse", "pactl", "pw-dump", "pw-cat", "pw-play", "paplay",
         "aplay", "cc", "pkg-config"]


def missing_tools(tools=TOOLS):
    """What of `tools` is not on PATH; the compiler is not needed where the recorder is built already
    (a run in the Debian 13 root, which has none, after the host's run built it)."""
    built = os.path.exists(os.path.join(ROOT, ".build", "bench", "pw_onset"))
    return [t for t in tools if not shutil.which(t) and not (built and t in ("cc", "pkg-config"))]
BUILD = os.path.join(ROOT, ".build", "bench")
RATE = 48000
ONE_1024 = 1024 / RATE  # the trigger's random phase: 0 .. one 1024-frame quantum
PROBE_S = 0.1  # the probe (pw-play and play-sample skip 20 ms sounds)
CODE_BASE = 12000  # the probe's frame i is ±(CODE_BASE + i): the onset's |sample| says which frame was heard first
POP_S = 0.02  # the mid-stream probe (cued's rows only)


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
    has no service directories (nothing is started by D-Bus activation). `for_user`: its sockets
    open to another uid (cued run as a desktop user: `desktopuser`), the directories on the way
    searchable, and `user_dir` a directory of that user's (cued's sockets and state)."""

    def __init__(self, tmp, no_activation=False, for_user=False):
        self.tmp = tmp
        self.for_user = for_user
        self.rt = os.path.join(tmp, "rt")
        cfg = os.path.join(tmp, "cfg")
        os.makedirs(self.rt, mode=0o700)
        self.user_dir = None
        if for_user:
            desktopuser.traverse(tmp)
            desktopuser.traverse(self.rt)
            self.user_dir = os.path.join(tmp, "user")
            os.makedirs(self.user_dir, mode=0o700)
            desktopuser.own(self.user_dir)
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
        self.start_servers()

    def start_servers(self):
        """pipewire, wireplumber and pipewire-pulse, until the null sink is the default; returns
        the monotonic time that was first seen (pactl answers, asked every 30 ms)."""
        env = self.env
        self.pipewire = self.spawn(["pipewire"])
        for _ in range(200):
            if os.path.exists(os.path.join(self.rt, "pipewire-0")):
                break
            time.sleep(0.02)
        if self.for_user:
            os.chmod(os.path.join(self.rt, "pipewire-0"), 0o666)
        self.wireplumber = self.spawn(["wireplumber"])
        self.pulse = self.spawn(["pipewire-pulse"])
        for _ in range(300):
            r = subprocess.run(["pactl", "get-default-sink"], env=env, capture_output=True, text=True)
            if r.stdout.strip() == "nul":
                break
            time.sleep(0.03)
        else:
            raise RuntimeError("private PipeWire did not come up")
        ready = time.monotonic()
        if self.for_user:
            desktopuser.traverse(os.path.join(self.rt, "pulse"))
            os.chmod(os.path.join(self.rt, "pulse", "native"), 0o666)
        subprocess.run(["pactl", "set-sink-volume", "nul", "100%"], env=env, capture_output=True)
        return ready

    def stop_servers(self):
        """Stops the three servers as `systemctl --user restart` would (SIGTERM, SIGKILL after 3 s)."""
        for p in (self.pulse, self.wireplumber, self.pipewire):
            stop(p, timeout=3)
        for name in ("pipewire-0", "pipewire-0.lock"):
            try:
                os.unlink(os.path.join(self.rt, name))
            except OSError:
                pass

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


def private_stack(prefix):
    """A temp directory and a private PipeWire in it whose session bus activates nothing."""
    tmp = tempfile.mkdtemp(prefix=prefix)
    return tmp, Stack(tmp, no_activation=True)


def build_recorder():
    """Compiles bench/pw_onset.c into .build/bench (when the source is newer); returns its path."""
    src = os.path.join(ROOT, "bench", "pw_onset.c")
    out = os.path.join(BUILD, "pw_onset")
    if os.path.exists(out) and os.path.getmtime(out) >= os.path.getmtime(src):
        return out
    os.makedirs(BUILD, exist_ok=True)
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "libpipewire-0.3"], capture_output=True, text=True)
    if flags.returncode != 0:
        raise RuntimeError("pkg-config libpipewire-0.3: " + flags.stderr.strip() + " (make deps installs libpipewire-0.3-dev)")
    r = subprocess.run(["cc", "-O2", "-Wall", "-o", out + ".tmp", src, *flags.stdout.split(), "-lm"], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("cc pw_onset.c: " + r.stderr.strip())
    os.replace(out + ".tmp", out)
    return out


class Recorder:
    """bench/pw_onset on the null sink: onsets stamped on the graph's clock, the quanta it saw."""

    EARLY_NS = 50_000_000  # an onset up to 50 ms before the trigger's time is still its (see report)

    def __init__(self, stack, path, threshold=0, quiet_ms=50, extra=(), target="nul"):
        self.p = stack.spawn([path, "--target", target, "--threshold", str(threshold), "--quiet-ms", str(quiet_ms), *extra],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.cond = threading.Condition()
        self.onsets = collections.deque()
        self.replies = collections.deque()
        self.clicks = collections.deque()
        self.cycles = collections.deque(maxlen=100000)  # after `d 1`: (start ns, frames, peak, duration) per cycle
        self.ends = {}  # onset ns -> (loud frames, span in frames) of that sound, once the next began
        self.gaps = 0
        self.gap_times = []  # cycles that did not follow the one before (a restart, or cycles the recorder missed)
        self.ready = False
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()
        # Passive, it gets its format only once the sink runs (a contender plays): not waited for.
        time.sleep(0.3)
        if self.p.poll() is not None:
            raise RuntimeError("pw_onset exited (%s)" % self.p.returncode)

    def _read(self):
        for raw in self.p.stdout:
            f = raw.decode().split()
            if not f:
                continue
            with self.cond:
                if f[0] == "O":
                    self.onsets.append((int(f[1]), int(f[2]), int(f[3]), int(f[4]), int(f[5]) if len(f) > 5 else 0))
                elif f[0] == "G":
                    self.gaps += 1
                    self.gap_times.append(int(f[1]))
                elif f[0] == "R":
                    self.ready = True
                elif f[0] == "P":
                    self.clicks.append(int(f[1]))
                elif f[0] == "E":
                    self.ends[int(f[1])] = (int(f[2]), int(f[3]))
                elif f[0] == "C":
                    self.cycles.append(tuple(int(x) for x in f[1:]))
                else:
                    self.replies.append(f)
                self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    def command(self, line, reply, timeout=5.0):
        with self.cond:
            self.replies.clear()
        self.p.stdin.write(line.encode() + b"\n")
        self.p.stdin.flush()
        if not reply:
            return None
        with self.cond:
            if not self.cond.wait_for(lambda: any(r[0] == reply for r in self.replies), timeout):
                raise RuntimeError("pw_onset did not answer %r" % line)
            return next(r for r in self.replies if r[0] == reply)

    def status(self):
        r = self.command("s", "S")
        return {"now": int(r[1]), "last_loud": int(r[2]), "last_cycle": int(r[3]), "cycles": int(r[4]), "mismatched": int(r[5]), "late": int(r[6])}

    def quanta(self):
        """Cycles seen per quantum (frames per captured buffer) since the last call."""
        return {int(k): int(v) for k, v in (x.split(":") for x in self.command("q", "Q")[1:])}

    def set(self, threshold, quiet_ms):
        self.command("t %d %g" % (threshold, quiet_ms), "T")

    def wait_quiet(self, quiet_s, limit_s=10.0):
        """Until the last frame over the threshold is `quiet_s` old (or none was ever heard)."""
        end = time.monotonic() + limit_s
        while time.monotonic() < end:
            s = self.status()
            if s["last_loud"] == 0:
                return
            left = quiet_s - (s["now"] - s["last_loud"]) / 1e9
            if left <= 0:
                return
            time.sleep(min(left, 0.5))

    def next_cycle(self, t0, through_ns, timeout_s=0.5):
        """After `d 1`: the start of the graph's first cycle at or after t0 (ns), once the recorder
        has reported the cycles up to `through_ns`; None if it has not."""
        end = time.monotonic() + timeout_s
        with self.cond:
            while not self.cycles or self.cycles[-1][0] < through_ns:
                left = end - time.monotonic()
                if left <= 0 or self.p.poll() is not None:
                    return None
                self.cond.wait(left)
            return min((c[0] for c in self.cycles if c[0] >= t0), default=None)

    def onset_after(self, t0, timeout_s=3.0):
        """The first onset stamped at or after t0 - EARLY_NS: (ns, peak, quantum, start of its cycle), or None."""
        end = time.monotonic() + timeout_s
        with self.cond:
            while True:
                while self.onsets:
                    o = self.onsets.popleft()
                    if o[0] >= t0 - self.EARLY_NS:
                        return o
                left = end - time.monotonic()
                if left <= 0 or self.p.poll() is not None:
                    return None
                self.cond.wait(left)

    def close(self):
        if self.p.poll() is None:
            try:
                self.p.stdin.write(b"x\n")
                self.p.stdin.flush()
                self.p.wait(timeout=3)
            except (OSError, subprocess.TimeoutExpired):
                self.p.kill()
                self.p.wait()


def calibrate(stack, path, clicks):
    """pw_onset --calibrate: a player in the same process stamps a click with the cycle it queued
    it for; the recorder's onset minus that is the recorder's offset (0: it stamps frames with the
    cycle the sink consumed them in). At the graph's default quantum and at 128 frames."""
    out = {}
    for label, extra in (("default quantum", []), ("128 frames", ["--latency", "128/48000"])):
        rec = Recorder(stack, path, quiet_ms=20, extra=["--calibrate", *extra])
        offs, qs = [], collections.Counter()
        try:
            time.sleep(0.3)
            for _ in range(clicks):
                with rec.cond:
                    rec.clicks.clear()
                rec.command("c", None)
                t0 = time.monotonic_ns()
                o = rec.onset_after(t0 - 10**9, 1.0)
                with rec.cond:
                    rec.cond.wait_for(lambda: rec.clicks, 1.0)
                    click = rec.clicks.popleft() if rec.clicks else None
                if o and click:
                    offs.append(o[0] - click)
                    qs[o[2]] += 1
                time.sleep(0.05)
        finally:
            rec.close()
        out[label] = {"offsets_ns": offs, "quanta": dict(qs)}
    return out


def measure(rec, trigger, after=None, trials=20, quiet_s=0.12, warmup=2, windows=None, sound_s=PROBE_S, before=None,
            floor=False):
    """`trials` triggers, each sent a random 0..one 1024-frame quantum after the recorder has
    heard `quiet_s` of quiet; latency = onset - trigger. `windows`: {name: (from_s, to_s)}, times
    after the end of each sound over which the server's context switches are counted. `before`:
    called before each trial's wait for quiet. `floor` (a graph that runs between sounds): also
    when the graph's next cycle began after each trigger (no stream's sound can start before it)
    and whether the sound was in that cycle."""
    lat, quanta, misses, lost, onsets, arrive = [], collections.Counter(), 0, [], [], []
    floors, first = [], 0
    idle = {k: [0, 0.0] for k in (windows or {})}
    if floor:
        rec.command("d 1", None)
    for i in range(trials + warmup):
        if before:
            before()
        rec.wait_quiet(quiet_s)
        time.sleep(random.uniform(0, ONE_1024))
        if floor:
            with rec.cond:
                rec.cycles.clear()
        t0 = time.monotonic_ns()
        token = trigger()
        o = rec.onset_after(t0)
        if after:
            after(token)
        if i >= warmup:
            if o is None:
                misses += 1
            else:
                lat.append((o[0] - t0) / 1000.0)
                if o[4]:
                    arrive.append((o[4] - t0) / 1000.0)
                quanta[o[2]] += 1
                lost.append(o[1] - CODE_BASE)
                onsets.append(o[0])
                nxt = rec.next_cycle(t0, o[3]) if floor else None
                if nxt is not None:
                    floors.append((nxt - t0) / 1000.0)
                    first += o[3] <= nxt
        if windows and o is not None and i >= warmup:
            end = o[0] / 1e9 + sound_s
            for name, (a, b) in sorted(windows.items(), key=lambda kv: kv[1]):
                _sleep_until(end + a)
                c0, w0 = windows_counter(), time.monotonic()
                _sleep_until(end + b)
                idle[name][0] += windows_counter() - c0
                idle[name][1] += time.monotonic() - w0
    if floor:
        rec.command("d 0", None)
        with rec.cond:
            rec.cycles.clear()
    return {"lat": lat, "arrive": arrive, "misses": misses, "quanta": dict(quanta), "lost": lost, "onsets": onsets, "frames": round(sound_s * RATE), "idle": {k: (v[0] / v[1] if v[1] else None) for k, v in idle.items()},
            "idle_s": {k: v[1] for k, v in idle.items()}, "floor": floors, "first": first}


def _sleep_until(t):
    d = t - time.monotonic()
    if d > 0:
        time.sleep(d)


windows_counter = None  # set by run(): context switches of pipewire + pipewire-pulse


def start_cued(stack, name, sink, sounds, extra=()):
    sock = os.path.join(stack.tmp, name + ".sock")
    env = dict(stack.env, XDG_STATE_HOME=os.path.join(stack.tmp, "state-" + name),
               XDG_CONFIG_HOME=os.path.join(stack.tmp, "noconfig"))
    p = stack.spawn([CUED, "--socket", sock, "--sink", sink, "--sounds", sounds, "--log-level", "error", *extra], env=env)
    wait_answering(sock, name)
    return p, sock


def start_user_cued(stack, name, sink, sounds, bins, rtkit, extra=()):
    """cued on a `for_user` stack, run as a desktop user (`desktopuser`), from `bins` (paths the
    user can run), with RTKit's real time (`rtkit`, a RealtimeKit) or, None, no system bus at all.
    Returns the process, its socket, and a function that makes a client of it (as the user)."""
    sock = os.path.join(stack.user_dir, name + ".sock")
    env = dict(stack.env, XDG_STATE_HOME=os.path.join(stack.user_dir, "state-" + name),
               XDG_CONFIG_HOME=os.path.join(stack.tmp, "noconfig"),
               DBUS_SYSTEM_BUS_ADDRESS=rtkit.address if rtkit else "unix:path=" + os.path.join(stack.tmp, "no-system-bus"))
    p = stack.spawn([bins[CUED], "--socket", sock, "--sink", sink, "--sounds", sounds, "--log-level", "error", *extra],
                    env=env, **desktopuser.popen_args())
    desktopuser.wait_answering(sock, name)
    return p, sock, lambda: desktopuser.connect(sock)


def stop(p, timeout=5):
    """SIGTERM, then SIGKILL if it has not exited within `timeout` s."""
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def ctx_switches(pid):
    """Context switches of all its threads (voluntary + involuntary)."""
    return sum(proc_ctx_switches(pid).values())


def cpu_ns(pid):
    """CPU time of every thread of a process, in ns (schedstat: finer than the 10 ms ticks of stat)."""
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                total += int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total


def cpu_percent(counters, seconds):
    """Each CPU-time counter's (ns, e.g. cpu_ns of a process) share of one core over the same `seconds`."""
    before, w0 = [c() for c in counters], time.monotonic()
    time.sleep(seconds)
    wall = time.monotonic() - w0
    return [(c() - b) / 1e9 / wall * 100 for c, b in zip(counters, before)]


def server_wakeups(stack, seconds):
    """Context switches per second of pipewire + pipewire-pulse over `seconds`."""
    pids = [stack.pipewire.pid, stack.pulse.pid]
    a = sum(ctx_switches(p) for p in pids)
    time.sleep(seconds)
    b = sum(ctx_switches(p) for p in pids)
    return (b - a) / seconds




