#!/usr/bin/python3
"""make reliability: every reliability scenario against the real daemon (release build), with
its figures, written to RELIABILITY.md grouped by what they attack: input, clients, files,
devices, signals, resources, the libcanberra plug-in (attacklib.CONCERNS). `make fuzz` runs first and leaves its logs in
.build/fuzz/. The scenarios are in the attack_*.py modules, one concern each (bench/README.md);
the same ones, shorter, are in `make test` (Tests/IntegrationTests).

Environment: RELIABILITY_SOAK_S (the soak's length, default 300). RELIABILITY_ONLY=a,b runs those
sections only: a concern (`input`, `clients`…), a section (`leaks`, `fairness_b`, `hostile`…) or
an older name (`issue12`, `issue19`, `issue29`, `issue29_clients`, `small19`, `small29`,
`clients_small`, `fairness`; see ALIASES), and writes their rows into RELIABILITY.md, each
replacing the row of the same attack (RELIABILITY_WRITE=0: print only). ISSUE29_ONLY=29.2c,29.4
narrows decoded_memory.
Needs root for some rows (a tmpfs, a FUSE mount, another user's directory), python3-fusepy for
the hung mount, gdb for malloc's figures.
"""
import os
import re
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack_canberra  # noqa: E402
import attack_clients  # noqa: E402
import attack_config  # noqa: E402
import attack_devices  # noqa: E402
import attack_files  # noqa: E402
import attack_input  # noqa: E402
import attack_lockout  # noqa: E402
import attack_memory  # noqa: E402
import attack_mounts  # noqa: E402
import attack_resources  # noqa: E402
import attack_signals  # noqa: E402
import attacklib  # noqa: E402
from attacklib import CONCERNS, ROWS, row  # noqa: E402
from benchlib import DECISIONS_MD, replace_section  # noqa: E402
from harness import ROOT, cleanup, machine, make_fixtures  # noqa: E402

# In the order a full run takes them (RELIABILITY.md's order).
MODULES = (attack_input, attack_clients, attack_lockout, attack_files, attack_mounts, attack_config, attack_devices,
           attack_signals, attack_resources, attack_memory, attack_canberra)
SECTIONS = {f.__name__: (m.CONCERN, f) for m in MODULES for f in m.SECTIONS}

# Names the sections had when they were grouped by issue: still accepted.
ALIASES = {
    "issue12": ["crafted_files", "fifos", "stalls", "connection_leak", "app_mutes", "leaks", "soak", "config_path", "state_temps",
                "socket_dir", "signals_row", "stderr_row", "small_items"],
    "issue19": ["ordering", "hung_mount", "slow_clients", "stderr_flood", "cache_bound", "skip_warnings", "fairness_a",
                "fairness_b", "fairness_c", "fd_exhaustion", "full_disk", "small19"],
    "small19": ["del_byte", "many_apps", "theme_items", "cuectl_items", "cuectl_reload"],
    "issue29": ["decoded_memory", "issue29_clients", "deep_files", "voice_share", "hup_loop_and_ids"],
    "small29": ["hup_loop_and_ids"],
    "issue29_clients": ["clients_memory", "clients_fairness", "clients_lockout", "clients_small"],
    "fairness": ["fairness_a", "fairness_b", "fairness_c"],
    "clients_small": ["many_apps", "nofile_caps"],
}
PATH = os.path.join(ROOT, "RELIABILITY.md")
HEADER = ["| attack | how it is run | figure | held |", "|---|---|---|---|"]


def expand(name):
    """Section names for a RELIABILITY_ONLY word: a concern, an alias, or a section."""
    if name in CONCERNS:
        return [s for s, (c, _) in SECTIONS.items() if c == name]
    if name in ALIASES:
        return [x for n in ALIASES[name] for x in expand(n)]
    if name in SECTIONS:
        return [name]
    sys.exit("RELIABILITY_ONLY: no section %r (concerns: %s; sections: %s; older names: %s)"
             % (name, ", ".join(CONCERNS), ", ".join(SECTIONS), ", ".join(ALIASES)))


def run(name, sounds):
    concern, section = SECTIONS[name]
    attacklib.CURRENT[0] = concern
    try:
        section(sounds)
    except Exception as e:  # a section that breaks is a failed row, not a lost report
        traceback.print_exc()
        row(name, "-", "the harness failed: %s: %s" % (e.__class__.__name__, e), False)


