"""Reliability, input: what a client can send. The fuzzers' results (read from `make fuzz`'s
logs), binary garbage, a line without end, names that try to be paths, replies in request order
with deferred ones mixed in, and small malformed requests. Figures; the verdict is the property
the row names."""
import json
import os
import re
import signal
import socket
import struct
import threading
import time
from benchlib import Client, pct
from harness import ROOT, TMP, start_cued
from attacklib import Cued, Pinger, kill_all, lat_summary, load_note, pipeline, row
from attack_fixtures import anon_kib, fds, proc_cpu_s, read_all, small_wav, write_noise_wav
from benchlib import cued_status as status
from cuedwire import is_err, ERR_BAD_ARGUMENT, ERR_BAD_FILE, ERR_LINE_TOO_LONG, ERR_UNKNOWN_CUE, FILE_NOT_FOUND, FILE_UNREADABLE

CONCERN = "input"


def fuzz_rows():
    logs = os.path.join(ROOT, ".build", "fuzz")
    for target, what, max_len in (("protocol", "protocol parser", 1024), ("toml", "TOML parser (cued's own)", 4096),
                                  ("json", "JSON parser (feedbackd themes, status)", 4096)):
        try:
            lf = open(os.path.join(logs, target + ".log")).read()
        except OSError:
            row("%s, libFuzzer (+ASan)" % what, "`make fuzz`", "not run", False)
            continue
        runs = re.search(r"Done (\d+) runs in (\d+) second", lf)
        crashed = any(m in lf for m in ("ERROR: libFuzzer", "deadly signal", "ERROR: AddressSanitizer", "ERROR: LeakSanitizer"))
        row("%s, libFuzzer (+ASan)" % what, "`make fuzz`: swiftc -sanitize=fuzzer,address; -max_len=%d" % max_len,
            "%s inputs in %s s, %s" % (runs.group(1) if runs else "?", runs.group(2) if runs else "?",
                                       "a crash" if crashed else "no crash"), bool(runs) and not crashed)
    for target, what in (("protocol", "protocol parser, seeded mutational driver"),
                         ("config", "config loader (cued's TOML parser + keys), seeded mutational driver"),
                         ("json", "JSON parser, seeded mutational driver (round trip)"),
                         ("toml", "TOML parser vs Python's tomllib (differential)")):
        try:
            text = open(os.path.join(logs, "cuedfuzz-%s.log" % target)).read()
        except OSError:
            row(what, "`make fuzz`", "not run", False)
            continue
        m = re.search(r"(\d+) inputs, (\d+) accepted, (\d+) rejected, every property held, (\d+) s", text)
        fig = "%s inputs (%s accepted, %s rejected) in %s s, every property held" % m.groups() if m else "failed"
        if m and target == "toml":
            fig += ": cued accepts exactly what tomllib accepts, with the same value tree (but past its nesting limit of 32)"
        if m and target == "config":
            fig += " (parsed in-process: cued has its own TOML parser, no child process to contain a crash)"
        row(what, "`make fuzz`: cuedfuzz %s -n %s" % (target, m.group(1) if m else "?"), fig, bool(m))


