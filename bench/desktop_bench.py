#!/usr/bin/python3
"""The desktop's event sources in `make bench`: the real feedbackd against cued as the
owner of org.sigxcpu.Feedback, and what one notification sound costs with cued's
`[notifications] enabled = true`, through the private PipeWire of pipewire_bench.

Both feedback daemons run on the same private session bus (no service directories, so
D-Bus activation cannot start the system's feedbackd) and the same private PipeWire, in
turn: feedbackd (Debian's /usr/libexec/feedbackd, its default theme, GSETTINGS_BACKEND=memory;
GSound -> libcanberra's pulse driver -> pipewire-pulse) owns the name first; cued is then
started, queues for the name, and gets it when feedbackd is killed. Each gets the same
TriggerFeedback calls (`message-new-instant`, which both resolve through feedbackd's default
theme to the freedesktop sound theme's message-new-instant.oga, 1.03 s, whose first frame is
non-zero). Latency: from just before the method call is handed to GDBus (a Gio connection
kept open; the reply is not waited for) to the first non-zero sample read from the null
sink's monitor. Before each trigger, a random 0-6 ms wait, so that triggers do not all land
at one point of the graph's cycle. A miss: no sound within 3 s.

Notifications: notification_server.py owns org.freedesktop.Notifications (it answers; cued
only watches); a Notify call without sound hints (cued plays its `normal` sound,
message-new-instant) is sent the same way, at least 1.5 s apart (cued's burst rule, 3 at once
then 1 a second, then drops none).

Figures, not tests. bench.py calls run() and report(); run alone
(`python3 bench/desktop_bench.py [--update BENCHMARKS.md]`, or `BENCH_ONLY=desktop python3
bench/bench.py`) it prints the section, and with --update replaces it in that file.
Environment: BENCH_DESKTOP_TRIALS (default 100; BENCH_QUICK=1: 20).
"""
import json
import os
import random
import shutil
import signal
import subprocess
import time

from benchlib import (Client, cue_set, cued_status, loadavg, log, pct, not_measured, release_dir, section_main,
                      skipped, square, targets_table, wait_answering)
from pwstack import RATE, Recorder, build_recorder, private_stack

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REL = release_dir(ROOT)
CUED = os.path.join(REL, "cued")
HEADING = "## Desktop event sources: feedbackd and notifications"
FEEDBACKD = "/usr/libexec/feedbackd"
TOOLS = ["dbus-daemon", "pipewire", "wireplumber", "pipewire-pulse", "pactl", "pw-dump", "cc", "pkg-config"]
EVENT = "message-new-instant"
SOUND = "/usr/share/sounds/freedesktop/stereo/message-new-instant.oga"
APP = "org.example.CuedBench"
NOTIFY = "cued, one notification sound (Notify call)"
SOCKET = "cued, its socket"
GAP_S = 0.5  # after the previous sound ended: each trigger finds the daemon idle (cued's PipeWire stream still lingers: 2 s)
# cued as a user runs it: auto (PipeWire's own stream here); BENCH_DESKTOP_SINK=alsa:default for the plugin.
CUED_SINK = os.environ.get("BENCH_DESKTOP_SINK", "auto")


def gio():
    import gi
    gi.require_version("Gio", "2.0")
    from gi.repository import Gio, GLib
    return Gio, GLib


