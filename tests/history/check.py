"""The history checker: proves from a history and the final rows that nothing acknowledged
was lost (the rules are in docs/semantics/persistence.md, "What the history checker proves").

1. Every acknowledged write's marker is a line of some document's current content, of a
   version row or of a save the safety net kept as written, unless a removal that may
   have come after it (acknowledged or indeterminate, not finished before the write
   began) removed the document, wherever
   moves that may have come after it took the document (a folder move on another mount
   counts if it finished less than ``LATE_ELSEWHERE`` before the write began: that mount
   sends it with its next transaction, so the writing mount may still show the old
   path, and its save follows the row to the new one); or another program on the same
   mount, while the write had the file open, truncated it in place (the open files of one
   document on one mount share its bytes, as a local file's page cache does: the
   truncation may have emptied them before the write's close saved them) or renamed
   another file onto its name (the write's descriptor then wrote to a file no name leads
   to, which is gone at its close, as on a local disk).
   A folder move another writer raced for its new name (``_contested_moves``) may not have
   been made at all, though its ``rename(2)`` returned 0: the mount sends it with its next
   transaction, which finds the other writer's rows there, moves nothing and shows the
   folder back under its old name (persistence.md, "A folder move").  A write through that
   mount right after, to a file below the new name, then reaches the document under the
   old name, which later operations there may take.
2. Every line of every current content and version row is a marker some operation tried
   to write, or a line the workspace held before the run: no byte nobody wrote (a NUL, a
   torn line), and an indeterminate write is there whole or not at all.
3. No path has two rows.
4. No daemon exited before it was unmounted, and every unmount exited 0.
5. No syscall answered EIO (the runs inject no fault: EIO would be the mount failing).
6. With the race (``drive(race=True)``, ``race_live``): every acknowledged line of the
   document only appended to is in its live content.

A marker is searched in every document, not only the one it was written to: a document's
content moves between rows when a file is renamed over another (the target keeps its id
and the source's content), and on the Reborn layout a document's identity is its path.
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Iterator
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
    #: (path, content) of every save kept as written by the safety net (issue 54).
    saver_copies: list[tuple[str, str]] = field(default_factory=list)


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder + "/")


def _moved(path: str, old: str, new: str) -> str:
    return new + path[len(old) :]


def _ancestors(path: str) -> list[str]:
    """``path`` and every folder above it ("a/b/c.md", "a/b", "a")."""
    parts = path.split("/")
    return ["/".join(parts[:n]) for n in range(len(parts), 0, -1)]


@dataclass
class _Index:
    """The operations a write's excuses are looked up in, by path and sorted by end (built
    once per history: a soak's hundreds of thousands of operations checked write by write
    would otherwise be quadratic)."""

    size: int
    moves: dict[str, list[Op]] = field(default_factory=dict)
    removals: dict[str, list[Op]] = field(default_factory=dict)
    trees_removed: dict[str, list[Op]] = field(default_factory=dict)
    #: Operations of a mount that truncate a file in place or rename another onto it, by
    #: the path of the file they overwrite, sorted by start.
    overwrites: dict[str, list[Op]] = field(default_factory=dict)
    #: Folder moves another writer raced for the new name (``_contested_moves``), by that name.
    contested: dict[str, list[Op]] = field(default_factory=dict)


def _is_folder(path: str) -> bool:
    """Whether the driver's ``path`` names a folder (its files all have a suffix)."""
    return "." not in path.rsplit("/", maxsplit=1)[-1]


def _contested_moves(ops: list[Op]) -> dict[str, list[Op]]:
    """The acknowledged folder moves of a mount another writer (another mount, the agent,
    ``memfs sync``) raced for the new name, by that name: it made or moved something at or
    below it while the move may still have been on its way to the database (its syscall,
    then up to ``LATE_ELSEWHERE`` for its transaction), which may then have found their
    rows there and moved nothing."""
    moves: dict[str, list[Op]] = {}
    for op in ops:
        folder_move = op.kind in MOVES and op.target and _is_folder(op.path)
        if folder_move and op.outcome == OK and op.mount is not None:
            assert op.target is not None
            moves.setdefault(op.target, []).append(op)
    touching: dict[str, list[Op]] = {}  # folder -> the operations at or below it
    for op in ops:
        if op.outcome == FAIL:
            continue
        for folder in {f for p in (op.path, op.target) if p for f in _ancestors(p)} & moves.keys():
            touching.setdefault(folder, []).append(op)
    return {
        target: [
            move for move in listed
            if any(
                other.mount != move.mount
                and other.end >= move.start - LATE_ELSEWHERE
                and other.start <= move.end + LATE_ELSEWHERE
                for other in touching.get(target, [])
            )
        ]
        for target, listed in moves.items()
    }  # fmt: skip


