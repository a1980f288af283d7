#!/usr/bin/python3
"""A libfeedback client (python3-gi, Lfb) for the tests and the bench.

    feedback_client.py EVENT [--app APP] [--timeout T] [--profile P] [--end-after S] [--wait S]

Triggers EVENT through org.sigxcpu.Feedback on the session bus as APP, prints
"triggered", ends it after S seconds if --end-after is given, and prints
"ended REASON" (not-found, natural, expired, explicit) when the daemon says the
feedback ended; then exits 0. Exits 3 if no end came within --wait seconds."""
import argparse
import sys

import gi
gi.require_version("Lfb", "0.0")
from gi.repository import GLib, Lfb  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("event")
p.add_argument("--app", default="org.example.CuedTest")
p.add_argument("--timeout", type=int, default=-1)
p.add_argument("--profile")
p.add_argument("--end-after", type=float)
p.add_argument("--wait", type=float, default=20)
a = p.parse_args()

Lfb.init(a.app)
loop = GLib.MainLoop()
result = {"code": 3}
names = {-1: "not-found", 0: "natural", 1: "expired", 2: "explicit"}


def ended(event):
    reason = int(event.get_end_reason())
    print("ended", names.get(reason, str(reason)), flush=True)
    result["code"] = 0
    loop.quit()


event = Lfb.Event.new(a.event)
event.set_timeout(a.timeout)
if a.profile:
    event.set_feedback_profile(a.profile)
event.connect("feedback-ended", ended)
event.trigger_feedback()
print("triggered", flush=True)
if a.end_after is not None:
    GLib.timeout_add(int(a.end_after * 1000), lambda: event.end_feedback() and False)
GLib.timeout_add(int(a.wait * 1000), loop.quit)
loop.run()
Lfb.uninit()
sys.exit(result["code"])
