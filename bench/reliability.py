#!/usr/bin/python3
"""make reliability: every reliability scenario against the real daemon (release
build), with its figures, written to RELIABILITY.md. `make fuzz` runs first and
leaves its logs in .build/fuzz/. The same scenarios, shorter, are in `make test`
(Tests/IntegrationTests: HostileTests, LimitsTests, DeviceFaultTests, FuzzTests).
"""
import asyncio
import json
import os
import re
import socket
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (fixtures, process helpers)
from bench import Client, pct, start_cued, spawn, TMP, CUED, ROOT, log  # noqa: E402

ROWS = []


def row(scenario, how, figure, ok):
    ROWS.append((scenario, how, figure, ok))
    log("%s: %s — %s" % ("ok  " if ok else "FAIL", scenario, figure))


def anon_kib(pid):
    for line in open("/proc/%d/smaps_rollup" % pid):
        if line.startswith("Anonymous:"):
            return int(line.split()[1])


def fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def status(sock):
    return json.loads(Client(sock).request("status")[3:])


def fuzz_rows():
    logs = os.path.join(ROOT, ".build", "fuzz")
    try:
        lf = open(os.path.join(logs, "protocol.log")).read()
        runs = re.search(r"Done (\d+) runs", lf)
        crashed = "ERROR: libFuzzer" in lf or "deadly signal" in lf
        row("protocol parser, libFuzzer (+ASan)", "`make fuzz`: swiftc -sanitize=fuzzer,address",
            "%s inputs, %s" % (runs.group(1) if runs else "?", "a crash" if crashed else "no crash"), bool(runs) and not crashed)
    except OSError:
        row("protocol parser, libFuzzer", "`make fuzz`", "not run", False)
    for target in ("protocol", "config"):
        try:
            text = open(os.path.join(logs, "cuedfuzz-%s.log" % target)).read()
            m = re.search(r"(\d+) inputs, (\d+) accepted, (\d+) rejected, every property held", text)
            aborts = re.search(r"(\d+) inputs made the TOML library abort", text)
            fig = "%s inputs (%s accepted, %s rejected), every property held" % m.groups() if m else "failed"
            if aborts:
                fig += "; %s made toml++ abort — contained by ConfigGuard, cued refuses such files" % aborts.group(1)
            row("%s parser, seeded mutational driver" % target, "`make fuzz`: cuedfuzz %s -n 10000000" % target, fig, bool(m))
        except OSError:
            row("%s parser, cuedfuzz" % target, "`make fuzz`", "not run", False)


def hostile(sounds):
    p, sock = start_cued("hostile", "null", sounds)
    # Garbage: random bytes, NULs, invalid UTF-8; one reply per line.
    c = Client(sock)
    rnd = os.urandom(400_000)
    lines = [bytes(b for b in rnd[i:i + 80] if b != 10) for i in range(0, len(rnd), 80)]
    c.s.sendall(b"\n".join(lines) + b"\n")
    replies = [c.reply() for _ in lines]
    good = all(r.startswith(("ok", "err ")) for r in replies) and c.request("ping") == "ok pong"
    row("binary garbage, NUL bytes, invalid UTF-8", "%d random lines on one connection" % len(lines),
        "%d lines → %d replies, then `ok pong`" % (len(lines), len(replies)), good and len(replies) == len(lines))

    # 1 MB without a newline.
    before = anon_kib(p.pid)
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock)
    sent = 0
    try:
        for _ in range(16):
            s.sendall(b"a" * 65536)
            sent += 65536
    except OSError:
        pass
    s.settimeout(5)
    data = b""
    try:
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    grew = anon_kib(p.pid) - before
    row("a 1 MB line without LF", "one client writes 16 × 64 KiB of 'a'",
        "reply `%s…`, then closed; daemon memory +%d KiB" % (data.decode()[:20], grew),
        data.startswith(b"err line-too-long") and grew < 2048)

    # A slow writer: 1 byte a second; others keep getting answers.
    slow = socket.socket(socket.AF_UNIX)
    slow.connect(sock)
    other = Client(sock)
    lat = []
    for b in b"ping":
        slow.sendall(bytes([b]))
        for _ in range(50):
            t = time.monotonic_ns()
            other.request("ping")
            lat.append((time.monotonic_ns() - t) / 1000)
            time.sleep(0.02)
    slow.sendall(b"\n")
    slow_ok = slow.recv(100) == b"ok pong\n"
    row("a writer sending 1 byte a second", "4 s to send `ping`; another client pings every 20 ms meanwhile",
        "others' ping p99 %.0f µs (max %.0f µs); the slow line answered when complete" % (pct(lat, .99), max(lat)), slow_ok)

    # 10,000 connects and disconnects.
    f0 = fds(p.pid)
    t = time.monotonic()
    for _ in range(10_000):
        x = socket.socket(socket.AF_UNIX)
        x.connect(sock)
        x.close()
    dt = time.monotonic() - t
    time.sleep(0.5)
    f1 = fds(p.pid)
    row("10,000 connects and disconnects", "connect + close, back to back",
        "%.1f s; descriptors %d before, %d after; clients %d" % (dt, f0, f1, status(sock)["clients"] - 1), f1 <= f0 + 1)

    # Clients that vanish before reading their replies (connection reset).
    for _ in range(500):
        x = socket.socket(socket.AF_UNIX)
        x.connect(sock)
        x.sendall(b"status\n" * 200)
        x.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        x.close()
    alive = p.poll() is None and Client(sock).request("ping") == "ok pong"
    row("clients that vanish before their replies", "500 clients send 200 `status` each and reset",
        "daemon alive (no SIGPIPE), answers `ok pong`", alive)

    # A cue name is never a path.
    c = Client(sock)
    bad = ["play ../../etc/passwd", "play /etc/passwd", "app ../x", "session /tmp", "mute app a/b"]
    refused = [c.request(line) for line in bad]
    row("names that try to be paths", "`play ../../etc/passwd` and 4 more",
        "all `err bad-argument`", all(r.startswith("err bad-argument") for r in refused))
    p.terminate()
    p.wait()


