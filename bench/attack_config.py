"""Reliability, files cued writes or reads beside its sounds: the config path not a regular
file, the state file's temp file, the socket directory, a theme that inherits thousands."""
import ctypes
import os
import struct
import subprocess
import time
from benchlib import pct
from harness import CUED, TMP
from attacklib import Cued, kill_all, row
from attack_fixtures import small_sounds, small_wav
from benchlib import cued_status as status
from cuedwire import is_err, ERR_UNKNOWN_CUE

CONCERN = "files"


# 8. The config path is not a regular file.
def config_path(sounds):
    q = Cued("cfgpath", sounds, config="[apps.mail]\nmuted = true\n")
    c = q.client(10)
    c.request("app mail")
    before = c.request("play probe")
    saved = open(q.config).read()
    figs, ok = [], before == "ok muted"
    for kind, reason in (("dangling symlink", "dangling symbolic link"), ("symlink loop", "symlink loop"), ("FIFO", "FIFO")):
        os.remove(q.config)
        if kind == "dangling symlink":
            os.symlink(os.path.join(TMP, "nowhere.toml"), q.config)
        elif kind == "symlink loop":
            os.symlink(q.config, q.config)
        else:
            os.mkfifo(q.config)
        t = time.monotonic()
        r = c.request("reload")
        dt = time.monotonic() - t
        kept = c.request("play probe") == "ok muted"
        start = subprocess.run([CUED, "--socket", os.path.join(TMP, "cfgpath2.sock"), "--sink", "null", "--sounds", sounds],
                               env=dict(os.environ, XDG_CONFIG_HOME=q.config_home, XDG_STATE_HOME=q.state),
                               capture_output=True, text=True, timeout=10)
        good = r.startswith("err reload-failed %s: " % q.config) and reason in r and kept
        good &= start.returncode == 78 and q.config in start.stderr
        ok &= good
        figs.append("%s → `%s` (%.1f ms), the app's mute kept: %s; at start exit %d" % (
            kind, r.replace(q.config, "CONFIG"), dt * 1000, kept, start.returncode))
        os.remove(q.config)
        open(q.config, "w").write(saved)
    row("the config path is not a regular file", "config `[apps.mail] muted = true`; the file replaced, then `reload`; "
        "then a second cued started on it", "; ".join(figs), ok and q.alive())
    q.term()


