#!/usr/bin/python3
"""Following the desktop's audio (issue 22, item 2), as `make bench` figures: cued with its
default output (`auto`) on the private PipeWire of pipewire_bench, while the sound server
starts after cued, restarts while cued is idle or playing, and the user picks another
default output. Each case is repeated; every cue is timed at the sink by pipewire_bench's
recorder (bench/pw_onset.c: the first non-zero sample as the sink consumed it, on the graph's
clock), so a cue that went nowhere is a miss, not a guess.

- started before the server: a fresh cued whose `auto` found nothing (it plays to nothing),
  then pipewire, wireplumber and pipewire-pulse start; once the null sink is the default
  (`pactl` asked every 30 ms) and a recorder is connected to it, one `play` is sent.
- a server restart while idle (cued's stream inactive, 3 s after its last cue) or while
  playing (a 3 s cue 0.3 s in): the servers are stopped as `systemctl --user restart` does
  (SIGTERM) and started again; then one `play` as above.
- a new default output: a second null sink (`nul2`); with cued's stream still lingering
  (a cue 0.5 s before) or inactive (3 s before), `pactl set-default-sink nul2`, then at once
  one `play`, and again every 100 ms until a cue is heard on nul2 (at most 3 s); and with a
  3 s cue playing: whether its rest moves to nul2, and whole.

Figures, not tests (the tests in PipeWireTests assert each case). bench.py calls run() and
report(); alone: `python3 bench/follow_bench.py [--update BENCHMARKS.md]`, or
`BENCH_ONLY=follow python3 bench/bench.py`. Environment: BENCH_FOLLOW_TRIALS (default 10;
BENCH_QUICK=1: 3).
"""
import json
import os
import shutil
import subprocess
import tempfile
import time

from benchlib import Client, cue_set, cued_status as status, loadavg, log, pct, section_main, square, write_wav
import desktop_bench
from pwstack import Recorder, Stack, build_recorder, start_cued, stop

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADING = "## Following the desktop's audio"
BEFORE = desktop_bench.HEADING  # where this section goes when BENCHMARKS.md has none yet
TOOLS = ["dbus-daemon", "pipewire", "wireplumber", "pipewire-pulse", "pactl", "cc", "pkg-config"]


def sink_of(sock):
    s = status(sock).get("sink") or {}
    return "%s (%s)" % (s.get("spec"), s.get("state"))


def cue(rec, sock, timeout_s=3.0):
    """One `play pop` on a new connection: (trigger -> onset µs or None, the reply)."""
    c = Client(sock)
    try:
        t0 = time.monotonic_ns()
        c.send("play pop")
        o = rec.onset_after(t0, timeout_s)
        return ((o[0] - t0) / 1000.0 if o else None), c.reply()
    finally:
        c.s.close()


def started_before(stack, rec_path, sounds, trials):
    out = {"ready_ms": [], "lat": [], "misses": 0, "sinks_before": [], "sinks_after": [], "replies": []}
    for i in range(trials):
        stack.stop_servers()
        p, sock = start_cued(stack, "before%d" % i, "auto", sounds)
        try:
            out["sinks_before"].append(sink_of(sock))
            t0 = time.monotonic()
            ready = stack.start_servers()
            out["ready_ms"].append((ready - t0) * 1000)
            rec = Recorder(stack, rec_path, quiet_ms=40)
            try:
                lat, reply = cue(rec, sock)
            finally:
                rec.close()
            out["replies"].append(reply)
            out["sinks_after"].append(sink_of(sock))
            if lat is None:
                out["misses"] += 1
            else:
                out["lat"].append(lat)
        finally:
            stop(p)
    return out


def restarts(stack, rec_path, sounds, trials, playing):
    out = {"restart_ms": [], "lat": [], "misses": 0, "states": [], "replies": []}
    p, sock = start_cued(stack, "restart-" + ("playing" if playing else "idle"), "auto", sounds)
    rec = Recorder(stack, rec_path, quiet_ms=40)
    try:
        for _ in range(trials):
            if playing:
                c = Client(sock)
                c.request("play long")
                c.s.close()
                time.sleep(0.3)
            else:
                cue(rec, sock)
                time.sleep(3.0)  # the stream's 2 s linger is over: inactive
            rec.close()
            t0 = time.monotonic()
            stack.stop_servers()
            ready = stack.start_servers()
            out["restart_ms"].append((ready - t0) * 1000)
            out["states"].append(sink_of(sock))
            rec = Recorder(stack, rec_path, quiet_ms=40)
            lat, reply = cue(rec, sock)
            out["replies"].append(reply)
            if lat is None:
                out["misses"] += 1
            else:
                out["lat"].append(lat)
        st = status(sock)
        out["end"] = {k: st.get(k) for k in ("dropped", "xruns", "stalls")}
        out["end"]["sink"] = (st.get("sink") or {}).get("spec")
        out["alive"] = p.poll() is None
    finally:
        rec.close()
        stop(p)
    return out


