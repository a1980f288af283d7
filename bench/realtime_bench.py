#!/usr/bin/python3
"""The "As a user" section of `make bench` (BENCH_ONLY=realtime): cued's native PipeWire stream run
as a desktop user runs it (uid 65534, no privilege: desktopuser), its audio thread real-time
through RTKit on a private system bus, with the machine idle and with 2 and 4 busy loops (`sh -c
'while :; do :; done'`, normal priority: a build on a laptop); beside it, in the same run, PipeWire's
own `pw-play --latency=128` started the same way (libpipewire's module-rt gets its data thread real
time from the same RTKit), cued as root (SCHED_FIFO by itself: what every figure was measured as
before) and cued as a user with no RTKit at all (normal scheduling: what a user without it gets).
Mid-stream (a quiet bed plays, a loud 20 ms pop is mixed in) and from stopped (the stream gone
inactive); latency = trigger -> the sink consuming the first loud frame (pwstack's recorder);
cued's margin and missed cycles from its status; the machine's own stalls from bench/stallwatch.c
(a SCHED_FIFO 99 thread per CPU), so that each missed cycle can be put on the machine or not
(docs/decisions/0006). Figures, not tests.

Environment: BENCH_QUICK=1 (a few cues a row), BENCH_RT_MID=N (pops per row, default 60),
BENCH_RT_STOPPED=N (default 6), BENCH_RT_LOADS=0,2,4.
"""
import json
import os
import random
import shutil
import subprocess
import tempfile
import time

import desktopuser
from benchlib import Client, log, pct, section_main
from pipewire_bench import fixtures
from pwstack import (CUED, POP_S, ROOT, RATE, Recorder, Stack, build_recorder, measure, start_cued, start_user_cued, stop)

HEADING = "## As a user: real time through RTKit"
BEFORE = "## Through PipeWire"
CONTENDERS = ("cued, user, RTKit", "cued, root", "cued, user, no RTKit", "`pw-play --latency=128`, user, RTKit")


def env_int(name, default):
    return int(os.environ[name]) if os.environ.get(name) else default


class Watch:
    """bench/stallwatch.c, running: the machine's stalls over a stretch of time."""

    def __init__(self, tmp):
        exe = os.path.join(tmp, "stallwatch")
        subprocess.run(["gcc", "-O2", "-pthread", "-o", exe, os.path.join(ROOT, "bench", "stallwatch.c")], check=True)
        self.log = os.path.join(tmp, "stalls.txt")
        self.p = subprocess.Popen([exe], stdout=open(self.log, "w"))
        time.sleep(0.2)

    def since(self, t0_ns):
        """(late ms) of each stall noted after t0_ns."""
        out = []
        with open(self.log) as f:
            for line in f:
                p = line.split()
                if len(p) == 3 and int(p[1]) >= t0_ns:
                    out.append(int(p[2]) / 1e6)
        return out

    def close(self):
        stop(self.p)


def cued_rows(rec, c, n_mid, n_stopped):
    """Mid-stream (bed + pops) and from stopped (3.5 s apart: the stream inactive) for one cued."""
    answer = lambda _: c.reply()  # noqa: E731
    rec.wait_quiet(0.2)
    rec.set(2000, 3)
    bed = {"t": 0.0}

    def play_bed():
        c.request("mute")
        c.request("unmute")
        c.request("play bed")
        bed["t"] = time.monotonic()
        time.sleep(0.3)

    def bed_left():
        if time.monotonic() - bed["t"] > 8.5:
            rec.wait_quiet(0.05)
            play_bed()

    play_bed()
    mid = measure(rec, lambda: c.send("play pop"), answer, n_mid, quiet_s=0.05, sound_s=POP_S, before=bed_left)
    c.request("mute")
    c.request("unmute")
    rec.set(0, 50)
    rec.wait_quiet(0.3)
    stopped = measure(rec, lambda: c.send("play probe"), answer, n_stopped, quiet_s=3.5, warmup=0)
    return mid, stopped


