"""Reliability, files: sound files that attack. Crafted headers (huge, sparse, RF64), a FIFO
as a cue, damaged MP3s that make a C library write to stderr, a directory of broken files,
names with control bytes, files nested deep."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from benchlib import mib, rss_kib
from harness import CUECTL, CUED, TMP, spawn
from attacklib import Cued, kill_all, row
from attack_fixtures import (FORTY_BUDGET, malloc_in_use, MIB, add_forty, crafted_rf64, crafted_wav, damaged_mp3, private_bus,
                             small_sounds, vm_kib, write_noise_wav, write_sparse)
from cuedwire import is_err, ERR_BAD_FILE, ERR_RELOAD_FAILED

CONCERN = "files"


# 1. Crafted sound files at reload.
def crafted_files(sounds):
    d = small_sounds(sounds, "crafted")
    pop = os.path.join(d, "pop.wav")
    original = open(pop, "rb").read()
    q = Cued("crafted", d, ["--rate-limit", "0", *FORTY_BUDGET])
    c = q.client(30)
    figs, ok = [], True
    plants = [("sparse RF64, 64 GiB at 2 GHz × 1024 ch", crafted_rf64(1024, 2_000_000_000, 64 << 30), (64 << 30) + 80,
               "has 1024 channels"),
              ("sparse 4 GiB WAV", crafted_wav(2, 48000, (4 << 30) - 64), 4 << 30, "is 22369.62 s long")]
    for label, header, size, reason in plants:
        before = rss_kib(q.pid)
        write_sparse(pop, header, size)
        t = time.monotonic()
        r = c.request("reload")
        dt = time.monotonic() - t
        after = rss_kib(q.pid)
        os.remove(pop)
        open(pop, "wb").write(original)
        good = r.startswith("err reload-failed %s: %s" % (pop, reason)) and q.alive() and c.request("play pop") == "ok"
        ok &= good and after - before < 16 * MIB
        figs.append("%s → `%s` in %.0f ms, RSS %s → %s" % (label, r.replace(d + "/", ""), dt * 1000, mib(before), mib(after)))
    # An ordinary cue that cannot be allocated: 40 legitimate 10 s cues and a 10 s pop
    # under an address-space limit just above what cued already maps (prlimit on the
    # running daemon; within its malloc arenas' reserved space a cue or two still fit).
    assert c.request("reload") == "ok reloaded"
    add_forty(d)
    os.remove(pop)
    write_noise_wav(pop, 10, 48000, 2)
    vm = vm_kib(q.pid)
    subprocess.run(["prlimit", "--pid", str(q.pid), "--as=%d:" % ((vm + 1024) * 1024)], check=True)
    before, used0 = rss_kib(q.pid), malloc_in_use(q)
    t = time.monotonic()
    r = c.request("reload")
    dt = time.monotonic() - t
    alive = q.alive() and c.request("play pop") == "ok"
    after, used1 = rss_kib(q.pid), malloc_in_use(q)
    subprocess.run(["prlimit", "--pid", str(q.pid), "--as=unlimited:"], check=True)
    lifted = c.request("reload")
    good = r.startswith("err reload-failed %s: cannot allocate" % pop) and alive and lifted == "ok reloaded"
    ok &= good
    figs.append("RLIMIT_AS = VmSize + 1 MiB (%s) with 40 ordinary 10 s cues and a 10 s pop → `%s` in %.1f s, RSS %s → %s%s, "
                "old cues still played: %s; limit lifted → `%s`"
                % (mib(vm + 1024), r.replace(d + "/", "")[:120], dt, mib(before), mib(after),
                   " (malloc in use %s → %s: the rest is freed memory malloc keeps)" % (mib(used0 // 1024), mib(used1 // 1024))
                   if used0 is not None and used1 is not None else "", alive, lifted))
    ok &= q.p.poll() is None
    rc, _ = q.term()
    row("crafted sound files at `reload`",
        "`pop.wav` (a required cue) replaced, then `reload`; RSS from /proc/PID/smaps_rollup",
        "; ".join(figs) + "; daemon alive throughout, exit %s at SIGTERM" % rc, ok and rc == 0)


SWAPPER = r"""
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
a, b, end = sys.argv[1].encode(), sys.argv[2].encode(), time.monotonic() + float(sys.argv[3])
n = 0
while time.monotonic() < end:
    if libc.renameat2(-100, a, -100, b, 2) != 0:  # RENAME_EXCHANGE
        print("renameat2 failed", ctypes.get_errno()); sys.exit(1)
    n += 1
