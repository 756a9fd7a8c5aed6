"""Keep libfuse's ``auto_unmount`` working when the daemon is SIGKILLed.

With ``auto_unmount``, libfuse starts a ``fusermount3`` helper and keeps one end of a
socket pair to it.  When the daemon dies the helper sees the socket close, opens the
mountpoint, and unmounts only if that open fails with ENOTCONN: the kernel's FUSE
connection must already be gone.  A dying process's files are released highest
descriptor first, and libfuse leaves the helper's socket above ``/dev/fuse`` (the device
is received into the socket pair's freed lower slot).  So the socket closed first; a
helper scheduled in between found the connection still up, its open failed with
ECONNABORTED instead, and it left a dead mount behind (5 of 40 SIGKILLs under the test
suite's load).

``init_helper_first`` runs the mount with a placeholder descriptor opened beforehand,
then moves the helper's socket into that lower slot: ``/dev/fuse`` is now released
first, and the helper always finds the connection gone.
"""

from __future__ import annotations

import logging
import os
import socket
import struct
from collections.abc import Callable

log = logging.getLogger(__name__)


def init_helper_first(mount: Callable[[], None]) -> None:
    """Run ``mount`` (``pyfuse3.init``); leave the helper's socket below ``/dev/fuse``."""
    placeholder = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    moved = False
    try:
        before = _own_socket_pairs()
        mount()
        new = sorted(_own_socket_pairs() - before)
        if len(new) == 1 and new[0] > placeholder:
            os.dup2(new[0], placeholder, inheritable=False)
            os.close(new[0])
            moved = True
            log.debug("auto_unmount: helper socket moved from fd %d to %d", new[0], placeholder)
        elif new:
            log.debug("auto_unmount: helper socket not identified among fds %s", new)
    finally:
        if not moved:
            os.close(placeholder)


def _own_socket_pairs() -> set[int]:
    """This process's Unix stream sockets whose peer it created itself (a socket pair)."""
    found: set[int] = set()
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            if not os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                continue
            probe = socket.socket(fileno=os.dup(fd))
        except OSError:
            continue  # the listing's own descriptor, or one closed meanwhile
        with probe:
            if probe.family != socket.AF_UNIX or probe.type != socket.SOCK_STREAM:
                continue
            try:
                cred = probe.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
            except OSError:
                continue
            if struct.unpack("3i", cred)[0] == os.getpid():
                found.add(fd)
    return found
