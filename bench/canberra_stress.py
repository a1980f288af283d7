#!/usr/bin/python3
"""The libcanberra plug-in inside a host process, under stress: canberra/stress/host.c (real
libcanberra, CANBERRA_DRIVER=cued,stressfb) against a fake cued in every hostile mode and
against the real cued stopped and restarted under it, the plug-in built as is, with ASan+UBSan
and with TSan (`make canberra-stress`). Each run is judged on what the plug-in owes its host:

- every accepted play called back exactly once, never on the caller's thread, and before the
  context is destroyed (none left waiting: a stalled or lying cued re-routes them at once);
- no play lost: ended neither heard (success, through cued or the fallback) nor by the app
  (canceled, its context destroyed), nor refused by cued for a reason of the play's own;
- host threads and descriptors back where they were; no sanitizer report;
- the calls' time in the host (play, cancel, playing): p99.9 and max, a figure everywhere and
  a verdict (5 ms p99.9, 20 ms max) for the plain build on a quiet machine (`timed` runs).

  canberra_stress.py [--quick] [--only NAME,…] [--json]   (prints one line a run; --json: a list)
attack_canberra.py writes the rows of RELIABILITY.md; Tests/IntegrationTests/CanberraStressTests
runs --quick in make test.
"""
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, ".build", "canberra")
STRESS = os.path.join(BUILD, "stress")
SANDBOX = os.path.join(ROOT, "canberra", "stress", "sandbox.sh")
SOUNDS = os.path.join(ROOT, "Sounds")
HOSTILE = ["garbage", "long-line", "nul", "fake-ends", "dup-ends", "end-flood", "silent", "deaf", "reply-hang",
           "close-mid-line", "not-played", "unknown-retry"]
VOICE_THEN_LIE = ("garbage", "long-line", "nul", "fake-ends", "dup-ends", "end-flood", "reply-hang", "close-mid-line")
# Codes a play may end with without being lost: heard, canceled by the app, its context destroyed by the app.
# --quick (make test) runs these hostile modes under the sanitizers too, the rest as built only.
QUICK_SANITIZED = ["end-flood", "silent", "close-mid-line", "unknown-retry"]
CA_SUCCESS, CA_ERROR_NODRIVER, CA_ERROR_DESTROYED, CA_ERROR_CANCELED, CA_ERROR_NOTAVAILABLE, CA_ERROR_DISCONNECTED = 0, -5, -10, -11, -12, -18
MAX_WORKERS = 8  # canberra/driver.h: fallback workers in a process
HUNG_OPEN_FDS = 2  # descriptors each hung open of the stand-in driver holds (STRESSFB_OPEN_FDS)
HUNGFS = os.path.join(ROOT, "bench", "hungfs.py")
CALL_P999_US, CALL_MAX_US = 5000, 20000
SANITIZER_MARKS = ("WARNING: ThreadSanitizer", "ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer")


def release_cued():
    d = os.environ.get("BENCH_BIN_DIR") or os.path.join(ROOT, ".build", "release")
    return os.path.join(d, "cued")


