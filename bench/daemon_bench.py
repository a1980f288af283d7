"""The daemon itself in `make bench`: its idle cost, throughput, memory and start-up, the
mixer's CPU (BENCH_ONLY=idle, throughput, memory, mixer); other clients' latency while one
client makes cued work, a long reload or a mute flood (eventloop); the footprint of the
installed binaries against the release before issues 11–14 (footprint); and the extra latency
of a sound-theme sound's first use (measured with the first table). Figures only.
"""
import asyncio
import json
import os
import select
import socket
import subprocess
import threading
import time

import desktopuser
from benchlib import Client, log, pct, proc_cpu_ticks, wait_answering, write_wav
from benchlib import proc_ctx_switches
from harness import CUED, IDLE_S, QUICK, ROOT, TMP, TRIALS, cleanup, ctx_delta, measure, proc_rss_kib, spawn, start_cued

# The release before issues 11–14 (commit 38c9c40), measured on this machine with
# the same harness (`python3 bench/daemon_bench.py --baseline DIR`, DIR holding that
# commit's `swift build -c release` output); its binaries needed the toolchain at run time.
BASELINE = os.path.join(ROOT, "bench", "baseline-38c9c40.json")


# Pings from a process of its own (not a thread of this harness, whose GIL would
# delay it while the main thread reads the busy client's replies): prints one
# latency in µs per line until stdin closes.
PINGER = r"""
import socket, sys, time, select
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); f = s.makefile("rb")
out = []
while not select.select([sys.stdin], [], [], 0.002)[0]:
    t = time.monotonic_ns(); s.sendall(b"ping\n")
    if f.readline() != b"ok pong\n": break
    out.append((time.monotonic_ns() - t) / 1000.0)
print("\n".join("%.1f" % x for x in out))
"""