def hostile(sounds):
    p, sock = start_cued("hostile", "null", sounds)
    # Garbage: random bytes, NULs, invalid UTF-8; one reply per line.
    c = Client(sock)
    rnd = os.urandom(400_000)
    lines = [bytes(b for b in rnd[i:i + 80] if b != 10) for i in range(0, len(rnd), 80)]
    replies = pipeline(c, b"\n".join(lines) + b"\n", len(lines))
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
        "others' ping p99 %.0f µs (max %.0f µs); the slow line answered when complete" % (pct(lat, .99), max(lat)), slow_ok, concern="clients")

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
        "%.1f s; descriptors %d before, %d after; clients %d" % (dt, f0, f1, status(sock)["clients"] - 1), f1 <= f0 + 1, concern="clients")

    # Clients that vanish before reading their replies (connection reset).
    for _ in range(500):
        x = socket.socket(socket.AF_UNIX)
        x.connect(sock)
        x.sendall(b"status\n" * 200)
        x.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        x.close()
    alive = p.poll() is None and Client(sock).request("ping") == "ok pong"
    row("clients that vanish before their replies", "500 clients send 200 `status` each and reset",
        "daemon alive (no SIGPIPE), answers `ok pong`", alive, concern="clients")

    # A cue name is never a path.
    c = Client(sock)
    bad = ["play ../../etc/passwd", "play /etc/passwd", "app ../x", "session /tmp", "mute app a/b"]
    refused = [c.request(line) for line in bad]
    row("names that try to be paths", "`play ../../etc/passwd` and 4 more",
        "all `err bad-argument`", all(is_err(r, ERR_BAD_ARGUMENT) for r in refused))
    p.terminate()
    p.wait()


# 13. Small items.
def small_items(sounds):
    q = Cued("small", sounds)
    figs, ok = [], True
    c = q.client(5)
    c.s.sendall(b"x" * 513 + b"\nping\n")
    data, end = read_all(c.s, 5)
    lines = data.decode(errors="replace").splitlines()
    good = len(lines) == 1 and is_err(lines[0], ERR_LINE_TOO_LONG) and end == "eof"
    ok &= good
    figs.append("513-byte line → `%s…`, then %s (the following `ping` unanswered)" % (lines[0][:40] if lines else "", end))
    c = q.client(5)
    r = c.request("p\0\x1b[2J\x07")
    good = not any(ord(ch) < 0x20 for ch in r) and "\\x00\\x1b[2J\\x07" in r
    ok &= good
    figs.append("`p NUL ESC[2J BEL` → `%s…`" % r[:40])
    r = c.request("drag 0x10")
    ok &= is_err(r, ERR_BAD_ARGUMENT)
    figs.append("`drag 0x10` → `%s`" % r[:60])
    long = os.path.join(TMP, "ten-point-oh-one.wav")
    write_noise_wav(long, 10.01, 48000, 1)
    r = c.request("play-file " + long)
    ok &= r == "err %s %s %s: is 10.01 s long; at most 10 s" % (ERR_BAD_FILE, FILE_UNREADABLE, long)
    figs.append("a 10.01 s file → `%s`" % r.replace(TMP + "/", ""))
    row("small malformed requests", "one request each", "; ".join(figs), ok and q.alive())
    q.term()


