#!/usr/bin/python3
"""The PipeWire section of `make bench`: trigger -> first sample of a probe sound at a private
PipeWire's null sink, for cued (on `alsa:default`, `alsa:pulse` and its native `pipewire`
stream) and the usual ways to play an event sound, in three states of the graph (nothing else
playing; another client holding it at 256 frames; another app's stream holding it at 1024),
all in one run; cued's stream after 0.5 s idle, from stopped and mid-stream; cued's CPU while
a cue plays; the sound server's wakeups while cued idles; the quantum the graph really ran.

The recorder is bench/pw_onset.c (compiled here with cc and libpipewire's pkg-config into
.build/bench): a passive pw_stream on the sink's monitor that asks for no quantum and stamps
each captured frame on the graph's clock (see its header). latency = the onset frame's time
(CLOCK_MONOTONIC, the cycle in which the sink consumed it + its index / rate) - the time the
trigger was sent (CLOCK_MONOTONIC).

The private stack, the recorder and the measuring loop are in pwstack.py.
Figures, not tests. bench.py calls run() and report(); run alone
(`python3 bench/pipewire_bench.py [--update BENCHMARKS.md]`) it prints the section,
and with --update replaces the section in that file.

Environment (for development; run() reads them when bench.py calls it too):
  BENCH_QUICK=1            small runs (a few trials per row).
  BENCH_PW_TRIALS=N        triggers per row and state (default 20; quick 5).
  BENCH_PW_MID=N           mid-stream probes per cued sink and state (default 40; quick 8).
  BENCH_PW_STOPPED=N       from-stopped triggers per cued sink and state (default 3; quick 1).
  BENCH_PW_SOAK=N          cues `--latency-ms 10` on `alsa:default` should have played in all
                           (the xrun check; default 500, quick 0): made up with mid-stream probes.
  BENCH_PW_CUED_ONLY=1     cued's rows only (no cuectl, no other players).
  BENCH_PW_STATES=a,b,c    which graph states (default all three).
  BENCH_PW_SINKS=LIST      which of cued's rows, by label: default, default10, pulse, native.
"""
import collections
import json
import os
import shutil
import subprocess
import tempfile
import time

from benchlib import Client, log, noise, pct, section_main, write_wav
import pwstack
import desktopuser
from pwstack import (CODE_BASE, CUED, CUECTL, POP_S, PROBE_S, RATE, TOOLS, Recorder, Stack, build_recorder, calibrate,
                     cpu_percent, ctx_switches, cpu_ns, measure, server_wakeups, start_cued, start_user_cued, stop)

HEADING = "## Through PipeWire"


