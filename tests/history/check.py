"""The history checker: proves from a history and the final rows that nothing acknowledged
was lost (the rules are in SEMANTICS.md, "What the history checker proves").

1. Every acknowledged write's marker is a line of some document's current content or of a
   version row, unless a removal that may have come after it (acknowledged or
   indeterminate, not finished before the write began) removed the document, wherever
   moves that may have come after it took the document; or another program on the same
   mount truncated the file in place while the write had it open (the open files of one
   document on one mount share its bytes, as a local file's page cache does: the
   truncation may have emptied them before the write's close saved them).
2. Every line of every current content and version row is a marker some operation tried
   to write, or a line the workspace held before the run: no byte nobody wrote (a NUL, a
   torn line), and an indeterminate write is there whole or not at all.
3. No path has two rows.
4. No daemon exited before it was unmounted, and every unmount exited 0.
5. No syscall answered EIO (the runs inject no fault: EIO would be the mount failing).

A marker is searched in every document, not only the one it was written to: a document's
content moves between rows when a file is renamed over another (the target keeps its id
and the source's content), and on the Reborn layout a document's identity is its path.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tests.history.record import FAIL, MOVES, OK, REMOVALS, WRITES, History, Op


@dataclass
class FinalState:
    """What the database holds after every mount was unmounted."""

    #: path -> current content.
    documents: dict[str, str]
    #: (document path, content) of every version row.
    versions: list[tuple[str, str]]
    #: Paths holding more than one document row.
    duplicates: list[str] = field(default_factory=list)
    #: mount -> how its daemon ended ("exited 3 during the run", "umount exited 1").
    daemon_problems: dict[str, str] = field(default_factory=dict)


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder + "/")


def _moved(path: str, old: str, new: str) -> str:
    return new + path[len(old) :]


def places(write: Op, ops: list[Op]) -> set[str]:
    """Every path the document ``write`` wrote to may have reached through moves that did
    not finish before it began."""
    found = {write.path}
    moves = [
        op for op in ops
        if op.kind in MOVES and op.outcome != FAIL and op.end >= write.start and op.target
    ]  # fmt: skip
    grew = True
    while grew:
        grew = False
        for move in moves:
            assert move.target is not None
            for path in list(found):
                if _under(path, move.path):
                    new = _moved(path, move.path, move.target)
                    if new not in found:
                        found.add(new)
                        grew = True
    return found


def removed_after(write: Op, ops: list[Op]) -> Op | None:
    """A removal that may have followed ``write`` and taken its document, if any."""
    where = places(write, ops)
    for op in ops:
        if op.kind not in REMOVALS or op.outcome == FAIL or op.end < write.start:
            continue
        if op.kind == "rm-rf":
            if any(_under(path, op.path) for path in where):
                return op
        elif op.path in where:
            return op
    return None


def truncated_while_open(write: Op, ops: list[Op]) -> Op | None:
    """Another operation on ``write``'s mount that truncated the file in place while
    ``write`` had it open (whatever it was told, unless its open was refused), if any."""
    if write.mount is None:
        return None
    where = places(write, ops)
    for op in ops:
        if (
            op is not write
            and op.mount == write.mount
            and op.outcome != FAIL
            and op.truncates_in_place()
            and op.path in where
            and op.start < write.end
            and op.end > write.start
        ):
            return op
    return None


def _lines(text: str) -> list[str]:
    return [line for line in text.split("\n") if line]


def check(history: History, state: FinalState) -> list[str]:
    """Every violation of the rules above, one line each (empty: the history holds)."""
    problems: list[str] = []
    stored: set[str] = set()
    where_stored: list[tuple[str, str]] = [
        *((f"current {path}", text) for path, text in state.documents.items()),
        *((f"a version of {path}", text) for path, text in state.versions),
    ]
    known = history.markers() | history.seed_lines
    for place, text in where_stored:
        for line in _lines(text):
            stored.add(line)
            if line not in known:
                problems.append(f"a line nobody wrote in {place}: {line[:80]!r}")
    for op in history.ops:
        if op.kind not in WRITES or op.outcome != OK or op.marker is None:
            continue
        if op.marker in stored:
            continue
        if removed_after(op, history.ops) is not None:
            continue
        if truncated_while_open(op, history.ops) is not None:
            continue
        problems.append(f"lost: {op.describe()}")
    problems += [f"EIO: {op.describe()}" for op in history.ops if "(5)" in op.detail]
    problems += [f"two rows at {path}" for path in state.duplicates]
    problems += [f"{mount}: {what}" for mount, what in state.daemon_problems.items()]
    return problems


__all__ = ["FinalState", "check", "places", "removed_after", "truncated_while_open"]