def long_sound():
    """A 3 s tone (48 kHz mono), made once under .build: what cued plays while it is stopped."""
    path = os.path.join(STRESS, "tone-3s.wav")
    if not os.path.exists(path):
        import math, struct, wave
        os.makedirs(STRESS, exist_ok=True)
        with wave.open(path + ".tmp", "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(48000)
            w.writeframes(b"".join(struct.pack("<h", int(3000 * math.sin(2 * math.pi * 440 * i / 48000))) for i in range(3 * 48000)))
        os.rename(path + ".tmp", path)
    return path


def scenarios(quick):
    """(name, variant, host arguments, what else to expect): the runs, short ones with --quick."""
    k = 4 if quick else 1  # quick: a quarter of the plays (the sanitizers' runs half again)
    # One word a line (canberra-host splits it there): the paths may hold a space.
    cued = "\n".join([release_cued(), "--sink", "null", "--sounds", SOUNDS, "--rate-limit", "0", "--max-clients", "2000"])
    runs = []
    for v in ("plain", "asan", "tsan"):
        n = 1 if v == "plain" else 2  # sanitizers run slower: fewer plays, the same paths
        runs += [
            ("honest", v, ["--fake", "honest", "--plays", 2000 // k // n, "--gap-us", 300, "--cancel", 5, "--playing", 10], {}),
            # 32 threads on one context, each playing every 10 ms (3,200 plays a second in all)
            ("threads32-honest", v, ["--fake", "honest", "--plays", 3200 // k // n, "--threads", 32, "--gap-us", 10000, "--cancel", 5,
                                     "--playing", 10], {}),
            ("threads32-silent", v, ["--fake", "silent", "--plays", 3200 // k // n, "--threads", 32, "--gap-us", 10000, "--cancel", 5,
                                     "--playing", 10], {}),
            # …and without a pause: past MAX_PLAYS in flight a play is refused at once (CA_ERROR_NOTAVAILABLE, no callback)
            # (the calls' time judged against the stand-in driver alone under the same load: the machine's floor)
            # (a sanitized reader can fall behind the fake, which then hangs up: the voices it had started are cut)
            ("overload", v, ["--fake", "honest", "--plays", 6400 // k // n, "--threads", 32, "--cancel", 5, "--playing", 10],
             {"refusals": True, "baseline": v == "plain", "cut": True}),
            ("contexts100", v, ["--fake", "honest", "--plays", 2000 // k // n, "--contexts", 100, "--threads", 4], {}),
            ("destroy", v, ["--fake", "honest", "--plays", 2000 // k // n, "--threads", 4, "--cancel", 10, "--recreate-every", 50,
                            "--destroy-in-callback", 50 // k], {"destroyed": True}),
            # the same with every play in the fallback: its drivers opened and closed while the host destroys contexts
            ("destroy-fallback", v, ["--fake", "not-played", "--plays", 2000 // k // n, "--threads", 4, "--cancel", 10,
                                     "--recreate-every", 50, "--destroy-in-callback", 20 // k], {"destroyed": True}),
            ("cued-restarts", v, ["--cued", cued, "--plays", 3000 // k // n, "--gap-us", 2000, "--cancel", 5, "--playing", 10,
                                  "--restart-every", 300 // k, "--event", "pop"], {"cut": True}),
            ("cued-stopped", v, ["--cued", cued, "--plays", 1500 // k // n, "--gap-us", 2000, "--stop-at", 100 // k,
                                 "--stop-ms", 3000 // k, "--event", "pop"], {"cut": True}),
        ]
        # The real cued stopped 0.3 s into a 3 s sound, its one play, for 25 s (6 s with --quick): nothing is unanswered,
        # and the play is called back within its sound's end + 1.5 s (on 1b03399: when cued went on, 28 s after it).
        if v == "plain" or not quick:
            runs += [
                ("cued-stopped-long", v, ["--cued", cued, "--plays", 1, "--stop-at", 1, "--stop-delay-ms", 300,
                                          "--stop-ms", 6000 if quick else 25000, "--file", 100, "--file-path", long_sound()],
                 {"cut": True, "bound_s": 3 + 1.5}),
        ]
        # No cued, every play through libcanberra's own alsa driver on ALSA's null PCM (it takes a sound
        # at once, so a sound's end races its cancel): a play every 1 ms, a cancel after every other.
        # The alsa driver calls back twice when its cancel races the sound's end (issue 46: the host
        # crashed 3 runs of 3, a double free under ASan). The same against a cued that never answers,
        # 32 threads. make reliability runs the ASan build 100 times.
        # What one context's fallback cannot keep up with (a sanitized build, 32 threads) it drops, as it must: called
        # back NOTAVAILABLE by the play's deadline (2.5 s), or DISCONNECTED at once when its queue is full.
        alsa = {"host_driver": "cued,alsa", "alsa_null": True, "repeat": 100 if v == "asan" and not quick else 1,
                "codes_ok": [CA_ERROR_NOTAVAILABLE, CA_ERROR_DISCONNECTED], "bound_s": 2.5 + 0.5}
        runs += [
            ("alsa-null-cancel", v, ["--no-cued", 1, "--plays", 8000 // k if v == "plain" else 1000, "--gap-us", 1000, "--cancel", 50,
                                     "--event", "bell"], alsa),
            ("alsa-null-silent32", v, ["--fake", "silent", "--plays", 3200 // k // n, "--threads", 32, "--gap-us", 10000, "--cancel", 50,
                                       "--event", "bell"], dict(alsa, repeat=1)),
        ]
        # The race behind the 1 crash in 181 ASan runs of alsa-null-cancel, made to happen every run: the alsa
        # driver's player threads slowed at their end (canberra/stress/slow-player-end.c, preloaded), so that the
        # context's destroy finds some still there and each is still in the driver's code after the destroy
        # returns. A dlclose of the driver there crashed every run (SIGSEGV at an address in no module).
        if v != "tsan":
            runs += [
                ("alsa-null-slow-end", v, ["--no-cued", 1, "--plays", 300, "--gap-us", 10000, "--cancel", 50, "--event", "bell"],
                 dict(alsa, repeat=1, preload=os.path.join(STRESS, "slow-player-end.so"))),
            ]
        # The bound on every play (issue 46 item 2): a cued that acks `ok N` and never ends a voice (each play
        # called back by the voice's deadline, `ok` + 10 s + 1.5 s, the connection given up; 32 threads: past
        # MAX_VOICES open at once cued is lying), and an app whose one callback takes 1.5 s while cued is fine
        # (nothing judged against cued, nothing played twice).
        if v == "plain" or not quick:
            runs += [
                ("no-end", v, ["--fake", "no-end", "--plays", 100, "--gap-us", 50000, "--event-per-play", 1],
                 {"cut": True, "bound_s": 11.5 + 0.5}),
                ("no-end32", v, ["--fake", "no-end", "--plays", 3200 // k // n, "--threads", 32, "--gap-us", 10000,
                                 "--event-per-play", 1], {"cut": True, "bound_s": 11.5 + 0.5}),
                ("slow-callback", v, ["--fake", "honest", "--plays", 100, "--gap-us", 100000, "--slow-at", 5, "--slow-ms", 1500,
                                      "--event-per-play", 1], {"no_fallback": True, "bound_s": 1.5 + 0.5}),
            ]
        # The fallback's bounds, cued absent, the stand-in driver misbehaving as pulse did: every play call hung 30 s
        # (each play called back by its birth + 2.5 s, too late to be worth hearing); every open hung 30 s with a
        # context per sound at 50 a second (at most MAX_WORKERS workers stuck in the process, not one per context);
        # every open failing (tried again after a backoff, not at every play).
        if v == "plain" or not quick:
            runs += [
                ("fallback-hung-play", v, ["--no-cued", 1, "--plays", 100, "--gap-us", 20000],
                 {"env": {"STRESSFB_BLOCK_MS": "30000"}, "codes_ok": [CA_ERROR_NOTAVAILABLE], "bound_s": 2.5 + 0.5,
                  "threads_over": 2 * MAX_WORKERS}),
                # (issue 46: with pulse hung, 1,022 of 1,024 descriptors and 510 threads after 6 s, the host's own fopen
                # failing): `ulimit -n 1024`, each hung open holding HUNG_OPEN_FDS descriptors as pulse's did, the
                # process's figures sampled every 10 plays: at their peak, threads and descriptors within what
                # MAX_WORKERS stuck workers hold.
                ("fallback-hung-open", v, ["--no-cued", 1, "--plays", 300, "--gap-us", 20000, "--recreate-every", 1, "--figures-every", 10],
                 {"env": {"STRESSFB_OPEN_BLOCK_MS": "30000", "STRESSFB_OPEN_FDS": str(HUNG_OPEN_FDS)}, "destroyed": True, "bound_s": 2.5 + 0.5,
                  "codes_ok": [CA_ERROR_NOTAVAILABLE, CA_ERROR_DISCONNECTED, CA_ERROR_NODRIVER], "threads_over": 2 * MAX_WORKERS,
                  "nofile": 1024, "peak_over": {"threads": MAX_WORKERS + 4, "fds": MAX_WORKERS * (HUNG_OPEN_FDS + 1) + 4}}),
            ]
        # A sound file on a FUSE mount whose open never returns (bench/hungfs.py: issue 46, on 1b03399 22 callbacks never
        # came and the host could not exit), through libcanberra's alsa driver on ALSA's null PCM, a context every 10
        # plays: each play called back by its deadline, the stuck worker abandoned (at most MAX_WORKERS, the driver then
        # skipped by the others), the host's destroys and exit not waiting for it: its main done within
        # `exit_bound_s` of its start. The thread in the kernel's FUSE wait is the kernel's to release: the
        # process is reaped once the mount answers or is aborted (its server killed), within `reap_bound_s` after.
        # Plain build only (LeakSanitizer's stop-the-world at exit would wait for that thread too).
        if v == "plain":
            runs += [
                ("fallback-hung-file", v, ["--no-cued", 1, "--plays", 150, "--gap-us", 20000, "--recreate-every", 10, "--file", 100,
                                           "--file-path", "@MOUNT@/hangopen.wav", "--settle", 5],
                 {"host_driver": "cued,alsa", "alsa_null": True, "hung_mount": True, "destroyed": True, "bound_s": 2.5 + 0.5,
                  "codes_ok": [CA_ERROR_NOTAVAILABLE, CA_ERROR_DISCONNECTED, CA_ERROR_NODRIVER], "threads_over": MAX_WORKERS,
                  "fds_over": 2 * MAX_WORKERS, "exit_bound_s": 150 * 0.02 + 2.5 + 5 + 3, "reap_bound_s": 3}),
            ]
        runs.append(("fallback-open-fails", v, ["--no-cued", 1, "--plays", 300, "--gap-us", 10000],
                     {"env": {"STRESSFB_OPEN_FAIL": "1"}, "codes_ok": [CA_ERROR_NODRIVER], "backoff": True}))
        for mode in HOSTILE:
            if quick and v != "plain" and mode not in QUICK_SANITIZED:
                continue
            args = ["--fake", mode, "--plays", 1000 // k // n, "--gap-us", 500, "--cancel", 5, "--playing", 10]
            if mode == "unknown-retry":  # a burst of plays with a file: the retry of the first cannot be sent
                args = ["--fake", mode, "--plays", 1000 // k // n, "--file", 100, "--file-path", os.path.join(SOUNDS, "pop.wav")]
            # Where the fake lies after it has started voices, the voices open then are cut (CA_ERROR_DISCONNECTED: cued
            # said it started them, so they are not played again); the modes that never start one are held to the rest.
            runs.append((mode, v, args, {"cut": True} if mode in VOICE_THEN_LIE else {}))
    return runs


def run_one(name, variant, args, expect, timeout=600, driver=None):
    """One scenario's run (or `repeat` runs: the first that fails is the result, with the count)."""
    repeat = expect.get("repeat", 1)
    for i in range(repeat):
        r = run_once(name, variant, args, expect, timeout, driver)
        r["runs"], r["runs_held"] = repeat, i + r["held"]
        if not r["held"]:
            break
    return r


# ALSA's null PCM as the default device: alsa.conf itself left out, since its hooks (conf.d) would
# put pipewire-alsa's default back over a later file's (PLATFORM-NOTES).
ALSA_NULL_CONF = "pcm.!default { type null }\n"


def run_once(name, variant, args, expect, timeout, driver):
    d = os.path.join(STRESS, variant)
    plugin = os.path.join(BUILD, "libcanberra-cued.so") if variant == "plain" else os.path.join(d, "libcanberra-cued.so")
    tmp = tempfile.mkdtemp(prefix="cstress.")
    env = dict(os.environ, STRESSFB_LOG=os.path.join(tmp, "fallback.log"), FAKE_CUED_LOG=os.path.join(tmp, "voices.log"), XDG_STATE_HOME=os.path.join(tmp, "state"),
               XDG_CONFIG_HOME=os.path.join(tmp, "config"), XDG_RUNTIME_DIR=tmp,
               TSAN_OPTIONS="halt_on_error=0 report_signal_unsafe=0", ASAN_OPTIONS="detect_leaks=1 halt_on_error=0",
               UBSAN_OPTIONS="print_stacktrace=1")
    env.pop("CANBERRA_DRIVER", None)
    if driver or expect.get("host_driver"):
        env["HOST_DRIVER"] = driver or expect["host_driver"]
    env.update(expect.get("env", {}))
    if expect.get("preload"):
        env["LD_PRELOAD"] = expect["preload"]
        env["ASAN_OPTIONS"] += " verify_asan_link_order=0"  # the shim comes first: it wraps ASan's pthread_create
    if expect.get("alsa_null"):
        with open(os.path.join(tmp, "asound.conf"), "w") as f:
            f.write(ALSA_NULL_CONF)
        env["ALSA_CONFIG_PATH"] = os.path.join(tmp, "asound.conf")
    mount = None
    if expect.get("hung_mount"):
        mount = mount_hung(tmp)
        if isinstance(mount, str):
            shutil.rmtree(tmp, ignore_errors=True)
            # (as make test's StuckFileTests: without FUSE here the run is skipped, said so; RELIABILITY.md's row says not run)
            return {"name": name, "variant": variant, "args": " ".join(str(a) for a in args), "rc": None, "sanitizer_reports": 0,
                    "held": True, "skipped": mount, "why": "not run: " + mount}
        args = [str(a).replace("@MOUNT@", mount[0]) for a in args]
    cmd = [SANDBOX, plugin, os.path.join(d, "libcanberra-stressfb.so"), "--", os.path.join(d, "canberra-host"),
           "--fake-bin", os.path.join(STRESS, "fake-cued"), "--socket", os.path.join(tmp, "cued.sock"),
           "--settle", "10"] + [str(a) for a in args]
    nofile = expect.get("nofile")
    # `ulimit -n`: the host's (the sandbox's shells inherit it and exec the host)
    limit = (lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))) if nofile else None
    exited = {}
    try:
        if mount:
            out, err, rc, exited = run_hung(cmd, env, mount, timeout)
        else:
            # What the host prints under a hostile cued is not always UTF-8 (the fake's garbage
            # quoted in its messages): kept as escapes, never a crash of the judge.
            p = subprocess.run(cmd, env=env, capture_output=True, text=True, errors="backslashreplace", timeout=timeout, preexec_fn=limit)
            out, err, rc = p.stdout, p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        out, err, rc = (e.stdout or b"").decode(errors="replace"), (e.stderr or b"").decode(errors="replace"), "timeout"
    finally:
        if mount:
            release_hung(mount)
        shutil.rmtree(tmp, ignore_errors=True)
    r = judge(name, variant, [a for a in args if not str(a).startswith(tmp)], expect, out, err, rc)
    if exited:
        r.update(exited)
        if exited.get("main_done_s") is None or exited["main_done_s"] > expect["exit_bound_s"]:
            r["held"] = False
            r["why"] = "; ".join(w for w in (r["why"], "the host's main not done by %.1f s (bound %.1f s)" % (
                exited.get("main_done_s") or -1, expect["exit_bound_s"])) if w)
        if exited.get("reaped_after_release_s") is None or exited["reaped_after_release_s"] > expect["reap_bound_s"]:
            r["held"] = False
            r["why"] = "; ".join(w for w in (r["why"], "the host not reaped %.1f s after the mount's release (bound %.1f s)" % (
                exited.get("reaped_after_release_s") or -1, expect["reap_bound_s"])) if w)
    if expect.get("baseline") and not driver:
        # The same load on libcanberra with the stand-in driver alone: what the machine and libcanberra's
        # own context lock cost; the plug-in is judged within 1.5 times that (and 20 ms at most).
        base = run_one(name, variant, args, {"refusals": True}, timeout, driver="stressfb")
        r["baseline_calls"] = base.get("calls")
        if r.get("calls") and base.get("calls"):
            r["slow"] = any(c["n"] and (c["max_us"] > CALL_MAX_US or c["p999_us"] > max(CALL_P999_US, 1.5 * base["calls"][op]["p999_us"]))
                            for op, c in r["calls"].items())
    return r


def mount_hung(tmp):
    """bench/hungfs.py mounted at TMP/mnt: (the mount point, its server), or why it cannot be."""
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    if not os.path.exists("/usr/lib/python3/dist-packages/fusepy.py"):
        return "python3-fusepy is not installed"
    mnt = os.path.join(tmp, "mnt")
    os.makedirs(mnt)
    log = open(os.path.join(tmp, "hungfs.log"), "w")
    fs = subprocess.Popen(["/usr/bin/python3", HUNGFS, mnt], stdout=log, stderr=log, start_new_session=True)
    end = time.monotonic() + 10
    while not os.path.exists(os.path.join(mnt, "hang1.wav")) and time.monotonic() < end and fs.poll() is None:
        time.sleep(0.02)
    if not os.path.exists(os.path.join(mnt, "hang1.wav")):
        release_hung((mnt, fs))
        return "the FUSE file system did not come up: " + open(os.path.join(tmp, "hungfs.log")).read()[-300:]
    return mnt, fs


def release_hung(mount):
    """The mount's server killed (the kernel aborts the connection: what waits on it fails) and the mount gone."""
    mnt, fs = mount
    if fs.poll() is None:
        fs.kill()
        fs.wait()
    with open("/proc/self/mounts") as f:  # (a dead FUSE mount's stat fails: os.path.ismount says no)
        mounted = any(line.split()[1] == mnt for line in f)
    if mounted:
        subprocess.run(["umount", "-l", mnt] if os.geteuid() == 0 else ["/usr/bin/fusermount", "-u", "-z", mnt],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def run_hung(cmd, env, mount, timeout):
    """The host with a file system that hangs under it: when its main is done (its JSON printed), whether the
    process ends by itself within 2 s; then the mount released and how long until it is reaped."""
    start = time.monotonic()
    errf = tempfile.TemporaryFile("w+", errors="backslashreplace")
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=errf, text=True, errors="backslashreplace", start_new_session=True)
    def give_up():
        release_hung(mount)
        os.killpg(p.pid, signal.SIGKILL)
    timer = threading.Timer(timeout, give_up)
    timer.start()
    lines, done = [], None
    for line in p.stdout:  # the host's stdout stays open while a thread of it is alive: read up to its JSON
        lines.append(line)
        if line.startswith("{"):
            done = time.monotonic() - start
            break
    alone = None
    try:
        p.wait(2)
        alone = True
    except subprocess.TimeoutExpired:
        alone = False
    released = time.monotonic()
    release_hung(mount)
    try:
        p.wait(max(1, timeout - (time.monotonic() - start)))
        reaped = time.monotonic() - released if not alone else 0.0
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        reaped = None
    timer.cancel()
    lines += p.stdout.readlines()
    errf.seek(0)
    return "".join(lines), errf.read(), p.returncode, {"main_done_s": done, "ended_alone": alone, "reaped_after_release_s": reaped}


def judge(name, variant, args, expect, out, err, rc):
    r = {"name": name, "variant": variant, "args": " ".join(str(a) for a in args if not str(a).startswith("/")), "rc": rc}
    try:
        res = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        res = None
    reports = [ln for ln in err.splitlines() if any(m in ln for m in SANITIZER_MARKS)]
    r["sanitizer_reports"] = len(reports)
    if reports:
        i = err.find(reports[0])
        r["first_report"] = err[max(0, i - 200):i + 2500]
    if res is None:
        r.update(held=False, why="no result (rc %s): %s" % (rc, err[-800:]))
        return r
    r["result"] = res
    # cut: a voice cued started and never ended, or whose cued stopped: called back CA_ERROR_DISCONNECTED, never replayed
    allowed = {CA_SUCCESS, CA_ERROR_CANCELED} | ({CA_ERROR_DESTROYED} if expect.get("destroyed") else set()) \
        | ({CA_ERROR_DISCONNECTED} if expect.get("cut") else set()) | set(expect.get("codes_ok", []))
    lost = sum(n for code, n in res["codes"].items() if int(code) not in allowed)
    refused = sum(n for code, n in res["returns"].items() if int(code) != 0)
    why = []
    if res["callbacks_once"] != res["accepted"] or res["callbacks_extra"] or res["never_called_back"]:
        why.append("callbacks: %d once of %d accepted, %d extra, %d never" % (res["callbacks_once"], res["accepted"],
                                                                             res["callbacks_extra"], res["never_called_back"]))
    if res["caller_thread_callbacks"]:
        why.append("%d callbacks on the caller's thread" % res["caller_thread_callbacks"])
    if res["pending_at_destroy"]:
        why.append("%d plays still waiting when the context was destroyed" % res["pending_at_destroy"])
    if lost:
        why.append("%d plays lost (codes %s)" % (lost, res["codes"]))
    if refused and not (expect.get("refusals") and set(res["returns"]) <= {"0", "-12"}):
        why.append("%d plays refused (returns %s)" % (refused, res["returns"]))
    # [before any context, while they run, once they are gone]: nothing left behind; while they run,
    # per context a reader and, once used, a fallback worker and the fallback driver's own.
    per = 3 * int(dict(zip(args[::2], args[1::2])).get("--contexts", 1)) + 1  # + the host's own timer (cued stopped)
    # libcanberra's alsa driver keeps one descriptor once it has played (the same with CANBERRA_DRIVER=alsa alone),
    # and its player thread of a play ends just after the play's callback: a few may still be ending "during"
    fds_kept = 1 if expect.get("alsa_null") else 0
    per += 8 if expect.get("alsa_null") else 0
    # threads_over: workers abandoned in a hung driver (and its own threads), bounded across the process
    over = expect.get("threads_over", 0)
    # fds_over: what each such worker holds (libcanberra's alsa driver: its play's pipe, made before it opens the file)
    if res["threads"][2] > res["threads"][0] + over or res["fds"][2] > res["fds"][0] + fds_kept + expect.get("fds_over", over) \
            or res["threads"][1] > res["threads"][0] + per + over:
        why.append("threads %s, descriptors %s (before, during, after)" % (res["threads"], res["fds"]))
    peak = expect.get("peak_over")
    if peak:
        rows = res.get("figures") or []
        r["peak"] = {"threads": max([res["threads"][1]] + [f[2] for f in rows]), "fds": max([res["fds"][1]] + [f[3] for f in rows])}
        if not rows or r["peak"]["threads"] > res["threads"][0] + peak["threads"] or r["peak"]["fds"] > res["fds"][0] + peak["fds"]:
            why.append("at their peak threads %d, descriptors %d (before: %d, %d; bound +%d, +%d)" % (
                r["peak"]["threads"], r["peak"]["fds"], res["threads"][0], res["fds"][0], peak["threads"], peak["fds"]))
    if expect.get("destroyed") and res["self_destroy_pending_callbacks"] != 3 * res["self_destroyed"]:
        why.append("destroyed in callbacks: %d, their pending plays called back %d" % (res["self_destroyed"], res["self_destroy_pending_callbacks"]))
    cb = res.get("callback") or {}
    r["bound_s"] = expect.get("bound_s")
    if expect.get("bound_s") and cb.get("n") and cb["max_us"] > expect["bound_s"] * 1e6:
        why.append("a callback %.2f s after its play (bound %.1f s)" % (cb["max_us"] / 1e6, expect["bound_s"]))
    if expect.get("backoff") and res.get("fallback_opens", 0) > res["ran_s"] + 2:
        why.append("the failing driver opened %d times in %.1f s (a backoff of 1 s, doubling)" % (res["fallback_opens"], res["ran_s"]))
    if res.get("played_twice", 0):
        why.append("%d plays heard twice (cued took them, then the fallback)" % res["played_twice"])
    if expect.get("no_fallback") and res.get("fallback_plays"):
        why.append("%d plays through the fallback though cued was fine" % res["fallback_plays"])
    if reports:
        why.append("%d sanitizer reports" % len(reports))
    if rc not in (0,):
        why.append("exit %s" % rc)
    calls = {op: res[op] for op in ("play", "cancel", "playing")}
    r["calls"] = calls
    r["slow"] = any(c["n"] and (c["p999_us"] > CALL_P999_US or c["max_us"] > CALL_MAX_US) for c in calls.values())
    r["lost"], r["refused"] = lost, refused
    r.update(held=not why, why="; ".join(why))
    return r


def callback_max(res):
    cb = res.get("callback") or {}
    return "%.2f" % (cb["max_us"] / 1e6) if cb.get("n") else "-"


def summary(r):
    if r.get("skipped"):
        return "skip  %-16s %-5s not run: %s" % (r["name"], r["variant"], r["skipped"])
    res = r.get("result") or {}
    calls = r.get("calls") or {}
    def ms(op):
        c = calls.get(op) or {}
        return "%.2f/%.2f" % (c.get("p999_us", 0) / 1000, c.get("max_us", 0) / 1000) if c.get("n") else "-"
    return ("%-5s %-16s %-5s play %s cancel %s playing %s ms (p99.9/max); %s of %s accepted, fallback %s, codes %s; "
            "play→callback max %s s%s, none at +5 s: %s, twice: %s; "
            "RSS %s KiB, threads %s, fds %s%s%s" % ("ok" if r["held"] else "FAIL", r["name"], r["variant"], ms("play"), ms("cancel"),
                                                    ms("playing"), res.get("accepted"), res.get("plays"), res.get("fallback_plays"),
                                                    res.get("codes"), callback_max(res),
                                                    " (bound %.1f)" % r["bound_s"] if r.get("bound_s") else "", res.get("late_5s"),
                                                    res.get("played_twice"), res.get("rss_kb"), res.get("threads"), res.get("fds"),
                                                    ("; %d of %d runs held" % (r["runs_held"], r["runs"]) if r.get("runs", 1) > 1 else "")
                                                    + ("; peak threads %d, fds %d" % (r["peak"]["threads"], r["peak"]["fds"]) if r.get("peak") else "")
                                                    + ("; main done at %s s, ended alone: %s, reaped %s s after the mount's release"
                                                       % (r.get("main_done_s") and "%.1f" % r["main_done_s"], r.get("ended_alone"),
                                                          r.get("reaped_after_release_s") is not None and "%.2f" % r["reaped_after_release_s"])
                                                       if "main_done_s" in r else ""),
                                                    "" if r["held"] else " — " + r["why"]))


def main():
    quick = "--quick" in sys.argv
    only = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--only=")), None)
    runs = [s for s in scenarios(quick) if not only or s[0] in only.split(",") or s[1] in only.split(",")]
    results = []
    for name, variant, args, expect in runs:
        r = run_one(name, variant, args, expect)
        results.append(r)
        print(summary(r), file=sys.stderr if "--json" in sys.argv else sys.stdout, flush=True)
        if r.get("first_report"):
            print(r["first_report"], file=sys.stderr, flush=True)
    if "--json" in sys.argv:
        print(json.dumps(results))
    return 0 if all(r["held"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
