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
