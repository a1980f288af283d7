"""Reliability, signals: kill -9 and a restart, a second instance, stray signals and SIGTERM
mid-work, stderr going away, Ctrl-C and restarts around `cuectl run`."""
import fcntl
import os
import signal
import subprocess
import termios
import time
from benchlib import Client, log
from harness import CUECTL, CUED, TMP, spawn, start_cued
from attacklib import Cued, kill_all, row
from attack_fixtures import FORTY_BUDGET, add_forty, small_sounds
from benchlib import cued_status as status

CONCERN = "signals"


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
    t_saved = time.monotonic()
    state_file = os.path.join(state, "cued", "state")
    # Saves run off the event loop, coalesced, within milliseconds of the reply: a SIGKILL
    # inside that window loses that window's change. Wait until the file holds both.
    while time.monotonic() < t_saved + 5:
        lines = (open(state_file).read() if os.path.exists(state_file) else "").splitlines()
        if "muted=true" in lines and "app.feeds.muted=true" in lines:  # whole lines: one contains the other
            break
        time.sleep(0.001)
    saved_ms = (time.monotonic() - t_saved) * 1000
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
    probe = c.request("play probe")
    apps = status(sock)["apps"]
    kept = probe == "ok muted" and apps.get("feeds", {}).get("muted")
    if not kept:
        log("kill -9: after restart `play probe` → %r, apps %r, state file %r" % (
            probe, apps, open(state_file).read() if os.path.exists(state_file) else None))
    second = subprocess.run(args, env=env, capture_output=True, text=True, timeout=10)
    row("kill -9 during playback, then restart", "SIGKILL while a cue plays; start again on the same socket",
        "state on disk %.1f ms after the last change's reply; stale socket reclaimed, answering %.0f ms after exec; "
        "mute and app mute intact: %s" % (saved_ms, dt * 1000, bool(kept)), bool(kept))
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
        "`mute` → `%s`, error logged, daemon answering: %s" % (reply, alive), reply == "ok muted" and alive, concern="resources")
    r.terminate()
    r.wait()


# 11. Stray signals; SIGTERM.
def signals_row(sounds):
    q = Cued("signals", sounds)
    rtmin, rtmax = signal.SIGRTMIN, signal.SIGRTMAX
    stray = [("USR1", signal.SIGUSR1), ("USR2", signal.SIGUSR2), ("ALRM", signal.SIGALRM), ("VTALRM", signal.SIGVTALRM),
             ("PROF", signal.SIGPROF), ("IO", signal.SIGIO), ("PWR", signal.SIGPWR), ("STKFLT", 16),
             ("RTMIN", rtmin), ("RTMIN+3", rtmin + 3), ("RTMAX", rtmax)]
    survived = []
    for name, s in stray:
        os.kill(q.pid, int(s))
        time.sleep(0.05)
        if q.alive() and os.path.exists(q.sock):
            survived.append(name)
    q.request("play long")
    time.sleep(0.1)
    rc, dt = q.term()
    gone = not os.path.exists(q.sock)
    # SIGTERM in the middle of a real slow reload (40 10 s cues to resample).
    d = small_sounds(sounds, "sigreload")
    r = Cued("sigreload", d, FORTY_BUDGET)
    add_forty(d)
    c = r.client(30)
    c.send("reload")
    time.sleep(1.0)
    rc2, dt2 = r.term()
    row("stray signals, SIGTERM", "%s sent one by one (ping after each); SIGTERM while a 10 s cue plays; SIGTERM 1 s "
        "into a reload of 40 10 s cues" % " ".join(n for n, _ in stray),
        "survived %d of %d, socket still there; SIGTERM while playing → exit %s in %.0f ms (goal ≤ 1 s + 500 ms grace), "
        "socket removed: %s; during the reload → exit %s in %.0f ms"
        % (len(survived), len(stray), rc, dt * 1000, gone, rc2, dt2 * 1000),
        len(survived) == len(stray) and rc == 0 and dt <= 1.5 and gone and rc2 == 0 and dt2 <= 1.5)


