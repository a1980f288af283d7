"""Reliability, clients: misbehaving clients and floods, against the release daemon, a row each
(`RELIABILITY_ONLY=clients` runs them all, or one section by name):

- clients that never read (clients_memory): cued's RSS with 250 and 1,000 of them, `events on`
  or not, and after they leave;
- floods: one client's 5,000 `play`s and 300 connections at once (load); 1,000 clients × 1,000
  pipelined requests, 100 clients flooding `status` or `stop` (fairness_a, _b, _c); 1,000 clients
  at the default cap and 250 pipelining `play` + `status wait` (clients_fairness); 20,000 `mute
  app` (app_mutes); 400 apps (many_apps); voices shared between apps (voice_share);
- lock-out (clients_lockout): 256 connections that are never idle, and another process's
  `cuectl play` meanwhile; the connection cap at a low `nofile` against what cued(1) says
  (nofile_caps); `status` with more apps than it lists (many_apps). More lock-out in
  attack_lockout.py.

Timings are figures; a row's verdict is the issue's target. The load average is given beside
each latency figure: other work on the machine's 2 cores shows there.
"""
import json
import os
import re
import socket
import subprocess
import sys
import time

from attack_fixtures import small_sounds, write_noise_wav
from attacklib import Cued, declare_apps, flood_row, kill_all, pipeline, row
from benchlib import Client, cued_status, mib, rss_kib
from harness import CUECTL, ROOT, TMP, spawn, start_cued
from cuedwire import is_err, ERR_BUSY, ERR_RATE_LIMITED, ERR_TOO_MANY

CONCERN = "clients"


def status(q):
    """cued's `status`, parsed; {"refused": line} when cued does not answer it (e.g. `err busy`)."""
    r = q.request("status")
    return json.loads(r[3:]) if r.startswith("ok {") else {"refused": r}


# Connections that send and never read: each writes `payload` (after `events on` if asked) as far
# as the socket takes it, then holds still. Prints one JSON line once all are connected and
# written; closes them all when stdin closes.
NONREADERS = r"""
import json, socket, sys, time, select
sock, n, events, payload = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4].encode().decode("unicode_escape").encode()
conns, sent = [], 0
chunk = payload * max(1, 65536 // len(payload))
for _ in range(n):
    s = socket.socket(socket.AF_UNIX); s.connect(sock)
    s.setblocking(False)
    conns.append(s)
    if events:
        s.send(b"events on\n")
    # Written as far as cued reads it (it stops reading a connection that takes no replies).
    end = time.monotonic() + 2.0
    while time.monotonic() < end:
        try:
            sent += s.send(chunk)
        except BlockingIOError:
            if not select.select([], [s], [], 0.05)[1]:
                break
        except OSError:
            break
print(json.dumps({"connected": len(conns), "sent": sent}), flush=True)
sys.stdin.read()
for s in conns:
    s.close()
"""


def settle_rss(pid, limit=15.0, quiet=1.5):
    """RSS (KiB) once it has not grown for `quiet` seconds (at most `limit`), and the largest seen."""
    end = time.monotonic() + limit
    best = last = rss_kib(pid)
    since = time.monotonic()
    while time.monotonic() < end:
        time.sleep(0.25)
        r = rss_kib(pid)
        best = max(best, r)
        if r > last + 64:
            since = time.monotonic()
        last = r
        if time.monotonic() - since >= quiet:
            break
    return last, best