#: The last history indexed, held so that its id is not reused by another list.
_INDEXES: dict[int, tuple[list[Op], _Index]] = {}
#: No operation of a run lasts longer (the driver's command timeout is far below).
_LONGEST_OP = 3600.0
#: How late another mount's deferred folder move may reach the database after its
#: syscall returned (its next transaction: a round trip, or the batch on its way first).
LATE_ELSEWHERE = 1.0


def _index(ops: list[Op]) -> _Index:
    held, found = _INDEXES.get(id(ops), (None, None))
    if held is ops and found is not None and found.size == len(ops):
        return found
    index = _Index(len(ops))
    for op in ops:
        if op.outcome == FAIL:
            continue
        if op.kind in MOVES and op.target:
            index.moves.setdefault(op.path, []).append(op)
        elif op.kind == "rm-rf":
            index.trees_removed.setdefault(op.path, []).append(op)
        elif op.kind in REMOVALS:
            index.removals.setdefault(op.path, []).append(op)
        if op.mount is not None and op.truncates_in_place():
            index.overwrites.setdefault(op.path, []).append(op)
        replaced = op.replaces_by_rename() if op.mount is not None else None
        if replaced is not None:
            index.overwrites.setdefault(replaced, []).append(op)
    index.contested = _contested_moves(ops)
    for table in (index.moves, index.removals, index.trees_removed, index.contested):
        for listed in table.values():
            listed.sort(key=lambda op: op.end)
    for listed in index.overwrites.values():
        listed.sort(key=lambda op: op.start)
    _INDEXES.clear()  # one history at a time
    _INDEXES[id(ops)] = (ops, index)
    return index


def _ended_since(listed: list[Op], start: float) -> list[Op]:
    """The operations of ``listed`` (sorted by end) that ended at or after ``start``."""
    return listed[bisect.bisect_left(listed, start, key=lambda op: op.end) :]


def _may_follow(move: Op, write: Op) -> bool:
    """Whether ``move`` may have reached the database after ``write`` began: it did not
    finish before, or it was another mount's folder move, which that mount sends with its
    next transaction (docs/semantics/persistence.md: other writers see it about one round
    trip late), finished less than ``LATE_ELSEWHERE`` before."""
    if move.end >= write.start:
        return True
    elsewhere = move.mount is not None and move.mount != write.mount
    return elsewhere and move.end >= write.start - LATE_ELSEWHERE


def _undone(folder: str, write: Op, index: _Index) -> Iterator[Op]:
    """The contested moves of ``write``'s mount onto ``folder`` that may have been refused
    after ``write`` began: made before it, less than ``LATE_ELSEWHERE`` before."""
    listed = _ended_since(index.contested.get(folder, []), write.start - LATE_ELSEWHERE)
    return (m for m in listed if m.mount == write.mount and m.end <= write.start)


def _reachable(write: Op, index: _Index) -> Iterator[str]:
    """``write``'s path, then every path moves that may have followed it (``_may_follow``)
    may have taken the document to, and the old name of a folder whose move may have been
    refused under it (``_undone``), breadth first, each once."""
    found = {write.path}
    waiting = deque([write.path])
    while waiting:
        path = waiting.popleft()
        yield path
        for folder in _ancestors(path):
            listed = _ended_since(index.moves.get(folder, []), write.start - LATE_ELSEWHERE)
            nexts = [
                _moved(path, folder, m.target) for m in listed
                if m.target is not None and _may_follow(m, write)
            ] + [_moved(path, folder, m.path) for m in _undone(folder, write, index)]  # fmt: skip
            for new in nexts:
                if new not in found:
                    found.add(new)
                    waiting.append(new)


def places(write: Op, ops: list[Op]) -> set[str]:
    """Every path the document ``write`` wrote to may have reached through moves that did
    not finish before it began."""
    return set(_reachable(write, _index(ops)))


def removed_after(write: Op, ops: list[Op]) -> Op | None:
    """A removal that may have followed ``write`` and taken its document, if any."""
    index = _index(ops)
    for path in _reachable(write, index):
        later = _ended_since(index.removals.get(path, []), write.start)
        if later:
            return later[0]
        for folder in _ancestors(path):
            later = _ended_since(index.trees_removed.get(folder, []), write.start)
            if later:
                return later[0]
    return None


def overwritten_while_open(write: Op, ops: list[Op]) -> Op | None:
    """Another operation on ``write``'s mount that truncated the file in place, or renamed
    another file onto it, while ``write`` had it open (whatever it was told, unless it was
    refused before it began), if any."""
    if write.mount is None:
        return None
    index = _index(ops)
    for path in _reachable(write, index):
        listed = index.overwrites.get(path, [])
        low = bisect.bisect_left(listed, write.start - _LONGEST_OP, key=lambda op: op.start)
        high = bisect.bisect_left(listed, write.end, key=lambda op: op.start)
        for op in listed[low:high]:  # began before the write ended
            if op is not write and op.mount == write.mount and op.end > write.start:
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
        *((f"the kept copy of a save to {path}", text) for path, text in state.saver_copies),
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
        if overwritten_while_open(op, history.ops) is not None:
            continue
        problems.append(f"lost: {op.describe()}")
    problems += [f"EIO: {op.describe()}" for op in history.ops if "(5)" in op.detail]
    problems += [f"two rows at {path}" for path in state.duplicates]
    problems += [f"{mount}: {what}" for mount, what in state.daemon_problems.items()]
    return problems


