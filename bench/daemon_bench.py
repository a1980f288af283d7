"""The daemon's side of `make bench` for issues 12–14: other clients' latency while
one client makes cued work (a long reload, a mute flood), the footprint of the
installed binaries (size, RSS, start-up) against the release before this work,
and the extra latency of a sound-theme sound's first use. Figures only.
"""
import json
import os
import shutil
import socket
import subprocess
import time

# bench.py's helpers (bench.Client, bench.spawn, TMP…): set by bench.py when it imports this
# module (it runs as __main__, so importing it again would make a second copy).
bench = None
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

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
    sounds = os.path.join(bench.TMP, "reload-sounds")
    os.makedirs(sounds)
    probe = [16384 if (i // 24) % 2 == 0 else -16384 for i in range(960)]
    for name in ("psst1", "psst2", "pop"):
        bench.write_wav(os.path.join(sounds, name + ".wav"), probe)
    p, sock = bench.start_cued("evloop", "null", sounds, ["--rate-limit", "0"])
    # Then 40 legitimate 10 s cues at 44.1 kHz, which the reload decodes and resamples.
    import wave, struct
    frames = b"".join(struct.pack("<h", ((i * 7919) % 2001) - 1000) for i in range(44_100))
    for k in range(40):
        with wave.open(os.path.join(sounds, "long%02d.wav" % k), "wb") as w:
            w.setnchannels(1); w.setsampwidth(2); w.setframerate(44_100)
            w.writeframes(frames * 10)
    out = {}
    for what in ("reload", "flood"):
        c = bench.Client(sock)

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
                     "p50_us": bench.pct(during, 0.5), "p99_us": bench.pct(during, 0.99), "max_us": max(during) if during else float("nan")}
        bench.log("event loop: %s took %.1f s (%s); ping p50 %.0f µs p99 %.0f µs max %.0f µs over %d pings" %
                  (what, took, reply, out[what]["p50_us"], out[what]["p99_us"], out[what]["max_us"], len(during)))
    p.terminate()
    p.wait()
    return out


def footprint(sounds):
    """The installed (stripped, self-contained) binaries: size, RSS after start,
    exec → READY=1; and the same for the release before this work, if its build is there."""
    prefix = os.path.join(bench.TMP, "prefix")
    subprocess.run(["make", "-s", "--no-print-directory", "install-files", "PREFIX=" + prefix, "BINDIR=" + prefix + "/bin",
                    "DATADIR=" + prefix + "/share", "UNITDIR=" + prefix + "/units"], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    cued, cuectl = os.path.join(prefix, "bin", "cued"), os.path.join(prefix, "bin", "cuectl")
    now = {"cued_bytes": os.path.getsize(cued), "cuectl_bytes": os.path.getsize(cuectl)}
    # As installed: its own cues, found beside the binary (../share/cued/sounds).
    now.update(_rss_and_ready(cued, None))
    linked = subprocess.run(["ldd", cued], capture_output=True, text=True).stdout
    now["needs_toolchain"] = "/swift" in linked
    return now


def _rss_and_ready(cued, sounds, runs=20):
    rss, readies = [], []
    for i in range(runs):
        nsock = os.path.join(bench.TMP, "fp-notify%d" % i)
        ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        ns.bind(nsock)
        sock = os.path.join(bench.TMP, "fp%d.sock" % i)
        env = dict(os.environ, NOTIFY_SOCKET=nsock, XDG_STATE_HOME=os.path.join(bench.TMP, "fp-st"),
                   XDG_CONFIG_HOME=os.path.join(bench.TMP, "noconfig"))
        t0 = time.monotonic_ns()
        q = bench.spawn([cued, "--socket", sock, "--sink", "null", "--log-level", "error"] + (["--sounds", sounds] if sounds else []),
                        env=env, stderr=subprocess.DEVNULL)
        ns.settimeout(10)
        while b"READY=1" not in ns.recv(4096):
            pass
        readies.append((time.monotonic_ns() - t0) / 1e6)
        time.sleep(0.3)
        rss.append(bench.proc_rss_kib(q.pid))
        q.terminate()
        q.wait()
        ns.close()
    return {"rss_start_kib": bench.pct(rss, 0.5), "exec_to_ready_ms": bench.pct(readies, 0.5), "exec_to_ready_max_ms": max(readies)}


def theme_latency(stream, env, sounds):
    """`play NAME` of a sound-theme sound: its first use (found, decoded, cached
    off the event loop) and later uses (from the cache), request → first sample."""
    data = os.path.join(bench.TMP, "theme-data")
    theme = os.path.join(data, "sounds", "benchtheme", "stereo")
    os.makedirs(theme)
    with open(os.path.join(data, "sounds", "benchtheme", "index.theme"), "w") as f:
        f.write("[Sound Theme]\nName=bench\nDirectories=stereo\n\n[stereo]\nOutputProfile=stereo\n")
    probe = [16384 if (i // 24) % 2 == 0 else -16384 for i in range(960)]
    n = bench.TRIALS
    for k in range(n + 3):  # a new name per first use, so each is a cache miss
        bench.write_wav(os.path.join(theme, "tprobe-%d.wav" % k), probe)
    cfg = os.path.join(bench.TMP, "theme-config", "cued")
    os.makedirs(cfg)
    with open(os.path.join(cfg, "cued.toml"), "w") as f:
        f.write('theme = "benchtheme"\n')
    e = dict(env, XDG_DATA_HOME=data)
    sock = os.path.join(bench.TMP, "theme.sock")
    e.update(XDG_STATE_HOME=os.path.join(bench.TMP, "state-theme"), XDG_CONFIG_HOME=os.path.join(bench.TMP, "theme-config"))
    p = bench.spawn([bench.CUED, "--socket", sock, "--sink", "alsa:benchsink", "--sounds", sounds, "--idle-close-s", "3600",
               "--log-level", "error"], env=e, stderr=subprocess.DEVNULL)
    bench.wait_answering(sock, "theme")
    c = bench.Client(sock)
    first = iter(range(n + 3))
    res = {}
    bench.log("latency: theme sound, first use")
    res["theme sound, first use (decode)"] = bench.measure(stream, lambda: c.send("play tprobe-%d" % next(first)),
                                                         lambda _: c.reply(), gap_s=0.05)
    bench.log("latency: theme sound, cached")
    res["theme sound, cached"] = bench.measure(stream, lambda: c.send("play tprobe-0"), lambda _: c.reply())
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
        ("RSS after start ≤ 12 MiB", "%.1f MiB" % (fp["rss_start_kib"] / 1024), fp["rss_start_kib"] <= 12 * 1024),
        ("exec → `READY=1` ≤ 10 ms", "%.1f ms p50" % fp["exec_to_ready_ms"], fp["exec_to_ready_ms"] <= 10),
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
           "| RSS after start (p50 of 20) | %.1f MiB | %.1f MiB | ≤ 12 MiB |" % (b["rss_start_kib"] / 1024, fp["rss_start_kib"] / 1024),
           "| exec → `READY=1` (p50 of 20) | %.1f ms | %.1f ms (max %.1f) | ≤ 10 ms |" % (b["exec_to_ready_ms"], fp["exec_to_ready_ms"], fp["exec_to_ready_max_ms"]),
           "| needs the Swift toolchain at run time | yes | %s | no |" % ("yes" if fp["needs_toolchain"] else "no")]
    if theme_rows:
        md += ["", "## Sound themes (issue 14)", "",
               "`play NAME` of a sound of the configured theme, kept connection, request → first sample at the",
               "file PCM (as in the first table). The first use finds the file, decodes it on the job pool and",
               "caches it; later uses play from memory like a cue of the bank.", "",
               "| | n | p50 µs | p99 µs | max µs | misses |", "|---|---|---|---|---|---|"]
        for name, (vals, misses) in theme_rows.items():
            md.append("| %s | %d | %.0f | %.0f | %.0f | %d |" % (name, len(vals), bench.pct(vals, .5), bench.pct(vals, .99),
                                                               max(vals) if vals else float("nan"), misses))
    return md


if __name__ == "__main__":
    import sys
    import bench
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
            bench.cleanup()
