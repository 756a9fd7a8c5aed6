"""The other stores of a Reborn workspace in IronClaw's libSQL file: versions, IronClaw
v1.3's full-text search (docs/ironclaw/libsql.md §3.2, §6), and editors' tool folders (in
memfs's own file beside IronClaw's).
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import json
import logging
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from importlib import resources
from typing import Any

from memfs.db.capabilities import KnownDigests, RankedRow, ToolFile, WrittenMeanwhile
from memfs.db.interface import AsOf, VersionInfo
from memfs.db.libsql.connection import LibsqlFile, blob
from memfs.db.libsql.row_times import TABLE, parse_time
from memfs.db.reborn.layout import RebornScope
from memfs.db.reborn.versions import RebornVersions, version_info
from memfs.errors import FsError
from memfs.ironclaw import fts_names as fts

log = logging.getLogger(__name__)

#: The name IronClaw declares a scope's full-text index under.
#: The most candidates IronClaw's libSQL query returns.
MOST_CANDIDATES = 1024
#: Scope paths IronClaw agrees to index (its first search refuses any other).
_INDEXABLE = re.compile(r"^[A-Za-z0-9_/.-]+$")
_BELOW = "(path >= :p || '/' AND path < :p || '0')"


def _stop_words() -> frozenset[str]:
    text = resources.files("memfs").joinpath("data/english.stop").read_text("utf-8")
    return frozenset(w for w in text.split() if w and not w.startswith("#")) - {"#"}


STOP_WORDS = _stop_words()


class LibsqlVersionStore(RebornVersions):
    """``RebornVersions`` on the libSQL file (bodies read here: one that is not
    IronClaw's JSON is passed over)."""

    def __init__(self, file: LibsqlFile, scope: RebornScope) -> None:
        super().__init__(scope)
        self.file = file

    def _listed(self, below: str) -> list[VersionInfo]:
        rows = self.file.read(lambda c: c.execute(
            "SELECT CAST(json_extract(indexed, '$.version') AS INTEGER), created_at, contents "
            f"FROM {TABLE} WHERE {_BELOW} AND kind = 'memory_document_version' ORDER BY 1",
            {"p": below},
        ).fetchall())  # fmt: skip
        found = (_version_info(number, created, body) for number, created, body in rows)
        return [info for info in found if info is not None]

    def _body(self, row: str) -> bytes | None:
        found = self.file.read(lambda c: c.execute(
            f"SELECT contents FROM {TABLE} WHERE path = ? AND kind = 'memory_document_version'",
            (row,),
        ).fetchone())  # fmt: skip
        return blob(found[0]) if found is not None else None

    def _as_of(self, scope_prefix: str, at: datetime) -> AsOf:
        prefix = scope_prefix + "/"
        since = _text_time(at)
        params = {"p": prefix, "end": scope_prefix + "0", "at": since}

        born, kept = self.file.read_together((
            f"SELECT path FROM {TABLE} WHERE path >= :p AND path < :end "
            "AND kind = 'memory_document' AND created_at > :at",
            "SELECT path, CAST(json_extract(indexed, '$.version') AS INTEGER), "
            f"created_at, contents FROM {TABLE} WHERE path >= :p AND path < :end "
            "AND kind = 'memory_document_version' AND created_at > :at",
        ), params)  # fmt: skip
        cut = len(prefix)
        earliest: dict[str, VersionInfo] = {}
        for path, number, created, body in kept:
            doc = path[: path.rindex("/") - len(".versions")]
            if doc[cut:] in earliest and earliest[doc[cut:]].number <= int(number):
                continue
            info = _version_info(number, created, body)
            if info is not None:
                earliest[doc[cut:]] = info
        return AsOf(frozenset(path[cut:] for (path,) in born), earliest)


def _version_info(number: Any, created: str, body: Any) -> VersionInfo | None:
    """A version row as ``VersionInfo`` (None: its body is not IronClaw's JSON)."""
    return version_info(int(number), parse_time(created), blob(body))


def _text_time(at: datetime) -> str:
    """A time as IronClaw writes it in its libSQL file (milliseconds, UTC)."""
    moment = at.astimezone(UTC)
    return f"{moment.strftime('%Y-%m-%dT%H:%M:%S')}.{moment.microsecond // 1000:03d}Z"


class LibsqlSearchStore:
    """IronClaw v1.3's search of one scope on libSQL: its FTS5 table (made as IronClaw's
    first search makes it, when it is not there yet and the mount may write), terms
    without PostgreSQL's English stop words, each quoted, any of which may match; rows by
    bm25 then path.  FTS5's tokenizer does not stem (``like`` does not find ``likes``):
    IronClaw's own behaviour on libSQL."""

    def __init__(self, file: LibsqlFile, scope: RebornScope, *, read_only: bool) -> None:
        self.file = file
        self.scope = scope
        self.read_only = read_only
        self.name = fts.sql_index_name(scope.prefix, fts.FTS_SPEC_NAME)
        #: Where the making of the scope's index stands, between searches (None: not
        #: begun by this mount, or done); one search at a time continues it.
        self._backfill: Backfill | None = None
        self._making = threading.Lock()

    def search(self, terms: Sequence[str], candidates: int) -> list[RankedRow]:
        wanted = [t for t in terms if t.lower() not in STOP_WORDS]
        if not wanted or not self._ready():
            return []
        match = " OR ".join('"' + t.replace('"', '""') + '"' for t in wanted)
        rows = self.file.read(lambda c: c.execute(
            "SELECT e.path, e.kind, json_extract(e.indexed, '$.doc_relative_path'), "
            "json_extract(e.indexed, '$.chunk_index'), "
            "COALESCE(json_extract(e.indexed, '$.content'), '') "
            f"FROM {TABLE} e JOIN (SELECT path, bm25({self.name}_fts) AS score "
            f"FROM {self.name}_fts WHERE {self.name}_fts MATCH :q) f ON f.path = e.path "
            "WHERE e.is_dir = 0 AND (e.path = :p OR (e.path >= :p || '/' AND e.path < :p || '0')) "
            "ORDER BY f.score ASC, e.path ASC LIMIT :n",
            {"q": match, "p": self.scope.prefix, "n": min(candidates, MOST_CANDIDATES)},
        ).fetchall())  # fmt: skip
        return [
            RankedRow(i, path, kind, rel, int(index) if index is not None else None,
                      content if isinstance(content, str) else str(content))
            for i, (path, kind, rel, index, content) in enumerate(rows, 1)
        ]  # fmt: skip

    def _ready(self) -> bool:
        """Whether the scope's FTS5 table is there, making it as IronClaw's first search
        does if not (and the mount may write)."""
        found = self.file.read(lambda c: c.execute(
            "SELECT keys, kind FROM root_filesystem_index_specs WHERE prefix = ? AND name = ?",
            (self.scope.prefix, fts.FTS_SPEC_NAME),
        ).fetchone())  # fmt: skip
        if found is not None:
            return tuple(found) == (fts.FTS_SPEC_KEYS, fts.FTS_SPEC_KIND)
        if self.read_only:
            log.info("no full-text index of this scope yet (IronClaw makes it on its first "
                     "search); a read-only mount makes none: no results")  # fmt: skip
            return False
        if not _INDEXABLE.match(self.scope.prefix):
            log.warning("IronClaw indexes no scope path with characters outside "
                        "[A-Za-z0-9_/.-]: no full-text search here")  # fmt: skip
            return False
        if not self._making.acquire(blocking=False):
            raise FsError(errno.EAGAIN, "the scope's full-text index is being made by another "
                          "search of this mount; search again in a moment")  # fmt: skip
        try:
            self._create()
        finally:
            self._making.release()
        log.info("made this scope's full-text index as IronClaw's first search does")
        return True

    def _create(self) -> None:
        """Make the scope's index as IronClaw's first search does (libsql.md §3.2): its FTS5
        table, three triggers, every row below the scope copied in, and its spec row.

        IronClaw does all of it in one transaction; at 100,000 documents that holds the
        write lock for seconds, and a running IronClaw's writes fail after 5 s.  So the
        table and triggers come first (they index every write from then on), the rows
        written before are copied in short transactions (``Backfill``), each followed by a
        pause as long (SQLite's lock is not fair: a writer waiting in its busy handler gets
        in only while nobody holds it), and the spec row comes with the last: until then
        IronClaw's own first search finds no spec and makes the index whole itself, as it
        would have.  A search spends at most ``BACKFILL_BUDGET`` seconds on it, then fails
        with EAGAIN (one lookup, never the mount); the next search goes on from there."""
        if self._backfill is None:
            self._backfill = self.file.write(self._table_and_triggers)
        started = time.monotonic()
        size = BACKFILL_FIRST_BATCH
        while True:
            began = time.monotonic()
            done, self._backfill = self.file.write(partial(self._copy, self._backfill, size))
            if done:
                self._backfill = None
                return
            took = time.monotonic() - began  # aim each transaction at the target
            size = max(100, min(size * 4, int(size * BACKFILL_TARGET / max(took, 1e-4))))
            if time.monotonic() - started > BACKFILL_BUDGET:
                raise FsError(errno.EAGAIN, f"making the scope's full-text index as IronClaw's "
                              f"first search does: {self._backfill.copied} rows so far; "
                              "search again in a moment")  # fmt: skip
            time.sleep(min(took, BACKFILL_TARGET))  # IronClaw's writers get their turn

    def _copy(self, backfill: Backfill, size: int, conn: Any) -> tuple[bool, Backfill]:
        """One batch of the backfill; the last brings the spec row."""
        done, following = backfill.batch(conn, size)
        if done:
            self._spec(conn)
        return done, following

    def _spec(self, conn: Any) -> None:
        conn.execute(
            "INSERT INTO root_filesystem_index_specs (prefix, name, keys, kind) VALUES "
            "(?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (self.scope.prefix, fts.FTS_SPEC_NAME, fts.FTS_SPEC_KEYS, fts.FTS_SPEC_KIND),
        )

    def _table_and_triggers(self, conn: Any) -> Backfill:
        scope, name = self.scope.prefix, self.name
        like = fts.scope_like_pattern(scope).replace("%", "%%")
        when = f"(%s.path = '{scope}' OR %s.path LIKE '{like}' ESCAPE '!')"
        insert = (f"INSERT INTO {name}_fts(path, content) VALUES (new.path, "
                  "COALESCE(json_extract(new.indexed, '$.content'), ''))")  # fmt: skip
        existed = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE name = ?", (f"{name}_fts",)
        ).fetchone()
        conn.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {name}_fts USING fts5(path UNINDEXED, content)"
        )
        conn.execute(
            f"CREATE TRIGGER IF NOT EXISTS {name}_ai AFTER INSERT ON {TABLE} "
            f"WHEN new.is_dir = 0 AND {when % ('new', 'new')} BEGIN {insert}; END"
        )
        conn.execute(
            f"CREATE TRIGGER IF NOT EXISTS {name}_au AFTER UPDATE ON {TABLE} "
            f"WHEN new.is_dir = 0 AND {when % ('new', 'new')} BEGIN DELETE FROM {name}_fts "
            f"WHERE path = old.path; {insert}; END"
        )
        conn.execute(
            f"CREATE TRIGGER IF NOT EXISTS {name}_ad AFTER DELETE ON {TABLE} "
            f"WHEN old.is_dir = 0 AND {when % ('old', 'old')} BEGIN DELETE FROM {name}_fts "
            "WHERE path = old.path; END"
        )
        return Backfill(f"{name}_fts", scope).start(conn, fresh=existed is None)


