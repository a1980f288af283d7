"""Reliability: the libcanberra plug-in inside its host (GNOME Shell's place). The runs and
their verdicts are canberra_stress.py's (a host process on real libcanberra against a fake cued
in every hostile mode and the real cued stopped and restarted; the plug-in as built, with
ASan+UBSan and with TSan); this module turns them into RELIABILITY.md's rows, one per attack,
and reads the reply parser's libFuzzer log (`make fuzz`). Timings are the plain build's, in
the host; each row gives the time from each play to its callback (against the run's bound where it
states one), the plays without a callback 5 s after their call and the plays heard twice; held also asks the calls' targets (p99.9 ≤ 5 ms, max ≤ 20 ms) of the plain build; where
the load saturates the machine (overload), p99.9 within 1.5 times the stand-in driver's alone.
"""
import os
import re
import sys

from attacklib import row
from canberra_stress import CALL_MAX_US, CALL_P999_US, HOSTILE, ROOT, run_one, scenarios

CONCERN = "canberra"
WHAT = {
    "honest": "an honest cued (the fake), plays with cancels",
    "threads32-honest": "32 threads on one context (3,200 plays a second), an honest cued",
    "threads32-silent": "32 threads on one context (3,200 plays a second), a cued that never answers",
    "overload": "32 threads on one context as fast as they can (tens of thousands of plays a second)",
    "contexts100": "100 contexts at once",
    "destroy": "contexts destroyed with plays pending, and from inside their callbacks",
    "destroy-fallback": "the same, every play in the fallback (its drivers opened and closed meanwhile)",
    "cued-restarts": "the real cued killed (SIGKILL and SIGTERM in turn) and started again under live plays",
    "cued-stopped": "the real cued stopped (SIGSTOP) for 3 s under live plays",
    "alsa-null-cancel": "no cued, libcanberra's alsa driver as the fallback on ALSA's null PCM, a play every 1 ms, a cancel after every other",
    "alsa-null-silent32": "the same against a cued that never answers, 32 threads",
    "alsa-null-slow-end": "no cued, libcanberra's alsa driver on ALSA's null PCM, its player threads slowed at their end (a preloaded shim): the race behind 1 crash in 181 ASan runs of the above, made to happen every run",
    "cued-stopped-long": "the real cued stopped (SIGSTOP) 0.3 s into a 3 s sound, its one play, for 25 s",
    "no-end": "a cued that acks every play (`ok N`) and never ends a voice",
    "no-end32": "the same, 32 threads (past 512 voices open cued is lying)",
    "slow-callback": "an app whose one callback takes 1.5 s, a play every 100 ms, cued healthy",
    "fallback-hung-play": "no cued, the fallback driver's every play call hung 30 s",
    "fallback-hung-open": "no cued, the fallback driver's every open hung 30 s holding 2 descriptors, a context per sound at 50 a second, `ulimit -n 1024`",
    "fallback-hung-file": "no cued, a sound file on a FUSE mount whose open never returns, through libcanberra's alsa driver, a context every 10 plays",
    "fallback-open-fails": "no cued, the fallback driver's every open failing",
    "garbage": "a cued sending random bytes", "long-line": "a 1 MiB line", "nul": "NUL bytes in a reply",
    "fake-ends": "`end` lines for voices never started", "dup-ends": "each `end` line twice",
    "end-flood": "`end` lines as fast as the socket takes them", "silent": "a cued that reads and never answers",
    "deaf": "a cued that never reads", "reply-hang": "a reply, then silence", "close-mid-line": "a close in the middle of a line",
    "not-played": "every play answered `err not-played shutdown`",
    "unknown-retry": "`err unknown-cue` for a play with a file whose retry cannot be sent (the socket full)",
}


def ms(c):
    return "%.2f/%.2f" % (c["p999_us"] / 1000, c["max_us"] / 1000) if c and c.get("n") else "-"