# 12. stderr closed or gone; a terminal hangup.
def stderr_row(sounds):
    figs, ok = [], True
    cfg = "[apps.mail]\nmuted = true\n"

    def exercise(q, label):
        c = q.client(10)
        replies = [c.request("mute" if i % 2 == 0 else "unmute") for i in range(200)]
        answered = all(x in ("ok muted", "ok unmuted") for x in replies)
        # A reload (SIGHUP) that changes something visible: mail is no longer muted.
        q.write_config("")
        q.p.send_signal(signal.SIGHUP)
        time.sleep(0.3)
        c.request("app mail")
        reloaded = c.request("play probe") == "ok"
        alive = q.alive()
        figs.append("%s: 200 logged requests answered: %s, SIGHUP reloaded: %s, serving: %s" % (label, answered, reloaded,
                                                                                                   alive))
        return answered and reloaded and alive

    # stderr closed before exec (`2>&-`).
    q = Cued("closed", sounds, ["--rate-limit", "0"], level="debug", config=cfg, stderr=subprocess.DEVNULL,
             launcher=["/bin/sh", "-c", 'exec "$@" 2>&-', "sh"])
    ok &= exercise(q, "stderr closed (`2>&-`)")
    rc, _ = q.term()
    ok &= rc == 0
    # stderr a pipe whose reader has gone: every log write gets EPIPE.
    rfd, wfd = os.pipe()
    q = Cued("epipe", sounds, ["--rate-limit", "0"], level="debug", config=cfg, stderr=wfd)
    os.close(wfd)
    os.close(rfd)
    ok &= exercise(q, "stderr's reader gone (EPIPE)")
    rc, _ = q.term()
    ok &= rc == 0
    # A terminal hangup: cued on a pty that is its controlling terminal; the master closes.
    master, slave = os.openpty()

    def ctty():
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    q = Cued("hangup", sounds, ["--rate-limit", "0"], level="debug", config=cfg, stderr=slave, stdin=slave, stdout=slave,
             preexec_fn=ctty)
    os.close(slave)
    c = q.client(10)
    c.request("app mail")
    muted_before = c.request("play probe") == "ok muted"
    q.write_config("")
    os.close(master)  # the terminal goes away: the kernel sends SIGHUP (and writes to it fail)
    time.sleep(0.5)
    c.request("app mail")
    reloaded = c.request("play probe") == "ok"
    replies = [c.request("mute" if i % 2 == 0 else "unmute") for i in range(200)]
    alive = q.alive() and all(x in ("ok muted", "ok unmuted") for x in replies)
    rc, _ = q.term()
    figs.append("terminal hangup (pty master closed): SIGHUP reloaded: %s, 200 logged requests after: %s, exit %s at "
                "SIGTERM" % (muted_before and reloaded, alive, rc))
    ok &= muted_before and reloaded and alive and rc == 0
    row("stderr goes away", "`--log-level debug` (a log line per request); a SIGHUP whose reload unmutes an app",
        "; ".join(figs), ok)


def cuectl_items(sounds):
    q = Cued("cuectl19", sounds)
    figs, ok = [], True
    try:
        # Ctrl-C: the terminal sends SIGINT to the whole foreground process group.
        p = spawn([CUECTL, "--socket", q.sock, "run", "--", "sleep", "10"], start_new_session=True)
        time.sleep(0.7)
        os.killpg(p.pid, signal.SIGINT)
        try:
            rc = p.wait(10)
        except subprocess.TimeoutExpired:
            rc = "still running after 10 s"
        direct = rc == -signal.SIGINT
        loop = spawn(["/bin/bash", "-c", 'for i in 1 2 3; do "$0" --socket "$1" run -- sleep 3; done; echo went-on',
                      CUECTL, q.sock], start_new_session=True, stdout=subprocess.PIPE, text=True)
        time.sleep(0.7)
        t = time.monotonic()
        os.killpg(loop.pid, signal.SIGINT)
        try:
            out = loop.communicate(timeout=15)[0]
            lrc, ldt = loop.returncode, time.monotonic() - t
        except subprocess.TimeoutExpired:
            kill_all(loop)
            out, lrc, ldt = "", "hung", 15.0
        stopped = "went-on" not in out and lrc == -signal.SIGINT
        row("`cuectl run` and Ctrl-C", "SIGINT to the process group (as a terminal's Ctrl-C) of `cuectl run -- sleep "
            "10`; then of `bash -c 'for i in 1 2 3; do cuectl run -- sleep 3; done; echo went-on'`",
            "cuectl %s; the loop: bash %s after %.1f s, the loop %s"
            % ("died of SIGINT" if direct else "ended with %s" % rc,
               "died of SIGINT" if lrc == -signal.SIGINT else "ended with %s" % lrc, ldt,
               "stopped" if "went-on" not in out else "went on"), direct and stopped)
        # A run session across a daemon restart: the success pop still sounds, on the new daemon.
        p = spawn([CUECTL, "--socket", q.sock, "--session", "build", "run", "--", "sleep", "1.5"],
                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(0.5)
        q.term()
        q = Cued("cuectl19", sounds)
        try:
            out, err = p.communicate(timeout=15)
            prc = p.returncode
        except subprocess.TimeoutExpired:
            kill_all(p)
            out, err, prc = "", "", "hung"
        pops, end = 0, time.monotonic() + 2
        while time.monotonic() < end:
            pops = status(q.sock)["cues"].get("pop", {}).get("played", 0)
            if pops:
                break
            time.sleep(0.02)
        row("`cuectl --session S run` across a restart", "`cuectl --session build run -- sleep 1.5`; cued stopped "
            "and started again on the same socket 0.5 s in",
            "cuectl exit %s%s; the new daemon played `pop` %d time(s)" % (prc, " (%s)" % err.strip()[:80] if err.strip()
                                                                          else "", pops),
            prc == 0 and pops >= 1)
        q.term()
    finally:
        kill_all(q)


SECTIONS = (crashes, signals_row, stderr_row, cuectl_items)
