"""Reliability, devices: the audio output failing (`--sink fault:…`): failed opens, xruns,
suspends, EIO, an unplugged device and its return. The PipeWire glitch soak is its own
tool (bench/glitch_soak.py, `make glitch-soak`)."""
import os
import time
from benchlib import Client, wait_answering
from harness import CUED, TMP, spawn
from attacklib import row
from benchlib import cued_status as status

CONCERN = "devices"


def faults(sounds):
    spec = "fault:open-fail=2,write-40=EPIPE,write-80=ESTRPIPE,write-120=EIO,write-200=ENODEV,down-ms=1000"
    logf = os.path.join(TMP, "faults.log")
    sock = os.path.join(TMP, "faults.sock")
    e = dict(os.environ, XDG_STATE_HOME=os.path.join(TMP, "state-faults"), XDG_CONFIG_HOME=os.path.join(TMP, "noconfig"))
    p = spawn([CUED, "--socket", sock, "--sink", spec, "--sounds", sounds, "--log-level", "warning"], env=e,
              stderr=open(logf, "w"))
    wait_answering(sock, "faults")
    c = Client(sock)

    def wait_for(cond, limit=10.0):
        end = time.monotonic() + limit
        while time.monotonic() < end:
            st = status(sock)
            if cond(st):
                return st
            time.sleep(0.01)
        return None

    c.request("play long")  # 10 s of audio (5 ms periods): meets the faults in turn
    opened = wait_for(lambda st: st["played"] >= 1) is not None        # after two failed opens
    xr = wait_for(lambda st: st["xruns"] >= 2)                           # writes 40 and 80: recovered in place
    xruns = xr["xruns"] if xr else -1
    # Write 120 breaks the device (EIO): reopened at once; the long cue, requested ~0.6 s
    # before, is past the 250 ms start rule, so it is dropped rather than restarted late.
    broke = wait_for(lambda st: st["dropped"] >= 1 and st["sink"]["state"] != "failed")
    eio_logged = "EIO" in open(logf, errors="replace").read()
    c.request("play long")                                               # write 200 unplugs it
    unplug = wait_for(lambda st: st["sink"]["state"] == "failed" and "ENODEV" in (st["sink"]["error"] or ""))
    failed_at = time.monotonic()
    answering = Client(sock).request("ping") == "ok pong"
    before = status(sock)
    c.request("play probe")                                              # during the outage
    time.sleep(0.4)
    during = status(sock)
    dropped = during["dropped"] - before["dropped"]
    late_play = during["played"] - before["played"]
    back = None
    while time.monotonic() < failed_at + 5:
        n = status(sock)["played"]
        c.request("play probe")
        time.sleep(0.02)
        if status(sock)["played"] > n and time.monotonic() > failed_at + 1.0:
            back = time.monotonic() - (failed_at + 1.0)
            break
        time.sleep(0.03)
    row("device faults", "`--sink %s`" % spec,
        "2 failed opens retried, cue played: %s; xrun + suspend recovered in place: %d; EIO: reopened at once, logged: %s, "
        "the cue it cut (0.6 s old) dropped, not restarted late: %s; ENODEV: `failed` in `status` with the error: %s; "
        "answering throughout: %s; the cue sent during the outage dropped (%d) and never played late (%d); "
        "playing again %.0f ms after the device returned"
        % (opened, xruns, eio_logged, broke is not None, unplug is not None, answering, dropped, late_play,
           (back or -1) * 1000),
        opened and xruns == 2 and broke is not None and eio_logged and unplug is not None and answering and dropped == 1
        and late_play == 0 and back is not None and back < 1.0)
    p.terminate()
    p.wait()


SECTIONS = (faults,)