def attack(name, runs):
    """One row from a scenario's three builds."""
    by = {r["variant"]: r for r in runs}
    plain = by.get("plain", {})
    if plain.get("skipped"):
        row("libcanberra plug-in: %s" % WHAT.get(name, name), "bench/canberra_stress.py %s" % name, "not run: " + plain["skipped"], False)
        return
    res = plain.get("result") or {}
    calls = plain.get("calls") or {}
    timed = bool(calls) and not plain.get("slow")
    san = ", ".join("%s %s" % ("ASan+UBSan" if v == "asan" else "TSan", "held" if by[v]["held"] else "**%s**" % by[v]["why"])
                    for v in ("asan", "tsan") if v in by) or "the plain build only"
    cb = res.get("callback") or {}
    bound = ("bound %.1f s: " % plain["bound_s"]) if plain.get("bound_s") else ""
    fig = ("%s plays (%s accepted%s): every callback once, before destroy; %splay → callback max %s s (p99 %s s), %s without "
           "a callback at +5 s, %s heard twice; %s through the fallback; codes %s; call p99.9/max "
           "play %s, cancel %s, playing %s ms; RSS %s KiB, threads %s, descriptors %s (before, during, after); %s"
           % (res.get("plays"), res.get("accepted"), ", the rest refused at once: back-pressure" if plain.get("refused") else "",
              bound, "%.2f" % (cb["max_us"] / 1e6) if cb.get("n") else "-", "%.2f" % (cb["p99_us"] / 1e6) if cb.get("n") else "-",
              res.get("late_5s"), res.get("played_twice"), res.get("fallback_plays"), res.get("codes"), ms(calls.get("play")),
              ms(calls.get("cancel")), ms(calls.get("playing")), res.get("rss_kb"), res.get("threads"), res.get("fds"), san))
    if res.get("fallback_opens"):
        fig += "; the fallback driver opened %d times in %.1f s" % (res["fallback_opens"], res.get("ran_s", 0))
    if plain.get("baseline_calls"):
        fig += "; the stand-in driver alone under the same load: play %s, cancel %s, playing %s ms (the machine's floor)" % (
            ms(plain["baseline_calls"].get("play")), ms(plain["baseline_calls"].get("cancel")), ms(plain["baseline_calls"].get("playing")))
    if plain.get("peak"):
        fig += "; at their peak (every 10 plays) threads %d, descriptors %d under `ulimit -n %s`" % (
            plain["peak"]["threads"], plain["peak"]["fds"], next(e.get("nofile") for n, v, a, e in scenarios(False) if n == name))
    if "main_done_s" in plain:
        fig += ("; the host's main done %s s after its start (bound %.1f s), the process %s; reaped %s s after the mount's "
                "server was killed (bound %.1f s)" % (
                    "%.1f" % plain["main_done_s"] if plain.get("main_done_s") is not None else "never",
                    next(e.get("exit_bound_s") for n, v, a, e in scenarios(False) if n == name),
                    "ending alone" if plain.get("ended_alone") else "held by the kernel meanwhile (a thread in its FUSE wait, unkillable)",
                    "%.2f" % plain["reaped_after_release_s"] if plain.get("reaped_after_release_s") is not None else "never",
                    next(e.get("reap_bound_s") for n, v, a, e in scenarios(False) if n == name)))
    if by.get("asan", {}).get("runs", 1) > 1:
        fig += "; ASan+UBSan: %d of %d runs held" % (by["asan"]["runs_held"], by["asan"]["runs"])
    if not plain.get("held", False):
        fig += "; plain build: **%s**" % plain.get("why")
    held = all(r["held"] for r in runs) and timed
    if not timed and plain.get("held"):
        fig += " (**calls over %d µs p99.9%s or %d µs max**)" % (CALL_P999_US, " and 1.5 times the floor" if plain.get("baseline_calls") else "",
                                                                 CALL_MAX_US)
    # A verdict may quote the host's stderr (a crash's last lines): one table cell, so one line and no bar.
    fig = " ".join(fig.split()).replace("|", "\\|")
    row("libcanberra plug-in: %s" % WHAT.get(name, name), "bench/canberra_stress.py %s: %s" % (name, plain.get("args", "")), fig, held)


def run_all(names):
    results = {}
    for name, variant, args, expect in scenarios(quick=False):
        if name in names:
            r = run_one(name, variant, args, expect)
            results.setdefault(name, []).append(r)
            if r.get("first_report"):  # the row has room for the verdict only: the sanitizer's words go to the log
                print("%s (%s): %s" % (name, variant, r["first_report"]), file=sys.stderr, flush=True)
    for name in names:
        if name in results:
            attack(name, results[name])


def canberra_load(sounds):
    run_all(["honest", "threads32-honest", "threads32-silent", "overload", "contexts100", "destroy", "destroy-fallback"])


def canberra_cued(sounds):
    run_all(["cued-restarts", "cued-stopped", "cued-stopped-long"])


def canberra_hostile(sounds):
    run_all(HOSTILE)


def canberra_fallback(sounds):
    run_all(["alsa-null-cancel", "alsa-null-silent32", "alsa-null-slow-end"])


def canberra_bounds(sounds):
    run_all(["no-end", "no-end32", "slow-callback", "fallback-hung-play", "fallback-hung-open", "fallback-hung-file", "fallback-open-fails"])


def canberra_fuzz(sounds):
    try:
        lf = open(os.path.join(ROOT, ".build", "fuzz", "canberra.log")).read()
    except OSError:
        row("libcanberra plug-in: its reply parser, libFuzzer (+ASan, UBSan)", "`make fuzz`", "not run", False)
        return
    runs = re.search(r"Done (\d+) runs in (\d+) second", lf)
    crashed = any(m in lf for m in ("ERROR: libFuzzer", "deadly signal", "ERROR: AddressSanitizer", "runtime error"))
    row("libcanberra plug-in: its reply parser, libFuzzer (+ASan, UBSan)",
        "`make fuzz`: clang -fsanitize=fuzzer,address,undefined, corpus fuzz/seeds/canberra; -max_len=1024",
        "%s inputs in %s s, %s" % (runs.group(1) if runs else "?", runs.group(2) if runs else "?", "a crash" if crashed else "no crash"),
        bool(runs) and not crashed)


SECTIONS = (canberra_fuzz, canberra_load, canberra_cued, canberra_hostile, canberra_fallback, canberra_bounds)
