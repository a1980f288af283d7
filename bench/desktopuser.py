"""cued (and PipeWire's own players) run as a desktop user runs them, for the bench's PipeWire rows:
the bench runs as root, where cued's audio thread would get SCHED_FIFO by itself; a user has no
CAP_SYS_NICE and RLIMIT_RTPRIO 0, and gets real time from the desktop's RTKit. So: uid 65534
(nobody, no capability: a plain setresuid from root keeps none), a private system bus with
polkitd and rtkit-daemon (`RealtimeKit`: the polkit rule granting RealtimeKit1.* to that user, as an
active session has it, is in /etc/polkit-1/rules.d only while it runs), and the bench's own
connections to cued made as that user (`connect`: cued answers only its own user's clients; the
connected socket is handed back over SCM_RIGHTS, so nothing relays the bench's lines).
The same as the tests' Tests/IntegrationTests/DesktopUser.swift and RealtimeKitStack.swift."""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from benchlib import Client

UID = GID = 65534
NAME = "nobody"
PYTHON = "/usr/bin/python3"  # a pyenv python under root's home is not the user's to run


def available():
    """Why the bench cannot run cued as another user here (None: it can)."""
    if os.getuid() != 0:
        return "not root: cued runs as this user, as it is"
    if not os.path.exists(PYTHON):
        return "no " + PYTHON
    return None


def popen_args():
    """Popen keywords that run a child as the user (after fork, before exec: no extra process)."""
    return {"user": UID, "group": GID, "extra_groups": []}


def own(path):
    """Gives `path` and everything under it to the user."""
    os.chown(path, UID, GID)
    for root, dirs, files in os.walk(path):
        for n in dirs + files:
            os.lchown(os.path.join(root, n), UID, GID)


def traverse(path):
    """Lets the user through a directory of root's (searchable, not listable)."""
    os.chmod(path, 0o711)


def reachable(path):
    """A copy of the executable `path` that the user can run (the checkout may be under a home it
    cannot enter), in a directory removed with `tmp`."""
    def ok(p):
        while p not in ("/", ""):
            if not os.stat(p).st_mode & 0o001:
                return False
            p = os.path.dirname(p)
        return True
    return path if ok(os.path.dirname(os.path.abspath(path))) else None


def copy_binaries(paths, tmp):
    """{path: a path the user can run}: each one reachable as it is, else copied into tmp/bin."""
    out = {}
    bindir = os.path.join(tmp, "bin")
    for p in paths:
        r = reachable(p)
        if r is None:
            os.makedirs(bindir, exist_ok=True)
            os.chmod(bindir, 0o755)
            r = os.path.join(bindir, os.path.basename(p))
            shutil.copy2(p, r)
            os.chmod(r, 0o755)
        out[p] = r
    return out


_CONNECT = ("import socket, sys\n"
            "s = socket.socket(socket.AF_UNIX)\n"
            "s.connect(sys.argv[1])\n"
            "socket.send_fds(socket.socket(fileno=int(sys.argv[2])), [b'x'], [s.fileno()])\n")


def connect(path, env=None):
    """A Client on cued's socket at `path`, connected as the user (its peer credentials are the
    user's: cued serves it), handed to this process."""
    here, there = socket.socketpair()
    try:
        p = subprocess.Popen([PYTHON, "-c", _CONNECT, path, str(there.fileno())], pass_fds=[there.fileno()], env=env,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **popen_args())
        there.close()
        _, fds, _, _ = socket.recv_fds(here, 1, 1)
        err = p.communicate(timeout=10)[1]
        if not fds:
            raise OSError("could not connect to %s as %s: %s" % (path, NAME, err.decode(errors="replace").strip()[-300:]))
        return Client(sock=socket.socket(fileno=fds[0]))
    finally:
        here.close()