def line(r):
    _, name, how, fig, ok = r
    return "| %s | %s | %s | %s |" % (name, how, fig, "yes" if ok else "**no**")


def section_md(concern, lines, note=None):
    return ["## " + CONCERNS[concern], ""] + ([note, ""] if note else []) + HEADER + lines


def existing_rows(text, concern):
    """The rows of a concern's table in RELIABILITY.md, by attack name, in order."""
    head = "## " + CONCERNS[concern] + "\n"
    if head not in text:
        return {}
    body = text.split(head, 1)[1].split("\n## ", 1)[0]
    rows = {}
    for ln in body.split("\n" + HEADER[1] + "\n", 1)[-1].splitlines():
        if ln.startswith("| "):
            rows[ln[2:].split(" | ", 1)[0]] = ln
    return rows


def rerun_note(text, concern, names):
    """The line under a concern's heading naming the rows re-run alone since the full run, by date."""
    head = "## " + CONCERNS[concern] + "\n"
    body = text.split(head, 1)[1].split("\n## ", 1)[0] if head in text else ""
    old = re.search(r"^Re-run alone .*$", body, re.M)
    runs = {}
    date = None
    for day, name in re.findall(r"on (\d{4}-\d\d-\d\d):|\*(.+?)\*", old.group(0) if old else ""):
        date = day or date
        if name:
            runs[name] = date
    runs.update((n, time.strftime("%Y-%m-%d")) for n in names)
    dates = sorted(set(runs.values()))
    return "Re-run alone (`RELIABILITY_ONLY`) since the full run, the other rows as it measured them: %s." % "; ".join(
        "on %s: %s" % (d, ", ".join("*%s*" % n for n, nd in runs.items() if nd == d)) for d in dates)


def write_rows():
    """Each concern that ran gets its rows in RELIABILITY.md: a row of the same attack replaced,
    a new one appended; the other rows and concerns stay as they were measured."""
    text = open(PATH).read()
    order = list(CONCERNS)
    for concern in order:
        new = [r for r in ROWS if r[0] == concern]
        if not new:
            continue
        rows = existing_rows(text, concern)
        for r in new:
            rows[r[1]] = line(r)
        later = ["## " + CONCERNS[c] for c in order[order.index(concern) + 1:]]
        before = next((h for h in later if "\n" + h + "\n" in text), None)
        note = rerun_note(text, concern, [r[1] for r in new])
        replace_section(PATH, "## " + CONCERNS[concern], section_md(concern, list(rows.values()), note), before=before)
        text = open(PATH).read()
    print(text)


def write_all():
    md = ["# cued reliability", "",
          "Generated by `make reliability` (bench/reliability.py, after `make fuzz`) against the real daemon,",
          "release build, on: %s; full run" % machine(),
          "%s. One section per concern, one row per attack; `RELIABILITY_ONLY=CONCERN` re-runs a" % time.strftime("%Y-%m-%d"),
          "concern alone and says so under its heading (bench/README.md).", "",
          "The same scenarios run shorter in `make test` (HostileTests, RobustnessTests, HostileFileDaemonTests,",
          "LimitsTests, DeviceFaultTests, FuzzTests, SystemdTests). Timings are figures: a row's verdict is",
          "the property it names, and a timing only where its target is one."]
    for concern in CONCERNS:
        md += [""] + section_md(concern, [line(r) for r in ROWS if r[0] == concern])
    md += [""] + DECISIONS_MD
    text = "\n".join(md) + "\n"
    open(PATH, "w").write(text)
    print(text)


def main():
    os.chdir(ROOT)
    sounds, _, _ = make_fixtures()
    only = os.environ.get("RELIABILITY_ONLY")
    names = [x for w in only.split(",") for x in expand(w)] if only else list(SECTIONS)
    for name in dict.fromkeys(names):  # each once, in the order asked
        run(name, sounds)
    if not only:
        write_all()
    elif os.environ.get("RELIABILITY_WRITE", "1") != "0":
        write_rows()
    return 0 if all(r[4] for r in ROWS) else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    finally:
        cleanup()