#: Rows the first search's backfill copies in its first transaction; later ones are sized
#: to take about ``BACKFILL_TARGET`` seconds (docs/ironclaw/libsql.md requirement 8).
BACKFILL_FIRST_BATCH = 500
BACKFILL_TARGET = 0.04
#: Seconds one search may spend making the index (the mount's call bound is 12 s).
BACKFILL_BUDGET = 4.0


@dataclass(frozen=True)
class Backfill:
    """Where a first search's copy of the rows below a scope into its new FTS5 table
    stands; each ``batch`` (one transaction) returns the next, so a transaction rolled back
    and retried starts again from the same one.

    Rows are copied in path order while the table's triggers index every write made
    meanwhile, and a row a trigger indexed must not be copied again (FTS5 would hold it
    twice).  FTS5 gives each new row the next rowid, so the rows indexed since the last
    batch are those above its highest rowid (``mark``): their paths are skipped.  Only if
    the row at ``mark`` went may a later row have taken a rowid at or below it; then every
    indexed path beyond the copied range is read once and skipped too.  A table that was
    there before (a backfill cut short) is read whole at the start."""

    table: str
    prefix: str
    #: The last path copied.
    after: str = ""
    #: The table's highest rowid after the last batch, and that row's path.
    mark: tuple[int, str | None] = (0, None)
    #: Paths beyond ``after`` indexed already.
    skip: frozenset[str] = frozenset()
    #: Rows copied so far.
    copied: int = 0

    def start(self, conn: Any, *, fresh: bool) -> Backfill:
        skip = frozenset() if fresh else frozenset(
            p for (p,) in conn.execute(f"SELECT path FROM {self.table}")
        )  # fmt: skip
        return dataclasses.replace(self, skip=skip, mark=self._mark(conn))

    def batch(self, conn: Any, size: int) -> tuple[bool, Backfill]:
        """Copy the next ``size`` rows; (whether every row is copied now, the next)."""
        rowid, path = self.mark
        at_mark = conn.execute(
            f"SELECT path FROM {self.table} WHERE rowid = ?", (rowid,)
        ).fetchone()
        moved = rowid and (at_mark is None or at_mark[0] != path)
        since = (f"SELECT path FROM {self.table} WHERE path > ?", (self.after,)) if moved else (
            f"SELECT path FROM {self.table} WHERE rowid > ?", (rowid,)
        )  # fmt: skip
        skip = self.skip | {p for (p,) in conn.execute(*since)}
        below = self.prefix + "/"  # one range of the path index per batch, never a scan
        paths = [] if self.after else [p for (p,) in conn.execute(
            f"SELECT path FROM {TABLE} WHERE path = ? AND is_dir = 0", (self.prefix,)
        )]  # fmt: skip
        lower = "path > :after" if self.after >= below else "path >= :below"
        ranged = [p for (p,) in conn.execute(
            f"SELECT path FROM {TABLE} WHERE {lower} AND path < :p || '0' AND is_dir = 0 "
            "ORDER BY path LIMIT :n",
            {"p": self.prefix, "below": below, "after": self.after, "n": size},
        )]  # fmt: skip
        paths += ranged
        copy = [p for p in paths if p not in skip]
        if copy:
            conn.execute(
                f"INSERT INTO {self.table}(path, content) SELECT path, "
                f"COALESCE(json_extract(indexed, '$.content'), '') FROM {TABLE} "
                "WHERE path IN (SELECT value FROM json_each(?)) ORDER BY path",
                (json.dumps(copy),),
            )
        after = paths[-1] if paths else self.after
        following = dataclasses.replace(
            self, after=after, mark=self._mark(conn),
            skip=frozenset(p for p in skip if p > after), copied=self.copied + len(copy),
        )  # fmt: skip
        return len(ranged) < size, following

    def _mark(self, conn: Any) -> tuple[int, str | None]:
        row = conn.execute(
            f"SELECT rowid, path FROM {self.table} ORDER BY rowid DESC LIMIT 1"
        ).fetchone()
        return (int(row[0]), str(row[1])) if row else (0, None)