def load(sounds):
    p, sock = start_cued("load", "null", sounds, ["--max-clients", "1100"])
    clients, per = 1000, 1000

    # The pinger is its own process: inside the flooding client's event loop it
    # would time Python's backlog, not cued.
    pings_file = os.path.join(TMP, "pings.txt")
    pinger = spawn([sys.executable, "-c", """
import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); f = s.makefile("rb")
out = open(sys.argv[2], "w")
end = time.monotonic() + 120
while time.monotonic() < end:
    t = time.monotonic_ns(); s.sendall(b"ping\\n"); f.readline()
    out.write("%d\\n" % ((time.monotonic_ns() - t) // 1000)); out.flush()
    time.sleep(0.005)
""", sock, pings_file])
    time.sleep(0.5)

    async def run():
        bad = 0

        async def one():
            nonlocal bad
            r, w = await asyncio.open_unix_connection(sock)
            w.write(b"".join(b"threshold %d\n" % k for k in range(1, per + 1)))
            for k in range(1, per + 1):
                line = await r.readline()
                if line != b"ok %d\n" % k:
                    bad += 1
            w.close()

        t = time.monotonic()
        await asyncio.gather(*[one() for _ in range(clients)])
        return bad, time.monotonic() - t

    start_line = sum(1 for _ in open(pings_file))
    bad, dt = asyncio.run(run())
    pinger.kill()
    pinger.wait()
    pings = [int(x) for x in open(pings_file).read().split()[start_line:]]
    row("1,000 concurrent clients × 1,000 requests", "each pipelines `threshold 1…1000` (replies echo K), checked in order",
        "%d requests in %.1f s, %d missing or out of order; `ping` from another process during the flood: "
        "p50 %.1f ms, p99 %.1f ms (%d pings)" % (clients * per, dt, bad, pct(pings, .5) / 1000, pct(pings, .99) / 1000,
                                                len(pings)), bad == 0)
    p.terminate()
    p.wait()

    # Rate limit and connection cap, at their defaults.
    p, sock = start_cued("limits", "null", sounds)
    c = Client(sock)
    t0 = time.monotonic()
    c.s.sendall(b"play probe\n" * 5000)
    rs = [c.reply() for _ in range(5000)]
    elapsed = time.monotonic() - t0
    ok, limited = rs.count("ok"), sum(r.startswith("err rate-limited") for r in rs)
    other = Client(sock)
    row("one client floods `play`", "5,000 plays at once on one connection, default `--rate-limit 200`",
        "%d played (the 200-cue burst + refill over %.0f ms), %d `err rate-limited`; another client's `play` → `%s`"
        % (ok, elapsed * 1000, limited, other.request("play probe")),
        ok <= 200 + 200 * elapsed + 1 and ok + limited == 5000)
    held, busy = [], 0
    for _ in range(300):
        x = Client(sock)
        x.s.settimeout(2)
        try:
            x.send("ping")
        except OSError:
            pass  # already refused and closed; its `err busy` is still there to read
        r = x.reply()
        if r.startswith("err busy"):
            busy += 1
        else:
            held.append(x)
    row("300 connections at once", "default `--max-clients 256`",
        "%d served, %d got `err busy` and were closed" % (len(held), busy), busy > 0 and len(held) <= 256)
    p.terminate()
    p.wait()


