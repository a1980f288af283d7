#!/usr/bin/python3
"""The two stacks side by side: cued's native PipeWire stream on this machine's Debian 12
(PipeWire 0.3.65, WirePlumber 0.4) and inside the Debian 13 root (PipeWire 1.4, WirePlumber 0.5;
Tests/stacks/debian13.sh), with cued on each stack's own libraries, as a user with RTKit (the
PipeWire section's own cued: pipewire_bench, cued's native rows, graph state a). The stacks take
turns, a round each at a time (BENCH_STACK_ROUNDS, default 2), so that what the machine does
meanwhile falls on both; each round is a fresh private stack and a fresh cued.

Per stack: trigger -> first sample at the null sink, from stopped and mid-stream (p50 / p99), the
cues that missed a graph cycle or lost frames at the monitor, what cued's own status said (played,
stalls, dropped, missed cycles, the margin it ended at), and Debian 13's p50 against Debian 12's.

Environment: BENCH_STACK_MID (mid-stream probes a round and stack, default 250: 500 in all with
two rounds), BENCH_STACK_STOPPED (from stopped, default 10), BENCH_STACK_ROUNDS. Without the
root (`Tests/stacks/debian13.sh path` fails: `make test` builds it) the section says so.
Figures, not tests. Run alone: `python3 bench/stacks_bench.py [--update BENCHMARKS.md]`."""
import json
import os
import subprocess
import sys
import tempfile

from benchlib import log, pct, section_main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADING = "## Debian 12 and Debian 13 side by side"
BEFORE = "## Through PipeWire"
SCRIPT = os.path.join(ROOT, "Tests", "stacks", "debian13.sh")
ROW = "cued `pipewire` (native)"


def env_int(name, default):
    v = os.environ.get(name)
    return int(v) if v and v.isdigit() else default


def root_dir():
    r = subprocess.run([SCRIPT, "path"], capture_output=True, text=True) if os.path.exists(SCRIPT) else None
    return r.stdout.strip() if r is not None and r.returncode == 0 else None


def versions(root):
    """pipewire and wireplumber of a stack: the root's stamp, or dpkg's on this machine."""
    out = {}
    if root:
        try:
            for line in open(os.path.join(root, "stamp")):  # debian13.sh's: "PACKAGE VERSION" a line
                name, _, ver = line.strip().partition(" ")
                out[name] = ver
        except OSError:
            pass
        return out
    for name in ("pipewire", "wireplumber"):
        r = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", name], capture_output=True, text=True)
        out[name] = r.stdout.strip()
    return out


def one_round(stack, root, mid, stopped):
    """pipewire_bench's native rows once, on `stack`; its figures (its JSON) or None."""
    tmp = tempfile.mkdtemp(prefix="cued-stacks-")
    os.chmod(tmp, 0o755)
    env = dict(os.environ, TMPDIR=tmp, BENCH_PW_CUED_ONLY="1", BENCH_PW_SINKS="native", BENCH_PW_STATES="a",
               BENCH_PW_MID=str(mid), BENCH_PW_STOPPED=str(stopped), BENCH_PW_SOAK="0")
    cmd = ["/usr/bin/python3", os.path.join(ROOT, "bench", "pipewire_bench.py")]
    if stack == "debian13":
        cmd = [SCRIPT, "run", root, "--"] + cmd
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
    path = os.path.join(tmp, "cued-bench-pipewire.json")
    if r.returncode != 0 or not os.path.exists(path):
        log("stacks: %s round failed (%d): %s" % (stack, r.returncode, (r.stderr or r.stdout)[-800:]))
        return None
    with open(path) as f:
        return json.load(f)