def inotify_names(path, body):
    """Names created in `path` while body() runs (inotify IN_CREATE)."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_NONBLOCK)
    libc.inotify_add_watch(fd, path.encode(), 0x100)  # IN_CREATE
    names = []
    try:
        body()
        time.sleep(0.3)
        while True:
            try:
                buf = os.read(fd, 65536)
            except BlockingIOError:
                break
            i = 0
            while i < len(buf):
                _, _, _, n = struct.unpack_from("iIII", buf, i)
                names.append(buf[i + 16:i + 16 + n].rstrip(b"\0").decode())
                i += 16 + n
    finally:
        os.close(fd)
    return names


# 9. The state file's temp file.
def state_temps(sounds):
    state = os.path.join(TMP, "state-temps")
    d = os.path.join(state, "cued")
    os.makedirs(d)
    for stale in (".state.AbC123", "state.tmp.4242"):
        open(os.path.join(d, stale), "w").write("x")
    victim = os.path.join(TMP, "victim")
    open(victim, "w").write("victim")
    q = Cued("temps", sounds, ["--rate-limit", "0"], env={"XDG_STATE_HOME": state})
    removed = sum(not os.path.exists(os.path.join(d, n)) for n in (".state.AbC123", "state.tmp.4242"))
    # The old scheme's name for this pid, planted as a symlink to a victim.
    os.symlink(victim, os.path.join(d, "state.tmp.%d" % q.pid))
    c = q.client(10)

    def changes():
        for i in range(20):
            c.request("mute" if i % 2 == 0 else "unmute")
            time.sleep(0.05)  # one save each (saves in quick succession coalesce)

    names = [n for n in inotify_names(d, changes) if n != "state"]
    untouched = open(victim).read() == "victim"
    left = [n for n in os.listdir(d) if n.startswith(".state.")]
    saved = "muted=false" in open(os.path.join(d, "state")).read()
    row("the state file's temp file", "2 stale temps planted before start; `state.tmp.PID` planted as a symlink to a "
        "victim file; 20 mute/unmute 50 ms apart; temp names seen with inotify",
        "%d of 2 stale temps removed at start; %d saves through %d distinct temp names (e.g. `%s`); victim untouched: %s; "
        "temps left: %d; state saved: %s" % (removed, len(names), len(set(names)), names[0] if names else "-", untouched,
                                              len(left), saved),
        removed == 2 and names and len(set(names)) == len(names) and all(n.startswith(".state.") for n in names)
        and untouched and not left and saved)
    q.term()


# 10. The socket directory.
def socket_dir(sounds):
    figs, ok = [], True
    for kind in ("mode 0777", "owned by uid 65534"):
        run = os.path.join(TMP, "run-" + kind.split()[0])
        os.makedirs(run, mode=0o700)
        d = os.path.join(run, "cued")
        os.mkdir(d, 0o700)
        if kind == "mode 0777":
            os.chmod(d, 0o777)
            expect = "chmod 700 %s" % d
        else:
            if os.getuid() != 0:
                figs.append("%s: not run (needs root)" % kind)
                continue
            os.chown(d, 65534, 65534)
            expect = "belongs to uid 65534"
        r = subprocess.run([CUED, "--socket", os.path.join(d, "cued.sock"), "--sink", "null", "--sounds", sounds],
                           env=dict(os.environ, XDG_CONFIG_HOME=os.path.join(TMP, "noconfig"),
                                    XDG_STATE_HOME=os.path.join(TMP, "state-sockdir")),
                           capture_output=True, text=True, timeout=10)
        good = r.returncode == 1 and expect in r.stderr and not os.path.exists(os.path.join(d, "cued.sock"))
        ok &= good
        figs.append("%s → exit %d: `%s`" % (kind, r.returncode, r.stderr.strip().replace(TMP, "…")[:150]))
    row("the socket directory", "an existing `cued/` socket directory, mode 0777, or owned by another user",
        "; ".join(figs), ok)


def theme_items(sounds):
    data = os.path.join(TMP, "data-many")
    base = os.path.join(data, "sounds")

    def index(theme, text):
        os.makedirs(os.path.join(base, theme), exist_ok=True)
        open(os.path.join(base, theme, "index.theme"), "w").write(text)

    # 20 real themes, each with 100 directories (a lookup stats every one of them).
    dirs = ",".join("d%d" % j for j in range(100))
    for i in range(20):
        index("real%d" % i, "[Sound Theme]\nDirectories=%s\n" % dirs + "".join(
            "[d%d]\nOutputProfile=stereo\n" % j for j in range(100)))
    inherits = ["ghost%d" % i for i in range(4970)] + ["bad/%d" % i for i in range(10)] + ["real%d" % i for i in range(20)]
    index("many", "[Sound Theme]\nInherits=%s\nDirectories=stereo\n\n[stereo]\nOutputProfile=stereo\n" % ",".join(inherits))
    os.makedirs(os.path.join(base, "many", "stereo"), exist_ok=True)
    q = Cued("themes", small_sounds(sounds, "themes"), level="warning", config='theme = "many"\n',
             env={"XDG_DATA_HOME": data, "XDG_DATA_DIRS": "/usr/share"})
    try:
        c = q.client(60)
        time.sleep(0.3)
        start_lines = len(q.stderr().splitlines())
        per_reload = []
        for _ in range(3):
            before = q.stderr()
            t = time.monotonic()
            ok_reload = c.request("reload") == "ok reloaded"
            dt = time.monotonic() - t
            time.sleep(0.3)
            added = q.stderr()[len(before):]
            per_reload.append((len(added.splitlines()), len(added.encode()), dt, ok_reload))
        chain = status(q.sock)["theme"]["chain"]
        row("a theme inheriting 5,000 themes", "config `theme = \"many\"`: Inherits lists 4,970 missing themes, 10 "
            "invalid names and 20 real ones (beyond the chain's 16); start, then 3 `reload`s",
            "start: %d log lines; per reload: %s; chain of %d themes"
            % (start_lines, "; ".join("%d lines (%d bytes) in %.0f ms" % (x[0], x[1], x[2] * 1000) for x in per_reload),
               len(chain)),
            all(x[3] and x[0] <= 2 and x[1] < 4096 for x in per_reload) and q.alive())
        # An unknown name, twice: searched once (16 themes × 100 directories, every shorter name at each `-`),
        # then a cached miss. A sound of that name added meanwhile is not found until the next reload.
        name = "no-such-sound-in-any-theme-at-all-x"
        times = []
        for _ in range(6):  # the first searches; the next five are the cached miss
            t = time.monotonic()
            r = c.request("play " + name)
            times.append(((time.monotonic() - t) * 1000, r))
        again = [ms for ms, _ in times[1:]]
        small_wav(os.path.join(base, "many", "stereo", name + ".wav"), 11)
        t = time.monotonic()
        third = c.request("play " + name)
        third_ms = (time.monotonic() - t) * 1000
        c.request("reload")
        after = c.request("play " + name)
        other_first = []
        for i in range(3):
            t = time.monotonic()
            c.request("play another-missing-name-%d-a-b-c" % i)
            other_first.append((time.monotonic() - t) * 1000)
        cached = all(is_err(r, ERR_UNKNOWN_CUE) for _, r in times) and is_err(third, ERR_UNKNOWN_CUE) \
            and after == "ok"
        row("a theme miss, twice", "the same theme; `play %s` 6 times; the sound then added to the theme, `play` "
            "again, `reload`, `play` again; 3 other unknown names for the cost of a first miss; verdict: the miss is "
            "remembered (the added sound is not found until the reload) and the repeats are faster than a first miss"
            % name,
            "first miss %.1f ms, the 5 repeats median %.1f ms, max %.1f ms (`%s…`); with the file added %.1f ms (`%s…`: "
            "the miss is cached), after the reload `%s`; other first misses %s ms"
            % (times[0][0], pct(again, .5), max(again), times[1][1][:30], third_ms, third[:30], after,
               "/".join("%.1f" % x for x in other_first)),
            cached and pct(again, .5) < min([times[0][0]] + other_first) and q.alive())
        q.term()
    finally:
        kill_all(q)


SECTIONS = (config_path, state_temps, socket_dir, theme_items)
