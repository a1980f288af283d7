#!/usr/bin/env python3
"""Cold vs pre-warmed first-cue latency, as cued itself measures it (status
latency_us: request read -> the cue's first frame handed to the sink).

cold:      the device is closed (idle-close elapsed); `drag 80` must open it, then play psst1.
prewarmed: `drag 5` first (opens and prepares the device), then `drag 80` plays psst1.
Each trial uses a fresh daemon so every latency is a first cue. Prints a table; asserts nothing.
"""
import json, os, socket, subprocess, sys, tempfile, time

BIN = os.environ.get("CUED_BIN", ".build/release/cued")
TRIALS = int(os.environ.get("TRIALS", "40"))


def request(sock, line):
    sock.sendall((line + "\n").encode())
    buf = b""
    while not buf.endswith(b"\n"):
        buf += sock.recv(65536)
    return buf.decode().strip()


def trial(sink, env, prewarm):
    d = tempfile.mkdtemp(prefix="cued-b.")
    path = d + "/s"
    p = subprocess.Popen([BIN, "--sink", sink, "--socket", path, "--log-level", "error"], env=env,
                         stderr=subprocess.DEVNULL)
    try:
        for _ in range(500):
            try:
                s = socket.socket(socket.AF_UNIX); s.connect(path); break
            except OSError:
                time.sleep(0.01)
        if prewarm:
            request(s, "drag 5")
            time.sleep(0.05)  # the user keeps pulling for a while before the threshold
        assert request(s, "drag 80") == "ok psst1"
        for _ in range(200):
            st = json.loads(request(s, "status")[3:])
            if st["latency_us"]["max"] is not None:
                return st["latency_us"]["max"]
            time.sleep(0.005)
    finally:
        p.terminate(); p.wait()


def pct(v, q):
    v = sorted(v); return v[min(len(v) - 1, int(len(v) * q))]


def main():
    sinks = sys.argv[1:] or ["alsa:null", "alsa:testsink"]
    env = dict(os.environ)
    conf = tempfile.mktemp(suffix=".conf")
    with open(conf, "w") as f:
        f.write('pcm.testsink { type file slave.pcm "null" file "/dev/null" format "raw" }\n')
    env["ALSA_CONFIG_PATH"] = "/usr/share/alsa/alsa.conf:" + conf
    print(f"| sink | mode | trials | p50 µs | p90 µs | max µs |\n|---|---|---|---|---|---|")
    for sink in sinks:
        for mode in ("cold", "prewarmed"):
            v = [trial(sink, env, mode == "prewarmed") for _ in range(TRIALS)]
            print(f"| {sink} | {mode} | {len(v)} | {pct(v, .5)} | {pct(v, .9)} | {max(v)} |")


if __name__ == "__main__":
    main()