def coded_probe(frames):
    """Stereo 1 kHz square whose magnitude counts its frames: the first frame heard tells how
    much of the start was lost (by the player, or by the recorder). Interleaved L R."""
    out = []
    for i in range(frames):
        v = (CODE_BASE + i) * (1 if (i // 24) % 2 == 0 else -1)
        out += (v, v)
    return out


def profile(stack, seconds):
    """pw-profiler over `seconds`: cycles per quantum, from its log's 4th column (the cycle's
    duration in µs: the driver's clock.duration / rate), in frames at 48 kHz."""
    if not shutil.which("pw-profiler"):
        return None
    out = os.path.join(stack.tmp, "profiler.log")
    p = stack.spawn(["pw-profiler", "-o", out], cwd=stack.tmp)
    time.sleep(seconds)
    stop(p)
    q = collections.Counter()
    try:
        with open(out) as f:
            for line in f:
                col = line.split("\t")
                if len(col) > 4 and col[3].strip().isdigit():
                    q[round(int(col[3]) * RATE / 1e6)] += 1
        os.unlink(out)
    except FileNotFoundError:
        pass
    return dict(q)


def fixtures(tmp):
    sounds = os.path.join(tmp, "sounds")
    # The probe: 100 ms (pw-play and play-sample skip 20 ms sounds); pop: the same square, 20 ms.
    os.makedirs(sounds)
    for name in ("probe", "psst1", "psst2"):
        write_wav(os.path.join(sounds, name + ".wav"), coded_probe(int(PROBE_S * RATE)), channels=2)
    write_wav(os.path.join(sounds, "pop.wav"), coded_probe(int(POP_S * RATE)), channels=2)
    # A quiet bed for mid-stream: 10 s of noise at about -40 dBFS (|x| <= 300).
    write_wav(os.path.join(sounds, "bed.wav"), noise(480000, 300, 7))
    return sounds, os.path.join(sounds, "probe.wav")


# cued's rows: label, sink, extra arguments. Its outputs on PipeWire: the ALSA plugin (its default
# period, and --latency-ms 10, issue 20's question), pipewire-pulse's, and the native stream.
CUED_SINKS = (("default", "alsa:default", ()), ("default10", "alsa:default", ("--latency-ms", "10")),
              ("pulse", "alsa:pulse", ()), ("native", "pipewire", ()),
              # Not in the default run (BENCH_PW_SINKS=native,native6): the native stream asking 288 frames.
              ("native6", "pipewire", ("--latency-ms", "6")))
CUED_NAMES = {"default": "cued `alsa:default`", "default10": "cued `alsa:default --latency-ms 10`",
              "pulse": "cued `alsa:pulse`", "native": "cued `pipewire` (native)",
              "native6": "cued `pipewire --latency-ms 6` (native, 288 frames)"}

# The graph's states: what else plays (argv, reading /dev/zero: silence for ever), described.
STATES = {
    "a": (None, "nothing else playing: the graph runs only while a contender plays"),
    "b": (["pw-cat", "--playback", "--latency", "256", "--rate", "48000", "--channels", "2", "--format", "s16", "-"],
          "another client holds the graph at 256 frames (`pw-cat --playback --latency 256` of silence)"),
    "c": (["pw-play", "--latency", "1024", "--rate", "48000", "--channels", "2", "--format", "s16", "-"],
          "another app's stream holds it at 1024 frames (`pw-play --latency 1024` of silence, endless)"),
}

# Windows after the end of a cue (s) over which the server's wakeups are counted, state a only:
# the native stream lingers active 2 s after its last cue, then goes inactive.
IDLE_WINDOWS = {"0.4-2 s after a cue": (0.4, 2.0), "2.5-3.5 s after a cue": (2.5, 3.5)}


def env_int(name, default):
    return int(os.environ[name]) if os.environ.get(name) else default


def run(trials=None, idle_s=None, quick=False, cued_only=None):
    """idle_s: the no-cued baseline of server wakeups (s)."""
    missing = pwstack.missing_tools()
    if missing:
        log("PipeWire section skipped: missing", " ".join(missing))
        return {"skipped": "missing " + " ".join(missing)}
    try:
        recorder = build_recorder()
    except (RuntimeError, OSError) as e:
        log("PipeWire section skipped:", e)
        return {"skipped": str(e)}
    quick = quick or os.environ.get("BENCH_QUICK") == "1"
    trials = trials or env_int("BENCH_PW_TRIALS", 5 if quick else 20)
    mid_n = env_int("BENCH_PW_MID", 8 if quick else 40)
    stopped_n = env_int("BENCH_PW_STOPPED", 1 if quick else 3)
    soak = env_int("BENCH_PW_SOAK", 0 if quick else 500)
    idle_s = idle_s or (2 if quick else 5)
    if cued_only is None:
        cued_only = os.environ.get("BENCH_PW_CUED_ONLY") == "1"
    states = [s for s in os.environ.get("BENCH_PW_STATES", "a,b,c").split(",") if s in STATES]
    labels = os.environ.get("BENCH_PW_SINKS", "default,default10,pulse,native").split(",")
    sinks = [s for s in CUED_SINKS if s[0] in labels]
    tmp = tempfile.mkdtemp(prefix="cued-pw.")
    # cued as a desktop user runs it: no privilege, real time from RTKit (desktopuser), where the
    # bench runs as root; else as the bench runs.
    as_user = desktopuser.RealtimeKit.unavailable() is None
    stack = Stack(tmp, for_user=as_user)
    rtkit = desktopuser.RealtimeKit() if as_user else None
    bins = desktopuser.copy_binaries([CUED, CUECTL], tmp) if as_user else None
    pids = [stack.pipewire.pid, stack.pulse.pid]
    pwstack.windows_counter = lambda: sum(ctx_switches(p) for p in pids)  # noqa: E731  (measure() reads it there)
    server_cpu_ns = lambda: sum(cpu_ns(p) for p in pids)  # noqa: E731
    started = time.monotonic()
    res = {"trials": trials, "mid_n": mid_n, "stopped_n": stopped_n, "idle_s": idle_s, "states": {}, "cues": {}, "status": {},
           "load": [os.getloadavg()[0]], "quick": quick, "cued_only": cued_only,
           "user": ("uid %d with RTKit" % desktopuser.UID) if as_user else desktopuser.RealtimeKit.unavailable()}
    xvfb = None
    try:
        sounds, probe = fixtures(tmp)
        res["quantum"] = stack.quantum()
        env = stack.env
        subprocess.run(["pactl", "upload-sample", probe, "probe"], env=env, check=True, capture_output=True)
        log("pipewire: calibrating the recorder")
        res["calibration"] = calibrate(stack, recorder, 4 if quick else 10)
        rec = Recorder(stack, recorder, threshold=0, quiet_ms=50)
        canberra = not cued_only and shutil.which("canberra-gtk-play") and shutil.which("Xvfb")
        if not cued_only and not canberra:
            res["canberra"] = "canberra-gtk-play or Xvfb missing (make bench-deps installs gnome-session-canberra, xvfb)"
        if canberra:
            xvfb = stack.spawn(["Xvfb", ":96", "-nolisten", "tcp"])
            time.sleep(1.0)

        def spawner(args, e=None, user=False):
            kw = desktopuser.popen_args() if user else {}
            return lambda: subprocess.Popen(args, env=e or env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)

        def reap(p):
            p.wait()

        for state in states:
            holder_argv, _ = STATES[state]
            st = res["states"][state] = {"rows": {}, "mid": {}, "mid_busy": {}, "stopped": {}, "cpu": {}, "server_cpu": {}, "idle": {},
                                         "row_quanta": {}}
            holder = None
            if holder_argv:
                with open("/dev/zero", "rb") as zero:
                    holder = stack.spawn(holder_argv, stdin=zero)
            time.sleep(1.0)
            rec.quanta()
            st["profiler"] = profile(stack, 1.0)  # the same second, seen by pw-profiler
            st["between"] = rec.quanta()  # cycles per quantum over 1 s with no contender
            log("pipewire state %s: graph between cues %s, pw-profiler %s" % (state, st["between"] or "stopped", st["profiler"] or "-"))
            st["server_cpu_alone"], = cpu_percent([server_cpu_ns], 2.0)
            if state == "a":
                time.sleep(1.0)  # the new recorder's links settled
                log("pipewire idle: no cued, %.0f s" % idle_s)
                st["idle"]["no cued"] = {"all": server_wakeups(stack, idle_s)}

            def row(name, fn):
                rec.quanta()
                r = fn()
                st["row_quanta"][name] = rec.quanta()
                return r

            for label, sink, extra in sinks:
                if as_user:
                    cued, sock, client = start_user_cued(stack, "%s-%s" % (label, state), sink, sounds, bins, rtkit, extra)
                else:
                    cued, sock = start_cued(stack, "%s-%s" % (label, state), sink, sounds, extra)
                    client = lambda: Client(sock)  # noqa: E731
                c = client()
                name = CUED_NAMES[label]
                play = lambda: c.send("play probe")  # noqa: E731
                answer = lambda _: c.reply()  # noqa: E731
                log("pipewire %s: %s after 0.5 s idle" % (state, name))
                st["rows"][name] = row(name, lambda: measure(rec, play, answer, trials, quiet_s=0.5))
                cues = trials + 2
                if label == "native" and not cued_only:
                    log("pipewire %s: cuectl play (cued on pipewire)" % state)
                    n = "`cuectl play` (cued on `pipewire`)"
                    cuectl = bins[CUECTL] if as_user else CUECTL
                    st["rows"][n] = row(n, lambda: measure(rec, spawner([cuectl, "--socket", sock, "play", "probe"], user=as_user), reap,
                                                           trials, quiet_s=0.5))
                    cues += trials + 2
                if label != "default10":
                    log("pipewire %s: %s from stopped (%d)" % (state, name, stopped_n))
                    st["stopped"][name] = row(name + " stopped", lambda: measure(
                        rec, play, answer, stopped_n, quiet_s=3.5, warmup=0, windows=IDLE_WINDOWS if state == "a" else None,
                        floor=state != "a"))
                    cues += stopped_n
                    if state == "a":
                        st["idle"][name] = st["stopped"][name]["idle"]
                # Mid-stream: the quiet bed plays; the loud 20 ms pop is mixed in.
                n_mid = mid_n
                if label == "default10" and soak:
                    n_mid = max(mid_n, -(-soak // len(states)) - trials - 2 - 2)
                log("pipewire %s: %s mid-stream (%d)" % (state, name, n_mid))
                rec.wait_quiet(0.2)
                rec.set(2000, 3)
                bed = {"t": 0.0, "beds": 0}

                def play_bed():
                    c.request("mute")  # fades out the bed playing
                    c.request("unmute")
                    c.request("play bed")
                    bed["t"] = time.monotonic()
                    bed["beds"] += 1
                    time.sleep(0.3)

                def bed_left():
                    if time.monotonic() - bed["t"] > 8.5:
                        rec.wait_quiet(0.05)  # the last pop has ended (mute would fade it out)
                        play_bed()

                play_bed()
                st["mid"][name] = row(name + " mid", lambda: measure(rec, lambda: c.send("play pop"), answer, n_mid, quiet_s=0.05,
                                                                     sound_s=POP_S, before=bed_left))
                cues += n_mid + 2
                # The same with one core kept busy by another program (a plain spinning shell, normal
                # priority: a user's build, a browser tab), as on a busy laptop.
                log("pipewire %s: %s mid-stream, a core busy (%d)" % (state, name, mid_n))
                spin = stack.spawn(["sh", "-c", "while :; do :; done"])
                try:
                    time.sleep(0.5)
                    st["mid_busy"][name] = row(name + " mid busy", lambda: measure(
                        rec, lambda: c.send("play pop"), answer, mid_n, quiet_s=0.05, sound_s=POP_S, before=bed_left))
                finally:
                    stop(spin)
                cues += mid_n + 2
                # CPU while a cue plays: the whole daemon, 2 s of the bed alone.
                if time.monotonic() - bed["t"] > 7:
                    play_bed()
                time.sleep(0.2)
                st["cpu"][name], st["server_cpu"][name] = cpu_percent([lambda: cpu_ns(cued.pid), server_cpu_ns], 2.0)
                c.request("mute")
                c.request("unmute")
                cues += bed["beds"]
                rec.set(0, 50)
                status = json.loads(c.request("status")[3:])
                res["status"].setdefault(name, []).append({
                    "state": state, "sink": status["sink"], "latency_us": status["latency_us"], "played": status.get("played"),
                    "stalls": status.get("stalls"), "xruns": status["xruns"], "dropped": status["dropped"],
                    "missed_cycles": status.get("missed_cycles"), "audio_thread": status.get("audio_thread")})
                log("pipewire %s: %s margin %s frames, grown %s after %s misses" % (
                    state, name, status["sink"].get("margin_frames"), status["sink"].get("margin_growths"), status["sink"].get("margin_misses")))
                res["cues"][name] = res["cues"].get(name, 0) + cues
                c.s.close()
                stop(cued)
                rec.wait_quiet(0.3)

            if not cued_only:
                contenders = [("`pactl play-sample`", ["pactl", "play-sample", "probe", "nul"], None),
                              ("`paplay`", ["paplay", probe], None),
                              ("`pw-play`", ["pw-play", probe], None),
                              ("`aplay -D pipewire`", ["aplay", "-q", "-D", "pipewire", probe], None)]
                if canberra:
                    contenders.append(("`canberra-gtk-play -f` (pulse driver)", ["canberra-gtk-play", "-f", probe],
                                       dict(env, DISPLAY=":96", CANBERRA_DRIVER="pulse")))
                for name, argv, e in contenders:
                    log("pipewire %s: %s" % (state, name))
                    st["rows"][name] = row(name, lambda: measure(rec, spawner(argv, e), reap, trials, quiet_s=0.12))
            if holder:
                stop(holder)
            st["gaps"] = rec.gaps
            res["load"].append(os.getloadavg()[0])
        res["recorder"] = dict(rec.status(), gaps=rec.gaps)
        # Each sound heard whole? (loud frames, span) of every onset measured; the last one of the
        # run has none (a sound's E line comes when the next begins).
        for st in res["states"].values():
            for part in ("rows", "mid", "mid_busy", "stopped"):
                for r in st[part].values():
                    r["sounds"] = [rec.ends.get(ns) for ns in r["onsets"]]
                    # A sound whose cycles the recorder itself did not all run in (its real-time thread
                    # stalled with the rest: the VM, see docs/decisions/0006-holes-are-judged-against-the-machine.md): its holes are the machine's.
                    r["stalled"] = [bool(e) and any(ns < g <= ns + e[1] * 1e9 / RATE + 3e6 for g in rec.gap_times)
                                    for ns, e in zip(r["onsets"], r["sounds"])]
        rec.close()
    finally:
        stack.close()
        if rtkit:
            rtkit.close()
        shutil.rmtree(tmp, ignore_errors=True)
    res["seconds"] = time.monotonic() - started
    return res


def _fmt_q(q):
    """{quantum: cycles} as '128' or '128 (19), 1024 (1)', most first."""
    if not q:
        return "-"
    items = sorted(q.items(), key=lambda kv: -kv[1])
    if len(items) == 1:
        return str(items[0][0])
    return ", ".join("%d (%d)" % kv for kv in items)


def _fmt_time_q(q):
    """{quantum: cycles} as the share of the graph's time at each quantum: '128 60 %, 1024 40 %'."""
    if not q:
        return "stopped"
    total = sum(k * v for k, v in q.items())
    items = sorted(q.items(), key=lambda kv: -kv[0] * kv[1])
    if len(items) == 1:
        return str(items[0][0])
    return ", ".join("%d %.0f %%" % (k, 100.0 * k * v / total) for k, v in items)


def _ms(v):
    return "%.1f" % (v / 1000.0)


def _stats(r):
    v = r["lat"]
    if not v:
        return "0 | - | - | - | - | %d" % r["misses"]
    return "%d | %s | %s | %s | %s | %d" % (len(v), _ms(pct(v, .5)), _ms(pct(v, .9)), _ms(pct(v, .99)), _ms(max(v)), r["misses"])


def _is_cued(name):
    return name.startswith(("cued", "`cuectl"))


def _whole(r):
    """'holes / cut': sounds with frames under the threshold inside them, sounds shorter than the
    probe (of those whose end was seen)."""
    seen = [(x, stalled) for x, stalled in zip(r.get("sounds", []), r.get("stalled", [])) if x]
    if not seen:
        return "-"
    holes = sum(1 for (loud, span), _ in seen if span > loud)
    cut = sum(1 for (loud, span), _ in seen if loud < r["frames"])
    stalled = sum(1 for (loud, span), st in seen if st and (span > loud or loud < r["frames"]))
    return "%d / %d%s" % (holes, cut, " (%d in a stall)" % stalled if stalled else "")


def _lost(r):
    """The most probe frames missing before the first one heard, over a row's trials."""
    return str(max(r["lost"])) if r.get("lost") else "-"


def report(res):
    if "skipped" in res:
        return [HEADING, "", "Not measured: " + res["skipped"] + "."]
    states = res["states"]
    cal = res.get("calibration", {})
    cal_txt = "; ".join("%s: largest offset %s over %d clicks" % (
        k, ("%+.3f ms" % (max(v["offsets_ns"], key=abs) / 1e6)) if v["offsets_ns"] else "-", len(v["offsets_ns"])) for k, v in cal.items())
    load = res.get("load", [])
    rec = res.get("recorder", {})
    md = [HEADING, "",
          "cued runs as a desktop user runs it: %s (its audio thread real-time through RTKit on a private system bus, as" % (
              res.get("user") or "as the bench runs"),
          "status's audio thread column says; `cuectl` too). A private PipeWire 0.3.65 (dbus, pipewire with a timer-clocked `support.null-audio-sink` `nul`, wireplumber,",
          "pipewire-pulse), all in one run (%.0f s; 1-min load %s on 2 cores). Latency is from the trigger to the probe's first" % (
              res.get("seconds", 0), " → ".join("%.1f" % x for x in load)),
          "sample as the sink consumed it, in ms. The recorder (bench/pw_onset.c) is a passive `pw_stream` on the sink's",
          "monitor that asks for no quantum: the graph runs as if nobody recorded (stopped between sounds when nothing else",
          "plays; at the other nodes' smallest request, or the default, when it runs). It stamps each captured frame on the",
          "graph's clock: the start of the cycle in which the sink consumed it (the driver's `clock.nsec`, CLOCK_MONOTONIC,",
          "the clock the trigger's time is read on) + its index / 48 kHz. A monitor reaches its reader one cycle late (the",
          "driver writes it at the end of its cycle, after its followers ran), and the recorder stamps frames with the cycle",
          "they were consumed in, not the one it read them in: checked in every run by a click that a player in the",
          "recorder's process queues for a known cycle (%s). A real device plays a frame" % (cal_txt or "not run"),
          "its own delay after the sink consumed it (ALSA: the frames it holds), the same for every row and not included: so a",
          "stream that hands its buffer over in the cycle it was woken in can read a little under 0 (the cycle began just",
          "before the trigger). Each trigger is sent a uniformly random 0–21.3 ms (one 1024-frame quantum) after the recorder",
          "heard quiet: 0.5 s after the previous sound for cued and `cuectl` (the native stream lingers active 2 s after a cue,",
          "so it is still running), 0.12 s for the others (each starts afresh anyway). The probe is a 100 ms 1 kHz square",
          "(pw-play and play-sample skip 20 ms sounds) whose magnitude counts its frames, so the first sample heard says how",
          "many of its frames were lost before it (\"start lost\": 0 everywhere means nothing was cut, by the player or the",
          "recorder). \"holes / cut\": sounds heard with frames missing inside them (a silent stretch between the first",
          "and the last frame heard), sounds heard shorter than they are; \"in a stall\": of them, those during which the",
          "recorder, a real-time thread too, missed a cycle itself (the machine stopped: see docs/decisions/0006).",
          "%d triggers per row and state (+ 2 first ones" % res["trials"],
          "not counted); a miss is a trigger not heard within 3 s.",
          "The quantum columns are what the graph ran (the frames per captured buffer): in the onset's cycle, and over the",
          "whole row (share of the graph's running time). The metadata's default quantum is %d frames. Checks on the" % res["quantum"],
          "recorder: %s of %s buffers were not as long as the cycle they were consumed in (where the graph changes its" % (
              rec.get("mismatched", "?"), rec.get("cycles", "?")),
          "quantum, the null sink's cycle lasts the old quantum and consumes the new one: a stretch of silence, or of",
          "overlap, in its timeline and not in the data; holes are counted in the frames consumed); %s graph restarts or" % rec.get("gaps", "?"),
          "skipped cycles; %s buffers of a cycle it had not run in (a passive reader is sometimes added back to a restarting" % rec.get("late", "?"),
          "graph a cycle late: stamped from that cycle's own start, see pw_onset.c).", ""]
    names = []
    for st in states.values():
        for n in st["rows"]:
            if n not in names:
                names.append(n)
    for key, st in states.items():
        prof = st.get("profiler")
        md += ["### State %s: %s" % (key, STATES[key][1]), "",
               "The graph with no contender playing: %s (pw-profiler over the same second: %s)." % (
                   ("%s frames per cycle" % _fmt_time_q(st["between"])) if st.get("between") else "stopped",
                   _fmt_time_q(prof) if prof else ("no cycle" if prof is not None else "not run")), "",
               "| contender | n | p50 ms | p90 ms | p99 ms | max ms | misses | start lost | holes / cut | quantum at onset | graph over the row |",
               "|---|---|---|---|---|---|---|---|---|---|---|"]
        for n in names:
            r = st["rows"].get(n)
            if r:
                md.append("| %s | %s | %s | %s | %s | %s |" % (n, _stats(r), _lost(r), _whole(r), _fmt_q(r["quanta"]),
                                                           _fmt_time_q(st["row_quanta"].get(n))))
        md.append("")
    md += ["cued from a stopped stream (%d triggers per sink and state, each 3.5 s after the previous cue ended: the native" % res["stopped_n"],
           "stream has gone inactive; the plugins' streams stop after every cue anyway), and mid-stream (a quiet 10 s bed,",
           "|x| ≤ 300, plays; latency to the first sample of a loud 20 ms pop mixed in: |x| > 2000 after 3 ms without;",
           "%d pops per sink and state, more on `--latency-ms 10` for the xrun count); CPU of the whole cued process over" % res["mid_n"],
           "2 s of the bed alone (schedstat of every thread), and of the sound server's (pipewire + pipewire-pulse) over the",
           "same 2 s, against its CPU over 2 s of the state's graph with no cued (in brackets). \"next cycle\": in states b and c, where the graph runs between",
           "cues, when its first cycle after each from-stopped trigger began (the recorder's cycle starts, on the same clock):",
           "a stream's sound starts in a cycle, so no player can be heard before it; \"in it\": the cues whose first sample",
           "was in that very cycle.", "",
           "| cued on | state | stopped n | p50 ms | max ms | start lost | quantum | next cycle p50 ms | in it | mid-stream n | p50 ms | p90 ms | p99 ms | max ms | misses | holes / cut | quantum | CPU while a cue plays | server's CPU then (no cued) |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for label, _, _ in CUED_SINKS:
        name = CUED_NAMES[label]
        for key, st in states.items():
            if name not in st["mid"]:
                continue
            s = st["stopped"].get(name)
            if s and s["lat"]:
                fl = s.get("floor") or []
                stopped = "%d%s | %s | %s | %s | %s | %s | %s" % (
                    len(s["lat"]), " (+%d missed)" % s["misses"] if s["misses"] else "", _ms(pct(s["lat"], .5)), _ms(max(s["lat"])),
                    _lost(s), _fmt_q(s["quanta"]), _ms(pct(fl, .5)) if fl else "-", "%d/%d" % (s["first"], len(fl)) if fl else "-")
            else:
                stopped = "%s | - | - | - | - | - | -" % ("-" if not s else "0 (%d missed)" % s["misses"])
            m = st["mid"][name]
            server = st.get("server_cpu", {}).get(name)
            md.append("| %s | %s | %s | %s | %s | %s | %.2f %% | %s |" % (
                name.replace("cued ", ""), key, stopped, _stats(m), _whole(m), _fmt_q(m["quanta"]), st["cpu"][name],
                "-" if server is None else "%.2f %% (%.2f %%)" % (server, st.get("server_cpu_alone", 0.0))))
    md += mid_busy_report(res)
    md += ["", "What cued reported (`status`) at the end of each state (one cued per sink and state, its counters since it started;",
           "margin: what it ended at, in frames, and the misses it grew after; -: fixed by the device):", "",
           "| cued on | state | kind | period / buffer frames | device delay µs | inside cued p50 / p99 µs | played | xruns | missed cycles | margin (growths / misses) | stalls | dropped | audio thread |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, rows in res["status"].items():
        for s in rows:
            k = s["sink"]
            margin = "-" if k.get("margin_frames") is None else "%s (%s / %s)" % (
                k.get("margin_frames"), k.get("margin_growths", 0), k.get("margin_misses", 0))
            md.append("| %s | %s | %s | %s / %s | %s | %s / %s | %s | %s | %s | %s | %s | %s | %s |" % (
                name.replace("cued ", ""), s["state"], k.get("kind"), k.get("period_frames"), k.get("buffer_frames"), k.get("device_delay_us"),
                s["latency_us"].get("p50"), s["latency_us"].get("p99"), s.get("played"), s["xruns"], s.get("missed_cycles"), margin,
                s.get("stalls"), s["dropped"], s.get("audio_thread")))
    a = states.get("a", {})
    if a.get("idle"):
        md += ["", "The sound server's wakeups while cued idles (state a): context switches per second of pipewire + pipewire-pulse,",
               "counted after each from-stopped cue in two windows after it ended (cued's default options; the recorder, passive,",
               "runs only while the graph does). No cued: %.0f s with nothing playing, before cued's rows." % res["idle_s"], "",
               "| situation | %s |" % " | ".join(IDLE_WINDOWS), "|---|%s" % ("---|" * len(IDLE_WINDOWS))]
        for name, v in a["idle"].items():
            if name == "no cued":
                md.append("| no cued | %s |" % " | ".join("%.1f" % v["all"] for _ in IDLE_WINDOWS))
            else:
                md.append("| %s | %s |" % (name, " | ".join("-" if v.get(w) is None else "%.1f" % v[w] for w in IDLE_WINDOWS)))
    md += [""] + targets(res)
    if res.get("canberra"):
        md += ["", "canberra-gtk-play not measured: " + res["canberra"] + "."]
    return md


def mid_busy_report(res):
    """Mid-stream, idle against a core kept busy, as the sink consumed the pop and as a client recording
    the monitor first had it."""
    states = res["states"]
    md = ["", "Mid-stream, idle and with one core kept busy by another program (`sh -c 'while :; do :; done'`, normal",
          "priority), %d pops each, the same bed and pop as above. \"at the sink\": the figures above, when the sink" % res["mid_n"],
          "consumed the pop's first frame (a device then adds its own delay). \"a monitor recorder\": when the recorder's",
          "own callback had that frame: a cycle later (a monitor is written at the end of the driver's cycle) plus its",
          "wake-up, which is what a probe reading the monitor (parec, pw-record, a test) reports.", "",
          "| cued on | state | idle: at the sink p50 / p90 / p99 / max ms | a monitor recorder p50 / p99 ms | holes / cut | busy: at the sink p50 / p90 / p99 / max ms | a monitor recorder p50 / p99 ms | holes / cut |",
          "|---|---|---|---|---|---|---|---|"]
    for label, _, _ in CUED_SINKS:
        name = CUED_NAMES[label]
        for key, st in states.items():
            m, b = st["mid"].get(name), st.get("mid_busy", {}).get(name)
            if not m or not b:
                continue

            def four(r):
                l = r["lat"]
                return " / ".join(_ms(pct(l, q)) for q in (.5, .9, .99)) + " / " + _ms(max(l)) if l else "-"

            def rec_(r):
                a = r.get("arrive") or []
                return "%s / %s" % (_ms(pct(a, .5)), _ms(pct(a, .99))) if a else "-"
            md.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (name.replace("cued ", ""), key, four(m), rec_(m), _whole(m),
                                                                four(b), rec_(b), _whole(b)))
    return md


def targets(res):
    """Issue 20's targets, as ratios and figures of this run: reported, never asserted."""
    states = res["states"]
    native = CUED_NAMES["native"]
    rows = []
    for key, st in states.items():
        m = st["mid"].get(native)
        if m and m["lat"]:
            p99 = pct(m["lat"], .99)
            rows.append(("native mid-stream p99 ≤ 5 ms (state %s)" % key, "%.1f ms" % (p99 / 1000), p99 <= 5000))
        b = st.get("mid_busy", {}).get(native)
        if b and b["lat"]:
            p99 = pct(b["lat"], .99)
            rows.append(("native mid-stream p99 ≤ 5 ms with a core busy (state %s)" % key, "%.1f ms" % (p99 / 1000), p99 <= 5000))
    for key, st in states.items():
        s = st["stopped"].get(native)
        alts = [(pct(r["lat"], .5), n) for n, r in st["rows"].items() if r["lat"] and not _is_cued(n)]
        if s and s["lat"] and alts:
            best, who = min(alts)
            p50 = pct(s["lat"], .5)
            fl = s.get("floor") or []
            floor = ("; the graph's next cycle began %.1f ms p50 after the trigger (%.2f× the best other), %d of %d cues were in it"
                     % (pct(fl, .5) / 1000, pct(fl, .5) / best if best > 0 else float("nan"), s["first"], len(fl))) if fl else ""
            rows.append(("native from stopped p50 ≤ 0.25 × the best other player's p50 (state %s)" % key,
                         "%.1f ms vs 0.25 × %.1f ms (%s): %.2f×%s" % (p50 / 1000, best / 1000, who, p50 / best if best > 0 else float("nan"), floor),
                         p50 <= 0.25 * best))
    cued_cues = sum(res["cues"].values())
    cued_misses = sum(r["misses"] for st in states.values() for part in ("rows", "mid", "mid_busy", "stopped")
                      for n, r in st[part].items() if _is_cued(n))
    all_misses = sum(r["misses"] for st in states.values() for part in ("rows", "mid", "mid_busy", "stopped") for r in st[part].values())
    rows.append(("0 misses for cued (over ≥ 500 cues)", "%d in %d measured cues of %d played (all contenders: %d)" % (
        cued_misses, sum(len(r["lat"]) + r["misses"] for st in states.values() for part in ("rows", "mid", "mid_busy", "stopped")
                         for n, r in st[part].items() if _is_cued(n)), cued_cues, all_misses), cued_misses == 0 and cued_cues >= 500))
    idle = states.get("a", {}).get("idle", {})
    base = idle.get("no cued", {}).get("all")
    if base is not None:
        w = list(IDLE_WINDOWS)[-1]
        for name, v in idle.items():
            if name != "no cued" and v.get(w) is not None:
                rows.append(("server wakeups %s with %s ≈ with no cued (%.1f/s)" % (w, name, base), "%.1f/s" % v[w], v[w] <= base * 1.2 + 1))
    for name in [CUED_NAMES[k] for k, _, _ in CUED_SINKS]:
        cpu = [st["cpu"][name] for st in states.values() if name in st["cpu"]]
        if cpu:
            rows.append(("%s: CPU while a cue plays ≤ 2 %% of a core" % name, " / ".join("%.2f %%" % x for x in cpu) + " (states %s)" % ", ".join(
                k for k, st in states.items() if name in st["cpu"]), max(cpu) <= 2))
    d10 = CUED_NAMES["default10"]
    if d10 in res["status"]:
        xr = sum(s["xruns"] for s in res["status"][d10])
        n = res["cues"].get(d10, 0)
        d = CUED_NAMES["default"]
        xd = sum(s["xruns"] for s in res["status"].get(d, []))
        rows.append(("`--latency-ms 10` on `alsa:default`: 0 xruns over ≥ 500 cues", "%d xruns in %d cues (default period: %d in %d); not made the default: "
                     "on a graph forced to 256 frames, above its 240-frame period, it underran (`make glitch-soak`: 10 xruns in 609 cues)" % (
            xr, n, xd, res["cues"].get(d, 0)), xr == 0 and n >= 500))
    md = ["| target (issue 20, PipeWire) | measured | |", "|---|---|---|"]
    for t, m, ok in rows:
        md.append("| %s | %s | %s |" % (t, m, "**met**" if ok else "**not met**"))
    return md


if __name__ == "__main__":
    section_main("pipewire", run, report, HEADING)