print(n)
"""


# 2. FIFOs: named as a cue in the config; swapped in for a cue during reloads.
def fifos(sounds):
    d = small_sounds(sounds, "fifo")
    q = Cued("fifo", d, ["--rate-limit", "0"])
    c = q.client(30)
    fifo = os.path.join(TMP, "cue-fifo.wav")
    os.mkfifo(fifo)
    q.write_config('[cues.hang]\nfile = "%s"\n' % fifo)
    t = time.monotonic()
    r1 = c.request("reload")
    dt1 = time.monotonic() - t
    q.write_config("")
    ok = r1.startswith("err reload-failed %s: is a FIFO, not a regular file" % fifo) and c.request("reload") == "ok reloaded"
    # The race the trial used (stat, then open by name): pop.wav and a FIFO swap
    # places atomically (renameat2 RENAME_EXCHANGE) as fast as a process can, while
    # reloads run back to back.
    swap = os.path.join(d, ".swap")
    os.mkfifo(swap)
    pop = os.path.join(d, "pop.wav")
    sw = spawn([sys.executable, "-c", SWAPPER, pop, swap, "6"], stdout=subprocess.PIPE, text=True)
    time.sleep(0.2)
    outcomes, worst, n, end = {}, 0.0, 0, time.monotonic() + 5
    while time.monotonic() < end:
        t = time.monotonic()
        r = c.request("reload")
        worst = max(worst, time.monotonic() - t)
        n += 1
        key = "ok reloaded" if r == "ok reloaded" else ("FIFO refused" if "is a FIFO, not a regular file" in r else r[:80])
        outcomes[key] = outcomes.get(key, 0) + 1
    swaps = sw.communicate()[0].strip()
    if not os.path.isfile(pop) and os.path.isfile(swap):
        os.replace(swap, pop)
    alive = q.alive()
    rc, dt = q.term()
    ok &= alive and set(outcomes) <= {"ok reloaded", "FIFO refused"} and outcomes.get("FIFO refused", 0) > 0 and rc == 0
    row("a FIFO as a cue", "the config names a FIFO as a cue, then `reload`; then pop.wav and a FIFO swap places "
        "(renameat2 RENAME_EXCHANGE, in a loop) while reloads run back to back for 5 s; then SIGTERM",
        "config FIFO: `%s` in %.1f ms; swapping (%s swaps): %d reloads, %s, slowest reply %.1f ms; "
        "no hang; SIGTERM → exit %s in %.0f ms" % (r1.replace(TMP + "/", "")[:70], dt1 * 1000, swaps, n,
                                                   ", ".join("%d %s" % (v, k) for k, v in sorted(outcomes.items())),
                                                   worst * 1000, rc, dt * 1000), ok)


def stderr_flood(sounds):
    rfd, wfd = os.pipe()  # read end held open and never read
    q = Cued("stderr-flood", sounds, ["--rate-limit", "0"], level="info", stderr=wfd)
    os.close(wfd)
    # Fill the pipe first: from here on every write to cued's original stderr would block.
    w = os.open("/proc/%d/fd/%d" % (os.getpid(), rfd), os.O_WRONLY | os.O_NONBLOCK)
    filled = 0
    try:
        while True:
            filled += os.write(w, b"." * 4096)
    except BlockingIOError:
        pass
    os.close(w)
    n, files = 60, []
    for i in range(n):
        files.append(os.path.join(TMP, "damaged%d.mp3" % i))
        damaged_mp3(files[-1], i)
    # Four connections pipeline 15 each, so both job threads decode at once.
    conns, other = [q.client(20) for _ in range(4)], q.client(10)
    t = time.monotonic()
    for k, c in enumerate(conns):
        for path in files[k::4]:
            c.send("play-file " + path)
    t_ping = time.monotonic()
    try:
        ping_ok = other.request("ping") == "ok pong"
    except OSError:
        ping_ok = False
    ping_s = time.monotonic() - t_ping
    answered = 0
    for k, c in enumerate(conns):
        try:
            for _ in files[k::4]:
                r = c.reply()
                answered += r == "ok" or is_err(r, ERR_BAD_FILE)
        except OSError:
            pass
    all_s = time.monotonic() - t
    figs = []
    try:
        play_ok = other.request("play probe") == "ok"
        t = time.monotonic()
        reload_ok = other.request("reload") == "ok reloaded"
        reload_s = time.monotonic() - t
        mute_ok = other.request("mute") == "ok muted"
    except OSError:
        play_ok = reload_ok = mute_ok = False
        reload_s = float("nan")
    state = os.path.join(q.state, "cued", "state")
    saved = False
    end = time.monotonic() + 2
    while time.monotonic() < end and not saved:
        saved = os.path.exists(state) and "muted=true" in open(state).read()
        time.sleep(0.02)
    alive = q.alive()
    figs.append("%d of %d damaged-MP3 `play-file`s answered (%.1f s for the lot); another client's ping meanwhile %s "
                "in %.1f ms; then `play probe` %s, `reload` %s in %.0f ms, `mute` on disk: %s; serving: %s"
                % (answered, n, all_s, "answered" if ping_ok else "unanswered", ping_s * 1000,
                   "ok" if play_ok else "unanswered", "ok" if reload_ok else "unanswered", reload_s * 1000, saved,
                   alive))
    q.term()
    os.close(rfd)
    row("a C library writes to an unread stderr",
        "stderr a pipe nobody reads, filled (%d KiB) before the first request; %d distinct damaged MP3s (valid frame "
        "headers, random bodies: mpg123 prints a few hundred lines, tens of KB, to fd 2 per decode), `play-file` "
        "pipelined on 4 connections; then another client's requests" % (filled // 1024, n),
        "; ".join(figs), answered == n and ping_ok and play_ok and reload_ok and mute_ok and saved and alive)


# Issue 19, problem 4: a warning per directory, not per file.
def skip_warnings(sounds):
    d = os.path.join(TMP, "sounds-broken")
    shutil.copytree(sounds, d)
    n = 5000
    for i in range(n):
        with open(os.path.join(d, "broken%d.wav" % i), "w") as f:
            f.write("not a sound")
    q = Cued("skip-warnings", d, level="warning")
    t = time.monotonic()
    reloaded = q.request("reload") == "ok reloaded"
    reload_s = time.monotonic() - t
    time.sleep(0.3)
    lines = [x for x in q.stderr().splitlines() if "skipped" in x]
    alive = q.alive()
    q.term()
    shutil.rmtree(d)
    row("a sounds directory of broken files", "%d files named `.wav` that are not sounds beside the cues; start, "
        "then `reload`" % n,
        "%d warning lines naming skipped files (%d KB) for the start and the reload; `reload` answered in %.0f ms; "
        "serving: %s" % (len(lines), sum(len(x) + 1 for x in lines) // 1000, reload_s * 1000, alive),
        len(lines) == 2 and reloaded and alive)


# 19.8 The small items of problem 8.
def del_byte(sounds):
    d = small_sounds(sounds, "del")
    names = ["del\x7fx", "c1\x85", "ls\u2028", 'q"b\\x']  # bytes ≤ 0x20 in a file name: skipped by the loader
    for n in names:
        shutil.copy(os.path.join(d, "probe.wav"), os.path.join(d, n + ".wav"))
    q = Cued("del", d)
    try:
        r = q.request("status")
        try:
            js = json.loads(r[3:])
            parsed, found = True, sorted(set(names) & set(js.get("cues", {})))
        except ValueError as e:
            parsed, found = "no: %s" % e, []
        played = q.request("play del\x7fx")
        row("a cue file named with a DEL byte", "cue files named `del` DEL `x`, `c1` U+0085, `ls` U+2028 and "
            "`q\"b\\x` beside the cues (a name with a byte ≤ 0x20 is skipped by the loader); `status`",
            "`status` parses as JSON: %s; those cues in it: %d of %d; `play` of the DEL one → `%s`"
            % (parsed, len(found), len(names), played.replace("\x7f", "\\x7F")),
            parsed is True and len(found) == len(names) and q.alive())
        q.term()
    finally:
        kill_all(q)


# 1. Files nested 40,000 levels deep: a config (header, dotted key) on reload, SIGHUP, at
# start and in `cuectl config check`; a feedbackd theme of 100,000 '[' at start, bus or no bus.
def deep_files(sounds):
    figs, ok = [], True
    deep = {"a [table.header] 40,000 levels deep": "[" + ".".join(["a"] * 40000) + "]\n",
            "a dotted key 40,000 levels deep": ".".join(["a"] * 40000) + " = 1\n"}
    q = Cued("deep", sounds)
    for what, text in deep.items():
        q.write_config(text)
        r = q.request("reload")
        os.kill(q.pid, signal.SIGHUP)
        time.sleep(0.3)
        alive = q.alive()
        check = subprocess.run([CUECTL, "config", "check", q.config], capture_output=True, text=True, timeout=30)
        start = subprocess.run([CUED, "--socket", os.path.join(TMP, "run", "deep2.sock"), "--sink", "null", "--sounds", sounds,
                                "--config", q.config], capture_output=True, text=True, timeout=30)
        good = (is_err(r, ERR_RELOAD_FAILED) and "nested deeper than 32" in r and alive and check.returncode == 78
                and start.returncode == 78 and "nested deeper than 32" in start.stderr)
        ok &= good
        figs.append("%s (%d KB): reload → `%s…`, SIGHUP → alive: %s, cuectl config check → exit %d, start → exit %d"
                    % (what, len(text) // 1000, r[:70].replace(q.config, "cued.toml"), alive, check.returncode, start.returncode))
    q.term()
    theme_home = os.path.join(TMP, "deep-theme")
    os.makedirs(os.path.join(theme_home, "feedbackd", "themes"), exist_ok=True)
    with open(os.path.join(theme_home, "feedbackd", "themes", "default.json"), "w") as f:
        f.write("[" * 100000)
    bus, addr = private_bus()
    for label, env in (("no bus", {}), ("a bus", {"DBUS_SESSION_BUS_ADDRESS": addr})):
        t = Cued("deeptheme", sounds, env=dict(env, XDG_CONFIG_HOME=theme_home), level="info")
        time.sleep(0.2)
        said = "nested deeper than 64" in t.stderr()
        alive = t.alive()
        ok &= said and alive
        figs.append("a feedbackd theme of 100,000 `[` (100 KB), %s: started, answering: %s, the theme refused with a warning: %s"
                    % (label, alive, said))
        t.term()
    kill_all(bus)
    row("deeply nested files", "the files written, then reload, SIGHUP, a start, `cuectl config check`",
        "; ".join(figs) + " (was: SIGSEGV each time)", ok)


SECTIONS = (crafted_files, fifos, stderr_flood, skip_warnings, del_byte, deep_files)
