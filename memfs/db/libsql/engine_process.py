"""IronClaw's libSQL engine in a process of its own, for the writes plain SQLite cannot
make (docs/ironclaw/libsql.md §8, §9; requirement 12).

Where IronClaw made its vector index (``idx_memory_chunks_embedding``, a
``libsql_vector_idx`` on ``memory_chunks.embedding``), stdlib ``sqlite3`` can read the
legacy file but cannot insert or delete a chunk, update an embedding or cascade a
document's delete: only the libSQL engine maintains that index.  The ``libsql`` package
holds the GIL for every statement and every lock wait, so it runs here, in a child
process: the mount's threads keep running while it works, and the process holds no
second SQLite library beside stdlib ``sqlite3`` (one library per process, per file).

The parent sends one statement at a time over a pipe and reads its answer; a
transaction is the parent's ``BEGIN IMMEDIATE`` … ``COMMIT`` on the child's one
connection, held by one thread at a time.  A child that ended between transactions is
started again at the next statement; one that ended inside a transaction fails that
transaction (its statements are never sent on to a new child outside it).  Errors
come back classified (a lock, a refused row, anything else) and are raised as stdlib
``sqlite3`` errors of the same kinds, so the stores handle both drivers alike.  Every
answer is awaited within a bound: a child that does not answer is killed and the
operation fails (the next one starts a new child).

The child is ``engine_child.py``, run as a script (it imports nothing of memfs's).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from memfs.db.libsql import engine_child
from memfs.db.libsql.engine_child import receive, send

#: How long the parent waits for one answer: SQLite's own wait for a lock (5 s, as
#: IronClaw's) and the statement, with a margin.
ANSWER_WITHIN = 20.0


def libsql_available() -> str | None:
    """None when the ``libsql`` package imports here, else why not (one line)."""
    try:
        import libsql  # noqa: F401
    except ImportError as exc:
        machine = os.uname().machine
        return f"the libsql package is not installed for this machine ({machine}): {exc}"
    return None


# -- the parent -------------------------------------------------------------------------


class Answer:
    """A statement's answer, as much of a ``sqlite3.Cursor`` as the stores use."""

    def __init__(self, rows: list[tuple[Any, ...]], rowcount: int) -> None:
        self._rows = rows
        self.rowcount = rowcount

    def fetchone(self) -> tuple[Any, ...] | None:
        return self._rows.pop(0) if self._rows else None

    def fetchall(self) -> list[tuple[Any, ...]]:
        rows, self._rows = self._rows, []
        return rows


_ERRORS: dict[str, type[sqlite3.Error]] = {
    "locked": sqlite3.OperationalError,
    "refused": sqlite3.IntegrityError,
    "error": sqlite3.OperationalError,
}


class EngineProcess:
    """The child process and its one connection (see the module docstring); a connection
    for one thread at a time (``connection``)."""

    def __init__(
        self,
        path: Path,
        *,
        attach: Mapping[str, Path] | None = None,
        foreign_keys: bool = True,
        busy_ms: int = 5000,
        answer_within: float = ANSWER_WITHIN,
    ) -> None:
        self.path = path
        self.options = {
            "attach": {k: str(v) for k, v in (attach or {}).items()},
            "foreign_keys": foreign_keys,
            "busy_ms": busy_ms,
        }
        self.answer_within = answer_within
        self._child: subprocess.Popen[bytes] | None = None
        #: Held by the thread whose statements the child runs (a transaction's whole span).
        self.lock = threading.RLock()
        #: Statements sent (tests count them).
        self.statements = 0
        #: A transaction is open on the child's connection: if the child ends now, the
        #: transaction's next statement fails (never runs outside it on a new child).
        self._open = False

    def _start(self) -> subprocess.Popen[bytes]:
        child = subprocess.Popen(
            [sys.executable, engine_child.__file__, str(self.path), json.dumps(self.options)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True,
        )  # fmt: skip
        self._child = child
        try:
            answer = self._answer(child)
        except BaseException:
            self._stop()
            raise
        if answer[0] != "ready":
            self._stop()
            raise sqlite3.OperationalError(f"the libSQL engine process did not start: {answer}")
        return child

    def _answer(self, child: subprocess.Popen[bytes]) -> Any:
        assert child.stdout is not None
        ready, _, _ = select.select([child.stdout], [], [], self.answer_within)
        if not ready:
            self._stop()
            raise sqlite3.OperationalError(
                f"the libSQL engine process gave no answer within {self.answer_within:.0f} s "
                f"({self.path}); it was stopped"
            )
        try:
            return receive(child.stdout)
        except EOFError:
            self._stop()
            raise sqlite3.OperationalError(
                f"the libSQL engine process for {self.path} ended (exit {child.poll()})"
            ) from None

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Answer:
        return self._request(("one", sql, tuple(params)))

    def executemany(self, sql: str, seq: Sequence[Sequence[Any]]) -> Answer:
        return self._request(("many", sql, [tuple(p) for p in seq]))

    def _request(self, request: tuple[str, str, Any]) -> Answer:
        verb = request[1].lstrip()[:8].upper()
        with self.lock:
            child = self._child if self._child is not None and self._child.poll() is None else None
            if child is None:
                if self._open and verb.startswith("ROLLBACK"):
                    self._open = False  # it ended with the process
                    return Answer([], 0)
                if self._open:
                    self._open = False
                    raise sqlite3.OperationalError(
                        f"the libSQL engine process for {self.path} ended during a "
                        "transaction (nothing of it was committed)"
                    )
                child = self._start()
            assert child.stdin is not None
            try:
                send(child.stdin, request)
            except (BrokenPipeError, OSError) as exc:
                self._stop()
                self._open = False
                raise sqlite3.OperationalError(
                    f"the libSQL engine process for {self.path} is gone: {exc}"
                ) from None
            self.statements += 1
            try:
                answer = self._answer(child)
            except sqlite3.OperationalError:
                self._open = False
                raise
            if answer[0] == "ok":
                if verb.startswith("BEGIN"):
                    self._open = True
                elif verb.startswith(("COMMIT", "ROLLBACK", "END")):
                    self._open = False
        if answer[0] == "ok":
            return Answer(answer[1], answer[2])
        _, kind, message = answer
        raise _ERRORS.get(kind, sqlite3.OperationalError)(message)

    @contextlib.contextmanager
    def connection(self) -> Iterator[EngineProcess]:
        """This process's connection for the calling thread until the block ends."""
        with self.lock:
            yield self

    def _stop(self) -> None:
        child, self._child = self._child, None
        if child is None:
            return
        with contextlib.suppress(OSError):
            if child.stdin is not None:
                child.stdin.close()
        try:
            child.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(timeout=5.0)
        if child.stdout is not None:
            child.stdout.close()

    def close(self) -> None:
        with self.lock:
            self._stop()

    @property
    def pid(self) -> int | None:
        return self._child.pid if self._child is not None else None

    def started(self) -> float:
        """Start the child now (so a refusal comes at mount, not at the first save)."""
        begun = time.monotonic()
        with self.lock:
            if self._child is None or self._child.poll() is not None:
                self._start()
        return time.monotonic() - begun
