"""One IronClaw libSQL file, opened the way it may be shared with a running IronClaw.

The rules (docs/ironclaw/libsql.md §7 and requirements 2, 3, 7, 8):

* the file is opened, never created; its journal mode is read, never set; memfs never
  vacuums it nor runs an explicit ``wal_checkpoint(TRUNCATE|RESTART)``;
* one SQLite library per process: stdlib ``sqlite3`` (a second library's close would drop
  the first one's POSIX locks: silently lost writes); the ``.db``, ``-wal`` and ``-shm``
  files are never opened with plain file calls;
* every read-modify-write is one short ``BEGIN IMMEDIATE`` transaction, so it never meets
  ``SQLITE_BUSY_SNAPSHOT`` halfway; a lock IronClaw holds is waited for by SQLite up to
  ``BUSY_MS`` at a time, and ``database is locked`` is retried with backoff up to
  ``LOCKED_FOR`` seconds in all (IronClaw itself waits 5 s: a memfs transaction never
  holds the lock long enough to make IronClaw's writes fail);
* no read transaction stays open (it would stop checkpoints): reads run in autocommit.

Connections are kept one per thread (the mount calls the database from worker threads).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from memfs.db.libsql.engine_process import EngineProcess

log = logging.getLogger(__name__)

T = TypeVar("T")

#: SQLite's own wait for a lock, per attempt (IronClaw sets 5,000 ms on its connections).
BUSY_MS = 5000
#: How long a write keeps retrying ``database is locked`` before the operation fails.
LOCKED_FOR = 15.0
#: A wait for the write lock longer than this is another program's hold (``.status``).
HELD_AFTER = 0.5
#: How long a mount waits at its start for a lock another program holds (a running
#: IronClaw mid-transaction), saying so once, before it gives up with one clear line.
STARTUP_WAIT = float(os.environ.get("MEMFS_LIBSQL_STARTUP_WAIT", "60"))
_BACKOFF_FIRST, _BACKOFF_MOST = 0.01, 0.5
#: Documents one transaction removes or moves at most (a larger ``rm -rf`` or folder
#: ``mv`` goes in parts): on the Reborn file 256 moved documents with their sidecars hold
#: the write lock about 45 ms at 100,000 documents (``benchmarks/bench_libsql.py``), far
#: below the 5 s IronClaw's writers wait.
MOVE_LIMIT = int(os.environ.get("MEMFS_LIBSQL_MOVE_LIMIT", "256"))


class NotIronClawFile(Exception):
    """The file is not a database memfs may open (one clear line for the user)."""


def blob(value: Any) -> bytes:
    """A ``contents`` value as bytes.  IronClaw writes blobs; a row some other tool wrote
    as text (``contents || 'x'`` in SQL makes one) reads as its UTF-8 bytes, and memfs's
    next save of it writes a blob again."""
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)


def on_read_only_filesystem(path: Path) -> bool:
    """Whether ``path`` lies on a filesystem mounted read-only (nothing writes it there)."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def sqlite_uri(path: Path, *, read_only: bool) -> str:
    """The URI a connection to ``path`` opens.  A file on a read-only filesystem is opened
    ``immutable``: nothing can change it there (IronClaw cannot write it either), and
    SQLite could not read a WAL file there otherwise (it needs to make the ``-shm``).
    Not if its ``-wal`` holds changes: an immutable file is read without them, so it is
    opened as usual (SQLite reads the ``-wal`` if the ``-shm`` is there too, and says
    it cannot open the file if not)."""
    wal = path.with_name(path.name + "-wal")
    if read_only and on_read_only_filesystem(path) and not (wal.exists() and wal.stat().st_size):
        return f"file:{path}?mode=ro&immutable=1"
    return f"file:{path}?mode={'ro' if read_only else 'rw'}"


def _locked(exc: sqlite3.Error) -> bool:
    text = str(exc).lower()
    return "database is locked" in text or "database table is locked" in text