def nonreaders_row(sounds, n, events, extra=()):
    label = "%s clients that never read%s%s" % ("{:,}".format(n), ", `events on`" if events else "",
                                                     " (%s)" % " ".join(extra) if extra else "")
    q = Cued("nonread-%d-%d" % (n, events), sounds, list(extra))
    p = None
    try:
        for _ in range(20):  # the allocator's working set for ordinary use, before the attack
            q.request("status")
        time.sleep(1.0)
        idle = rss_kib(q.pid)
        payload = "play probe\\n" if events else "ping\\n"
        p = spawn([sys.executable, "-c", NONREADERS, q.sock, str(n), "1" if events else "0", payload],
                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        got = json.loads(p.stdout.readline() or "{}")
        held, peak = settle_rss(q.pid)
        st = status(q)
        p.stdin.close()
        p.wait(30)
        end = time.monotonic() + 10
        while time.monotonic() < end and status(q)["clients"] > 1:
            time.sleep(0.1)
        time.sleep(2.0)
        after = rss_kib(q.pid)
        alive = q.alive()
        # Connections they hold (`status` may be refused: every slot taken).
        held_conns = st["clients"] - 1 if "clients" in st else min(n, 256)
        per = (peak - idle) / max(1, held_conns)
        bound = st.get("client_output_limit_bytes")
        # The target: growth per connection within its output bound plus 64 KiB of connection state and
        # read buffer, and RSS back within 4 MiB of idle once they leave.
        per_ok = bound is not None and per * 1024 <= bound + 64 * 1024
        back_ok = after - idle <= 4 * 1024
        row(label, "%s%d connections (one process of their own) each %swrite `%s` pipelined as far as cued "
            "reads it and never read a byte; RSS once it stops growing, then after they close; target: growth per "
            "connection within its output bound (`client_output_limit_bytes`) + 64 KiB, RSS back within 4 MiB of idle"
            % ("`%s`; " % " ".join(extra) if extra else "default limits; ", n, "send `events on`, then " if events else "",
               payload.replace("\\n", ""),),
            "%s connected, %s bytes written; RSS idle %s → %s held (peak %s; %.0f KiB a connection; output bound %s) "
            "→ %s after they left (%+.1f MiB); `status` meanwhile: %s; serving: %s"
            % (got.get("connected"), "{:,}".format(got.get("sent", 0)), mib(idle), mib(held), mib(peak), per,
               "%d KiB" % (bound // 1024) if bound else "none", mib(after), (after - idle) / 1024,
               "`%s`" % st["refused"][:70] if "refused" in st else "%d clients, %s closed for not reading"
               % (st["clients"], st.get("closed_unread", "-")), alive),
            per_ok and back_ok and alive)
        q.term()
    finally:
        kill_all(p, q)


def clients_memory(sounds):
    for n, events, extra in ((250, False, ()), (250, True, ()), (1000, True, ()), (1000, False, ("--max-clients", "1100")),
                             (1000, True, ("--max-clients", "1100"))):
        nonreaders_row(sounds, n, events, extra)


def clients_fairness(sounds):
    flood_row("fairness: 1,000 clients pipelining at the default cap", sounds, 1000, 1000, "threshold",
                       "default limits (the cap 256); 1,000 connections at once, from a process of their own, each "
                       "pipelines `threshold 1…1000` and reads the replies (those over the cap are refused `err busy`)",
                       require_all=False, rounds=3)
    flood_row("fairness: 250 clients pipelining `play` + `status wait`", sounds, 250, 40,
                       "play probe\nstatus wait",
                       "default limits; 250 connections at once, from a process of their own, each pipelines 40 pairs "
                       "`play probe` + `status wait` (what `cuectl play` sends) and reads the replies", rounds=3)


# Connections that are never idle: each sends `unit` every `period` seconds (spread over the period)
# and reads what comes back. Prints counts once stdin closes.
BUSY = r"""
import json, socket, sys, time, select
sock, n, unit, period = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode().decode("unicode_escape").encode(), float(sys.argv[4])
conns = []
for _ in range(n):
    s = socket.socket(socket.AF_UNIX); s.connect(sock); s.setblocking(False); conns.append(s)
st = {"connected": n, "closed": 0, "busy_lines": 0, "other_lines": 0, "ok": 0}
live = list(conns)
print(json.dumps({"connected": n}), flush=True)
due = time.monotonic()
while not select.select([sys.stdin], [], [], 0)[0]:
    # Every period, each connection sends its unit; meanwhile, what comes back is read.
    r, _, _ = select.select(live, [], [], max(0, due - time.monotonic()))
    for s in r:
        try:
            data = s.recv(65536)
        except OSError:
            data = b""
        if not data:
            st["closed"] += 1; live.remove(s); continue
        for line in data.split(b"\n"):
            if line.startswith(b"err busy"): st["busy_lines"] += 1
            elif line.startswith(b"ok"): st["ok"] += 1
            elif line: st["other_lines"] += 1
    if time.monotonic() >= due:
        for s in live:
            try: s.send(unit)
            except OSError: pass
        due += period
    if not live: break
print(json.dumps(st), flush=True)
"""


def lockout_row(sounds, unit, period, what):
    label = "lock-out: 256 connections that %s" % what
    q = Cued("lockout-%s" % ("byte" if unit == "x" else "ping"), sounds)
    busy = None
    try:
        busy = spawn([sys.executable, "-c", BUSY, q.sock, "256", unit, str(period)], stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE, text=True)
        busy.stdout.readline()
        time.sleep(1.5)  # past the 0.5 s a connection in use is protected from idle eviction
        results = []
        env = dict(os.environ, CUED_SOCKET=q.sock)
        for _ in range(20):
            t = time.monotonic()
            r = subprocess.run([CUECTL, "play", "probe"], env=env, capture_output=True, text=True, timeout=10)
            results.append((r.returncode, (r.stdout + r.stderr).strip(), time.monotonic() - t))
            time.sleep(0.25)
        st = status(q)
        busy.stdin.close()
        got = json.loads(busy.stdout.readline() or "{}")
        busy.wait(10)
        ok = sum(1 for rc, _, _ in results if rc == 0)
        fails = sorted(set(out[:90] for rc, out, _ in results if rc != 0))
        row(label, "default limits (the cap 256); one process opens 256 connections, each sending %s; meanwhile "
            "another process runs `cuectl play probe` 20 times, 0.25 s apart; target: every one plays" % what.replace("send ", ""),
            "%d of 20 `cuectl play` succeeded (slowest %.0f ms)%s; the 256: %s closed by cued (%s `err busy` lines); "
            "`status`: %s"
            % (ok, max(t for _, _, t in results) * 1000, "; failures: " + ", ".join("`%s`" % f for f in fails) if fails else "",
               got.get("closed", "?"), got.get("busy_lines", "?"),
               "`%s`" % st["refused"][:60] if "refused" in st else
               "%d clients, %s refused busy, %s idle evicted, %s taken from the busiest process (%s)"
               % (st["clients"], st["refused_busy"], st["evicted_idle"], st.get("evicted_share", "-"),
                  "its pid holds %s" % st["busiest_clients"] if st.get("busiest_pid") else "no per-process figures")),
            ok == 20 and q.alive())
        q.term()
    finally:
        kill_all(busy, q)


def clients_lockout(sounds):
    lockout_row(sounds, "x", 0.3, "send a byte every 0.3 s (never a whole line)")
    lockout_row(sounds, "ping\\n", 0.4, "send `ping` every 0.4 s")


def readme_caps():
    """What cued(1) says the cap is at low `nofile`: {nofile: cap}."""
    text = open(os.path.join(ROOT, "docs", "man", "cued.1.scd")).read()
    return {int(a): int(b) for a, b in re.findall(r"\*nofile\* (\d+) that is (\d+)", text)}


def nofile_caps(sounds):
    said = readme_caps()
    close_others = "import os, sys; os.closerange(3, 1 << 16); os.execv(sys.argv[1], sys.argv[1:])"
    for nofile in (24, 64):
        # A desktop session's environment, as cued(1)'s figures are: XDG_RUNTIME_DIR set (the D-Bus face watches it).
        rt = os.path.join(TMP, "rt-cap%d" % nofile)
        os.makedirs(rt, mode=0o700, exist_ok=True)
        q = Cued("cap%d" % nofile, sounds, level="warning", env={"XDG_RUNTIME_DIR": rt, "DBUS_SESSION_BUS_ADDRESS": ""},
                 launcher=[sys.executable, "-c", close_others, "/usr/bin/prlimit", "--nofile=%d:%d" % (nofile, nofile), "--"])
        try:
            st = status(q)
            cap = st.get("max_clients")
            end = time.monotonic() + 2
            while cap is None and time.monotonic() < end:  # a cued without the field: its log line
                lowered = re.search(r"connection cap lowered.*?max_clients=(\d+)", q.stderr())
                cap = int(lowered.group(1)) if lowered else None
                time.sleep(0.05)
            # As many as the cap connect and are answered; one more is told `err busy`.
            socks, answered = [], 0
            for _ in range(cap or 0):
                s = socket.socket(socket.AF_UNIX)
                s.connect(q.sock)
                socks.append(s)
            time.sleep(0.1)
            for s in socks:
                s.sendall(b"ping\n")
            for s in socks:
                s.settimeout(2)
                try:
                    answered += s.makefile("rb").readline() == b"ok pong\n"
                except OSError:
                    pass
            extra = socket.socket(socket.AF_UNIX)
            extra.connect(q.sock)
            extra.sendall(b"ping\n")
            extra.settimeout(2)
            try:
                last = extra.makefile("rb").readline().decode().strip()
            except OSError as e:
                last = str(e)
            row("the connection cap at `nofile` %d" % nofile,
                "`prlimit --nofile=%d:%d` (cued's own descriptors only), `XDG_RUNTIME_DIR` set as in a desktop session, default flags; `status`'s `max_clients` "
                "against cued(1)'s figure; then as many connections as the cap and one more; target: cued(1)'s "
                "figure, every connection under the cap answered" % (nofile, nofile),
                "cap %s (cued(1): %s); %d of %d answered `ok pong`; one more: `%s`"
                % (cap, said.get(nofile, "no figure"), answered, cap or 0, last[:60]),
                cap is not None and said.get(nofile) == cap and answered == cap and is_err(last, ERR_BUSY))
            for s in socks + [extra]:
                s.close()
            q.term()
        finally:
            kill_all(q)


def load(sounds):
    # The 1,000-client flood is row 19.5a (fairness_a).
    # Rate limit and connection cap, at their defaults.
    p, sock = start_cued("limits", "null", sounds)
    c = Client(sock)
    t0 = time.monotonic()
    c.s.sendall(b"play probe\n" * 5000)
    rs = [c.reply() for _ in range(5000)]
    elapsed = time.monotonic() - t0
    ok, limited = rs.count("ok"), sum(is_err(r, ERR_RATE_LIMITED) for r in rs)
    other = Client(sock)
    row("one client floods `play`", "5,000 plays at once on one connection, default `--rate-limit 200`",
        "%d played (the 200-cue burst + refill over %.0f ms), %d `err rate-limited`; another client's `play` → `%s`"
        % (ok, elapsed * 1000, limited, other.request("play probe")),
        ok <= 200 + 200 * elapsed + 1 and ok + limited == 5000)
    held, busy, t = [], 0, time.monotonic()
    for _ in range(300):
        x = Client(sock)
        x.s.settimeout(2)
        try:
            x.send("ping")
        except OSError:
            pass  # already refused and closed; its `err busy` is still there to read
        r = x.reply()
        if is_err(r, ERR_BUSY):
            busy += 1
        else:
            held.append(x)
    dt = time.monotonic() - t
    served = len(held)
    for x in held:
        x.f.close()  # the file object holds the descriptor open too
        x.s.close()
    time.sleep(0.2)
    st = cued_status(sock)
    row("300 connections at once", "default `--max-clients 256`; 300 connect within %.2f s (none idle for the 0.5 s that "
        "makes a connection evictable), each sends `ping`, all kept open" % dt,
        "%d served, %d got `err busy` and were closed (status: %d refused, %d idle evicted)"
        % (served, busy, st["refused_busy"], st["evicted_idle"]), busy > 0 and served + busy == 300)
    p.terminate()
    p.wait()


# 6. Per-app mutes are bounded.
def app_mutes(sounds):
    q = Cued("apps", sounds, ["--rate-limit", "0"])
    c = q.client(60)
    t = time.monotonic()
    replies = pipeline(c, b"".join(b"mute app a%d\n" % i for i in range(20_000)), 20_000)
    dt = time.monotonic() - t
    muted = sum(r.startswith("ok muted a") for r in replies)
    refused = sum(is_err(r, ERR_TOO_MANY) for r in replies)
    time.sleep(0.5)  # the last (coalesced) save
    size = os.path.getsize(os.path.join(q.state, "cued", "state"))
    st = q.request("status")
    row("20,000 `mute app`", "`--rate-limit 0`; one connection pipelines `mute app a0` … `a19999`",
        "%d `ok muted`, %d `err too-many` (%.2f s); state file %d bytes; `status` line %d bytes"
        % (muted, refused, dt, size, len(st.encode())),
        muted == 256 and refused == 20_000 - 256 and size < 16_384 and len(st) < 64_000)
    q.term()


# 19.5 A fair event loop: another client's ping while others flood.
def fairness_a(sounds):
    flood_row("fairness: 1,000 clients × 1,000 pipelined requests", sounds, 1000, 1000, "threshold",
              "`--max-clients 1100`; 1,000 connections at once, from a process of their own, each pipelines "
              "`threshold 1…1000` (replies echo K, checked in order)", ["--max-clients", "1100"])


def fairness_b(sounds):
    flood_row("fairness: 100 clients flood `status`", sounds, 100, 6000, "status",
              "default limits; 100 connections at once, from a process of their own, each pipelines 6,000 `status` and "
              "reads the replies")


def fairness_c(sounds):
    flood_row("fairness: 100 clients flood `stop`", sounds, 100, 10000, "stop",
              "default limits; 100 connections at once, from a process of their own, each pipelines 10,000 `stop` and "
              "reads the replies")



def many_apps(sounds):
    """More apps than `status` lists: what it lists, and that it says how many it leaves out."""
    q = Cued("manyapps", sounds, ["--rate-limit", "0"])
    try:
        c = q.client(30)
        n_play, n_mute = 400, 300
        mutes = declare_apps(c, n_play, n_mute)
        r = q.request("status")
        st = json.loads(r[3:])
        apps = st["apps"]
        row("`status` lists at most 256 apps", "`--rate-limit 0`; one connection declares %d apps that each play "
            "once (`app pN`, `play probe`), then `mute app` × %d" % (n_play, n_mute),
            "%d `mute app` accepted (the rest `err too-many`); `status` lists %d apps (%d muted), %d bytes"
            % (mutes, len(apps), sum(1 for a in apps.values() if a.get("muted")), len(r.encode())),
            len(apps) <= 256 and mutes == 256 and q.alive())
        listed = len(apps)
        unlisted = st.get("apps_unlisted")
        plays = st.get("apps_unlisted_played")
        # Known apps: 256 muted (the table's bound) + the 256 that played and were counted.
        row("`status` says how many apps it leaves out", "`--rate-limit 0`; one connection declares %d apps that "
            "each play once, then `mute app` × %d (256 accepted); target: `status` says how many apps and plays it "
            "does not list" % (n_play, n_mute),
            "`status` lists %d apps; `apps_unlisted` %s, `apps_unlisted_played` %s (of %d plays)"
            % (listed, unlisted if unlisted is not None else "absent", plays if plays is not None else "absent", n_play),
            # Known by name: the muted apps and the 256 counted by name; the plays of the others are counted together.
            listed <= 256 and unlisted is not None and listed + unlisted == mutes + min(n_play, 256) and plays is not None
            and plays + sum(a.get("played", 0) for a in apps.values()) == n_play and q.alive())
        q.term()
    finally:
        kill_all(q)


# 7. One app holding every voice at the highest priority; loops of a client that dies.
def voice_share(sounds):
    figs, ok = [], True
    d = small_sounds(sounds, "share")
    write_noise_wav(os.path.join(d, "long.wav"), 3.0, 48000, 1)
    q = Cued("share", d, extra=["--sink", "null"])
    hog = q.client()
    hog.request("app hog")
    for _ in range(16):
        hog.request("play long loop priority=100 id")
    other = q.client()
    other.request("app mail")
    replies = [other.request("play pop wait") for _ in range(5)]
    good = all(r == "ok" for r in replies)
    ok &= good
    figs.append("16 loops at priority=100 from app `hog`; app `mail`'s `play pop wait` ×5 → %s (was: `err not-played` or, "
                "without wait, `ok` and never heard)" % ", ".join(sorted(set(replies))))
    imp = Cued("share-imp", d, extra=["--sink", "null", "--voices", "4"],
               config='[profiles]\nimportant_apps = ["alarm"]\n')
    a = imp.client()
    a.request("app alarm")
    for _ in range(4):
        a.request("play long loop priority=100")
    r = a.request("play pop important wait")
    ok &= r == "ok"
    figs.append("4 of 4 voices looping at priority=100, the same app's `play pop important wait` → `%s`" % r)
    imp.term()
    # A client process that dies holding loops (one detached): its loops end with it.
    code = ("import socket,sys,time;s=socket.socket(socket.AF_UNIX);s.connect(sys.argv[1]);"
            "[s.sendall(b'play long loop\\n') for _ in range(8)];s.sendall(b'play long loop detach id\\n');time.sleep(60)")
    child = spawn([sys.executable, "-c", code, q.sock])
    time.sleep(0.5)
    before = cued_status(q.sock)["voices_active"]
    child.kill()
    child.wait()
    time.sleep(0.3)
    after = cued_status(q.sock)["voices_active"]
    hog.f.close()
    hog.s.close()
    time.sleep(0.3)
    left = cued_status(q.sock)["voices_active"]
    good = after < before and left == 1
    ok &= good
    figs.append("a client killed (SIGKILL) while 8 loops and 1 detached loop of its own play: voices %d → %d; the hog's "
                "connection closed: → %d (the detached loop, until `stop id`)" % (before, after, left))
    row("one app silencing the others", "`play … loop priority=100` ×16 from one connection, then another app; "
        "a client killed holding loops", "; ".join(figs), ok and q.alive())
    q.term()


SECTIONS = (load, clients_memory, clients_fairness, fairness_a, fairness_b, fairness_c, clients_lockout, nofile_caps,
            app_mutes, many_apps, voice_share)