def back_on_nul(stack, rec1, sock):
    """`nul` the default again, and cued's stream on it (the session manager moves it on its
    own time): cues until one is heard there (5 s at most)."""
    subprocess.run(["pactl", "set-default-sink", "nul"], env=stack.env, capture_output=True, timeout=10)
    end = time.monotonic() + 5
    while time.monotonic() < end:
        if cue(rec1, sock, 1.0)[0] is not None:
            return


def new_default(stack, rec_path, sounds, trials, gap_s):
    """gap_s: how long after the last cue the default changes (0.5: cued's stream lingers, active;
    3: inactive)."""
    out = {"first_on_new": 0, "first_on_old": 0, "first_missed": 0, "lat_new": [], "until_new_ms": [], "never": 0, "old_after": []}
    p, sock = start_cued(stack, "default-%g" % gap_s, "auto", sounds)
    rec1 = Recorder(stack, rec_path, quiet_ms=40)
    rec2 = Recorder(stack, rec_path, quiet_ms=40, target="nul2")
    try:
        for _ in range(trials):
            back_on_nul(stack, rec1, sock)
            time.sleep(gap_s)
            t0 = time.monotonic_ns()
            subprocess.run(["pactl", "set-default-sink", "nul2"], env=stack.env, capture_output=True, timeout=10)
            first = True
            while time.monotonic_ns() - t0 < 3e9:
                c = Client(sock)
                try:
                    t1 = time.monotonic_ns()
                    c.send("play pop")
                    o2 = rec2.onset_after(t1, 0.5)
                    o1 = None if o2 else rec1.onset_after(t1, 0.01)
                    c.reply()
                finally:
                    c.s.close()
                if first:
                    first = False
                    if o2:
                        out["first_on_new"] += 1
                        out["lat_new"].append((o2[0] - t1) / 1000.0)
                    elif o1:
                        out["first_on_old"] += 1
                    else:
                        out["first_missed"] += 1
                if o2:
                    out["until_new_ms"].append((o2[0] - t0) / 1e6)
                    break
                if o1:
                    out["old_after"].append((o1[0] - t0) / 1e6)
                time.sleep(0.1)
            else:
                out["never"] += 1
        out["alive"] = p.poll() is None
    finally:
        rec1.close()
        rec2.close()
        stop(p)
    return out


def moving_cue(stack, rec_path, sounds, trials):
    """A 3 s cue playing (0.5 s in) when the default output changes: whether the rest of it
    is heard on the new default, how soon after the change, and whether the two parts make
    the whole cue (what nul heard of it, then nul2)."""
    out = {"moved": 0, "move_ms": [], "rest_ms": [], "never": 0}
    p, sock = start_cued(stack, "moving", "auto", sounds)
    rec1 = Recorder(stack, rec_path, quiet_ms=40)
    rec2 = Recorder(stack, rec_path, quiet_ms=40, target="nul2")
    try:
        st0 = status(sock)
        for _ in range(trials):
            back_on_nul(stack, rec1, sock)
            rec1.wait_quiet(0.3)
            rec2.wait_quiet(0.3)
            c = Client(sock)
            try:
                t_play = time.monotonic_ns()
                c.request("play long")
            finally:
                c.s.close()
            o1 = rec1.onset_after(t_play, 1.0)
            if o1 is None:
                out["never"] += 1
                continue
            time.sleep(0.5)
            t0 = time.monotonic_ns()
            subprocess.run(["pactl", "set-default-sink", "nul2"], env=stack.env, capture_output=True, timeout=10)
            o2 = rec2.onset_after(t0, 2.0)
            if o2 is None:
                out["never"] += 1
                continue
            out["moved"] += 1
            out["move_ms"].append((o2[0] - t0) / 1e6)
            rec2.wait_quiet(0.3)
            # Heard on nul up to the move, then on nul2 to its end: the whole 3 s, less what the
            # move lost (negative) or plus what both played (positive). Every frame of the
            # probe is non-zero, so a sound's span is its first to its last frame.
            heard = (rec1.status()["last_loud"] - o1[0]) + (rec2.status()["last_loud"] - o2[0]) + 2 * 10**9 // 48000
            out["rest_ms"].append(heard / 1e6 - 3000)
        st = status(sock)
        out["xruns"] = (st.get("xruns") or 0) - (st0.get("xruns") or 0)
        out["missed_cycles"] = (st.get("missed_cycles") or 0) - (st0.get("missed_cycles") or 0)
        out["dropped"] = (st.get("dropped") or 0) - (st0.get("dropped") or 0)
        out["alive"] = p.poll() is None
    finally:
        rec1.close()
        rec2.close()
        stop(p)
    return out