def _pings_during(sock, work):
    p = subprocess.Popen(["python3", "-c", PINGER, sock], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    time.sleep(0.3)
    result = work()
    time.sleep(0.05)
    out, _ = p.communicate("")
    return result, [float(x) for x in out.split()]


def event_loop():
    """Other clients' ping while one connection reloads 40 ten-second cues (real
    decoding and resampling, no test hook), and while one floods mute/unmute."""
    sounds = os.path.join(TMP, "reload-sounds")
    os.makedirs(sounds)
    probe = [16384 if (i // 24) % 2 == 0 else -16384 for i in range(960)]
    for name in ("psst1", "psst2", "pop"):
        write_wav(os.path.join(sounds, name + ".wav"), probe)
    p, sock = start_cued("evloop", "null", sounds, ["--rate-limit", "0"])
    # Then 40 legitimate 10 s cues at 44.1 kHz, which the reload decodes and resamples.
    import wave, struct
    frames = b"".join(struct.pack("<h", ((i * 7919) % 2001) - 1000) for i in range(44_100))
    for k in range(40):
        with wave.open(os.path.join(sounds, "long%02d.wav" % k), "wb") as w:
            w.setnchannels(1); w.setsampwidth(2); w.setframerate(44_100)
            w.writeframes(frames * 10)
    out = {}
    for what in ("reload", "flood"):
        c = Client(sock)

        def work():
            t0 = time.monotonic()
            if what == "reload":
                reply = c.request("reload")
            else:
                c.s.sendall(b"mute\nunmute\n" * 5000)
                for _ in range(10_000):
                    reply = c.reply()
            return time.monotonic() - t0, reply

        (took, reply), during = _pings_during(sock, work)
        out[what] = {"took_s": took, "reply": reply, "pings": len(during),
                     "p50_us": pct(during, 0.5), "p99_us": pct(during, 0.99), "max_us": max(during) if during else float("nan")}
        log("event loop: %s took %.1f s (%s); ping p50 %.0f µs p99 %.0f µs max %.0f µs over %d pings" %
                  (what, took, reply, out[what]["p50_us"], out[what]["p99_us"], out[what]["max_us"], len(during)))
    p.terminate()
    p.wait()
    return out


def as_user():
    """Issue 36: the footprint rows are cued as a desktop user runs it (uid 65534, no privilege:
    desktopuser); the bench's temp dir is made traversable and the user gets a directory of its
    own for its sockets and state. None where it cannot (not root): cued runs as this user."""
    if desktopuser.available() is not None:
        return None
    home = os.path.join(TMP, "user")
    if not os.path.isdir(home):
        desktopuser.traverse(TMP)
        os.makedirs(home)
        desktopuser.own(home)
    return home


def runs_as(home):
    return "uid %d" % desktopuser.UID if home else "uid %d (not root: no other user)" % os.getuid()


def footprint(sounds):
    """The installed (stripped, self-contained) binaries: size, RSS after start,
    exec → READY=1 (cued as a user, see `as_user`); and the same for the release before this
    work, if its build is there."""
    prefix = os.path.join(TMP, "prefix")
    subprocess.run(["make", "-s", "--no-print-directory", "install-files", "PREFIX=" + prefix, "BINDIR=" + prefix + "/bin",
                    "DATADIR=" + prefix + "/share", "UNITDIR=" + prefix + "/units"], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    cued, cuectl = os.path.join(prefix, "bin", "cued"), os.path.join(prefix, "bin", "cuectl")
    now = {"cued_bytes": os.path.getsize(cued), "cuectl_bytes": os.path.getsize(cuectl)}
    # As installed: its own cues, found beside the binary (../share/cued/cues).
    home = as_user()
    now.update(_rss_and_ready(cued, None, home=home))
    now["as"] = runs_as(home)
    linked = subprocess.run(["ldd", cued], capture_output=True, text=True).stdout
    now["needs_toolchain"] = "/swift" in linked
    return now


def spawn_notified(cued, name, sounds, home=None):
    """`cued` on `--sink null` with a fake NOTIFY_SOCKET: (process, its socket, the notify socket
    bound, the exec time in ns). `home`: run as the user (`as_user`), its files in there."""
    base = home or TMP
    nsock = os.path.join(base, name + ".notify")
    ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    ns.bind(nsock)
    sock = os.path.join(base, name + ".sock")
    env = dict(os.environ, NOTIFY_SOCKET=nsock, XDG_STATE_HOME=os.path.join(base, "st"),
               XDG_CONFIG_HOME=os.path.join(base, "noconfig"))
    kw = {}
    if home:
        os.chmod(nsock, 0o666)  # the user's cued sends READY=1 to root's socket
        env.update(HOME=home, XDG_RUNTIME_DIR=home)
        kw = desktopuser.popen_args()
    t0 = time.monotonic_ns()
    q = spawn([cued, "--socket", sock, "--sink", "null", "--log-level", "error"] + (["--sounds", sounds] if sounds else []),
              env=env, stderr=subprocess.DEVNULL, **kw)
    return q, sock, ns, t0


def _rss_and_ready(cued, sounds, runs=20, home=None):
    rss, readies = [], []
    for i in range(runs):
        q, sock, ns, t0 = spawn_notified(cued, "fp%d" % i, sounds, home=home)
        ns.settimeout(10)
        while b"READY=1" not in ns.recv(4096):
            pass
        readies.append((time.monotonic_ns() - t0) / 1e6)
        time.sleep(0.3)
        rss.append(proc_rss_kib(q.pid))
        q.terminate()
        q.wait()
        ns.close()
    return {"rss_start_kib": pct(rss, 0.5), "exec_to_ready_ms": pct(readies, 0.5), "exec_to_ready_max_ms": max(readies)}


def theme_latency(stream, env, sounds):
    """`play NAME` of a sound-theme sound: its first use (found, decoded, cached
    off the event loop) and later uses (from the cache), request → first sample."""
    data = os.path.join(TMP, "theme-data")
    theme = os.path.join(data, "sounds", "benchtheme", "stereo")
    os.makedirs(theme)
    with open(os.path.join(data, "sounds", "benchtheme", "index.theme"), "w") as f:
        f.write("[Sound Theme]\nName=bench\nDirectories=stereo\n\n[stereo]\nOutputProfile=stereo\n")
    probe = [16384 if (i // 24) % 2 == 0 else -16384 for i in range(960)]
    n = TRIALS
    for k in range(n + 3):  # a new name per first use, so each is a cache miss
        write_wav(os.path.join(theme, "tprobe-%d.wav" % k), probe)
    cfg = os.path.join(TMP, "theme-config", "cued")
    os.makedirs(cfg)
    with open(os.path.join(cfg, "cued.toml"), "w") as f:
        f.write('theme = "benchtheme"\n')
    e = dict(env, XDG_DATA_HOME=data)
    sock = os.path.join(TMP, "theme.sock")
    e.update(XDG_STATE_HOME=os.path.join(TMP, "state-theme"), XDG_CONFIG_HOME=os.path.join(TMP, "theme-config"))
    p = spawn([CUED, "--socket", sock, "--sink", "alsa:benchsink", "--sounds", sounds, "--idle-close-s", "3600",
               "--log-level", "error"], env=e, stderr=subprocess.DEVNULL)
    wait_answering(sock, "theme")
    c = Client(sock)
    first = iter(range(n + 3))
    res = {}
    log("latency: theme sound, first use")
    res["theme sound, first use (decode)"] = measure(stream, lambda: c.send("play tprobe-%d" % next(first)),
                                                         lambda _: c.reply(), gap_s=0.05)
    log("latency: theme sound, cached")
    res["theme sound, cached"] = measure(stream, lambda: c.send("play tprobe-0"), lambda _: c.reply())
    p.terminate()
    p.wait()
    return res


def targets(ev, fp):
    """Issue 12's and 13's targets, as rows of the Targets table."""
    size = fp["cued_bytes"] + fp["cuectl_bytes"]
    return [
        ("other clients' ping p99 during a long reload ≤ 5 ms", "%.1f ms (reload of %.1f s)" % (ev["reload"]["p99_us"] / 1000, ev["reload"]["took_s"]),
         ev["reload"]["p99_us"] <= 5000),
        ("installed cued + cuectl ≤ 15 MB", "%.1f MB (see the notes: the Swift runtime is ≈ 6 MB per binary)" % (size / 1e6), size <= 15e6),
        ("RSS after start ≤ 12 MiB (as a user)", "%.1f MiB (%s)" % (fp["rss_start_kib"] / 1024, fp.get("as", "root")),
         fp["rss_start_kib"] <= 12 * 1024),
        ("exec → `READY=1` ≤ 10 ms (as a user)", "%.1f ms p50 (%s)" % (fp["exec_to_ready_ms"], fp.get("as", "root")),
         fp["exec_to_ready_ms"] <= 10),
        ("the installed binaries run without the Swift toolchain", "ldd: %s" % ("needs it" if fp["needs_toolchain"] else "no toolchain library"),
         not fp["needs_toolchain"]),
    ]


def report(ev, fp, theme_rows):
    md = ["", "## One busy client, everyone else (issue 12)", "",
          "A second client pings every 2 ms while the first one works; p99 goal ≤ 5 ms. The work runs on",
          "cued's job pool, off the event loop; only the connection that asked waits for it.", "",
          "| while | took | pings answered | ping p50 µs | ping p99 µs | max µs |", "|---|---|---|---|---|---|"]
    names = {"reload": "`reload` of 40 × 10 s cues (44.1 kHz: decoded and resampled)",
             "flood": "10,000 pipelined `mute`/`unmute` on one connection"}
    for k in ("reload", "flood"):
        r = ev[k]
        md.append("| %s | %.1f s | %d | %.0f | %.0f | %.0f |" % (names[k], r["took_s"], r["pings"], r["p50_us"], r["p99_us"], r["max_us"]))
    b = json.load(open(BASELINE)) if os.path.exists(BASELINE) else None
    if b is None:
        return md + ["", "(no baseline: bench/baseline-38c9c40.json is missing)"]
    md += ["", "## Footprint of the installed binaries (issue 13)", "",
           "`make install`'s binaries: stripped, the Swift runtime linked in, no Foundation. *Before*: release",
           "%s (dynamically linked to the toolchain, unstripped), measured on this machine with the same harness." % b["commit"], "",
           "| figure | before | now | target |", "|---|---|---|---|",
           "| cued size | %.1f MB | %.1f MB | |" % (b["cued_bytes"] / 1e6, fp["cued_bytes"] / 1e6),
           "| cuectl size | %.1f MB | %.1f MB | |" % (b["cuectl_bytes"] / 1e6, fp["cuectl_bytes"] / 1e6),
           "| both | %.1f MB | %.1f MB | ≤ 15 MB |" % ((b["cued_bytes"] + b["cuectl_bytes"]) / 1e6, (fp["cued_bytes"] + fp["cuectl_bytes"]) / 1e6),
           "| RSS after start (p50 of 20; now as %s) | %.1f MiB | %.1f MiB | ≤ 12 MiB |" % (fp.get("as", "root"), b["rss_start_kib"] / 1024, fp["rss_start_kib"] / 1024),
           "| exec → `READY=1` (p50 of 20; now as %s) | %.1f ms | %.1f ms (max %.1f) | ≤ 10 ms |" % (fp.get("as", "root"), b["exec_to_ready_ms"], fp["exec_to_ready_ms"], fp["exec_to_ready_max_ms"]),
           "| needs the Swift toolchain at run time | yes | %s | no |" % ("yes" if fp["needs_toolchain"] else "no")]
    if theme_rows:
        md += ["", "## Sound themes (issue 14)", "",
               "`play NAME` of a sound of the configured theme, kept connection, request → first sample at the",
               "file PCM (as in the first table). The first use finds the file, decodes it on the job pool and",
               "caches it; later uses play from memory like a cue of the bank.", "",
               "| | n | p50 µs | p99 µs | max µs | misses |", "|---|---|---|---|---|---|"]
        for name, (vals, misses) in theme_rows.items():
            md.append("| %s | %d | %.0f | %.0f | %.0f | %d |" % (name, len(vals), pct(vals, .5), pct(vals, .99),
                                                               max(vals) if vals else float("nan"), misses))
    return md



def idle_cost(sounds):
    p, sock = start_cued("idle", "alsa:null", sounds)
    hz = os.sysconf("SC_CLK_TCK")
    out = {}
    for label, prelude in (("after start", None), ("after a cue", "play probe")):
        if prelude:
            Client(sock).request(prelude)
            time.sleep(0.2)  # let the cue finish and the stream stop
        t0, c0 = proc_cpu_ticks(p.pid), proc_ctx_switches(p.pid)
        log("idle: %s, %.0f s" % (label, IDLE_S))
        time.sleep(IDLE_S)
        t1, c1 = proc_cpu_ticks(p.pid), proc_ctx_switches(p.pid)
        out[label] = (t1 - t0, ctx_delta(c0, c1) / IDLE_S)
    p.terminate()
    p.wait()
    return out, hz


def throughput(sounds):
    # Raw capacity: the per-connection rate limit and the connection cap are lifted.
    p, sock = start_cued("flood", "null", sounds, ["--voices", "16", "--rate-limit", "0", "--max-clients", "4096"])
    out = {}
    # One pipelined connection: a writer thread streams requests, this thread reads replies.
    n = 100_000 if QUICK else 500_000
    c = Client(sock)
    payload = b"play probe\n" * 1000
    ok = err = 0

    def writer():
        for _ in range(n // 1000):
            c.s.sendall(payload)

    t0 = time.monotonic()
    w = threading.Thread(target=writer)
    w.start()
    for _ in range(n):
        r = c.f.readline()
        if r.startswith(b"ok"):
            ok += 1
        else:
            err += 1
    dt = time.monotonic() - t0
    w.join()
    out["pipelined"] = {"requests": n, "seconds": dt, "rps": n / dt, "ok": ok, "err": err}
    log("throughput: one pipelined connection: %.0f req/s (%d ok, %d err)" % (n / dt, ok, err))

    async def flood(conns, per_conn):
        lat, pings = [], []
        done = asyncio.Event()

        async def one():
            r, w = await asyncio.open_unix_connection(sock)
            for _ in range(per_conn):
                t = time.monotonic_ns()
                w.write(b"play probe\n")
                await r.readline()
                lat.append((time.monotonic_ns() - t) / 1000)
            w.close()

        async def pinger():
            r, w = await asyncio.open_unix_connection(sock)
            while not done.is_set():
                t = time.monotonic_ns()
                w.write(b"ping\n")
                await r.readline()
                pings.append((time.monotonic_ns() - t) / 1000)
                await asyncio.sleep(0.002)
            w.close()

        pt = asyncio.create_task(pinger())
        t0 = time.monotonic()
        await asyncio.gather(*[one() for _ in range(conns)])
        dt = time.monotonic() - t0
        done.set()
        await pt
        return {"connections": conns, "requests": conns * per_conn, "seconds": dt, "rps": conns * per_conn / dt,
                "reply_p99_us": pct(lat, 0.99), "ping_p99_us": pct(pings, 0.99), "pings": len(pings)}

    for conns, per in ((100, 200 if QUICK else 1000), (1000, 20 if QUICK else 100)):
        r = asyncio.run(flood(conns, per))
        out["%d connections" % conns] = r
        log("throughput: %d connections: %.0f req/s, reply p99 %.0f us, ping p99 %.0f us"
            % (conns, r["rps"], r["reply_p99_us"], r["ping_p99_us"]))
    p.terminate()
    p.wait()
    return out


def memory_and_startup(sounds):
    out = {}
    p, sock = start_cued("mem", "null", sounds, ["--rate-limit", "0"])
    time.sleep(0.3)
    out["rss_start_kib"] = proc_rss_kib(p.pid)
    c = Client(sock)
    n = 100_000 if QUICK else 1_000_000
    lines = [b"play probe\n", b"ping\n", b"state release\n", b"state idle\n", b"status\n"]
    payload = b"".join(lines[i % len(lines)] for i in range(1000))

    def writer():
        for _ in range(n // 1000):
            c.s.sendall(payload)

    w = threading.Thread(target=writer)
    w.start()
    for _ in range(n):
        c.f.readline()
    w.join()
    time.sleep(0.5)
    out["requests"] = n
    out["rss_after_kib"] = proc_rss_kib(p.pid)
    p.terminate()
    p.wait()

    # exec -> first `ok pong`, and exec -> READY=1 (a fake NOTIFY_SOCKET).
    pongs, readies = [], []
    for i in range(10 if QUICK else 30):
        q, sock, ns, t0 = spawn_notified(CUED, "start%d" % i, sounds)
        ready = None
        while True:
            r, _, _ = select.select([ns], [], [], 0.0002)
            if r and b"READY=1" in ns.recv(4096) and ready is None:
                ready = time.monotonic_ns()
            try:
                cl = Client(sock)
                if cl.request("ping") == "ok pong":
                    pongs.append((time.monotonic_ns() - t0) / 1e6)
                    break
            except OSError:
                pass
        while ready is None:
            if b"READY=1" in ns.recv(4096):
                ready = time.monotonic_ns()
        readies.append((ready - t0) / 1e6)
        q.terminate()
        q.wait()
        ns.close()
    out["exec_to_pong_ms"] = (pct(pongs, 0.5), max(pongs))
    out["exec_to_ready_ms"] = (pct(readies, 0.5), max(readies))
    return out


def mixer_cpu(sounds):
    """cued's CPU per second of output on `--sink null`, 1 and 16 voices of a 10 s cue; as the
    user (`as_user`), connected as the user (cued serves only its own user's clients)."""
    home = as_user()
    sock = os.path.join(home or TMP, "mix.sock")
    env = dict(os.environ, XDG_STATE_HOME=os.path.join(home or TMP, "state-mix"), XDG_CONFIG_HOME=os.path.join(TMP, "noconfig"))
    if home:
        env.update(HOME=home, XDG_RUNTIME_DIR=home)
    cued = desktopuser.copy_binaries([CUED], TMP)[CUED] if home else CUED  # a checkout under /root: copied
    p = spawn([cued, "--socket", sock, "--sink", "null", "--sounds", sounds, "--log-level", "error", "--voices", "16"],
              env=env, stderr=subprocess.DEVNULL, **(desktopuser.popen_args() if home else {}))
    (desktopuser.wait_answering if home else wait_answering)(sock, "mix")
    hz = os.sysconf("SC_CLK_TCK")
    out = {"as": runs_as(home)}
    for voices in (1, 16):
        c = desktopuser.connect(sock) if home else Client(sock)
        t0 = proc_cpu_ticks(p.pid)
        w0 = time.monotonic()
        for _ in range(voices):
            c.request("play long")
        time.sleep(10.5)
        t1 = proc_cpu_ticks(p.pid)
        out[voices] = (t1 - t0) / hz / (time.monotonic() - w0) * 100  # % of one core
        log("mixer: %d voices: %.2f %% of a core (%s)" % (voices, out[voices], out["as"]))
    p.terminate()
    p.wait()
    return out


def report_figures(idle, hz, thr, mem, mix):
    """Idle cost, throughput, memory and start-up, the mixer: their sections of BENCHMARKS.md."""
    md = []
    ticks_start, cs_start = idle["after start"]
    ticks_cue, cs_cue = idle["after a cue"]
    md += ["## Idle cost", "",
           "cued on `alsa:null`, idle for %.0f s after start, then for %.0f s after one cue (utime+stime from" % (IDLE_S, IDLE_S),
           "/proc, in clock ticks of 1/%d s; context switches summed over all threads)." % hz, "",
           "| period | CPU ticks | context switches / s |", "|---|---|---|",
           "| after start | %d | %.3f |" % (ticks_start, cs_start), "| after a cue | %d | %.3f |" % (ticks_cue, cs_cue)]

    pl = thr["pipelined"]
    md += ["", "## Throughput", "", "`--sink null`, 16 voices (plays beyond 16 steal the oldest voice), `--rate-limit 0`",
           "and `--max-clients 4096` (by default one connection may start 200 cues a second and 256 may connect).", "",
           "| load | requests | req/s | reply p99 µs | ping p99 µs during |", "|---|---|---|---|---|",
           "| one pipelined connection | %d | %.0f | - | - |" % (pl["requests"], pl["rps"])]
    for k in ("100 connections", "1000 connections"):
        r = thr[k]
        md.append("| %s (request/reply each) | %d | %.0f | %.0f | %.0f |" % (k, r["requests"], r["rps"], r["reply_p99_us"], r["ping_p99_us"]))
    md += ["", "The concurrent rows are driven by one Python asyncio client, which is the bottleneck there;",
           "they show that every connection is served and how `ping` fares meanwhile, not cued's ceiling.", ""]

    md += ["## Memory and start-up", "",
           "| figure | value |", "|---|---|",
           "| RSS after start | %.1f MiB |" % (mem["rss_start_kib"] / 1024),
           "| RSS after %d requests | %.1f MiB |" % (mem["requests"], mem["rss_after_kib"] / 1024),
           "| exec → first `ok pong` (p50 / max) | %.1f / %.1f ms |" % mem["exec_to_pong_ms"],
           "| exec → `READY=1` (p50 / max) | %.1f / %.1f ms |" % mem["exec_to_ready_ms"], "",
           "## Mixer", "", "CPU of the whole daemon per second of output (`--sink null`, a 10 s cue played by N voices;",
           "cued as %s)." % mix.get("as", "root"), "",
           "| voices | % of one core |", "|---|---|"]
    for v in (1, 16):
        md.append("| %d | %.2f |" % (v, mix[v]))
    return md

if __name__ == "__main__":
    import sys
    # --baseline DIR: measure the old release in DIR the same way and keep its figures.
    if len(sys.argv) == 3 and sys.argv[1] == "--baseline":
        d = sys.argv[2]
        try:
            # Its sounds as it ships them (the repo's Sounds/ at that commit: psst1, psst2, pop).
            sounds = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(d))), "Sounds")
            old = {"commit": "38c9c40", "cued_bytes": os.path.getsize(os.path.join(d, "cued")),
                   "cuectl_bytes": os.path.getsize(os.path.join(d, "cuectl"))}
            old.update(_rss_and_ready(os.path.join(d, "cued"), sounds))
            json.dump(old, open(BASELINE, "w"), indent=1)
            print(old)
        finally:
            cleanup()