# 19.1 Replies in request order, deferred ones mixed in.
def ordering(sounds):
    q = Cued("order", sounds, ["--rate-limit", "0"])
    pinger = None
    try:
        files = [small_wav(os.path.join(TMP, "order%d.wav" % i), 100 + i) for i in range(16)]
        missing = os.path.join(TMP, "order-missing.wav")
        lines, checks = [], []
        last_id = [0]

        def rising_id(r):
            m = re.fullmatch(r"ok (\d+)", r)
            if not m or int(m.group(1)) <= last_id[0]:
                return False
            last_id[0] = int(m.group(1))
            return True

        def is_status(r):
            try:
                return r.startswith("ok {") and isinstance(json.loads(r[3:]), dict)
            except ValueError:
                return False

        cycles = 200
        for i in range(cycles):
            k, f, m = i + 1, files[i % len(files)], "m%d" % (i % 8)
            for line, check in (
                    ("ping", lambda r: r == "ok pong"),
                    ("threshold %d" % k, lambda r, k=k: r == "ok %d" % k),
                    ("play-file " + f, lambda r: r == "ok"),
                    ("session", lambda r, k=k: r.startswith("ok - ") and r.endswith(" %d" % k)),
                    ("play probe wait" if i % 2 == 0 else "play-file %s wait" % f, lambda r: r == "ok"),
                    ("status", is_status),
                    ("play-file " + missing, lambda r: is_err(r, ERR_BAD_FILE, FILE_NOT_FOUND) and missing in r),
                    ("play pop id", rising_id),
                    ("stop", lambda r: re.fullmatch(r"ok \d+", r) is not None),
                    ("app ord%d" % i, lambda r, i=i: r == "ok ord%d" % i),
                    ("cues", lambda r: r.startswith("ok ") and "probe" in r.split()),
                    ("play nosuch%d" % i, lambda r: is_err(r, ERR_UNKNOWN_CUE)),
                    ("mute app " + m, lambda r, m=m: r == "ok muted " + m),
                    ("unmute app " + m, lambda r, m=m: r == "ok unmuted " + m),
                    ("play bell", lambda r: r in ("ok", "ok disabled"))):
                lines.append(line)
                checks.append(check)
        pinger = Pinger(q.sock)
        c = q.client(30)
        payload = "".join(x + "\n" for x in lines).encode()
        w = threading.Thread(target=c.s.sendall, args=(payload,), daemon=True)
        t0 = time.monotonic()
        w.start()
        replies = []
        try:
            for _ in lines:
                r = c.reply()
                if not r:
                    break
                replies.append(r)
        except OSError:
            pass
        t1 = time.monotonic()
        pinger.stop()
        during = pinger.window(t0, t1)
        bad = [(lines[i], r) for i, r in enumerate(replies) if not checks[i](r)]
        alive = q.alive()
        row("replies in request order, deferred ones mixed in",
            "`--rate-limit 0`; one connection pipelines %s lines, %d cycles of 15 kinds: ping, `threshold K`, `session` "
            "(echoes K), `play-file` of 16 small WAVs (decoded off the loop on first use) with and without `wait`, "
            "`play probe wait`, `play-file` of a missing file, `play pop id` (ids must rise), `stop`, `app`, `cues`, an "
            "unknown cue (a theme miss, off the loop), `mute app`/`unmute app`, `play bell` (a theme sound), `status` "
            "(parsed as JSON); each reply checked against its request; another process pings every 5 ms"
            % ("{:,}".format(len(lines)), cycles),
            "%d of %d replies in %.1f s, %d not matching their request%s; another client's ping meanwhile %s; %s"
            % (len(replies), len(lines), t1 - t0, len(bad),
               " (first: `%s` → `%s`)" % (bad[0][0].replace(TMP + "/", ""), bad[0][1][:60].replace(TMP + "/", ""))
               if bad else "", lat_summary(during), load_note()),
            len(replies) == len(lines) and not bad and len(during) > 0 and alive)
        q.term()
    finally:
        kill_all(pinger and pinger.p, q)


# 8. Smaller: a SIGHUP storm; `stop id` past 2^53.
def hup_loop_and_ids(sounds):
    figs, ok = [], True
    q = Cued("hupstorm", sounds, level="info")
    t0 = proc_cpu_s(q.pid)
    end = time.monotonic() + 10
    n = 0
    while time.monotonic() < end:
        os.kill(q.pid, signal.SIGHUP)
        n += 1
        time.sleep(0.0002)
    time.sleep(0.5)
    cpu = proc_cpu_s(q.pid) - t0
    log_text = q.stderr()
    reloads = log_text.count(": reloaded")
    good = reloads <= 60 and q.alive()
    ok &= good
    figs.append("SIGHUP ×%d in 10 s → %d reloads, %d KB of log, %.2f s of CPU (was: 6,258 reloads, 488 KB, about a core)"
                % (n, reloads, len(log_text) // 1024, cpu))
    r = q.request("stop id 9007199254740993")
    ok &= r == "ok 0"
    figs.append("`stop id 9007199254740993` (2^53 + 1) → `%s` (was: not a number from 1)" % r)
    row("a SIGHUP storm and an id past 2^53", "kill -HUP in a loop for 10 s; one request", "; ".join(figs), ok)
    q.term()


SECTIONS = (fuzz_rows, hostile, ordering, small_items, hup_loop_and_ids)