def run(trials=None, quick=False):
    missing = [t for t in TOOLS if not shutil.which(t)]
    if missing:
        log("follow section skipped: missing", " ".join(missing))
        return {"skipped": "missing " + " ".join(missing)}
    trials = trials or (3 if quick else 10)
    tmp = tempfile.mkdtemp(prefix="cued-follow.")
    res = {"trials": trials, "load": {"start": loadavg()}}
    stack = None
    try:
        rec_path = build_recorder()
        stack = Stack(tmp)
        sounds = os.path.join(tmp, "sounds")
        cue_set(sounds, square(4800))
        write_wav(os.path.join(sounds, "long.wav"), square(48000 * 3))
        log("follow: started before the server, %d times" % trials)
        res["before"] = started_before(stack, rec_path, sounds, trials)
        log("follow: server restarts while idle, %d times" % trials)
        res["idle"] = restarts(stack, rec_path, sounds, trials, playing=False)
        log("follow: server restarts while playing, %d times" % trials)
        res["playing"] = restarts(stack, rec_path, sounds, trials, playing=True)
        r = subprocess.run(["pactl", "load-module", "module-null-sink", "sink_name=nul2", "rate=48000", "channels=2"],
                           env=stack.env, capture_output=True, text=True, timeout=10)
        if r.returncode != 0:
            raise RuntimeError("pactl load-module module-null-sink: " + r.stderr.strip())
        subprocess.run(["pactl", "set-sink-volume", "nul2", "100%"], env=stack.env, capture_output=True, timeout=10)
        for gap in (0.5, 3.0):
            log("follow: a new default output, %g s after a cue, %d times" % (gap, trials))
            res["default %g" % gap] = new_default(stack, rec_path, sounds, trials, gap)
        log("follow: a new default output while a 3 s cue plays, %d times" % trials)
        res["moving"] = moving_cue(stack, rec_path, sounds, trials)
    except RuntimeError as e:
        log("follow section failed:", e)
        res["failed"] = str(e)
    finally:
        if stack is not None:
            stack.close()
        shutil.rmtree(tmp, ignore_errors=True)
    res["load"]["end"] = loadavg()
    return res


def _ms(v):
    return "%.1f" % (v / 1000.0) if v is not None else "-"


def _lat(v):
    if not v:
        return "- | - | -"
    return "%s | %s | %s" % (_ms(pct(v, .5)), _ms(pct(v, .9)), _ms(max(v)))