def faults(sounds):
    spec = "fault:open-fail=2,write-40=EPIPE,write-80=ESTRPIPE,write-120=EIO,write-200=ENODEV,down-ms=1000"
    p, sock = start_cued("faults", spec, sounds)
    c = Client(sock)

    def wait_for(cond, limit=10.0):
        end = time.monotonic() + limit
        while time.monotonic() < end:
            st = status(sock)
            if cond(st):
                return st
            time.sleep(0.01)
        return None

    c.request("play long")  # 10 s of audio: meets the faults in turn
    opened = wait_for(lambda st: st["played"] >= 1) is not None        # after two failed opens
    eio = wait_for(lambda st: "EIO" in (st["sink"]["error"] or ""))   # write 120: the device breaks
    xruns = eio["xruns"] if eio else -1                                  # writes 40 and 80 before it
    c.request("play long")                                               # reopens; write 200 unplugs it
    unplug = wait_for(lambda st: "write failed: No such device" in (st["sink"]["error"] or ""))
    failed_at = time.monotonic()
    answering = Client(sock).request("ping") == "ok pong"
    before = status(sock)
    c.request("play probe")                                              # during the outage
    time.sleep(0.4)
    during = status(sock)
    dropped = during["dropped"] - before["dropped"]
    late_play = during["played"] - before["played"]
    back = None
    while time.monotonic() < failed_at + 5:
        n = status(sock)["played"]
        c.request("play probe")
        time.sleep(0.02)
        if status(sock)["played"] > n and time.monotonic() > failed_at + 1.0:
            back = time.monotonic() - (failed_at + 1.0)
            break
        time.sleep(0.03)
    row("device faults", "`--sink %s`" % spec,
        "2 failed opens retried, cue played: %s; xrun + suspend recovered: %d; EIO and ENODEV reported in `status` and "
        "survived; answering throughout: %s; the cue sent during the outage dropped (%d) and never played late (%d); "
        "playing again %.0f ms after the device returned" % (opened, xruns, answering, dropped, late_play, (back or -1) * 1000),
        opened and xruns == 2 and unplug is not None and answering and dropped == 1 and late_play == 0
        and back is not None and back < 1.0)
    p.terminate()
    p.wait()


