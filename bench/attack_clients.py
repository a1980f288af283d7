"""Issue 29's client attacks against the release daemon, a row each (registered by
bench/reliability.py's main() as the `issue29_clients` section; `RELIABILITY_ONLY=clients_memory`,
`clients_fairness`, `clients_lockout` or `clients_small` runs one part):

- 29.3 clients that never read: cued's RSS with 250 and 1,000 of them, `events on` or not,
  and after they leave;
- 29.5 fairness at the edges: another process's ping while 1,000 clients pipeline at the
  default cap, and while 250 pipeline `play` + `status wait` (what `cuectl play` sends);
- 29.6 lock-out: 256 connections that are never idle (a byte every 0.3 s, or a ping every
  0.4 s), and another process's `cuectl play` meanwhile;
- 29.8 `status` with more apps than it lists; the connection cap at a low `nofile`, against
  what cued(1) says it is.

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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (fixtures: the temp dir, the release binaries, spawn)
import benchlib  # noqa: E402
from benchlib import kill_all, mib, row, rss_kib  # noqa: E402

FX = bench.FIXTURE


def Cued(*a, **kw):
    return benchlib.Cued(FX, *a, **kw)


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
    label = "29.3 %s clients that never read%s%s" % ("{:,}".format(n), ", `events on`" if events else "",
                                                     " (%s)" % " ".join(extra) if extra else "")
    q = Cued("nonread-%d-%d" % (n, events), sounds, list(extra))
    p = None
    try:
        for _ in range(20):  # the allocator's working set for ordinary use, before the attack
            q.request("status")
        time.sleep(1.0)
        idle = rss_kib(q.pid)
        payload = "play probe\\n" if events else "ping\\n"
        p = FX.spawn([sys.executable, "-c", NONREADERS, q.sock, str(n), "1" if events else "0", payload],
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
    benchlib.flood_row(FX, "29.5a fairness: 1,000 clients pipelining at the default cap", sounds, 1000, 1000, "threshold",
                       "default limits (the cap 256); 1,000 connections at once, from a process of their own, each "
                       "pipelines `threshold 1…1000` and reads the replies (those over the cap are refused `err busy`)",
                       require_all=False, rounds=3)
    benchlib.flood_row(FX, "29.5b fairness: 250 clients pipelining `play` + `status wait`", sounds, 250, 40,
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
    label = "29.6%s lock-out: 256 connections that %s" % ("a" if unit == "x" else "b", what)
    q = Cued("lockout-%s" % ("byte" if unit == "x" else "ping"), sounds)
    busy = None
    try:
        busy = FX.spawn([sys.executable, "-c", BUSY, q.sock, "256", unit, str(period)], stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE, text=True)
        busy.stdout.readline()
        time.sleep(1.5)  # past the 0.5 s a connection in use is protected from idle eviction
        results = []
        env = dict(os.environ, CUED_SOCKET=q.sock)
        for _ in range(20):
            t = time.monotonic()
            r = subprocess.run([bench.CUECTL, "play", "probe"], env=env, capture_output=True, text=True, timeout=10)
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


def status_apps(sounds):
    q = Cued("apps29", sounds, ["--rate-limit", "0"])
    try:
        c = q.client(30)
        n_play, n_mute = 400, 300
        mutes = benchlib.declare_apps(c, n_play, n_mute)
        st = status(q)
        listed = len(st["apps"])
        unlisted = st.get("apps_unlisted")
        plays = st.get("apps_unlisted_played")
        # Known apps: 256 muted (the table's bound) + the 256 that played and were counted.
        row("29.8a `status` says how many apps it leaves out", "`--rate-limit 0`; one connection declares %d apps that "
            "each play once, then `mute app` × %d (256 accepted); target: `status` says how many apps and plays it "
            "does not list" % (n_play, n_mute),
            "`status` lists %d apps; `apps_unlisted` %s, `apps_unlisted_played` %s (of %d plays)"
            % (listed, unlisted if unlisted is not None else "absent", plays if plays is not None else "absent", n_play),
            # Known by name: the muted apps and the 256 counted by name; the plays of the others are counted together.
            listed <= 256 and unlisted is not None and listed + unlisted == mutes + min(n_play, 256) and plays is not None
            and plays + sum(a.get("played", 0) for a in st["apps"].values()) == n_play and q.alive())
        q.term()
    finally:
        kill_all(q)


def readme_caps():
    """What cued(1) says the cap is at low `nofile`: {nofile: cap}."""
    text = open(os.path.join(bench.ROOT, "docs", "man", "cued.1.scd")).read()
    return {int(a): int(b) for a, b in re.findall(r"\*nofile\* (\d+) that is (\d+)", text)}


def nofile_caps(sounds):
    said = readme_caps()
    close_others = "import os, sys; os.closerange(3, 1 << 16); os.execv(sys.argv[1], sys.argv[1:])"
    for nofile in (24, 64):
        # A desktop session's environment, as cued(1)'s figures are: XDG_RUNTIME_DIR set (the D-Bus face watches it).
        rt = os.path.join(FX.tmp, "rt-cap%d" % nofile)
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
            row("29.8b the connection cap at `nofile` %d" % nofile,
                "`prlimit --nofile=%d:%d` (cued's own descriptors only), `XDG_RUNTIME_DIR` set as in a desktop session, default flags; `status`'s `max_clients` "
                "against cued(1)'s figure; then as many connections as the cap and one more; target: cued(1)'s "
                "figure, every connection under the cap answered" % (nofile, nofile),
                "cap %s (cued(1): %s); %d of %d answered `ok pong`; one more: `%s`"
                % (cap, said.get(nofile, "no figure"), answered, cap or 0, last[:60]),
                cap is not None and said.get(nofile) == cap and answered == cap and last.startswith("err busy"))
            for s in socks + [extra]:
                s.close()
            q.term()
        finally:
            kill_all(q)


def clients_small(sounds):
    status_apps(sounds)
    nofile_caps(sounds)


def issue29_clients(sounds):
    for section in (clients_memory, clients_fairness, clients_lockout, clients_small):
        try:
            section(sounds)
        except Exception as e:  # a section that breaks is a failed row, not a lost report
            import traceback
            traceback.print_exc()
            row("29.%s" % section.__name__, "-", "the harness failed: %s: %s" % (e.__class__.__name__, e), False)