class Bus:
    """A Gio connection to the private bus: calls sent without waiting, replies and
    FeedbackEnded signals collected when the main context is iterated."""

    def __init__(self, address):
        Gio, GLib = gio()
        self.Gio, self.GLib = Gio, GLib
        self.ctx = GLib.MainContext.default()
        self.conn = Gio.DBusConnection.new_for_address_sync(
            address, Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION, None, None)
        self.replies = []  # (tag, value or error text)
        self.ended = {}  # feedback id -> [reasons]
        self.conn.signal_subscribe(None, "org.sigxcpu.Feedback", "FeedbackEnded", "/org/sigxcpu/Feedback", None,
                                   Gio.DBusSignalFlags.NONE, self._ended)

    def _ended(self, conn, sender, path, iface, signal, params):
        fid, reason = params.unpack()
        self.ended.setdefault(fid, []).append(reason)

    def sync(self, dest, path, iface, method, args, reply_type):
        v = self.conn.call_sync(dest, path, iface, method, args, self.GLib.VariantType(reply_type) if reply_type else None,
                                self.Gio.DBusCallFlags.NONE, 5000, None)
        return v.unpack() if v is not None else None

    def owner_pid(self, name):
        """The pid of the process owning `name`, or None."""
        try:
            unique = self.sync("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetNameOwner",
                               self.GLib.Variant("(s)", (name,)), "(s)")[0]
            return self.sync("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                             "GetConnectionUnixProcessID", self.GLib.Variant("(s)", (unique,)), "(u)")[0]
        except Exception:
            return None

    def send(self, tag, dest, path, iface, method, args, reply_type):
        """Hands the call to GDBus and returns at once; the reply lands in self.replies."""
        def done(conn, res):
            try:
                self.replies.append((tag, conn.call_finish(res).unpack()))
            except Exception as e:  # noqa: BLE001 - reported, not raised
                self.replies.append((tag, "error: %s" % e))
        self.conn.call(dest, path, iface, method, args, self.GLib.VariantType(reply_type), self.Gio.DBusCallFlags.NONE,
                       5000, None, done)

    def pump(self, until=None, timeout_s=3.0):
        """Dispatches what came in until `until()` holds (None: for all of timeout_s)."""
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            while self.ctx.pending():
                self.ctx.iteration(False)
            if until is not None and until():
                return True
            time.sleep(0.002)
        return until is None

    def trigger_feedback(self, tag):
        self.send(tag, "org.sigxcpu.Feedback", "/org/sigxcpu/Feedback", "org.sigxcpu.Feedback", "TriggerFeedback",
                  self.GLib.Variant("(ssa{sv}i)", (APP, EVENT, {}, -1)), "(u)")

    def notify(self, tag):
        self.send(tag, "org.freedesktop.Notifications", "/org/freedesktop/Notifications", "org.freedesktop.Notifications",
                  "Notify", self.GLib.Variant("(susssasa{sv}i)", ("cued-bench", 0, "", "Bench %d" % tag, "a notification", [], {}, -1)),
                  "(u)")

    def close(self):
        self.conn.close_sync(None)


def measure(rec, bus, trigger, trials, warmup, rng, env, after=None):
    """trigger -> the first non-zero sample as the sink consumed it (bench/pw_onset, as
    pipewire_bench.measure), with a random 0-6 ms wait before each trigger; the call's reply is
    collected after the onset (or the miss). Also how long each sound was heard (the recorder's
    span from its first to its last non-zero sample, its sounds split by 40 ms of quiet), the
    quantum of the cycle each onset came in, and, during the first sound, the playback streams
    PipeWire has (pw-dump)."""
    out, misses, tags, onsets, quanta, streams = [], 0, [], [], {}, None
    bus.replies.clear()
    bus.ended.clear()
    for i in range(trials + warmup):
        rec.wait_quiet(GAP_S)
        time.sleep(rng.uniform(0, 0.006))
        t0 = time.monotonic_ns()
        trigger(i)
        o = rec.onset_after(t0)
        if after:
            after()
        else:
            bus.pump(lambda: any(tag == i for tag, _ in bus.replies[-3:]), timeout_s=3.0)
        if i == 0 and o is not None:
            streams = playback_streams(env)
        if i < warmup:
            continue
        tags.append(i)
        if o is None:
            misses += 1
        else:
            out.append((o[0] - t0) / 1000.0)
            onsets.append(o[0])
            quanta[o[2]] = quanta.get(o[2], 0) + 1
    rec.wait_quiet(GAP_S)
    time.sleep(0.05)
    with rec.cond:  # a sound's span is known once the next began: the last one's is not
        heard = [rec.ends[t][1] * 1000.0 / RATE for t in onsets if t in rec.ends]
    return out, misses, tags, heard, streams, quanta


def merge(a, b):
    return {k: a.get(k, 0) + b.get(k, 0) for k in set(a) | set(b)}


def playback_streams(env):
    """What streams PipeWire has right now (playback and the recorder): names, client APIs, latencies."""
    r = subprocess.run(["pw-dump"], env=env, capture_output=True, text=True, timeout=10)
    try:
        objs = json.loads(r.stdout)
    except ValueError:
        return None
    out = []
    for o in objs:
        props = (o.get("info") or {}).get("props") or {}
        if props.get("media.class") in ("Stream/Output/Audio", "Stream/Input/Audio"):
            out.append({k: props.get(k) for k in ("media.class", "application.name", "client.api", "media.name", "media.filename",
                                                  "node.latency", "application.process.binary") if props.get(k) is not None})
    return out


def wait_for(pred, timeout_s, step=0.02):
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return False


def tail(path, n=8):
    try:
        with open(path, errors="replace") as f:
            return " / ".join(line.strip() for line in f.readlines()[-n:])
    except OSError:
        return ""


def run(trials=None, quick=False):
    missing = [t for t in TOOLS if not shutil.which(t)] + [p for p in (FEEDBACKD, SOUND) if not os.path.exists(p)]
    try:
        gio()
    except Exception:  # noqa: BLE001
        missing.append("python3-gi")
    if missing:
        return skipped("desktop", missing, "make deps installs feedbackd, sound-theme-freedesktop, python3-gi")
    trials = trials or (20 if quick else 100)
    warmup = 3
    rng = random.Random(21)
    tmp, stack = private_stack("cued-desktop.")
    res = {"trials": trials, "warmup": warmup, "gap_s": GAP_S, "lat": {}, "load": {"start": loadavg()}, "notes": []}
    try:
        return measure_all(stack, tmp, res, trials, warmup, rng)
    except RuntimeError as e:  # a daemon that did not come up: said in the section, the rest of make bench goes on
        log("desktop section failed:", e)
        res["failed"] = str(e)
        return res
    finally:
        stack.close()
        shutil.rmtree(tmp, ignore_errors=True)


ROUNDS = 2  # feedbackd, cued, feedbackd, cued: a machine whose load drifts weighs on both alike


def measure_all(stack, tmp, res, trials, warmup, rng):
    bus = rec = None
    try:
        env = stack.env
        res["quantum"] = stack.quantum()
        res["rounds"] = []
        bus = Bus(env["DBUS_SESSION_BUS_ADDRESS"])
        if bus.owner_pid("org.sigxcpu.Feedback") is not None:
            raise RuntimeError("org.sigxcpu.Feedback has an owner on the private bus before the bench started one")
        rec = Recorder(stack, build_recorder(), quiet_ms=40)
        fenv = dict(env, GSETTINGS_BACKEND="memory", CANBERRA_DRIVER="pulse")
        for k in ("DISPLAY", "WAYLAND_DISPLAY", "FEEDBACK_THEME"):
            fenv.pop(k, None)
        conf = os.path.join(tmp, "cued.toml")
        with open(conf, "w") as f:
            f.write("[notifications]\nenabled = true\n")
        sounds = os.path.join(tmp, "sounds")
        cue_set(sounds, square(4800))  # cued's required cues; none is named like a feedbackd event
        clog = os.path.join(tmp, "cued.log")
        acc = {"feedbackd": ([], 0, [], [], {}), "cued": ([], 0, [], [], {})}
        cued = sock = None
        per_round = [trials // ROUNDS + (1 if r < trials % ROUNDS else 0) for r in range(ROUNDS)]

        def run_owner(key, n):
            v, m, tags, heard, streams, quanta = measure(rec, bus, bus.trigger_feedback, n, warmup, rng, env)
            bus.pump(timeout_s=2.0)  # the last FeedbackEnded
            e = ended_summary(bus, tags)
            old = acc[key]
            acc[key] = (old[0] + v, old[1] + m, old[2] + [e], old[3] + heard, merge(old[4], quanta))
            res.setdefault("streams", {}).setdefault(key, streams)
            return v

        for r, n in enumerate(per_round):
            # feedbackd owns the name (a cued of the previous round is gone first).
            if cued is not None:
                cued.terminate()
                cued.wait()
            flog = os.path.join(tmp, "feedbackd-%d.log" % r)
            with open(flog, "w") as f:
                fbd = stack.spawn([FEEDBACKD], env=fenv, stderr=f)
            if not wait_for(lambda: bus.owner_pid("org.sigxcpu.Feedback") == fbd.pid, 10):
                raise RuntimeError("feedbackd did not own org.sigxcpu.Feedback: " + tail(flog))
            log("desktop round %d: feedbackd (pid %d) owns org.sigxcpu.Feedback; %d TriggerFeedback %s" % (r + 1, fbd.pid, n, EVENT))
            load0 = loadavg()
            fv = run_owner("feedbackd", n)

            # cued starts, queues behind feedbackd, and gets the name when feedbackd is killed.
            sock = os.path.join(tmp, "cued-%d.sock" % r)
            cenv = dict(env, XDG_STATE_HOME=os.path.join(tmp, "state-cued"), XDG_CONFIG_HOME=os.path.join(tmp, "noconfig"))
            with open(clog, "a") as f:
                cued = stack.spawn([CUED, "--socket", sock, "--sink", CUED_SINK, "--sounds", sounds, "--config", conf,
                                    "--idle-close-s", "3600", "--log-level", "info"], env=cenv, stderr=f)
            try:
                wait_answering(sock, "desktop")
            except RuntimeError:
                raise RuntimeError("cued did not start: " + tail(clog))
            spec = (cued_status(sock).get("sink") or {}).get("spec", CUED_SINK)
            res["cued_sink"] = spec
            res["cued_sink_note"] = {"pipewire": ", PipeWire's own stream", "alsa:default": ", the PipeWire ALSA plugin"}.get(spec, "") + (
                ", the pick of `auto`" if CUED_SINK == "auto" else "")
            ok = wait_for(lambda: (cued_status(sock).get("bus") or {}).get("feedback") in ("queued", "owner"), 5)
            res.setdefault("cued_before_handover", (cued_status(sock).get("bus") or {}) if ok else "no bus status")
            fbd.kill()
            fbd.wait()
            t = time.monotonic()
            if not wait_for(lambda: bus.owner_pid("org.sigxcpu.Feedback") == cued.pid, 10, step=0.005):
                raise RuntimeError("cued did not get org.sigxcpu.Feedback after feedbackd left")
            res.setdefault("handover_ms", []).append((time.monotonic() - t) * 1000)
            log("desktop round %d: cued (pid %d) owns org.sigxcpu.Feedback after %.0f ms; %d TriggerFeedback %s"
                % (r + 1, cued.pid, res["handover_ms"][-1], n, EVENT))
            cv = run_owner("cued", n)
            # For reference, the same sound through cued's socket (no D-Bus): half as many.
            c = Client(sock)
            try:
                v, m, _, _, _, q = measure(rec, bus, lambda i: c.send("play " + EVENT), n // 2, 1, rng, env,
                                           after=lambda: c.reply())
            finally:
                c.s.close()
            old = res["lat"].get(SOCKET, ([], 0))
            res["lat"][SOCKET] = (old[0] + v, old[1] + m)
            qs = res.setdefault("quanta", {})
            qs[SOCKET] = merge(qs.get(SOCKET, {}), q)
            res["rounds"].append({"n": n, "feedbackd_p50": pct(fv, .5), "cued_p50": pct(cv, .5), "load": [load0, loadavg()]})

        for key in ("feedbackd", "cued"):
            v, m, ends, heard, quanta = acc[key]
            res["lat"][key] = (v, m)
            res.setdefault("quanta", {})[key] = quanta
            res.setdefault("heard_ms", {})[key] = pct(heard, .5)
            res[key + "_ended"] = {"ids": sum(e["ids"] for e in ends), "n_errors": sum(e["n_errors"] for e in ends),
                                   "errors": sum((e["errors"] for e in ends), [])[:3], "no_reply": sum(e["no_reply"] for e in ends),
                                   "ended_once": sum(e["ended_once"] for e in ends),
                                   "reasons": {k: sum(e["reasons"].get(k, 0) for e in ends) for e in ends for k in e["reasons"]}}
        res["load"]["after the feedback rounds"] = loadavg()

        # A notification sound: Notify to the stand-in notification server, the last cued watching.
        ns = stack.spawn(["/usr/bin/python3", os.path.join(ROOT, "bench", "notification_server.py")], stdout=subprocess.PIPE)
        line = ns.stdout.readline().decode().strip()
        if line != "ready":
            raise RuntimeError("notification_server.py did not start: %r" % line)
        if not wait_for(lambda: (cued_status(sock).get("bus") or {}).get("notifications") == "watching", 5):
            res["notes"].append("cued's status did not say notifications watching: %s" % cued_status(sock).get("bus"))
        log("desktop: %d Notify calls, cued watching" % trials)
        v, m, tags, heard, _, quanta = measure(rec, bus, bus.notify, trials, warmup, rng, env)
        res["lat"][NOTIFY] = (v, m)
        res.setdefault("quanta", {})[NOTIFY] = quanta
        res["heard_ms"]["notification"] = pct(heard, .5)
        res["notify_errors"] = sum(1 for tag, r in bus.replies if tag in tags and isinstance(r, str))
        st = cued_status(sock)
        res["cued_status"] = {k: st.get(k) for k in ("bus", "xruns", "dropped", "stalls", "latency_us")}
        res["load"]["end"] = loadavg()
        cued.terminate()
        cued.wait()
        with open(clog, errors="replace") as f:
            res["cued_log"] = [ln.strip() for ln in f if "warn" in ln.lower() or "error" in ln.lower()][-5:]
    finally:
        if rec is not None:
            rec.close()
        if bus is not None:
            bus.close()
    return res


def ended_summary(bus, tags):
    """Replies and FeedbackEnded signals of the measured triggers: ids answered, errors, how
    many ids ended exactly once, and the end reasons seen."""
    got = {tag: r for tag, r in bus.replies}
    ids = [got[t][0] for t in tags if isinstance(got.get(t), tuple)]
    errors = [got[t] for t in tags if isinstance(got.get(t), str)]
    once = sum(1 for i in ids if len(bus.ended.get(i, [])) == 1)
    reasons = {}
    for i in ids:
        for r in bus.ended.get(i, []):
            reasons[r] = reasons.get(r, 0) + 1
    return {"ids": len(ids), "no_reply": len(tags) - len(ids) - len(errors), "errors": errors[:3], "n_errors": len(errors),
            "ended_once": once, "reasons": reasons}


def report(res):
    if not_measured(HEADING, res):
        return not_measured(HEADING, res)
    lat = res["lat"]
    def node_latency(key, cls="Stream/Output/Audio"):
        st = [x for x in (res.get("streams") or {}).get(key) or [] if x.get("media.class") == cls] or [{}]
        return st[0].get("node.latency", "?")

    md = [HEADING, "",
          "The real feedbackd (Debian's `/usr/libexec/feedbackd` 0.0.3, its default theme, `GSETTINGS_BACKEND=memory`;",
          "it plays through GSound → libcanberra's pulse driver → pipewire-pulse, a new stream per event) and cued",
          "(`--sink %s`%s) each own `org.sigxcpu.Feedback` in turn on one private" % (res.get("cued_sink", "alsa:default"), res.get("cued_sink_note", "")),
          "session bus (no service directories: nothing is D-Bus-activated) on a private PipeWire as in the section",
          "above: feedbackd first; then cued starts, queues for the name, and gets it when feedbackd is killed; then",
          "a second round the same way (a fresh feedbackd once that cued is stopped), so that a machine whose load",
          "drifts weighs on both alike. Each gets %d `TriggerFeedback(\"%s\", \"%s\", {}, -1)`" % (res["trials"], APP, EVENT),
          "calls in all (%d unmeasured at the start of each round), which both resolve through feedbackd's default" % res["warmup"],
          "theme to the freedesktop sound theme's `message-new-instant.oga` (1.03 s; its first frame is non-zero).",
          "Latency: from just before the call is handed to GDBus (a Gio connection kept open, the reply not waited",
          "for) to the first non-zero sample as the null sink consumed it, stamped on the graph's clock by the section",
          "above's recorder (`bench/pw_onset.c`, a passive stream on the sink's monitor: it asks no quantum). Each",
          "trigger comes once the sink has been silent for %.1f s, then after a random 0–6 ms wait (so triggers do" % res["gap_s"],
          "not all land at one point of the graph's cycle; cued's PipeWire stream is then still active: it lingers",
          "2 s after a cue). A miss: no sound within 3 s. The graph's default quantum is %d frames; it runs at the" % res["quantum"],
          "smallest `node.latency` its streams ask: feedbackd's pulse stream asks %s, cued's stream %s. The quantum of" % (
              node_latency("feedbackd"), node_latency("cued")),
          "the cycle each first sample came in (frames: sounds): %s." % "; ".join(
              "%s %s" % (k, ", ".join("%s: %d" % (q, n) for q, n in sorted(v.items(), key=lambda x: int(x[0]))))
              for k, v in (res.get("quanta") or {}).items()),
          "",
          "| owner of org.sigxcpu.Feedback | n | p50 µs | p90 µs | p99 µs | max µs | misses |", "|---|---|---|---|---|---|---|"]
    rows = [("feedbackd", "feedbackd (GSound → pulse)"), ("cued", "cued (`%s`)" % res.get("cued_sink", "alsa:default"))]
    for key, name in rows:
        v, m = lat.get(key, ([], 0))
        md.append(row(name, v, m))
    if SOCKET in lat:
        md.append(row("for reference: cued, the same sound through its socket (`play %s`, a kept connection)" % EVENT, *lat[SOCKET]))
    fb, cu = lat.get("feedbackd", ([], 0))[0], lat.get("cued", ([], 0))[0]
    ratio = pct(cu, .5) / pct(fb, .5) if fb and cu else float("nan")
    md += ["", "Replies and `FeedbackEnded` for the measured calls:", "",
           "| owner | ids answered | errors | ids with exactly one FeedbackEnded | end reasons |", "|---|---|---|---|---|"]
    for key, name in rows:
        e = res.get(key + "_ended", {})
        md.append("| %s | %s | %s | %s | %s |" % (name, e.get("ids"), e.get("n_errors"), e.get("ended_once"),
                                                  ", ".join("%s×%d" % (r, n) for r, n in sorted(e.get("reasons", {}).items())) or "-"))
    md += ["", "(Reasons as feedbackd sends them, a `u`: 0 natural, 1 expired, 2 explicit, 4294967295 (−1) not found.)"]
    hm = res.get("heard_ms", {})
    md += ["", "Each sound heard for (first to last non-zero sample at the sink, p50): feedbackd %.0f ms, cued %.0f ms,"
           % (hm.get("feedbackd", float("nan")), hm.get("cued", float("nan"))),
           "notification %.0f ms (the file is 1,025 ms). The streams during the first sound (`pw-dump`):" % hm.get(
               "notification", float("nan")), ""]
    for key, name in rows:
        md.append("- %s: `%s`" % (name, json.dumps(res.get("streams", {}).get(key))))
    if res.get("rounds"):
        md += ["", "By round (p50 µs; load average 1/5/15 min at the round's start and end):", "",
               "| round | n each | feedbackd p50 | cued p50 | load |", "|---|---|---|---|---|"]
        for i, r in enumerate(res["rounds"]):
            md.append("| %d | %d | %.0f | %.0f | %s → %s |" % (i + 1, r["n"], r["feedbackd_p50"], r["cued_p50"], r["load"][0], r["load"][1]))
    if "handover_ms" in res:
        md += ["", "cued's bus status while feedbackd held the name: `%s`; it owned the name %s ms after feedbackd was killed."
               % (json.dumps(res.get("cued_before_handover")), " and ".join("%.0f" % h for h in res["handover_ms"]))]
    nk = NOTIFY
    md += ["", "The cost of one notification sound: cued with `[notifications] enabled = true` (it watches Notify calls",
           "as a monitor), `bench/notification_server.py` owning `org.freedesktop.Notifications`; %d `Notify` calls" % res["trials"],
           "without sound hints (cued plays its `normal` sound, `message-new-instant`, the same file), sent as above",
           "(Gio, not `notify-send`'s process start), each %.1f s after the previous sound ended (more than cued's" % res["gap_s"],
           "burst rule needs: 3 at once, then 1 a second). Latency: Notify call → first sample.", "",
           "| source | n | p50 µs | p90 µs | p99 µs | max µs | misses |", "|---|---|---|---|---|---|---|"]
    v, m = lat.get(nk, ([], 0))
    md.append(row("Notify → cued", v, m))
    if res.get("notify_errors"):
        md.append("")
        md.append("Notify calls answered with an error by the stand-in server: %d." % res["notify_errors"])
    cs = res.get("cued_status") or {}
    md += ["", "cued's `status` at the end: stalls %s, xruns %s, dropped %s; inside cued (request → first frame to the device)"
           % (cs.get("stalls"), cs.get("xruns"), cs.get("dropped")),
           "p50 / p99 %s / %s µs." % ((cs.get("latency_us") or {}).get("p50"), (cs.get("latency_us") or {}).get("p99")),
           "", "Load average (1/5/15 min) at the start, after the feedback rounds, at the end: %s (2 cores, shared)." % "; ".join(
               res["load"].get(k, "?") for k in ("start", "after the feedback rounds", "end"))]
    for n in res.get("notes", []):
        md += ["", n]
    if res.get("cued_log"):
        md += ["", "cued's warnings and errors in this run (last 5):", ""] + ["    " + ln for ln in res["cued_log"]]
    targets = []
    if fb and cu:
        targets.append(("cued p50 ≤ 0.2 × feedbackd's p50", "%.0f µs vs 0.2 × %.0f µs (ratio %.3f)" % (pct(cu, .5), pct(fb, .5), ratio),
                        ratio <= 0.2))
    targets.append(("0 misses for cued (feedback and notifications)", "%d (feedbackd: %d)" % (
        lat.get("cued", ([], 0))[1] + lat.get(nk, ([], 0))[1], lat.get("feedbackd", ([], 0))[1]),
        lat.get("cued", ([], 0))[1] + lat.get(nk, ([], 0))[1] == 0))
    return md + targets_table(21, targets)


def row(name, v, misses):
    if not v:
        return "| %s | 0 | - | - | - | - | %d |" % (name, misses)
    return "| %s | %d | %.0f | %.0f | %.0f | %.0f | %d |" % (name, len(v), pct(v, .5), pct(v, .9), pct(v, .99), max(v), misses)


if __name__ == "__main__":
    section_main("desktop", lambda: run(trials=int(os.environ["BENCH_DESKTOP_TRIALS"]) if "BENCH_DESKTOP_TRIALS" in os.environ else None,
                                         quick=os.environ.get("BENCH_QUICK") == "1"), report, HEADING)
