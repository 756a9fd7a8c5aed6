"""A history of operations, as Jepsen records one: what each writer asked for and what it
was told.

Every write adds one line, a *marker* unique to that write (``m0w1-17``), so the final rows
say which writes landed.  An operation's outcome is ``ok`` (the syscalls said success),
``fail`` (a syscall refused it: nothing of it may have landed... or may have, for a
program's save; see ``INFO``) or ``info`` (indeterminate: a shell redirect ignores
close()'s error, a program that failed half-way may have written).
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

OK = "ok"
FAIL = "fail"
INFO = "info"

#: Operations that write a marker into the document at ``path``.
WRITES = {"append", "truncate", "shell-append", "shell-truncate", "save", "replace",
          "agent-append", "agent-create"}  # fmt: skip
#: Operations that remove the document at ``path`` (``rm-rf``: everything below it).
REMOVALS = {"rm", "rm-rf", "agent-delete"}
#: Operations that move ``path`` (a file or a folder) to ``target``.
MOVES = {"mv"}
#: Operations that truncate the open file in place (``open(O_TRUNC)``), and the savers
#: that do (the rest write a new file and rename it over the old one).
TRUNCATIONS = {"truncate", "shell-truncate"}
IN_PLACE_SAVERS = {"vim backupcopy=yes", "nano"}


@dataclass
class Op:
    """One operation of one writer."""

    writer: str
    kind: str
    path: str
    start: float
    target: str | None = None
    marker: str | None = None
    end: float = 0.0
    outcome: str = INFO
    #: errno name, exit code or exception: why it failed or is unknown.
    detail: str = ""
    #: The longest single syscall of the operation, in seconds (operations the driver
    #: makes itself; programs report their whole run).
    longest: float = 0.0
    #: Wall-clock time of the start (to match database and daemon logs).
    wall: float = field(default_factory=time.time)
    #: The mount it was made through (None: by SQL or by ``memfs sync``).
    mount: str | None = None

    def truncates_in_place(self) -> bool:
        """Whether it empties the open file it writes (every open file of it on its mount)."""
        saver = self.detail.split(":", maxsplit=1)[0]
        return self.kind in TRUNCATIONS or (self.kind == "save" and saver in IN_PLACE_SAVERS)

    def replaces_by_rename(self) -> str | None:
        """The path whose file it replaces by renaming another onto it (a descriptor still
        open on the old file then writes to a file no name leads to), if any."""
        saver = self.detail.split(":", maxsplit=1)[0]
        if self.kind == "mv":
            return self.target
        if self.kind == "replace" or (self.kind == "save" and saver not in IN_PLACE_SAVERS):
            return self.path
        return None

    def describe(self) -> str:
        what = f"{self.writer} {self.kind} {self.path}"
        if self.target:
            what += f" -> {self.target}"
        if self.marker:
            what += f" [{self.marker}]"
        return f"{what}: {self.outcome} {self.detail}".rstrip()


def _errno(detail: str) -> str:
    """The errno a failure's detail names ('Input/output error (5)'), else its first part."""
    found = re.search(r"([A-Za-z][^:()]*) \((\d+)\)", detail)
    if found:
        return f"{found.group(1).strip()} ({found.group(2)})"
    return detail.split(":", maxsplit=1)[0][:40]


@dataclass
class History:
    """Every operation of a run, in the order they started."""

    ops: list[Op] = field(default_factory=list)
    #: Lines the workspace held before the run (not written by any operation).
    seed_lines: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def begin(self, writer: str, kind: str, path: str, **extra: str | None) -> Op:
        op = Op(writer, kind, path, time.monotonic(), **extra)  # type: ignore[arg-type]
        with self._lock:
            self.ops.append(op)
        return op

    @staticmethod
    def end(op: Op, outcome: str, detail: str = "") -> None:
        op.end = time.monotonic()
        op.outcome = outcome
        op.detail = detail
        op.longest = max(op.longest, op.end - op.start)

    def markers(self) -> set[str]:
        """Every marker any operation tried to write, whatever it was told."""
        return {op.marker for op in self.ops if op.marker is not None}

    def summary(self) -> dict[str, object]:
        """Operations, acknowledgements, errors by errno and the longest syscall."""
        errors = Counter(_errno(op.detail) for op in self.ops if op.outcome != OK and op.detail)
        return {
            "operations": len(self.ops),
            "acknowledged": sum(op.outcome == OK for op in self.ops),
            "acknowledged_writes": sum(op.outcome == OK and op.kind in WRITES for op in self.ops),
            "failed": sum(op.outcome == FAIL for op in self.ops),
            "indeterminate": sum(op.outcome == INFO for op in self.ops),
            "errors": dict(errors.most_common()),
            "longest_syscall_s": round(
                max((op.longest for op in self.ops if op.kind not in {"save"}), default=0.0), 3
            ),
        }