def pw_play_rows(stack, rec, probe, bed_probes, n_stopped):
    """`pw-play --latency=128` as the user: from stopped (the probe, a process each), and a 10 s
    stream of probes every 250 ms over silence, whose holes are its missed cycles (no trigger)."""
    def spawn():
        return subprocess.Popen(["pw-play", "--latency=128", probe], env=stack.user_env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, **desktopuser.popen_args())
    rec.set(0, 50)
    stopped = measure(rec, spawn, lambda p: p.wait(), n_stopped, quiet_s=0.5)
    rec.wait_quiet(0.3)
    t0 = time.monotonic_ns()
    p = subprocess.Popen(["pw-play", "--latency=128", bed_probes], env=stack.user_env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, **desktopuser.popen_args())
    p.wait()
    rec.wait_quiet(0.3)
    with rec.cond:
        return stopped, [e for ns, e in rec.ends.items() if ns >= t0]


def audio_thread(pid):
    """The tid of cued's audio thread."""
    for t in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/comm" % (pid, t)) as f:
            if f.read().strip() == "cued-audio":
                return int(t)
    return None


def thread_figures(pid, tid):
    """(CPU ns, voluntary switches, involuntary switches, policy) of one thread."""
    with open("/proc/%d/task/%d/schedstat" % (pid, tid)) as f:
        cpu = int(f.read().split()[0])
    vol = invol = 0
    with open("/proc/%d/task/%d/status" % (pid, tid)) as f:
        for line in f:
            if line.startswith("voluntary_ctxt_switches"):
                vol = int(line.split()[1])
            elif line.startswith("nonvoluntary_ctxt_switches"):
                invol = int(line.split()[1])
    return cpu, vol, invol, os.sched_getscheduler(tid)


def soak(stack, rtkit, bins, sounds, seconds):
    """cued as the user with RTKit, its RLIMIT_RTTIME's soft limit at 10 ms (prlimit; cued only ever
    lowers it): a real-time thread that ran 10 ms without sleeping would get SIGXCPU and be dropped
    to normal, for good, and status would say so. `seconds` of a bed looping with a pop every 250 ms
    mixed in; status every 10 s."""
    sock = os.path.join(stack.user_dir, "soak.sock")
    env = dict(stack.env, XDG_STATE_HOME=os.path.join(stack.user_dir, "state-soak"), XDG_CONFIG_HOME=os.path.join(stack.tmp, "noconfig"),
               DBUS_SYSTEM_BUS_ADDRESS=rtkit.address)
    p = stack.spawn(["prlimit", "--rttime=10000:200000", bins[CUED], "--socket", sock, "--sink", "pipewire", "--sounds", sounds,
                     "--log-level", "error"], env=env, **desktopuser.popen_args())
    desktopuser.wait_answering(sock, "soak")
    c = desktopuser.connect(sock)
    time.sleep(0.3)
    c.request("play bed loop")
    tid = audio_thread(p.pid)
    first = thread_figures(p.pid, tid)
    t0 = time.monotonic()
    threads, pops, nxt = set(), 0, t0
    while time.monotonic() - t0 < seconds:
        c.request("play pop")
        pops += 1
        if time.monotonic() >= nxt:
            threads.add(json.loads(c.request("status")[3:]).get("audio_thread"))
            nxt += 10
        time.sleep(0.25)
    last = thread_figures(p.pid, tid)
    s = json.loads(c.request("status")[3:])
    threads.add(s.get("audio_thread"))
    span = time.monotonic() - t0
    with open("/proc/%d/limits" % p.pid) as f:
        limit = [line for line in f if line.startswith("Max realtime timeout")][0].split()[3:5]
    c.s.close()
    stop(p)
    return {"seconds": span, "pops": pops, "threads": sorted(t for t in threads if t), "rttime": limit,
            "cpu_pct": 100.0 * (last[0] - first[0]) / (span * 1e9), "wakeups_s": (last[1] - first[1]) / span,
            "preempted_s": (last[2] - first[2]) / span, "policy_end": last[3], "missed_cycles": s.get("missed_cycles"),
            "margin_frames": s["sink"].get("margin_frames"), "margin_growths": s["sink"].get("margin_growths"),
            "played": s.get("played"), "dropped": s.get("dropped")}