def crashes(sounds):
    state = os.path.join(TMP, "crash-state")
    env = dict(os.environ, XDG_STATE_HOME=state, XDG_CONFIG_HOME=os.path.join(TMP, "noconfig"))
    sock = os.path.join(TMP, "crash.sock")
    args = [CUED, "--socket", sock, "--sink", "null", "--sounds", sounds, "--log-level", "error"]
    p = spawn(args, env=env, stderr=subprocess.DEVNULL)
    while not os.path.exists(sock):
        time.sleep(0.01)
    time.sleep(0.1)
    c = Client(sock)
    c.request("mute app feeds")
    c.request("mute")
    c.request("play long")
    p.kill()
    p.wait()
    t = time.monotonic()
    q = spawn(args, env=env, stderr=subprocess.DEVNULL)
    while True:
        try:
            if Client(sock).request("ping") == "ok pong":
                break
        except OSError:
            time.sleep(0.002)
    dt = time.monotonic() - t
    c = Client(sock)
    kept = c.request("play probe") == "ok muted" and status(sock)["apps"].get("feeds", {}).get("muted")
    second = subprocess.run(args, env=env, capture_output=True, text=True, timeout=10)
    row("kill -9 during playback, then restart", "SIGKILL while a cue plays; start again on the same socket",
        "stale socket reclaimed, answering %.0f ms after exec; mute and app mute intact: %s" % (dt * 1000, bool(kept)), bool(kept))
    row("a second instance", "start cued again while one runs",
        "refused (exit %d): %s" % (second.returncode, second.stderr.strip()[:80]), second.returncode != 0)
    q.terminate()
    q.wait()
    # Saving state fails (the state directory's place is taken by a file): reported, not fatal.
    bad = os.path.join(TMP, "bad-state")
    os.makedirs(bad)
    open(os.path.join(bad, "cued"), "w").close()
    r, sock2 = start_cued("nosave", "null", sounds, env=dict(os.environ, XDG_STATE_HOME=bad))
    reply = Client(sock2).request("mute")
    alive = Client(sock2).request("ping") == "ok pong"
    row("state cannot be saved (disk full, read-only…)", "the state directory's place is taken by a file",
        "`mute` → `%s`, error logged, daemon answering: %s" % (reply, alive), reply == "ok muted" and alive)
    r.terminate()
    r.wait()
    # A real full disk: the state directory on a 4 KiB tmpfs, filled (needs root).
    full = os.path.join(TMP, "full")
    os.makedirs(full)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", full], capture_output=True).returncode == 0:
        try:
            os.makedirs(os.path.join(full, "cued"))
            subprocess.run(["dd", "if=/dev/zero", "of=" + os.path.join(full, "cued", "filler"), "bs=1k", "count=64"],
                           capture_output=True)
            logf = os.path.join(TMP, "full.log")
            e = dict(os.environ, XDG_STATE_HOME=full, XDG_CONFIG_HOME=os.path.join(TMP, "noconfig"))
            fsock = os.path.join(TMP, "full.sock")
            q = spawn([CUED, "--socket", fsock, "--sink", "null", "--sounds", sounds], env=e, stderr=open(logf, "w"))
            while not os.path.exists(fsock):
                time.sleep(0.01)
            time.sleep(0.05)
            reply = Client(fsock).request("mute")
            alive = Client(fsock).request("ping") == "ok pong"
            q.terminate()
            q.wait()
            logged = "No space left on device" in open(logf).read()
            row("a full disk when saving state", "state directory on a 4 KiB tmpfs filled to the last byte",
                "`mute` → `%s`; logged ENOSPC: %s; answering: %s" % (reply, logged, alive), reply == "ok muted" and logged and alive)
        finally:
            subprocess.run(["umount", "-l", full], capture_output=True)


def security(sounds):
    p, sock = start_cued("sec", "null", sounds)
    d = os.path.dirname(sock)
    mode_sock = oct(os.stat(sock).st_mode & 0o777)
    blocked = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "socat", "-",
                              "UNIX-CONNECT:" + sock], input="ping\n", capture_output=True, text=True)
    os.chmod(TMP, 0o755)  # the harness's own temp directory, on the way to the socket
    os.chmod(d, 0o777)
    os.chmod(sock, 0o777)
    # Read-only client (-u): cued answers and closes at once, so a client that writes first
    # may see its write fail before it reads the reply.
    refused = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "socat", "-u",
                              "UNIX-CONNECT:" + sock, "-"], capture_output=True, text=True)
    row("another user connects", "socat as `nobody` (setpriv); then with the socket's permissions opened to all",
        "socket %s: connect refused; opened up: `%s` (SO_PEERCRED) and closed" % (mode_sock, refused.stdout.strip()[:40]),
        blocked.stdout == "" and refused.stdout.startswith("err forbidden"))
    p.terminate()
    p.wait()


def main():
    os.chdir(ROOT)
    sounds, _, _ = bench.make_fixtures()
    fuzz_rows()
    hostile(sounds)
    load(sounds)
    faults(sounds)
    crashes(sounds)
    security(sounds)
    md = ["# cued reliability", "",
          "Generated by `make reliability` (bench/reliability.py, after `make fuzz`) against the real daemon,",
          "release build, on: %s, %s." % (bench.machine(), time.strftime("%Y-%m-%d")), "",
          "The same scenarios run shorter in `make test` (HostileTests, LimitsTests, DeviceFaultTests, FuzzTests,",
          "SystemdTests).", "",
          "| scenario | how it is run | figure | held |", "|---|---|---|---|"]
    for s, how, fig, ok in ROWS:
        md.append("| %s | %s | %s | %s |" % (s, how, fig, "yes" if ok else "**no**"))
    notes = os.path.join(ROOT, "bench", "RELIABILITY-NOTES.md")
    if os.path.exists(notes):
        md += ["", open(notes).read().rstrip()]
    text = "\n".join(md) + "\n"
    open(os.path.join(ROOT, "RELIABILITY.md"), "w").write(text)
    print(text)
    return 0 if all(r[3] for r in ROWS) else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    finally:
        bench.cleanup()