def report(res):
    md = [HEADING, ""]
    if "skipped" in res:
        return md + ["Not measured: " + res["skipped"] + "."]
    if "failed" in res:
        md += ["Not measured in full: " + res["failed"], ""]
    n = res["trials"]
    md += ["cued with its default output (`auto`, which picks PipeWire's own stream here) on the private PipeWire",
           "of the section above, while the desktop's audio changes under it; each case %d times, every cue timed at" % n,
           "the sink by the same recorder (`bench/pw_onset.c`: trigger → the first non-zero sample as the sink",
           "consumed it). A miss: not heard within 3 s. Made by `bench/follow_bench.py` (`BENCH_ONLY=follow`);",
           "PipeWireTests asserts each case.", "",
           "| case | n | cue heard | p50 ms | p90 ms | max ms | server start/restart, p50 ms | misses |",
           "|---|---|---|---|---|---|---|---|"]
    b = res.get("before")
    if b:
        md.append("| cued started before the server (it played to nothing), then the server starts | %d | %d | %s | %s | %d |" % (
            n, len(b["lat"]), _lat(b["lat"]), "%.0f" % pct(b["ready_ms"], .5), b["misses"]))
    for key, name in (("idle", "a server restart while cued is idle (its stream inactive)"),
                      ("playing", "a server restart while cued plays a 3 s cue")):
        r = res.get(key)
        if r:
            md.append("| %s | %d | %d | %s | %s | %d |" % (name, n, len(r["lat"]), _lat(r["lat"]), "%.0f" % pct(r["restart_ms"], .5), r["misses"]))
    md += ["", "The cue is sent once the server answers (`pactl get-default-sink` says the null sink, asked every 30 ms)",
           "and a recorder is connected (≈ 0.3 s later): how long after that cued's cue takes to sound, with a device",
           "it must open again on a new server. The server's own start (pipewire → wireplumber → pipewire-pulse, the",
           "null sink the default) is the other column: it bounds how soon any client can play."]
    if b:
        md += ["", "Started before the server: cued's `status.sink` before the server started: %s; after the cue: %s; replies: %s." % (
            ", ".join(sorted(set(b["sinks_before"]))), ", ".join(sorted(set(b["sinks_after"]))), ", ".join(sorted(set(b["replies"]))))]
    for key in ("idle", "playing"):
        r = res.get(key)
        if r:
            md += ["", "Restarts %s: cued's sink as the server came back: %s; replies: %s; at the end `status` %s, cued %s." % (
                "while idle" if key == "idle" else "while playing", ", ".join(sorted(set(r["states"]))),
                ", ".join(sorted(set(r["replies"]))), json.dumps(r.get("end")), "running" if r.get("alive") else "**gone**")
                + (" (`dropped` counts the 3 s cues the restarts cut: their device went away under them)" if key == "playing" else "")]
    md += ["", "A new default output (`pactl set-default-sink nul2`, as the desktop's sound settings do; WirePlumber moves",
           "the streams that follow the default), then a cue at once, then one every 100 ms until one is heard on nul2:", "",
           "| cued's stream when the default changes | n | first cue on the new default | on the old | missed | its latency p50 ms | set-default → a cue heard on the new default, p50 / max ms | never (3 s) |",
           "|---|---|---|---|---|---|---|---|"]
    for gap, name in ((0.5, "lingering (a cue 0.5 s before)"), (3.0, "inactive (a cue 3 s before)")):
        r = res.get("default %g" % gap)
        if r:
            md.append("| %s | %d | %d | %d | %d | %s | %s / %s | %d |" % (
                name, n, r["first_on_new"], r["first_on_old"], r["first_missed"],
                _ms(pct(r["lat_new"], .5)) if r["lat_new"] else "-",
                "%.0f" % pct(r["until_new_ms"], .5) if r["until_new_ms"] else "-",
                "%.0f" % max(r["until_new_ms"]) if r["until_new_ms"] else "-", r["never"]))
    m = res.get("moving")
    if m:
        md += ["", "A new default output while a 3 s cue plays (0.5 s in): WirePlumber moves cued's stream with the cue in it.",
               "The rest of the cue reached nul2 in %d of %d; set-default → its first sample there p50 / max %s / %s ms; what nul2" % (
                   m["moved"], n, "%.0f" % pct(m["move_ms"], .5) if m["move_ms"] else "-", "%.0f" % max(m["move_ms"]) if m["move_ms"] else "-"),
               "and nul together heard of it against its 3,000 ms, p50 / min / max: %s ms (0: whole; negative: lost in the move; "
               "positive: played on both); cued's" % (
                   " / ".join("%+.0f" % x for x in (pct(m["rest_ms"], .5), min(m["rest_ms"]), max(m["rest_ms"]))) if m["rest_ms"] else "-"),
               "xruns %s, missed cycles %s, dropped %s over these cues; cued %s." % (
                   m.get("xruns"), m.get("missed_cycles"), m.get("dropped"), "running" if m.get("alive") else "**gone**")]
    md += ["", "A cue on the old output after the switch is one sent before WirePlumber moved cued's stream (cued's stream",
           "follows the default: it names no target). Load average (1/5/15 min) at the start and the end: %s; %s." % (
               res["load"].get("start"), res["load"].get("end"))]
    return md


if __name__ == "__main__":
    section_main("follow", lambda: run(trials=int(os.environ["BENCH_FOLLOW_TRIALS"]) if "BENCH_FOLLOW_TRIALS" in os.environ else None,
                                        quick=os.environ.get("BENCH_QUICK") == "1"), report, HEADING)
