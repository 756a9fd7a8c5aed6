"""py-spy profiles of the memfs daemon, one per workload, and a plain-text summary of each.

``Profiler.around(label)`` samples the daemon (all threads, idle ones too, so time spent
waiting for PostgreSQL or for the kernel shows up) while a workload runs.  ``summarize``
turns py-spy's collapsed stacks into where each thread's wall time went.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import signal
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

# Leaf frames of a thread with nothing to do: the trio loop waiting for the kernel, idle
# worker threads, the pool's housekeeping, the invalidation queue.
_IDLE = ("get_events", "_epoll_wait", "WorkerThread._work", "Condition.wait", "Event.wait",
         "Queue.get", "FuseNotifier._run", "ParkingLot.park")  # fmt: skip
# Frames that are on every stack of their thread and say nothing about where time went.
_ROOTS = ("memfs/daemon.py", "memfs/cli.py", "memfs/__main__.py")
# Leaf frames of a thread blocked on PostgreSQL's answer.
_PG_WAIT = ("Connection.wait", "wait_c", "wait_epoll", "wait_select")


def py_spy() -> str | None:
    found = shutil.which("py-spy")
    if found:
        return found
    beside = Path(__file__).resolve().parent.parent / ".venv/bin/py-spy"
    return str(beside) if beside.exists() else None


class Profiler:
    """Records one raw py-spy profile per workload into ``directory``."""

    def __init__(self, directory: Path, pid: int, rate: int = 400) -> None:
        binary = py_spy()
        if binary is None:
            raise RuntimeError("py-spy is not installed: pip install -e '.[bench]'")
        self.binary, self.directory, self.pid, self.rate = binary, directory, pid, rate
        directory.mkdir(parents=True, exist_ok=True)

    @contextlib.contextmanager
    def around(self, label: str) -> Iterator[Path]:
        out = self.directory / (re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-") + ".txt")
        proc = subprocess.Popen(
            [self.binary, "record", "--pid", str(self.pid), "--format", "raw", "--idle",
             "--threads", "--function", "--nonblocking", "--rate",
             str(self.rate), "--output", str(out)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            yield out
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


def _frame(text: str) -> str:
    """``Class.method (memfs/vfs/content.py:98)`` -> ``Class.method (memfs/vfs/content.py)``."""
    return re.sub(r":\d+\)$", ")", text.strip())


def _thread_kind(name: str) -> str:
    if name == "MainThread":
        return "trio thread (FUSE requests)"
    if name.startswith(("Trio thread", "None from")):
        return "database calls (worker threads)"
    if name == "memfs-listen":
        return "change-feed listener"
    return "other threads"


def summarize(path: Path, top: int = 6) -> str:
    """Where the daemon's wall time went during one workload, by kind of thread.

    Each kind's samples split into idle (nothing to do), waiting for PostgreSQL, and busy
    in Python; busy samples are charged to the innermost memfs function on the stack.
    """
    if not path.exists() or path.stat().st_size == 0:
        return f"  (no samples in {path.name})"
    totals: Counter[str] = Counter()
    idle: Counter[str] = Counter()
    pg: Counter[str] = Counter()
    busy: dict[str, Counter[str]] = {}
    threads: dict[str, set[str]] = {}
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        head, *rest = stack.split(";")
        thread_id, _, name = head.partition(": ")
        kind = _thread_kind(name)
        threads.setdefault(kind, set()).add(thread_id)
        totals[kind] += count
        frames = [_frame(f) for f in rest]
        leaf = frames[-1] if frames else ""
        waiting_for_news = any("Connection.notifies" in f for f in frames)
        if not frames or waiting_for_news or any(w in leaf for w in _IDLE):
            idle[kind] += count
        elif any(leaf.startswith(w) for w in _PG_WAIT) and "psycopg" in leaf:
            pg[kind] += count
        else:
            ours = [f for f in frames if "memfs/" in f and not any(r in f for r in _ROOTS)]
            busy.setdefault(kind, Counter())[ours[-1] if ours else leaf] += count
    lines = []
    for kind in sorted(totals, key=lambda k: -totals[k]):
        total = totals[kind]
        working = total - idle[kind] - pg[kind]
        lines.append(
            f"  {kind} (x{len(threads[kind])}): {100 * idle[kind] / total:.0f}% idle, "
            f"{100 * pg[kind] / total:.0f}% waiting for PostgreSQL, "
            f"{100 * working / total:.0f}% busy"
        )
        for frame, count in busy.get(kind, Counter()).most_common(top):
            lines.append(f"      {100 * count / total:5.1f}%  {frame}")
    return "\n".join(lines)
