"""Whether a process still runs (pid files, the embedded server's users, recovery runs)."""

from __future__ import annotations

from pathlib import Path


def process_running(pid: int) -> bool:
    """True while ``pid`` runs; a zombie (exited, not yet reaped by its parent) is not running."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except (FileNotFoundError, ProcessLookupError):
        return False
    state = stat_line.rpartition(")")[2].split()[0]
    return state not in ("Z", "X")


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
