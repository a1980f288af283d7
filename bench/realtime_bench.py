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
BENCH_RT_STOPPED=N (default 6), BENCH_RT_LOADS=0,2,4, BENCH_RT_ROUNDS=N (the user's and root's cued in turn, a fresh
one a round, the cues shared out: default 3), BENCH_RT_SOAK_S=N (default 600).
"""
import json
import os
import random
import shutil
import subprocess
import tempfile
import threading
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

    def stalls(self):
        """(at ns, late ms) of every stall noted."""
        out = []
        with open(self.log) as f:
            for line in f:
                p = line.split()
                if len(p) == 3:
                    out.append((int(p[1]), int(p[2]) / 1e6))
        return out

    def since(self, t0_ns):
        """(late ms) of each stall noted after t0_ns."""
        return [late for at, late in self.stalls() if at >= t0_ns]

    def close(self):
        stop(self.p)


class MissWatch:
    """cued's `missed_cycles`, looked at every 50 ms on a connection of its own: when each miss was
    seen, so that each can be put on the machine or not (a stall of the watch's near it)."""

    def __init__(self, client):
        self.c, self.events, self.done = client, [], threading.Event()
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        last, prev = None, time.monotonic_ns()
        while not self.done.wait(0.05):
            try:
                n = json.loads(self.c.request("status")[3:])["missed_cycles"]
            except (OSError, ValueError, KeyError):
                return
            now = time.monotonic_ns()
            if last is not None and n > last:
                self.events.append((prev, now, n - last))
            last, prev = n, now

    def close(self):
        self.done.set()
        self.t.join()
        self.c.s.close()
        return self.events


def attribute(events, watch):
    """(missed cycles, of them the machine's): a miss is the machine's when the stall watch saw a
    stall of 2.2 ms or more (a 128-frame cycle lost) between the look before it (less a 1,024-frame
    cycle: cued counts a miss at the look after it) and the look that saw it."""
    stalls = watch.stalls()
    total = mach = 0
    for t0, t1, n in events:
        total += n
        if any(t0 - 21_400_000 <= at <= t1 and late >= 2.2 for at, late in stalls):
            mach += n
    return total, mach


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
    rounds = env_int("BENCH_RT_ROUNDS", 1 if quick else 3)
    recorder = build_recorder()
    tmp = tempfile.mkdtemp(prefix="cued-rt.")
    stack = Stack(tmp, for_user=True)
    stack.user_env = dict(stack.env)
    rtkit = desktopuser.RealtimeKit()
    bins = desktopuser.copy_binaries([CUED], tmp)
    watch = Watch(tmp)
    res = {"loads": {}, "n_mid": n_mid, "n_stopped": n_stopped, "rounds": rounds, "cpus": os.cpu_count()}
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
                # The user's and root's cued in turn, a fresh one a round: a stall that lands in one
                # row only says where it landed; rounds let both meet the same machine.
                order = []
                for k in range(rounds):
                    order += [(CONTENDERS[0], k), (CONTENDERS[1], k)] if k % 2 == 0 else [(CONTENDERS[1], k), (CONTENDERS[0], k)]
                order += [(CONTENDERS[2], 0), (CONTENDERS[3], 0)]
                for name, k in order:
                    log("as a user, %d busy loops: %s%s" % (load, name, " (round %d of %d)" % (k + 1, rounds) if name in CONTENDERS[:2] else ""))
                    t0 = time.monotonic_ns()
                    row = {"load": os.getloadavg()[0]}
                    if name.startswith("`pw-play"):
                        row["stopped"], row["probes"] = pw_play_rows(stack, rec, probe, bed_probes, n_stopped * 3)
                    else:
                        each = rounds if name in CONTENDERS[:2] else 1
                        label = "%s-%d-%s-%d" % ("u" if "user" in name else "r", load, "rt" if "no RTKit" not in name else "nort", k)
                        if name == "cued, root":
                            p, sock = start_cued(stack, label, "pipewire", sounds)
                            c, watcher = Client(sock), MissWatch(Client(sock))
                        else:
                            p, sock, client = start_user_cued(stack, label, "pipewire", sounds, bins,
                                                              None if "no RTKit" in name else rtkit)
                            c, watcher = client(), MissWatch(client())
                        time.sleep(0.3)  # cued's ask of RTKit, after READY=1, has been answered
                        row["mid"], row["stopped"] = cued_rows(rec, c, -(-n_mid // each), -(-n_stopped // each))
                        s = json.loads(c.request("status")[3:])
                        missed, mach = attribute(watcher.close(), watch)
                        row["status"] = {"audio_thread": s.get("audio_thread"), "missed_cycles": s.get("missed_cycles"),
                                         "margin_frames": s["sink"].get("margin_frames"),
                                         "margin_growths": s["sink"].get("margin_growths"), "xruns": s.get("xruns"),
                                         "seen_missed": missed, "machine_missed": mach}
                        c.s.close()
                        stop(p)
                    row["stalls"] = watch.since(t0)
                    row["seconds"] = (time.monotonic_ns() - t0) / 1e9
                    rows.setdefault(name, []).append(row)
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
            for name, parts in rows.items():
                for r in parts:
                    for part in ("mid", "stopped"):
                        if part in r:
                            r[part]["sounds"] = [rec.ends.get(ns) for ns in r[part]["onsets"]]
                rows[name] = merged(parts)
        rec.close()
    finally:
        watch.close()
        stack.close()
        rtkit.close()
        shutil.rmtree(tmp, ignore_errors=True)
    res["seconds"] = time.monotonic() - started
    return res


def merged(parts):
    """One row of a contender's rounds: latencies and sounds pooled, counters summed, the margin
    after each round (a fresh cued a round) listed."""
    row = dict(parts[-1])
    for part in ("mid", "stopped"):
        if part in row:
            row[part] = {k: sum((p[part][k] for p in parts), []) for k in ("lat", "onsets", "sounds")}
            row[part]["misses"] = sum(p[part]["misses"] for p in parts)
    row["stalls"] = sum((p["stalls"] for p in parts), [])
    if "status" in row:
        st = row["status"] = dict(row["status"])
        for k in ("missed_cycles", "seen_missed", "machine_missed"):
            st[k] = sum(p["status"].get(k) or 0 for p in parts)
        st["margins"] = [p["status"].get("margin_frames") for p in parts]
        st["threads"] = sorted({p["status"].get("audio_thread") for p in parts})
    row["rounds"] = len(parts)
    return row


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
    res = dict(res, loads={int(k): v for k, v in res["loads"].items()})  # JSON keeps them as text (BENCH_REPORT)
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
          "trigger → the sink consuming the first loud frame, ms. The user's and root's cued run in %d rounds, in turn, a" % res.get("rounds", 1),
          "fresh cued a round (its margin starts at 128 frames) with its share of the cues, pooled in the row: a machine",
          "stall that lands in one round says where it landed, not whose thread is better. Missed cycles: cued's status;",
          "the machine's: seen (status every 50 ms) within a 1,024-frame cycle of a late wake ≥ 2.2 ms (a 128-frame cycle",
          "less the watch's look) of a SCHED_FIFO 99 thread on either CPU (bench/stallwatch.c), a cycle any client misses.",
          "Margin after: each round's. pw-play's mid-stream row is a 10 s stream of 40 probes, no trigger: its holes.", "",
          "| busy loops | contender | audio thread | mid-stream n | p50 ms | p99 ms | max ms | from stopped p50 / max ms | holes / cut | missed cycles (the machine's) | margin after | machine stalls ≥ 2.2 ms (worst) |",
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
            missed = "%d (%d)" % (st["missed_cycles"], st["machine_missed"]) if "missed_cycles" in st else "-"
            md.append("| %d | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                load, name, ", ".join(st["threads"]) if "threads" in st else "RTKit (module-rt)" if "pw-play" in name else "-",
                mid, stopped, holes, missed, ", ".join(str(m) for m in st.get("margins", [])) or "-", mach))
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
        st, rst = u.get("status", {}), root.get("status", {})
        rows.append(("as a user with RTKit, status says `realtime (rtkit)` (%d busy loops)" % load, ", ".join(st.get("threads", [])),
                     st.get("threads") == ["realtime (rtkit)"]))
        if load and u["mid"]["lat"] and root["mid"]["lat"]:
            a, b = pct(u["mid"]["lat"], .99), pct(root["mid"]["lat"], .99)
            rows.append(("native mid-stream p99 as a user ≤ 1.25 × root's (%d busy loops)" % load, "%.1f vs %.1f ms (%.2f×)" % (
                a / 1000, b / 1000, a / b if b else float("nan")), a <= 1.25 * b))
        if load:
            at = lambda x: sum(1 for m in x.get("margins", []) if m == 128)  # noqa: E731
            missed, mach = st.get("missed_cycles") or 0, st.get("machine_missed") or 0
            # The margin grows on a miss heard, by design (decision 0017), root's as a user's: it stays
            # at 128 as root's does when every round's stays, or it grew on misses, each the machine's.
            rows.append(("margin stays at 128 frames as a user, as root's: grown only after a miss the stall watch put on the machine (%d busy loops)" % load,
                         "user: 128 after %d of %d rounds, %d missed, %d the machine's (root: %d of %d, %d, %d)" % (
                             at(st), len(st.get("margins", [])), missed, mach, at(rst), len(rst.get("margins", [])),
                             rst.get("missed_cycles") or 0, rst.get("machine_missed") or 0),
                         at(st) == len(st.get("margins", [])) or 0 < missed == mach))
            rows.append(("no missed cycle as a user the stall watch does not put on the machine (%d busy loops)" % load,
                         "%d missed, %d of them the machine's (root: %d, %d)" % (missed, mach, rst.get("missed_cycles") or 0,
                                                                                  rst.get("machine_missed") or 0), missed == mach))
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
