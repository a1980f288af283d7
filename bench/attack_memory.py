"""Reliability, resources: attacks on cued's memory for decoded sound and on its decoding
lane, against the release daemon, with their figures (`RELIABILITY_ONLY=decoded_memory`;
ISSUE29_ONLY=29.2c,29.4 narrows it to the rows issue 29 labelled so; `BENCH_BIN_DIR=DIR`
measures another build).

Memory (29.2): RSS (smaps_rollup) sampled every 20 ms while each mix runs: its peak against the
idle RSS + the budget + a few MiB, and where it settles once the load ends against the idle
RSS + what `status` says is still held (the cache) + a few MiB.
The decoding lane (29.4): four apps keep asking for files on a FUSE mount whose reads never return; another
app's local files and uncached theme sounds meanwhile: every one answered, and how fast.
"""
import json
import os
import shutil
import subprocess
import threading
import time
import wave

from attacklib import Cued, kill_all, mount_hung_for, row
from benchlib import Client, log, mib, pct, rss_kib
from harness import TMP
from cuedwire import is_err, ERR_RELOAD_FAILED, ERR_UNKNOWN_CUE

CONCERN = "resources"


# A few MiB: what cued may hold beyond its samples while a load runs (Swift objects, NIO
# buffers, the decoders' small allocations, thread stacks touched) or after it.
SLACK_KIB = 8 * 1024
DEFAULT_BUDGET_MIB = 64


def status(q):
    return json.loads(Client(q.sock).request("status")[3:])


def memory(st):
    """`status`'s memory object ({} from a cued without one: the old build)."""
    return st.get("memory") or {}


def budget_kib(st):
    return (memory(st).get("limit_bytes") or DEFAULT_BUDGET_MIB << 20) // 1024