def run(quick=False):
    why = desktopuser.RealtimeKit.unavailable()
    if why:
        log("As-a-user section skipped:", why)
        return {"skipped": why}
    quick = quick or os.environ.get("BENCH_QUICK") == "1"
    n_mid = env_int("BENCH_RT_MID", 10 if quick else 60)
    n_stopped = env_int("BENCH_RT_STOPPED", 2 if quick else 6)
    loads = [int(x) for x in os.environ.get("BENCH_RT_LOADS", "0,2,4").split(",")]
    recorder = build_recorder()
    tmp = tempfile.mkdtemp(prefix="cued-rt.")
    stack = Stack(tmp, for_user=True)
    stack.user_env = dict(stack.env)
    rtkit = desktopuser.RealtimeKit()
    bins = desktopuser.copy_binaries([CUED], tmp)
    watch = Watch(tmp)
    res = {"loads": {}, "n_mid": n_mid, "n_stopped": n_stopped, "cpus": os.cpu_count()}
    started = time.monotonic()
    try:
        sounds, probe = fixtures(tmp)
        stack.user_env["DBUS_SYSTEM_BUS_ADDRESS"] = rtkit.address
        bed_probes = os.path.join(tmp, "probes.wav")
        make_probes(bed_probes)
        rec = Recorder(stack, recorder, threshold=0, quiet_ms=50)
        for load in loads:
            spins = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(load)]
            rows = res["loads"][load] = {}
            try:
                time.sleep(0.5)
                for name in CONTENDERS:
                    log("as a user, %d busy loops: %s" % (load, name))
                    t0 = time.monotonic_ns()
                    row = {"load": os.getloadavg()[0]}
                    if name.startswith("`pw-play"):
                        row["stopped"], row["probes"] = pw_play_rows(stack, rec, probe, bed_probes, n_stopped * 3)
                    else:
                        label = "%s-%d-%s" % ("u" if "user" in name else "r", load, "rt" if "no RTKit" not in name else "nort")
                        if name == "cued, root":
                            p, sock = start_cued(stack, label, "pipewire", sounds)
                            c = Client(sock)
                        else:
                            p, sock, client = start_user_cued(stack, label, "pipewire", sounds, bins,
                                                              None if "no RTKit" in name else rtkit)
                            c = client()
                        time.sleep(0.3)  # cued's ask of RTKit, after READY=1, has been answered
                        row["mid"], row["stopped"] = cued_rows(rec, c, n_mid, n_stopped)
                        s = json.loads(c.request("status")[3:])
                        row["status"] = {"audio_thread": s.get("audio_thread"), "missed_cycles": s.get("missed_cycles"),
                                         "margin_frames": s["sink"].get("margin_frames"),
                                         "margin_growths": s["sink"].get("margin_growths"), "xruns": s.get("xruns")}
                        c.s.close()
                        stop(p)
                    row["stalls"] = watch.since(t0)
                    row["seconds"] = (time.monotonic_ns() - t0) / 1e9
                    rows[name] = row
                    rec.wait_quiet(0.3)
            finally:
                for s in spins:
                    stop(s)
        soak_s = env_int("BENCH_RT_SOAK_S", 20 if quick else 600)
        if soak_s:
            log("as a user: a %d s soak with RLIMIT_RTTIME's soft limit at 10 ms" % soak_s)
            t0 = time.monotonic_ns()
            res["soak"] = soak(stack, rtkit, bins, sounds, soak_s)
            res["soak"]["stalls"] = [x for x in watch.since(t0) if x >= 2.2]
        # Each pop heard whole? (loud frames, span) of every onset (a sound's E line comes when the next begins).
        for rows in res["loads"].values():
            for r in rows.values():
                for part in ("mid", "stopped"):
                    if part in r:
                        r[part]["sounds"] = [rec.ends.get(ns) for ns in r[part]["onsets"]]
        rec.close()
    finally:
        watch.close()
        stack.close()
        rtkit.close()
        shutil.rmtree(tmp, ignore_errors=True)
    res["seconds"] = time.monotonic() - started
    return res