def wait_answering(path, name, env=None, limit=15.0):
    """Waits until cued answers `ping` at `path` (asked as the user)."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        try:
            c = connect(path, env)
            if c.request("ping") == "ok pong":
                c.s.close()
                return
        except (OSError, subprocess.TimeoutExpired):
            pass
        time.sleep(0.01)
    raise RuntimeError("cued %s did not answer" % name)


SYSTEM_CONF = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=%s</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/><allow own="*"/><allow send_destination="*"/><allow receive_sender="*"/>
  </policy>
</busconfig>
"""

RULES_DIR = "/etc/polkit-1/rules.d"
RULE_PREFIX = "49-cued-bench-rtkit."
RULE = """// Written by cued's bench for its run (removed after): the bench user gets RTKit's real time
// as an active desktop session does.
polkit.addRule(function(action, subject) {
    if (action.id.indexOf("org.freedesktop.RealtimeKit1.") == 0 && subject.user == "%s")
        return polkit.Result.YES;
});
""" % NAME


class RealtimeKit:
    """A private system bus with polkitd and rtkit-daemon (no canary, no chroot, no resource
    limits: it cannot set those outside systemd), as a desktop gives its users. `env` points a
    program at it. close() kills them and removes the polkit rule; a rule a killed run left
    behind is removed by the next (its pid is gone)."""

    TOOLS = ("/usr/bin/dbus-daemon", "/usr/lib/polkit-1/polkitd", "/usr/libexec/rtkit-daemon")

    @classmethod
    def unavailable(cls):
        why = available()
        if why:
            return why
        missing = [t for t in cls.TOOLS if not os.path.exists(t)]
        return ("missing " + " ".join(missing) + " (make deps installs rtkit, polkitd)") if missing else None

    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="cued-rtkit.")
        traverse(self.tmp)
        sock = os.path.join(self.tmp, "system_bus_socket")
        self.address = "unix:path=" + sock
        self.env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=self.address)
        self.procs = []
        self.rule = os.path.join(RULES_DIR, RULE_PREFIX + "%d.rules" % os.getpid())
        for f in os.listdir(RULES_DIR) if os.path.isdir(RULES_DIR) else []:
            if f.startswith(RULE_PREFIX):
                try:
                    os.kill(int(f[len(RULE_PREFIX):].split(".")[0]), 0)
                except (ValueError, ProcessLookupError):
                    os.unlink(os.path.join(RULES_DIR, f))
        try:
            with open(self.rule, "w") as f:
                f.write(RULE)
            conf = os.path.join(self.tmp, "system.conf")
            with open(conf, "w") as f:
                f.write(SYSTEM_CONF % sock)
            self._spawn(["dbus-daemon", "--config-file=" + conf, "--nofork", "--nopidfile"])
            for _ in range(500):
                if os.path.exists(sock):
                    break
                time.sleep(0.01)
            self._spawn(["/usr/lib/polkit-1/polkitd", "--no-debug"])
            self._spawn(["/usr/libexec/rtkit-daemon", "--no-canary", "--no-chroot", "--no-limit-resources"])
            for name, path, iface, prop in (
                    ("org.freedesktop.RealtimeKit1", "/org/freedesktop/RealtimeKit1", "org.freedesktop.RealtimeKit1", "MaxRealtimePriority"),
                    ("org.freedesktop.PolicyKit1", "/org/freedesktop/PolicyKit1/Authority", "org.freedesktop.PolicyKit1.Authority", "BackendName")):
                for _ in range(250):
                    r = subprocess.run(["gdbus", "call", "--system", "-d", name, "-o", path, "-m",
                                        "org.freedesktop.DBus.Properties.Get", iface, prop],
                                       env=self.env, capture_output=True, timeout=5)
                    if r.returncode == 0:
                        break
                    time.sleep(0.02)
                else:
                    raise RuntimeError("%s did not answer on the private system bus" % name)
        except BaseException:
            self.close()
            raise

    def _spawn(self, argv):
        self.procs.append(subprocess.Popen(argv, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

    def close(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait()
        self.procs = []
        try:
            os.unlink(self.rule)
        except OSError:
            pass
        shutil.rmtree(self.tmp, ignore_errors=True)