def held(st):
    m = memory(st)
    return "budget: %s of %s used (cues %s, cache %s, playing %s, decoding %s), %d refused" % (
        mib(m.get("used_bytes", 0) // 1024), mib(m.get("limit_bytes", 0) // 1024), mib(m.get("cues_bytes", 0) // 1024),
        mib(m.get("cache_bytes", 0) // 1024), mib(m.get("playing_bytes", 0) // 1024),
        mib(m.get("decoding_bytes", 0) // 1024), m.get("refused", 0)) if m else \
        "no budget in `status` (cache %s)" % mib(st.get("theme", {}).get("cache_bytes", 0) // 1024)


class Peak:
    """The highest RSS of a process, sampled every 20 ms while it runs."""

    def __init__(self, pid):
        self.pid, self.kib, self.done = pid, 0, False
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        while not self.done:
            try:
                self.kib = max(self.kib, rss_kib(self.pid))
            except (OSError, TypeError):
                return
            time.sleep(0.02)

    def stop(self):
        self.done = True
        self.t.join()
        return self.kib


def noise_wav(path, seconds, rate=48000, channels=1):
    with wave.open(path, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(os.urandom(int(seconds * rate) * channels * 2))
    return path


def settle(q, seconds=3.0):
    """RSS once the load has ended and the voices have played out."""
    time.sleep(seconds)
    return rss_kib(q.pid)


# 29.2a/b: distinct 1 s files, one after another, on one connection.
def distinct_files(sounds, n, unlimited):
    label = "%s distinct 1 s files%s" % ("{:,}".format(n),
                                                ", `--rate-limit 0`" if unlimited else ", default flags")
    d = os.path.join(TMP, "files-%d" % n)
    os.makedirs(d, exist_ok=True)
    paths = [noise_wav(os.path.join(d, "f%d.wav" % i), 1.0) for i in range(n)]
    warm = noise_wav(os.path.join(d, "warm.wav"), 1.0)
    q = Cued("distinct%d" % n, sounds, ["--rate-limit", "0"] if unlimited else [])
    try:
        c = q.client(30)
        c.request("play-file " + warm)  # the decoders' code and first allocations, before the idle figure
        idle = settle(q, 1.5)
        peak = Peak(q.pid)
        t = time.monotonic()
        replies = {}
        for i, p in enumerate(paths):
            r = c.request("play-file " + p)
            key = r if r == "ok" else " ".join(r.split()[:2]) + (" (budget)" if "budget" in r else "")
            replies[key] = replies.get(key, 0) + 1
            if not unlimited:
                # Under the default 200 cues a second a connection, as a client that keeps to it.
                time.sleep(max(0.0, t + (i + 1) / 180 - time.monotonic()))
        load_s = time.monotonic() - t
        end = rss_kib(q.pid)
        top = peak.stop()
        after = settle(q)
        st = status(q)
        reloaded = q.request("reload")
        after_reload = settle(q, 1.0)
        used = memory(st).get("used_bytes", st.get("theme", {}).get("cache_bytes", 0)) // 1024
        ok = top <= idle + budget_kib(st) + SLACK_KIB and after <= idle + used + SLACK_KIB and q.alive()
        row(label, "one connection `play-file`s %s distinct 1 s 48 kHz WAVs (384 KB decoded each)%s; RSS every 20 ms; "
            "bound: peak ≤ idle + budget + 8 MiB, after ≤ idle + what `status` holds + 8 MiB"
            % ("{:,}".format(n), " back to back" if unlimited else " at 180 a second"),
            "replies %s in %.1f s; RSS idle %s, peak %s, at the end %s, 3 s later %s, after `reload` (`%s`) %s; %s"
            % (", ".join("%d `%s`" % (v, k) for k, v in sorted(replies.items())), load_s, mib(idle), mib(top), mib(end),
               mib(after), reloaded, mib(after_reload), held(st)), ok)
    finally:
        kill_all(q)
        shutil.rmtree(d, ignore_errors=True)


def config_of(names, path):
    return "".join('[cues.%s]\nfile = "%s"\n' % (n, path) for n in names)


def idle_rss(sounds, name):
    """RSS of a cued with no config and nothing played: what a config mix is measured against."""
    q = Cued(name, sounds)
    try:
        status(q)
        return settle(q, 1.0)
    finally:
        kill_all(q)


# 29.2c/d: many cues naming one file, reloads.
def many_cues(sounds, label, count, seconds, reloads, then_without):
    d = os.path.join(TMP, "cues-%d" % count)
    os.makedirs(d, exist_ok=True)
    f = noise_wav(os.path.join(d, "one.wav"), seconds, channels=2 if seconds < 1 else 1)
    names = ["c%d" % i for i in range(count)]
    idle = idle_rss(sounds, "idle-%d" % count)
    q = None
    try:
        peak_start = time.monotonic()
        q = Cued("cues%d" % count, sounds, config=config_of(names, f))
        start_s = time.monotonic() - peak_start
        peak = Peak(q.pid)
        figs = ["started in %.1f s, RSS %s" % (start_s, mib(rss_kib(q.pid)))]
        worst = rss_kib(q.pid)
        ok = True
        for i in range(reloads):
            t = time.monotonic()
            r = q.client(120).request("reload")
            rss = settle(q, 0.5)
            worst = max(worst, rss)
            ok &= r == "ok reloaded"
            figs.append("reload %d `%s` in %.1f s, RSS %s" % (i + 1, r[:60], time.monotonic() - t, mib(rss)))
        st = status(q)
        cues = len(st.get("cues", {}))
        figs.append("%d cues; %s" % (cues, held(st)))
        bound = idle + budget_kib(st) + SLACK_KIB
        final = None
        if then_without:
            q.write_config("")
            r = q.client(120).request("reload")
            final = settle(q, 1.5)
            ok &= r == "ok reloaded" and final <= idle + SLACK_KIB
            figs.append("reload of a config without them `%s`, RSS %s" % (r, mib(final)))
        top = peak.stop()
        ok &= max(top, worst) <= bound and q.alive()
        row(label, "a config of %s cues naming one %s WAV (%d bytes); start, %d reload%s%s; RSS every 20 ms; bound: "
            "RSS ≤ idle + budget + 8 MiB%s" % ("{:,}".format(count), "%g s" % seconds, os.path.getsize(f), reloads,
                                              "s" if reloads > 1 else "",
                                              ", then a config without them" if then_without else "",
                                              ", and back within 8 MiB of idle" if then_without else ""),
            "idle cued %s; %s; peak %s" % (mib(idle), "; ".join(figs), mib(top)), ok)
    finally:
        kill_all(q)
        shutil.rmtree(d, ignore_errors=True)


# 29.2e: a reload that does not fit is refused whole; the old cues stay.
def over_budget(sounds):
    d = os.path.join(TMP, "over")
    os.makedirs(d, exist_ok=True)
    files = [noise_wav(os.path.join(d, "long%d.wav" % i), 10.0) for i in range(20)]
    q = Cued("over", sounds)
    try:
        idle = settle(q, 0.5)
        q.write_config("".join('[cues.long%d]\nfile = "%s"\n' % (i, p) for i, p in enumerate(files)))
        peak = Peak(q.pid)
        t = time.monotonic()
        r = q.client(60).request("reload")
        reload_s = time.monotonic() - t
        after = settle(q, 1.0)
        top = peak.stop()
        st = status(q)
        play = q.request("play pop")
        long0 = q.request("play long0")
        refused = is_err(r, ERR_RELOAD_FAILED) and "budget" in r
        ok = refused and play == "ok" and is_err(long0, ERR_UNKNOWN_CUE) and after <= idle + SLACK_KIB
        row("a config over the budget", "a reload to a config of 20 cues naming 20 distinct 10 s WAVs (3.84 MB "
            "decoded each: 77 MB, over the default 64 MiB); bound: refused whole, the old cues kept, RSS back within "
            "8 MiB of idle",
            "`%s` in %.1f s; then `play pop` → `%s`, `play long0` → `%s`; RSS idle %s, peak %s, after %s; %s"
            % (r.replace(d + "/", "")[:320], reload_s, play, long0[:40], mib(idle), mib(top), mib(after), held(st)), ok)
    finally:
        kill_all(q)
        shutil.rmtree(d, ignore_errors=True)


# Theme sounds that are not cached at first (each asked once): the freedesktop theme's.
THEME_SOUNDS = ["bell", "message", "message-new-instant", "dialog-warning", "dialog-information", "complete",
                "alarm-clock-elapsed", "audio-volume-change", "camera-shutter", "device-added", "device-removed",
                "network-connectivity-established", "network-connectivity-lost", "phone-incoming-call",
                "power-plug", "power-unplug", "screen-capture", "service-login", "service-logout", "suspend-error",
                "trash-empty", "window-attention", "audio-test-signal", "outcome-success", "outcome-failure"]


def hung_mount_owner(sounds):
    name = "four apps on a hung mount; another app's files and theme sounds"
    hung = mount_hung_for(name, "hung29-mnt")
    if hung is None:
        return
    mnt, fs = hung
    q = None
    try:
        local = [noise_wav(os.path.join(TMP, "local29-%d.wav" % i), 0.2) for i in range(17)]
        q = Cued("hung29", sounds, level="info")
        stop = threading.Event()
        hung_replies = []

        def hung_app(k):
            c = q.client(60)
            c.request("app stuck%d" % k)
            sent = 0

            def reader():
                while True:
                    try:
                        r = c.reply()
                    except OSError:
                        return
                    if not r:
                        return
                    hung_replies.append(r)
            threading.Thread(target=reader, daemon=True).start()
            while not stop.is_set():  # keeps asking, one a quarter second
                c.send("play-file %s/hang%d-%d.wav" % (mnt, k, sent))
                sent += 1
                stop.wait(0.25)
        apps = [threading.Thread(target=hung_app, args=(k,), daemon=True) for k in range(4)]
        for a in apps:
            a.start()
        time.sleep(0.5)  # the four are in the kernel now
        other = q.client(30)
        other.request("app other")
        files, sounds_ = [], []
        for i in range(17):
            t = time.monotonic()
            r = other.request("play-file " + local[i])
            files.append((r, time.monotonic() - t))
            t = time.monotonic()
            r = other.request("play " + THEME_SOUNDS[i])
            sounds_.append((r, time.monotonic() - t))
            time.sleep(0.25)
        threads = len(os.listdir("/proc/%d/task" % q.pid))
        stop.set()
        time.sleep(5.5)  # the last hung requests reach their deadline
        alive = q.alive()
        files_ok = sum(r == "ok" for r, _ in files)
        sounds_ok = sum(r == "ok" for r, _ in sounds_)
        worst = max(s for _, s in files + sounds_)
        kinds = {}
        for r in hung_replies:
            k = "timed out" if "timed out" in r else "refused: stuck" if "stuck" in r else r[:30]
            kinds[k] = kinds.get(k, 0) + 1
        ok = files_ok == 17 and sounds_ok == 17 and worst < 1.0 and alive
        bad = [r for r, _ in files + sounds_ if r != "ok"][:2]
        row(name, "a FUSE file system (python3-fusepy) whose reads never return; apps `stuck0`…`stuck3` each send a "
            "`play-file` of a file on it every 0.25 s; meanwhile app `other` plays 17 local 0.2 s WAVs and 17 uncached "
            "freedesktop theme sounds, one by one; bound: all 34 `ok`, each within 1 s",
            "local files: %d of 17 `ok`, p50 %.1f ms, max %.1f ms; theme sounds: %d of 17 `ok`, p50 %.1f ms, max %.1f ms%s; "
            "the stuck apps' %d replies: %s; cued's threads during: %d; serving: %s"
            % (files_ok, pct([s for _, s in files], .5) * 1000, max(s for _, s in files) * 1000, sounds_ok,
               pct([s for _, s in sounds_], .5) * 1000, max(s for _, s in sounds_) * 1000,
               " (first refusals: %s)" % "; ".join("`%s`" % b.replace(TMP + "/", "")[:90] for b in bad) if bad else "",
               len(hung_replies), ", ".join("%d %s" % (v, k) for k, v in sorted(kinds.items())), threads, alive), ok)
    finally:
        kill_all(fs)
        subprocess.run(["umount", "-l", mnt], capture_output=True)
        kill_all(q)


def decoded_memory(sounds):
    """Every row here (ISSUE29_ONLY=29.2c,29.4 narrows them: the labels of the issue that asked)."""
    sections = [
        ("29.2a", lambda: distinct_files(sounds, 1468, unlimited=False)),
        ("29.2b", lambda: distinct_files(sounds, 4000, unlimited=True)),
        ("29.2c", lambda: many_cues(sounds, "300 cues naming one 10 s file, two reloads", 300, 10.0, 2, False)),
        ("29.2d", lambda: many_cues(sounds, "10,000 cues naming one 38 KB file, two reloads, then a config "
                                            "without them", 10000, 0.2, 2, True)),
        ("29.2e", lambda: over_budget(sounds)),
        ("29.4", lambda: hung_mount_owner(sounds)),
    ]
    only = os.environ.get("ISSUE29_ONLY")  # e.g. "29.2c,29.4"
    for label, run in sections:
        if only and label not in only.split(","):
            continue
        try:
            run()
        except Exception as e:  # a section that breaks is a failed row, not a lost report
            import traceback
            traceback.print_exc()
            row("memory (%s)" % label, "-", "the harness failed: %s: %s" % (e.__class__.__name__, e), False)
    log("memory rows done")


SECTIONS = (decoded_memory,)
