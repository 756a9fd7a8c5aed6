"""The history checker's snapshots: at moments chosen by the seed (counted in operations),
every writer is held, the mounts' waiting changes sent and seen, the moment taken, and the
first mount copied with ``cp -r``; after the run, ``diff -r`` of each copy against
``.at/<moment>/`` must be empty (issue 33).

What ``.at/`` does not claim to show is taken out of the copy first, as the README says:
files memfs does not keep as documents (scratch and tentative names, tool folders) and
folders holding no document.  On the Reborn layout, where no trigger of memfs's sees SQL,
a document the agent deleted by SQL after the moment is not kept: such paths are excused
by the history (on the legacy layout memfs's trigger keeps them, and nothing is excused).
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg

from memfs.db.capabilities import Move
from memfs.scratch import Kind, ScratchRules
from memfs.vfs.at_dir import path_then

if TYPE_CHECKING:
    from tests.history.driver import Run

#: How long a snapshot waits for the operations under way to end.
PAUSE_TIMEOUT = 180.0
#: How long a snapshot waits for the first mount to show what the database holds (its
#: copy is what ``.at/`` is held to: a copy made while the mount was still hearing of
#: the agent's last change is a late view, not a wrong past).
CATCH_UP_TIMEOUT = 30.0


class Gate:
    """Operations run freely; a snapshot waits for those under way and holds new ones."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._active = 0
        self._closed = False
        #: Operations finished (snapshots fall due by this count).
        self.done = 0

    @contextlib.contextmanager
    def op(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._closed)
            self._active += 1
        try:
            yield
        finally:
            with self._cond:
                self._active -= 1
                self.done += 1
                self._cond.notify_all()

    def wait_done(self, count: int, stop: threading.Event) -> bool:
        with self._cond:
            while self.done < count and not stop.is_set():
                self._cond.wait(timeout=0.5)
            return self.done >= count

    @contextlib.contextmanager
    def paused(self) -> Iterator[bool]:
        with self._cond:
            self._closed = True
            quiet = self._cond.wait_for(lambda: self._active == 0, timeout=PAUSE_TIMEOUT)
        try:
            yield quiet
        finally:
            with self._cond:
                self._closed = False
                self._cond.notify_all()


@dataclass
class Snapshot:
    """One moment and the copy of the first mount made at it."""

    moment: datetime
    #: ``time.monotonic()`` at the moment (operations are timed by it).
    monotonic: float
    copy: Path