def make_probes(path):
    """10 s: a 100 ms coded probe every 250 ms over silence (pw-play's stream, held running)."""
    from benchlib import write_wav
    from pipewire_bench import coded_probe
    frames, out = 10 * RATE, []
    probe = coded_probe(int(0.1 * RATE))
    k = 0
    while k < frames:
        chunk = min(int(0.25 * RATE), frames - k)
        body = probe[:2 * min(chunk, len(probe) // 2)]
        out += body + [0] * (2 * chunk - len(body))
        k += chunk
    write_wav(path, out, channels=2)


def _ms(v):
    return "%.1f" % (v / 1000.0)


def report(res):
    if "skipped" in res:
        return [HEADING, "", "Not measured: " + res["skipped"] + "."]
    md = [HEADING, "",
          "cued's native stream (`--sink pipewire`) on a private PipeWire as a desktop user runs it: uid %d, no privilege," % desktopuser.UID,
          "its audio thread real-time through RTKit (rtkit-daemon and polkitd on a private system bus, the polkit rule an",
          "active session has), with the machine idle and %s busy loops (`sh -c 'while :; do :; done'`, normal priority) on" % " and ".join(
              str(x) for x in res["loads"] if x),
          "its %d cores; beside it in the same run: cued as root (SCHED_FIFO 20 by itself: what the figures were measured" % res["cpus"],
          "as before), cued as a user with no RTKit (normal scheduling), and `pw-play --latency=128` started as the same user",
          "(module-rt gets its data thread RTKit's real time). Mid-stream: a quiet bed plays, a loud 20 ms pop is mixed in",
          "(%d a row); from stopped: %d cues 3.5 s apart (cued's stream inactive again; pw-play: a process a cue). Latency:" % (
              res["n_mid"], res["n_stopped"]),
          "trigger → the sink consuming the first loud frame, ms. Missed cycles and the margin: cued's status at the row's",
          "end (one fresh cued a row: the margin starts at 128 frames). The machine: late wakes of a SCHED_FIFO 99 thread",
          "per CPU (bench/stallwatch.c) during the row, ≥ 2.2 ms (a 128-frame cycle less the watch's look): a cycle any",
          "client misses. pw-play's mid-stream row is a 10 s stream of 40 probes, no trigger: its holes.", "",
          "| busy loops | contender | audio thread | mid-stream n | p50 ms | p99 ms | max ms | from stopped p50 / max ms | holes / cut | missed cycles | margin after | machine stalls ≥ 2.2 ms (worst) |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for load, rows in res["loads"].items():
        for name in CONTENDERS:
            r = rows.get(name)
            if not r:
                continue
            st = r.get("status", {})
            stalls = [s for s in r["stalls"] if s >= 2.2]
            mach = "%d (%.1f ms)" % (len(stalls), max(stalls)) if stalls else "0"
            s = r["stopped"]
            stopped = "%s / %s" % (_ms(pct(s["lat"], .5)), _ms(max(s["lat"]))) if s["lat"] else "- (%d missed)" % s["misses"]
            if "mid" in r:
                m = r["mid"]
                mid = "%d | %s | %s | %s" % (len(m["lat"]), _ms(pct(m["lat"], .5)), _ms(pct(m["lat"], .99)), _ms(max(m["lat"]))) if m["lat"] else "0 | - | - | -"
                sounds, frames = [x for x in m.get("sounds", []) if x], round(POP_S * RATE)
            else:
                mid = "- | - | - | -"
                sounds, frames = [x for x in r.get("probes", []) if x], round(0.1 * RATE)
            holes = "%d / %d of %d" % (sum(1 for loud, span in sounds if span > loud), sum(1 for loud, span in sounds if loud < frames),
                                       len(sounds)) if sounds else "-"
            md.append("| %d | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                load, name, st.get("audio_thread", "RTKit (module-rt)" if "pw-play" in name else "-"), mid, stopped, holes,
                st.get("missed_cycles", "-"), st.get("margin_frames", "-"), mach))
    k = res.get("soak")
    if k:
        md += ["", "The thread never spins (RTKit's condition: a real-time thread has a budget, RLIMIT_RTTIME, past which it is",
               "stopped): cued as the user with RTKit for %.0f s, its RLIMIT_RTTIME soft limit lowered to 10 ms before it started" % k["seconds"],
               "(`prlimit --rttime=10000:200000`: SIGXCPU, and cued drops the thread to normal for good and says so, had it ever",
               "run 10 ms at real time without sleeping), a 10 s bed looping, a pop every 250 ms mixed in (%d); status every 10 s." % k["pops"], "",
               "| audio thread, every look | its policy at the end | RLIMIT_RTTIME soft / hard µs | its CPU | its wake-ups/s | preempted/s | played / dropped | missed cycles | margin after (growths) | machine stalls ≥ 2.2 ms |",
               "|---|---|---|---|---|---|---|---|---|---|",
               "| %s | %s | %s | %.2f %% | %.0f | %.1f | %s / %s | %s | %s (%s) | %d%s |" % (
                   ", ".join(k["threads"]), {os.SCHED_RR: "SCHED_RR", os.SCHED_FIFO: "SCHED_FIFO"}.get(k["policy_end"] & 0xff, "normal"),
                   " / ".join(k["rttime"]), k["cpu_pct"], k["wakeups_s"], k["preempted_s"], k["played"], k["dropped"], k["missed_cycles"],
                   k["margin_frames"], k["margin_growths"], len(k["stalls"]), " (worst %.1f ms)" % max(k["stalls"]) if k["stalls"] else "")]
    md += [""] + targets(res)
    return md


def targets(res):
    """Issue 36's: reported, never asserted."""
    rows = []
    for load, r in res["loads"].items():
        u, root = r.get(CONTENDERS[0]), r.get(CONTENDERS[1])
        if not u or not root:
            continue
        st = u.get("status", {})
        rows.append(("as a user with RTKit, status says `realtime (rtkit)` (%d busy loops)" % load, st.get("audio_thread"),
                     st.get("audio_thread") == "realtime (rtkit)"))
        if load and u["mid"]["lat"] and root["mid"]["lat"]:
            a, b = pct(u["mid"]["lat"], .99), pct(root["mid"]["lat"], .99)
            rows.append(("native mid-stream p99 as a user ≤ 1.25 × root's (%d busy loops)" % load, "%.1f vs %.1f ms (%.2f×)" % (
                a / 1000, b / 1000, a / b if b else float("nan")), a <= 1.25 * b))
        if load:
            rows.append(("margin stays at 128 frames as a user (%d busy loops)" % load, str(st.get("margin_frames")), st.get("margin_frames") == 128))
            mach = [s for s in u["stalls"] if s >= 2.2]
            missed = st.get("missed_cycles") or 0
            rows.append(("no missed cycle as a user the stall watch does not put on the machine (%d busy loops)" % load,
                         "%d missed, %d machine stalls ≥ 2.2 ms" % (missed, len(mach)), missed == 0 or len(mach) > 0))
    k = res.get("soak")
    if k:
        rows.append(("the audio thread never spins: real time (RTKit) all through a %.0f s soak with a 10 ms RT budget" % k["seconds"],
                     ", ".join(k["threads"]), k["threads"] == ["realtime (rtkit)"] and k["policy_end"] & 0xff in (os.SCHED_RR, os.SCHED_FIFO)))
    md = ["| target (issue 36) | measured | |", "|---|---|---|"]
    for t, m, ok in rows:
        md.append("| %s | %s | %s |" % (t, m, "**met**" if ok else "**not met**"))
    return md


if __name__ == "__main__":
    section_main("realtime", run, report, HEADING, before=BEFORE)
