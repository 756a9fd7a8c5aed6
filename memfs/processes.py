"""Whether a process still runs (pid files, the embedded server's users, recovery runs)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path


def _state(pid: int) -> str | None:
    """The process's state letter in ``/proc/PID/stat`` (None: no such process)."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except (FileNotFoundError, ProcessLookupError):
        return None
    return stat_line.rpartition(")")[2].split()[0]


def process_running(pid: int) -> bool:
    """True while ``pid`` runs; a zombie (exited, not yet reaped by its parent) is not running."""
    state = _state(pid)
    return state is not None and state not in ("Z", "X")


def process_stopped(pid: int) -> bool:
    """True while ``pid`` is stopped (SIGSTOP, a debugger): it answers nothing until it
    is continued, and a signal sent to end it waits too."""
    return _state(pid) in ("T", "t")


def command_line(pid: int) -> bytes:
    """The process's command line (NUL-separated), or b"" if it is gone."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def process_of(thread: int) -> int:
    """The process (thread group) a thread id belongs to, or ``thread`` itself if it cannot
    be told (gone, or 0).  FUSE names the calling *thread*: a program that reads a file on
    one thread and writes it on another (rclone, Go, node's thread pool) is one process."""
    if thread <= 0:
        return thread
    try:
        with open(f"/proc/{thread}/status", "rb") as status:
            for line in status:
                if line.startswith(b"Tgid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return thread


class RecentProcesses:
    """``process_of`` remembered for a second: every open asks it (a reader's base is kept
    for its thread and its process), and ``/proc/<id>/status`` costs ~20 µs, a tenth of a
    warm read; a thread id is not reused within a second (ids wrap only after
    ``pid_max``, 4 million on 64-bit Linux)."""

    #: How long a thread's process is remembered, in seconds.
    TTL = 1.0
    #: At most this many threads remembered (the oldest half goes beyond it).
    LIMIT = 4096

    def __init__(
        self,
        lookup: Callable[[int], int] = process_of,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lookup = lookup
        self._clock = clock
        self._known: dict[int, tuple[float, int]] = {}

    def __call__(self, thread: int) -> int:
        now = self._clock()
        known = self._known.get(thread)
        if known is not None and now - known[0] < self.TTL:
            return known[1]
        process = self._lookup(thread)
        if len(self._known) >= self.LIMIT:
            for old in list(self._known)[: self.LIMIT // 2]:
                del self._known[old]
        self._known[thread] = (now, process)
        return process
