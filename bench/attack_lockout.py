"""Reliability, clients: lock-out and access. Another user connecting, connections idle or
busy at the connection cap, and `cuectl reload` while another client's reload runs."""
import os
import socket
import subprocess
import threading
import time
from harness import CUECTL, TMP, start_cued
from attacklib import Cued, kill_all, load_note, row
from attack_fixtures import forty_cues, read_all, small_sounds
from cuedwire import is_err, ERR_FORBIDDEN

CONCERN = "clients"


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
        blocked.stdout == "" and is_err(refused.stdout, ERR_FORBIDDEN))
    p.terminate()
    p.wait()
    os.chmod(TMP, 0o700)  # back as it was: later daemons put their sockets here and check it


# 4. A connection leak must not lock everyone out.
def connection_leak(sounds):
    cap = 16
    q = Cued("leak-conn", sounds, ["--max-clients", str(cap)])
    time.sleep(0.6)  # the start-up probes are gone
    idle = []
    for _ in range(cap):
        s = socket.socket(socket.AF_UNIX)
        s.connect(q.sock)
        idle.append(s)
    time.sleep(0.8)  # idle past the 0.5 s a connection is protected
    newcomers, served, waits = [], 0, []
    for _ in range(cap):
        t = time.monotonic()
        n = q.client(5)
        try:
            served += n.request("ping") == "ok pong"
        except OSError:
            pass
        waits.append((time.monotonic() - t) * 1000)
        newcomers.append(n)
    told, example, ends = 0, "", {}
    for s in idle:
        data, end = read_all(s, 3)
        ends[end] = ends.get(end, 0) + 1
        if data.startswith(b"err busy closing this connection"):
            told += 1
            example = data.decode().strip()
        s.close()
    for n in newcomers:
        n.f.close()
        n.s.close()
    row("idle connections at the cap", "`--max-clients %d`; %d connections that never send a line, idle 0.8 s; "
        "then %d newcomers" % (cap, cap, cap),
        "%d of %d newcomers answered `ok pong` (slowest %.1f ms); %d of %d idle ones read `%s…` then %s"
        % (served, cap, max(waits), told, cap, example[:70], ", ".join("%d %s" % (v, k) for k, v in ends.items())),
        served == cap and told == cap)

    # Now every connection is in use (each pings every 100 ms): a newcomer is refused.
    time.sleep(0.5)
    stop = threading.Event()
    failures = []

    def active():
        try:
            c = q.client(5)
            while not stop.is_set():
                if c.request("ping") != "ok pong":
                    failures.append("reply")
                time.sleep(0.1)
            c.f.close()
            c.s.close()
        except OSError as e:
            failures.append(str(e))

    threads = [threading.Thread(target=active) for _ in range(cap)]
    for th in threads:
        th.start()
    time.sleep(0.5)
    counts = {"`err busy`": 0, "reset": 0, "EOF without a line": 0, "other": 0}
    t = time.monotonic()
    for _ in range(1000):
        s = socket.socket(socket.AF_UNIX)
        s.connect(q.sock)
        try:
            s.sendall(b"play probe\n")  # as cuectl does: write first, then read
        except OSError:
            pass
        data, end = read_all(s, 5)
        s.close()
        if data.startswith(b"err busy too many connections"):
            counts["`err busy`"] += 1
        elif end == "reset":
            counts["reset"] += 1
        elif not data:
            counts["EOF without a line"] += 1
        else:
            counts["other"] += 1
    dt = time.monotonic() - t
    stop.set()
    for th in threads:
        th.join()
    row("every connection in use", "`--max-clients %d`, each connection pinging every 100 ms; 1,000 newcomers "
        "connect, write `play probe` first, then read" % cap,
        "of 1,000 refused connects: %s (%.1f s); the %d working clients: %d failures"
        % (", ".join("%d %s" % (v, k) for k, v in counts.items()), dt, cap, len(failures)),
        counts["`err busy`"] == 1000 and not failures)
    q.term()


def cuectl_reload(sounds):
    d = small_sounds(sounds, "longreload")
    q = Cued("longreload", d)
    try:
        src = forty_cues()
        for f in sorted(os.listdir(src))[:12]:  # 12 cues to decode and resample: well past cuectl's old 5 s
            os.link(os.path.join(src, f), os.path.join(d, f))
        a = q.client(300)
        t0 = time.monotonic()
        a.send("reload")
        time.sleep(0.5)
        t = time.monotonic()
        r = subprocess.run([CUECTL, "--socket", q.sock, "reload"], capture_output=True, text=True, timeout=400)
        cdt = time.monotonic() - t
        first = a.reply()
        first_s = time.monotonic() - t0
        cues = len(q.request("cues").split()) - 1
        row("`cuectl reload` during a long reload", "12 legitimate 10 s cues (stereo 44.1 kHz, resampled) added; one "
            "client's `reload`, and 0.5 s later `cuectl reload` (before: cuectl gave up after 5 s with exit 69)",
            "the first reload `%s` after %.1f s; cuectl exit %d after %.1f s%s; %d cues loaded; %s"
            % (first, first_s, r.returncode, cdt, (": `%s`" % (r.stdout + r.stderr).strip()[:100])
               if (r.stdout + r.stderr).strip() else " (no output)", cues, load_note()),
            r.returncode == 0 and cdt > 5 and first == "ok reloaded" and q.alive())
        q.term()
    finally:
        kill_all(q)


SECTIONS = (security, connection_leak, cuectl_reload)
