"""Real fault injection: a full disk, a frozen PostgreSQL (by pid), a syscall watchdog."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path


#: A full disk, injected: every write of a document fails as PostgreSQL's ENOSPC would.
def disk_full(table: str = "memory_documents") -> str:
    """A trigger making every write of ``table``'s rows fail as a full disk does."""
    return f"""
CREATE OR REPLACE FUNCTION test_disk_full() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'could not extend file: No space left on device (injected)'
        USING ERRCODE = 'disk_full';
END $$;
CREATE TRIGGER test_disk_full BEFORE INSERT OR UPDATE ON {table}
    FOR EACH ROW EXECUTE FUNCTION test_disk_full();
"""


def disk_freed(table: str = "memory_documents") -> str:
    return f"DROP TRIGGER test_disk_full ON {table}"


DISK_FULL = disk_full()
DISK_FREED = disk_freed()


def server_pids(pgdata: Path) -> list[int]:
    """The postmaster (from ``postmaster.pid``) and every process it forked."""
    postmaster = int((pgdata / "postmaster.pid").read_text().split()[0])
    pids = [postmaster]
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        if ppid == postmaster:
            pids.append(int(entry.name))
    return pids


@contextlib.contextmanager
def frozen(pgdata: Path) -> Iterator[list[int]]:
    """SIGSTOP every process of the server; SIGCONT them however the block ends."""
    pids = server_pids(pgdata)
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield pids
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


@dataclass
class Outcome:
    returncode: int | None  # None: still blocked when the watchdog gave up
    seconds: float
    stderr: str


def write_file(name: str, mode: str, text: str) -> list[str]:
    """A command that writes ``text`` to ``name`` and fails if write or close fails (a
    shell's ``>`` ignores close errors)."""
    script = f"with open({name!r}, {mode!r}) as f: f.write({text!r})"
    return [sys.executable, "-c", script]


def timed(cmd: Sequence[str], *, cwd: Path, limit: float) -> Outcome:
    """Run ``cmd`` and time it; a process stuck in D state cannot be killed, so this only
    waits ``limit`` seconds and reports it as blocked (the caller then unfreezes)."""
    started = time.monotonic()
    proc = subprocess.Popen(list(cmd), cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    while proc.poll() is None and time.monotonic() - started < limit:
        time.sleep(0.02)
    seconds = time.monotonic() - started
    if proc.returncode is None:
        proc.kill()
        return Outcome(None, seconds, "")
    assert proc.stderr is not None
    return Outcome(proc.returncode, seconds, proc.stderr.read().decode(errors="replace"))