@dataclass
class Snapshotter:
    """Takes ``count`` snapshots at operation counts the seed picks."""

    run: Run
    gate: Gate
    count: int
    total: int
    folder: Path
    rng: random.Random
    #: path -> content of every document the database holds now.
    documents: Callable[[], dict[str, str]]
    taken: list[Snapshot] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    #: Per snapshot, the seconds the first mount took, after the pause, to show the
    #: database's documents (None: it never did within ``CATCH_UP_TIMEOUT``).
    catch_up: list[float | None] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def loop(self) -> None:
        dues = sorted(self.rng.randrange(self.total // 10, self.total) for _ in range(self.count))
        for n, due in enumerate(dues):
            if not self.gate.wait_done(due, self.stop):
                return
            try:
                self.take(n)
            except Exception as exc:  # a driver bug must fail the run, not vanish
                self.failures.append(f"snapshot {n}: {type(exc).__name__}: {exc}")

    def take(self, n: int) -> None:
        with self.gate.paused() as quiet:
            if not quiet:
                self.failures.append(f"snapshot {n}: the writers did not pause")
                return
            for mount in self.run.mounts:  # removals and moves waiting in it are sent
                if not barrier(mount):
                    self.failures.append(f"snapshot {n}: fsyncdir of {mount.mountpoint} "
                                         f"failed {BARRIER_TRIES} times")  # fmt: skip
                    return
            # Every mount sees the others' and the agent's changes (the feed, or a poll).
            paused = time.monotonic()
            time.sleep(0.6 if self.run.engine.name == "legacy" else 2.2)
            copy = self.folder / f"snapshot-{n}"
            while True:
                problem = self._copy(copy)
                if problem:
                    self.failures.append(f"snapshot {n}: {problem}")
                    return
                shown = _files_of(copy) == self.documents()
                waited = time.monotonic() - paused
                if shown or waited > CATCH_UP_TIMEOUT:
                    break
                shutil.rmtree(copy)
                time.sleep(0.5)
            self.catch_up.append(round(waited, 2) if shown else None)
            moment, monotonic = datetime.now(UTC), time.monotonic()
            time.sleep(0.05)
        self.taken.append(Snapshot(moment, monotonic, copy))

    def _copy(self, copy: Path) -> str | None:
        """``cp -r`` of the first mount to ``copy``, pruned (``_prune``); what failed."""
        done = subprocess.run(
            ["cp", "-r", str(self.run.mounts[0].path()), str(copy)],
            timeout=120, capture_output=True, text=True, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            return f"cp -r failed: {done.stderr[-600:]}"
        _prune(copy)
        return None


def _files_of(copy: Path) -> dict[str, str]:
    """path -> content of the files of a pruned copy."""
    return {
        str(path.relative_to(copy)): path.read_bytes().decode("utf-8", errors="replace")
        for path in copy.rglob("*")
        if path.is_file()
    }


def _prune(copy: Path) -> None:
    """Take out of a copy what ``.at/`` does not show: non-documents, empty folders."""
    rules = ScratchRules()
    for tool in rules.tool_folders:
        shutil.rmtree(copy / tool, ignore_errors=True)
    for folder, _dirs, files in os.walk(copy, topdown=False):
        for name in files:
            if rules.classify(name) is not Kind.DOCUMENT:
                (Path(folder) / name).unlink()
        if Path(folder) != copy and not os.listdir(folder):
            os.rmdir(folder)


#: fsyncdir tries of a barrier (a send that failed is sent again by the mount a second
#: later; under load a try can fail, and a barrier given up on left the copy ahead of the
#: database: a false difference).
BARRIER_TRIES = 30


def barrier(mount: Any) -> bool:
    """The mount's waiting namespace changes in the database (``fsyncdir`` until it
    succeeds); False if it never did."""
    for _ in range(BARRIER_TRIES):
        try:
            mount.barrier()
            return True
        except OSError:
            time.sleep(1.0)
    return False


def settle(run: Run) -> None:
    """After the run: every mount's waiting changes sent and seen, before the diffs."""
    for mount in run.mounts:
        barrier(mount)
    time.sleep(0.6 if run.engine.name == "legacy" else 2.2)


def compare(run: Run, snapshot: Snapshot) -> list[str]:
    """``diff -r`` of a snapshot's copy against ``.at/<its moment>/`` of the first mount."""
    _prune(snapshot.copy)
    at = run.mounts[0].path(f".at/{snapshot.moment.isoformat(timespec='microseconds')}")
    done = subprocess.run(["diff", "-r", str(snapshot.copy), str(at)], capture_output=True,
                          text=True, timeout=300, check=False)  # fmt: skip
    if done.returncode == 0:
        return []
    excused = _agent_deleted_after(run, snapshot) if run.engine.name != "legacy" else set()
    problems = []
    for line in done.stdout.splitlines():
        if line.startswith(f"Only in {snapshot.copy}"):
            folder, _, name = line[len("Only in ") :].partition(": ")
            where = Path(folder) / name
            files = [where] if where.is_file() else [p for p in where.rglob("*") if p.is_file()]
            if all(str(f.relative_to(snapshot.copy)) in excused for f in files):
                continue
        problems.append(line)
    if not problems:
        return []
    return [f".at/{snapshot.moment.isoformat()} differs from the copy made then: "
            + " | ".join(problems[:12]) + "\n" + _rows_then(run, problems)]  # fmt: skip


def _rows_then(run: Run, problems: list[str]) -> str:
    """What the database holds of the documents that differ: each row's times and every
    version's (number, time, last line), to tell a late view from a wrong past."""
    paths = {line.split("/snapshot-", 1)[1].split(" ", 1)[0].split("/", 1)[1]
             for line in problems if line.startswith("diff -r ")}  # fmt: skip
    if run.url.startswith("sqlite:"):
        return _libsql_rows_then(run, sorted(paths))
    out = []
    for line in problems:  # what the moment's tree shows that the copy does not
        if line.startswith("Only in ") and "/.at/" in line:
            folder, _, name = line[len("Only in ") :].partition(": ")
            below = folder.split("/.at/", 1)[1].partition("/")[2]
            paths.add(f"{below}/{name}" if below else name)
    for line in problems:  # what a copy holds that the moment's tree does not
        if line.startswith("Only in ") and "/snapshot-" in line:
            folder, _, name = line[len("Only in ") :].partition(": ")
            where = Path(folder) / name
            found = [where] if where.is_file() else sorted(where.rglob("*.md"))
            paths.update(str(p).split("/snapshot-", 1)[1].split("/", 1)[1] for p in found)
    with psycopg.connect(run.url, autocommit=True) as conn:
        moves = conn.execute(
            "SELECT old_path, new_path, folder, moved_at FROM memfs.path_history "
            "ORDER BY moved_at, id"
        ).fetchall()
        out.append("  moves: " + "; ".join(
            f"{o}->{n}{'/' if f else ''} {t:%H:%M:%S.%f}" for o, n, f, t in moves[-40:]
        ))  # fmt: skip
        for path in sorted(paths):
            if run.engine.name == "legacy":
                rows = conn.execute(
                    "SELECT d.created_at, d.updated_at, v.version, v.created_at, "
                    "right(v.content, 40) FROM memory_documents d LEFT JOIN "
                    "memory_document_versions v ON v.document_id = d.id WHERE d.path = %s "
                    "ORDER BY v.version",
                    (path,),
                ).fetchall()
            else:
                rows = conn.execute(
                    "SELECT d.created_at, d.updated_at, (v.indexed ->> 'version')::int, "
                    "v.created_at, right(convert_from(v.contents, 'UTF8'), 60) "
                    "FROM root_filesystem_entries d LEFT JOIN root_filesystem_entries v "
                    "ON v.path LIKE d.path || '.versions/%%' "
                    "AND v.kind = 'memory_document_version' WHERE d.path LIKE %s "
                    "AND d.kind = 'memory_document' ORDER BY 3",
                    ("%/" + path,),
                ).fetchall()
            for deleted_at, created_at, content, versions in conn.execute(
                "SELECT deleted_at, created_at, right(content, 40), versions "
                "FROM memfs.deleted_documents WHERE path = %s ORDER BY deleted_at",
                (path,),
            ).fetchall():
                kept = ", ".join(f"v{v['version']}@{str(v['created_at'])[11:26]} "
                                 f"{v['content'][-30:]!r}" for v in versions)  # fmt: skip
                out.append(f"  {path} deleted {deleted_at:%H:%M:%S.%f} (made "
                           f"{created_at:%H:%M:%S.%f}) {content!r} [{kept}]")  # fmt: skip
            out.append(f"  {path}: " + "; ".join(
                f"doc {c:%H:%M:%S.%f}/{u:%H:%M:%S.%f} v{n} at "
                f"{w:%H:%M:%S.%f} {t!r}" if w else f"doc {c:%H:%M:%S.%f}/{u:%H:%M:%S.%f}"
                for c, u, n, w, t in rows
            ))  # fmt: skip
    return "\n".join(out)


def _libsql_rows_then(run: Run, paths: list[str]) -> str:
    """``_rows_then`` on IronClaw's libSQL file: each differing document's time and every
    version's (path or number, time, last line)."""
    from tests.engines import reborn_prefix

    db = sqlite3.connect(f"file:{run.url.removeprefix('sqlite:')}?mode=ro", uri=True)
    out = []
    try:
        for path in paths:
            if run.engine.name == "libsql-legacy":
                rows = db.execute(
                    "SELECT 'doc', d.updated_at, substr(d.content, -40) FROM memory_documents d "
                    "WHERE d.path = ? UNION ALL SELECT v.version, v.created_at, "
                    "substr(v.content, -40) FROM memory_document_versions v JOIN "
                    "memory_documents d ON d.id = v.document_id WHERE d.path = ?",
                    (path, path),
                ).fetchall()
            else:
                full = f"{reborn_prefix('default')}/{path}"
                rows = db.execute(
                    "SELECT substr(path, ?), updated_at, substr(CAST(contents AS TEXT), -60) "
                    "FROM root_filesystem_entries WHERE path = ? OR (path >= ? AND path < ?) "
                    "ORDER BY updated_at",
                    (len(full) + 1, full, full + ".versions/", full + ".versions0"),
                ).fetchall()
            out.append(f"  {path}: " + "; ".join(f"{k or 'doc'} at {t} {c!r}" for k, t, c in rows))
    finally:
        db.close()
    return "\n".join(out)


def _moves_after(run: Run, moment: datetime) -> list[Move]:
    """The moves memfs recorded after ``moment`` (its own tables, or its file beside
    IronClaw's libSQL file)."""
    if run.url.startswith("sqlite:"):
        own = run.url.removeprefix("sqlite:") + ".memfs"
        since = moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        db = sqlite3.connect(own)
        try:
            rows = db.execute(
                "SELECT old_path, new_path, folder, moved_at FROM path_history "
                "WHERE moved_at > ? ORDER BY moved_at, rowid",
                (since,),
            ).fetchall()
        finally:
            db.close()
        return [Move(o, n, bool(f), datetime.fromisoformat(t)) for o, n, f, t in rows]
    with psycopg.connect(run.url, autocommit=True) as conn:
        return [
            Move(old, new, folder, at)
            for old, new, folder, at in conn.execute(
                "SELECT old_path, new_path, folder, moved_at FROM memfs.path_history "
                "WHERE moved_at > %s ORDER BY moved_at, id",
                (moment,),
            ).fetchall()
        ]


def _agent_deleted_after(run: Run, snapshot: Snapshot) -> set[str]:
    """Paths, as they were at the snapshot, of documents the agent deleted by SQL after
    it (mapped back through the moves made between the two)."""
    moves = _moves_after(run, snapshot.moment)
    excused = set()
    for op in run.history.ops:
        if op.kind != "agent-delete" or op.end < snapshot.monotonic:
            continue
        deleted_at = datetime.fromtimestamp(op.wall, UTC)
        excused.add(path_then(op.path, [m for m in moves if m.moved_at < deleted_at]))
    return excused