def run():
    root = root_dir()
    res = {"root": root, "stacks": {}}
    if not root:
        return res
    rounds, mid, stopped = env_int("BENCH_STACK_ROUNDS", 2), env_int("BENCH_STACK_MID", 250), env_int("BENCH_STACK_STOPPED", 10)
    for stack in ("debian12", "debian13"):
        res["stacks"][stack] = {"versions": versions(root if stack == "debian13" else None), "rounds": []}
    for i in range(rounds):
        for stack in ("debian12", "debian13"):
            log("stacks: round %d of %d on %s" % (i + 1, rounds, stack))
            d = one_round(stack, root, mid, stopped)
            if d is None:
                res["stacks"][stack]["rounds"].append(None)
                continue
            a = d["states"]["a"]
            st = (d.get("status", {}).get(ROW) or [{}])[-1]
            res["stacks"][stack]["rounds"].append({
                "stopped": a["stopped"][ROW]["lat"], "mid": a["mid"][ROW]["lat"],
                "stopped_misses": a["stopped"][ROW]["misses"], "mid_misses": a["mid"][ROW]["misses"],
                "played": st.get("played"), "stalls": st.get("stalls"), "dropped": st.get("dropped"),
                "missed_cycles": st.get("missed_cycles"), "margin": st.get("sink", {}).get("margin_frames"),
                "audio_thread": st.get("audio_thread"), "user": d.get("user")})
    return res


def report(res):
    md = [HEADING, ""]
    if not res.get("root"):
        return md + ["Not measured: no Debian 13 root (`Tests/stacks/debian13.sh root` builds it; `make test` does).", ""]
    md += ["cued's native PipeWire stream on each stack, cued on that stack's own libraries, as a user with RTKit;",
           "trigger -> first sample at the null sink, graph state a (nothing else playing). The stacks took turns,",
           "a fresh stack and cued a round; misses: cues that missed a graph cycle or lost frames at the monitor.", "",
           "| stack | PipeWire | WirePlumber | from stopped n | p50 / p99 ms | mid-stream n | p50 / p99 ms | misses | "
           "played / stalls / dropped / missed cycles (cued's status) | margin at the end | audio thread |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    p50 = {}
    for stack, s in res["stacks"].items():
        rounds = [r for r in s["rounds"] if r]
        if not rounds:
            md.append("| %s | %s | %s | - | failed | - | failed | - | - | - | - |" % (
                stack, s["versions"].get("pipewire", "?"), s["versions"].get("wireplumber", "?")))
            continue
        stopped = [v for r in rounds for v in r["stopped"]]
        mid = [v for r in rounds for v in r["mid"]]
        misses = sum(r["stopped_misses"] + r["mid_misses"] for r in rounds)
        p50[stack] = (pct(stopped, .5), pct(mid, .5))
        counts = " · ".join("%s / %s / %s / %s" % (r["played"], r["stalls"], r["dropped"], r["missed_cycles"]) for r in rounds)
        margins = ", ".join(str(r["margin"]) for r in rounds)
        md.append("| %s | %s | %s | %d | %.1f / %.1f | %d | %.1f / %.1f | %d of %d | %s | %s | %s |" % (
            stack, s["versions"].get("pipewire", "?"), s["versions"].get("wireplumber", "?"), len(stopped),
            pct(stopped, .5) / 1000, pct(stopped, .99) / 1000, len(mid), pct(mid, .5) / 1000, pct(mid, .99) / 1000,
            misses, len(stopped) + len(mid), counts, margins, rounds[-1]["audio_thread"]))
    md.append("")
    if "debian12" in p50 and "debian13" in p50:
        (s12, m12), (s13, m13) = p50["debian12"], p50["debian13"]
        md += ["| target (issue 45) | measured | |", "|---|---|---|"]
        for what, a, b in (("from stopped", s13, s12), ("mid-stream", m13, m12)):
            md.append("| Debian 13 %s p50 within 1.25× Debian 12's | %.2f vs %.2f ms (%.2f×) | %s |" % (
                what, a / 1000, b / 1000, a / b if b else 0, "**met**" if b and a <= 1.25 * b else "**not met**"))
        md.append("")
    return md


if __name__ == "__main__":
    section_main("stacks", run, report, HEADING, before=BEFORE)
