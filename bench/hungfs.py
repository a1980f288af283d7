#!/usr/bin/python3
"""A FUSE file system whose reads never return (python3-fusepy), mounted at argv[1] in the
foreground: a network mount that stopped answering, for the hung-mount rows of
reliability.py and for Tests/IntegrationTests/StuckFileTests. Any `hang*.wav` exists
(48,044 bytes: a WAV header's worth of metadata answers at once); `hang.wav`, `hang1.wav`
and `hang2.wav` are listed; every read waits forever. The open of any `hangopen*.wav` waits
forever too (a server that stopped answering before the file was opened: the opener in
fuse_open, in D state)."""
import errno
import stat
import sys
import threading
import time

from fusepy import FUSE, FuseOSError, Operations


class Hung(Operations):
    def getattr(self, path, fh=None):
        t = time.time()
        if path == '/':
            return dict(st_mode=stat.S_IFDIR | 0o755, st_nlink=2, st_ctime=t, st_mtime=t, st_atime=t)
        if path.startswith('/hang') and path.endswith('.wav'):
            return dict(st_mode=stat.S_IFREG | 0o644, st_nlink=1, st_size=48044, st_ctime=t, st_mtime=t, st_atime=t)
        raise FuseOSError(errno.ENOENT)

    def readdir(self, path, fh):
        return ['.', '..', 'hang.wav', 'hang1.wav', 'hang2.wav']

    def open(self, path, flags):
        if path.startswith('/hangopen'):
            threading.Event().wait()
        return 0

    def read(self, path, size, offset, fh):
        threading.Event().wait()


if __name__ == "__main__":
    FUSE(Hung(), sys.argv[1], foreground=True, nothreads=False)