#: Operations after which a line may leave the current content without a merge failing:
#: they replace the content (a truncation, ``replace``'s one-line file, a file renamed onto
#: it) or push a copy read earlier by another process (``memfs sync``; rsync and rclone
#: copy what the driver read before they started).
_REPLACING = {"truncate", "shell-truncate", "replace", "mv"}
_COPIES = {"rsync", "rclone"}


def _replaces(op: Op) -> bool:
    if op.kind in _REPLACING or op.writer == "sync":
        return True
    return op.kind == "save" and op.detail.split(":", maxsplit=1)[0] in _COPIES


def race_live(history: History, state: FinalState, path: str) -> list[str]:
    """The race's rule (issue 54): on a document every writer only appends to (the agent
    every 20 ms by SQL, each saver kind adding one line), no two changes overlap, so every
    acknowledged line is in its *live* content: not only a version, not only the safety
    net's copy."""
    live = set(_lines(state.documents.get(path, "")))
    return [
        f"not live in {path}: {op.describe()}"
        for op in history.ops
        if op.path == path and op.kind in WRITES and op.outcome == OK
        and op.marker is not None and op.marker not in live
    ]  # fmt: skip


def not_merged(history: History, state: FinalState) -> list[str]:
    """The tightened rule (issue 32): every acknowledged write's line is in the *current*
    content of a document, unless an operation that replaces content or removes the
    document may have come after it, or came while a save that ended after it was under
    way.  Concurrent saves and appends change different lines (each adds its own), so none
    of them may push another's line into a version."""
    current: set[str] = set()
    for text in state.documents.values():
        current.update(_lines(text))
    index = _index(history.ops)
    replacing: dict[str, list[Op]] = {}
    for op in history.ops:
        if _replaces(op):
            for path in {op.path, op.target} - {None}:
                assert path is not None
                replacing.setdefault(path, []).append(op)
    for listed in replacing.values():
        listed.sort(key=lambda op: op.end)
    saves: dict[str, list[Op]] = {}
    for op in history.ops:
        if op.kind == "save" and op.mount is not None:
            saves.setdefault(op.path, []).append(op)
    for listed in saves.values():
        listed.sort(key=lambda op: op.end)
    problems = []
    for op in history.ops:
        if op.kind not in WRITES or op.outcome != OK or op.marker is None:
            continue
        if op.marker in current or removed_after(op, history.ops) is not None:
            continue
        paths = list(_reachable(op, index))
        # A save that ended after the write may have read before a replacing operation
        # that came before the write: its change and that replacement overlap, and the
        # save wins over both (the rule for overlapping changes).
        since = min(
            [op.start, *(s.start for p in paths for s in _ended_since(saves.get(p, []), op.start))]
        )
        if any(_ended_since(replacing.get(p, []), since) for p in paths):
            continue
        problems.append(f"only in a version: {op.describe()}")
    return problems


def shared_file(history: History, state: FinalState) -> dict[str, object]:
    """The figures of the path the most writers wrote to (issue 32's "soak's shared file"):
    its writers, the lines they were told were written, how many of those are in current
    content, only in a version, or gone with a removal of the document; and the version
    rows of the path at the end."""
    by_path: dict[str, list[Op]] = {}
    for op in history.ops:
        if op.kind in WRITES and op.outcome == OK and op.marker is not None:
            by_path.setdefault(op.path, []).append(op)
    if not by_path:
        return {}
    path, writes = max(  # the soak's shared file if it ran one (``driver.SHARED``)
        by_path.items(),
        key=lambda item: (item[0] == "shared.md", len({o.writer for o in item[1]}), len(item[1])),
    )
    current = {line for text in state.documents.values() for line in _lines(text)}
    kept = {line for _, text in state.versions for line in _lines(text)}
    return {
        "path": path,
        "writers": len({op.writer for op in writes}),
        "lines_acknowledged": len(writes),
        "in_current_content": sum(op.marker in current for op in writes),
        "only_in_versions": sum(op.marker not in current and op.marker in kept for op in writes),
        "removed_with_the_document": sum(
            op.marker not in current and op.marker not in kept for op in writes
        ),
        "versions_at_end": sum(1 for where, _ in state.versions if where == path),
    }


__all__ = [
    "FinalState",
    "check",
    "not_merged",
    "overwritten_while_open",
    "places",
    "removed_after",
    "shared_file",
]