_TOOL_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS memfs.tool_files (workspace TEXT NOT NULL, path TEXT NOT NULL, "
    "is_dir INTEGER NOT NULL, content BLOB NOT NULL, mode INTEGER NOT NULL, "
    "mtime_ns INTEGER NOT NULL, changed_at INTEGER NOT NULL, PRIMARY KEY (workspace, path))"
)


def _md5(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


class LibsqlToolFileStore:
    """One workspace's tool files, in memfs's own file (never IronClaw's)."""

    def __init__(self, file: LibsqlFile, workspace: str) -> None:
        self.file = file
        self.workspace = workspace
        if not file.read_only:
            file.write(lambda c: c.execute(_TOOL_SCHEMA))

    def _exists(self, conn: Any) -> bool:
        row = conn.execute("SELECT 1 FROM memfs.sqlite_master WHERE name = 'tool_files'").fetchone()
        return row is not None

    def load(self) -> list[ToolFile]:
        def read(conn: Any) -> list[Any]:
            if not self._exists(conn):
                return []
            return conn.execute(  # type: ignore[no-any-return]
                "SELECT path, is_dir, content, mode, mtime_ns FROM memfs.tool_files "
                "WHERE workspace = ? ORDER BY path",
                (self.workspace,),
            ).fetchall()

        return [ToolFile(p, bool(d), blob(c), m, t) for p, d, c, m, t in self.file.read(read)]

    def fingerprint(self) -> tuple[int, object]:
        def read(conn: Any) -> tuple[int, object]:
            if not self._exists(conn):
                return (0, None)
            row = conn.execute(
                "SELECT count(*), max(changed_at) FROM memfs.tool_files WHERE workspace = ?",
                (self.workspace,),
            ).fetchone()
            return (int(row[0]), row[1])

        return self.file.read(read)

    def digests(self) -> dict[str, tuple[bool, int, int, str]]:
        return {f.path: (f.is_dir, f.mode, f.mtime_ns, _md5(f.content)) for f in self.load()}

    def contents(self, paths: Sequence[str]) -> dict[str, bytes]:
        wanted = set(paths)
        return {f.path: f.content for f in self.load() if f.path in wanted}

    def apply_checked(
        self, upserts: Sequence[ToolFile], removed: Sequence[str], expected: KnownDigests
    ) -> WrittenMeanwhile:
        """A compare-and-swap as on PostgreSQL: paths another mount wrote since the caller
        last knew them are left alone and answered."""
        paths = [f.path for f in upserts] + list(removed)

        def work(conn: Any) -> WrittenMeanwhile:
            rows = conn.execute(
                "SELECT path, is_dir, content, mode, mtime_ns FROM memfs.tool_files "
                "WHERE workspace = ? AND path IN (SELECT value FROM json_each(?))",
                (self.workspace, json.dumps(paths)),
            ).fetchall()
            found = {p: (ToolFile(p, bool(d), blob(c), m, t), _md5(blob(c)))
                     for p, d, c, m, t in rows}  # fmt: skip
            clashes = {
                path: found[path] for path in paths
                if path in found and found[path][1] != expected.get(path)
                and not found[path][0].is_dir
            }  # fmt: skip
            self._write(conn, [f for f in upserts if f.path not in clashes],
                        [p for p in removed if p not in clashes])  # fmt: skip
            return clashes

        return self.file.write(work)

    def apply(self, upserts: Sequence[ToolFile], removed: Sequence[str]) -> None:
        self.file.write(lambda c: self._write(c, upserts, removed))

    def _write(self, conn: Any, upserts: Sequence[ToolFile], removed: Sequence[str]) -> None:
        conn.executemany(
            "DELETE FROM memfs.tool_files WHERE workspace = ? AND path = ?",
            [(self.workspace, p) for p in removed],
        )
        conn.executemany(
            "INSERT OR REPLACE INTO memfs.tool_files (workspace, path, is_dir, content, mode, "
            "mtime_ns, changed_at) VALUES (?, ?, ?, ?, ?, ?, "
            "CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER))",
            [(self.workspace, f.path, int(f.is_dir), f.content, f.mode, f.mtime_ns)
             for f in upserts],
        )  # fmt: skip