def check_features(conn: sqlite3.Connection) -> None:
    """IronClaw's triggers need JSON1 and CTEs inside triggers, its search FTS5: without
    them every write to the file would fail in a trigger (requirement 3)."""
    try:
        conn.execute("SELECT json_extract('{\"a\":1}', '$.a')").fetchone()
        probe = sqlite3.connect(":memory:")
        try:
            probe.execute("CREATE VIRTUAL TABLE f USING fts5(content)")
            probe.execute("CREATE TABLE t (x TEXT)")
            probe.execute(
                "CREATE TRIGGER tr AFTER INSERT ON t BEGIN INSERT INTO f (content) "
                "SELECT new.x FROM (WITH RECURSIVE c(n) AS (SELECT 1) SELECT n FROM c); END"
            )
            probe.execute("INSERT INTO t VALUES ('x')")
        finally:
            probe.close()
    except sqlite3.Error as exc:
        raise NotIronClawFile(
            f"this Python's SQLite {sqlite3.sqlite_version} lacks what IronClaw's file needs "
            f"(JSON1, FTS5, CTEs in triggers): {exc}"
        ) from None


class LibsqlFile:
    """An existing SQLite-format file and this process's connections to it."""

    def __init__(
        self,
        path: Path,
        *,
        read_only: bool = False,
        foreign_keys: bool = False,
        attach: Mapping[str, Path | str] | None = None,
        writer: EngineProcess | None = None,
    ) -> None:
        self.path = path
        #: Where write transactions run instead of this process's connections: IronClaw's
        #: libSQL engine in a process of its own (a legacy file with a vector index).
        self.writer = writer
        self.read_only = read_only
        #: Files of memfs's own attached to every connection, by schema name.
        self.attach = dict(attach or {})
        #: Legacy files: IronClaw's engine has foreign keys on (cascading deletes).
        self.foreign_keys = foreign_keys
        #: Transactions this process committed to the file (``data_version`` does not
        #: count a connection's own).
        self.commits = 0
        #: How long the last write transaction held the lock, in seconds (the pause
        #: between two parts of a large change is as long: ``DeferringStore``).
        self.last_hold = 0.0
        #: Lock waits under way, by token: the wall time each began (a ``BEGIN
        #: IMMEDIATE`` in progress, or a retry after ``database is locked``).
        self._waits: dict[int, float] = {}
        self._tokens = itertools.count(1)
        #: Retries waiting now (the first one logs), and transactions memfs holds now
        #: (then a wait is for memfs's own, not another program's).
        self._retrying_now = 0
        self._holding = 0
        self._counter = itertools.count(1)
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        if not path.is_file():
            raise NotIronClawFile(f"{path}: no such file (memfs never creates IronClaw's file)")
        conn = self.connection()
        check_features(conn)
        mode = conn.execute("PRAGMA journal_mode").fetchone()
        #: Read, never set (IronClaw sets WAL on every start).
        self.journal_mode = str(mode[0]) if mode else "unknown"

    def connection(self) -> sqlite3.Connection:
        """This thread's connection (autocommit: transactions are explicit)."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            uri = sqlite_uri(self.path, read_only=self.read_only)
            try:
                conn = sqlite3.connect(uri, uri=True, isolation_level=None,
                                       check_same_thread=False, timeout=BUSY_MS / 1000)  # fmt: skip
            except sqlite3.Error as exc:
                raise NotIronClawFile(f"{self.path}: cannot open it: {exc}") from None
            conn.execute(f"PRAGMA busy_timeout = {BUSY_MS}")
            for schema, own in self.attach.items():
                conn.execute("ATTACH DATABASE ? AS " + schema, (str(own),))
            if self.foreign_keys:
                conn.execute("PRAGMA foreign_keys = ON")
            self._local.conn = conn
            with self._lock:
                self._all.append(conn)
        return conn

    def data_version(self) -> int:
        """Changes whenever another connection commits to the file (IronClaw's heartbeats
        and journals included): a cheap first look before a diff of the memory rows."""
        row = self.connection().execute("PRAGMA data_version").fetchone()
        return int(row[0]) if row else 0

    def read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work`` on this thread's connection in autocommit (no read transaction is
        left open); a lock met on the way is retried like a write's."""
        return self._retrying(lambda: work(self.connection()))

    def read_together(self, statements: Sequence[str], params: Any) -> list[list[Any]]:
        """Each statement's rows, all read in one short read transaction: one snapshot of
        the file, so a writer landing between two of them is never half seen (ended
        before this returns: no read transaction stays open)."""

        def work(conn: sqlite3.Connection) -> list[list[Any]]:
            conn.execute("BEGIN")
            try:
                return [conn.execute(statement, params).fetchall() for statement in statements]
            finally:
                conn.execute("ROLLBACK")

        return self.read(work)

    def write(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work`` in one ``BEGIN IMMEDIATE`` transaction, committed if it returns,
        rolled back if it raises; retried whole while the file is locked."""

        def attempt() -> T:
            with self._immediate(retry_begin=False) as conn:
                return work(conn)

        return self._retrying(attempt)

    def wait_until_writable(self, patience: float | None = None) -> None:
        """Wait up to ``patience`` seconds until this process may take the write lock (a
        ``BEGIN IMMEDIATE`` rolled back at once): a mount's first writes then meet no
        lock a running IronClaw holds for longer than one transaction."""
        if self.read_only:
            return

        def probe() -> None:
            conn = self.connection()
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("ROLLBACK")

        token = self._wait_began(time.time())
        try:
            self._retrying(probe, STARTUP_WAIT if patience is None else patience)
        finally:
            self._wait_ended(token)

    def _retrying(self, attempt: Callable[[], T], patience: float | None = None) -> T:
        began = time.time()
        deadline = time.monotonic() + (LOCKED_FOR if patience is None else patience)
        pause = _BACKOFF_FIRST
        waited: int | None = None
        try:
            while True:
                try:
                    result = attempt()
                except sqlite3.OperationalError as exc:
                    if not _locked(exc) or time.monotonic() + pause > deadline:
                        exc.memfs_path = self.path  # type: ignore[attr-defined]  # the CLI's line
                        raise
                    if waited is None:
                        waited = self._begin_wait(began, deadline)
                    time.sleep(pause * (0.5 + random.random()))
                    pause = min(pause * 2, _BACKOFF_MOST)
                    continue
                if waited is not None:
                    log.info("%s: the write lock is free again after %.1f s; memfs goes on",
                             self.path, time.time() - began)  # fmt: skip
                return result
        finally:
            if waited is not None:
                self._end_wait(waited)

    @property
    def held_since(self) -> float | None:
        """Wall time since which another program (IronClaw) holds the write lock memfs
        waits for; None when no wait is longer than ``HELD_AFTER`` or memfs holds it."""
        now = time.time()
        with self._lock:
            if self._holding:
                return None
            long = [began for began in self._waits.values() if now - began >= HELD_AFTER]
        return min(long) if long else None

    def _wait_began(self, began: float) -> int:
        token = next(self._tokens)
        with self._lock:
            self._waits[token] = began
        return token

    def _wait_ended(self, token: int) -> None:
        with self._lock:
            self._waits.pop(token, None)

    def _begin_wait(self, began: float, deadline: float) -> int:
        with self._lock:
            self._retrying_now += 1
            first = self._retrying_now == 1
        if first:
            log.warning(
                "%s: another program (IronClaw?) holds its write lock since %s; memfs "
                "waits up to %.0f s more for it to let go",
                self.path,
                time.strftime("%H:%M:%S", time.localtime(began)),
                max(0.0, deadline - time.monotonic()),
                extra={"tell_user": True},
            )
        return self._wait_began(began)

    def _end_wait(self, token: int) -> None:
        with self._lock:
            self._retrying_now -= 1
        self._wait_ended(token)

    def transaction(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction on this thread's connection; its BEGIN is
        retried while the file is locked (nothing is done before it), the work is not:
        ``write`` retries a whole unit of work."""
        return self._immediate(retry_begin=True)

    @contextlib.contextmanager
    def _immediate(self, *, retry_begin: bool) -> Iterator[sqlite3.Connection]:
        if self.writer is not None:
            with self.writer.connection() as child:
                yield from self._in_transaction(child, retry_begin=retry_begin)  # type: ignore[arg-type]
            return
        yield from self._in_transaction(self.connection(), retry_begin=retry_begin)

    def _in_transaction(
        self, conn: sqlite3.Connection, *, retry_begin: bool
    ) -> Iterator[sqlite3.Connection]:
        token = self._wait_began(time.time())  # BEGIN IMMEDIATE waits for the lock only
        try:
            if retry_begin:
                self._retrying(lambda: conn.execute("BEGIN IMMEDIATE"))
            else:
                conn.execute("BEGIN IMMEDIATE")
        finally:
            self._wait_ended(token)
        began = time.monotonic()
        with self._lock:
            self._holding += 1
        try:
            yield conn
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise
        else:
            conn.execute("COMMIT")
            self.commits = next(self._counter)  # atomic, unlike +=
        finally:
            self.last_hold = time.monotonic() - began
            with self._lock:
                self._holding -= 1

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        with self._lock:
            conns, self._all = self._all, []
        for conn in conns:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
