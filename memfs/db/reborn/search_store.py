"""IronClaw v1.3's full-text query over a Reborn workspace's chunk rows
(docs/ironclaw/reborn.md §5.2), and the scope's GIN index IronClaw's search declares (§5.4).

The index: IronClaw's search inserts the scope's spec row and runs a plain ``CREATE INDEX
IF NOT EXISTS``, which holds a lock that stops every write to the table for the whole build
(at 100,000 documents, minutes).  memfs makes the same index, under IronClaw's name, over
the same expression and partial on the same path range, but ``CONCURRENTLY`` (writes go on)
and off the search's path: the first search of a mount starts it on a session of its own,
and searches meanwhile answer as before, by a scan.  Without it every search reads and
parses every chunk of the scope (64 s at 100,000 documents); with it a rare word is found
in milliseconds.  Ranking is unchanged: the query's rows and order are the same with and
without the index (``ts_rank`` over the same tsvector).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

import psycopg
from psycopg import sql

from memfs.db.capabilities import RankedRow
from memfs.db.reborn.layout import RebornScope
from memfs.db.scoped import Pool
from memfs.ironclaw import fts_names as fts

log = logging.getLogger(__name__)

#: The tsvector IronClaw searches (and its per-scope GIN index covers, reborn.md §5.4).
_TSV = "to_tsvector('english', coalesce(indexed ->> 'content', ''))"
#: The candidates of one query.  The scope's range is given twice, as IronClaw selects a
#: subtree and as its index's predicate, so the planner may use the partial index (both
#: select the same rows).
CANDIDATES = (
    "SELECT path, kind, indexed ->> 'doc_relative_path', "
    "  (indexed ->> 'chunk_index')::bigint, coalesce(indexed ->> 'content', '') "
    "FROM root_filesystem_entries, to_tsquery('english', %(q)s) AS q "
    "WHERE (path = %(p)s OR (path >= %(p)s || '/' AND path < %(p)s || '0')) "
    "  AND (path = %(p)s OR path LIKE %(like)s ESCAPE '!') "
    f"  AND NOT is_dir AND {_TSV} @@ q "
    f"ORDER BY ts_rank({_TSV}, q) DESC, path LIMIT %(limit)s"
)

#: A direct session (never a transaction pooler's) on which an index may be built with no
#: statement timeout; None where the mount may not write or has no direct session.
IndexSession = Callable[[], "psycopg.Connection[Any]"]


class RebornSearchStore:
    """Candidates for one query: rows of the scope matching any term, by ``ts_rank``."""

    def __init__(
        self, pool: Pool, scope: RebornScope, *, index_session: IndexSession | None = None
    ) -> None:
        self.pool = pool
        self.scope = scope
        self.index_name = fts.sql_index_name(scope.prefix, fts.FTS_SPEC_NAME)
        #: Opens the session the index is built on (None: this mount makes no index).
        self._index_session = index_session
        #: The thread making the scope's index, once started (one per store).
        self._maker: threading.Thread | None = None

    def search(self, terms: Sequence[str], candidates: int) -> list[RankedRow]:
        """Rows whose ``indexed.content`` matches any of ``terms``, best ``ts_rank``
        first, then path; no terms, no query."""
        if not terms:
            return []
        self._start_index()
        query = " | ".join(terms)
        with self.pool.connection() as conn:
            rows = conn.execute(
                CANDIDATES,
                {"q": query, "p": self.scope.prefix,
                 "like": fts.scope_like_pattern(self.scope.prefix), "limit": candidates},
            ).fetchall()  # fmt: skip
        return [RankedRow(i, *row) for i, row in enumerate(rows, 1)]

    def _start_index(self) -> None:
        if self._index_session is None or self._maker is not None:
            return
        self._maker = threading.Thread(target=self.make_index, name="memfs-fts-index", daemon=True)
        self._maker.start()

    def wait_for_index(self, timeout: float) -> bool:
        """Whether the index's making, if begun, ended within ``timeout`` seconds."""
        if self._maker is None:
            return True
        self._maker.join(timeout)
        return not self._maker.is_alive()

    def make_index(self) -> None:
        """Declare the scope's spec and make its GIN index, as IronClaw's search does,
        unless it is there and valid.  One mount at a time (an advisory lock on the
        index's name); an invalid index (a build cut short: a daemon killed mid-way) is
        dropped and made again, as IronClaw's ``IF NOT EXISTS`` never would."""
        assert self._index_session is not None
        try:
            with self._index_session() as conn:
                self._make_on(conn)
        except psycopg.Error as error:
            log.warning("the scope's full-text index %s was not made: %s (searches scan "
                        "the scope meanwhile)", self.index_name, error)  # fmt: skip

    def _make_on(self, conn: psycopg.Connection[Any]) -> None:
        name, prefix = self.index_name, self.scope.prefix
        conn.execute("SET statement_timeout = 0")
        locked = conn.execute("SELECT pg_try_advisory_lock(hashtext(%s))", (name,)).fetchone()
        if not locked or not locked[0]:
            return  # another mount is making it
        spec = self._spec(conn)
        if spec is None:
            conn.execute(
                "INSERT INTO root_filesystem_index_specs (prefix, name, keys, kind) "
                "VALUES (%s, %s, %s::jsonb, %s) ON CONFLICT DO NOTHING",
                (prefix, fts.FTS_SPEC_NAME, fts.FTS_SPEC_KEYS, fts.FTS_SPEC_KIND),
            )
            spec = self._spec(conn)
        if spec != (True, fts.FTS_SPEC_KIND):
            log.warning("this scope's full-text spec is not IronClaw's (%s): no index made",
                        spec)  # fmt: skip
            return
        found = conn.execute(
            "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE i.indrelid = 'root_filesystem_entries'::regclass AND c.relname = %s",
            (name,),
        ).fetchone()
        if found is not None and found[0]:
            return
        if found is not None:
            log.warning("the scope's full-text index %s is invalid (a build cut short): "
                        "made again", name)  # fmt: skip
            conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(
                sql.Identifier(name)))  # fmt: skip
        log.info("making this scope's full-text index %s as IronClaw's search declares it",
                 name)  # fmt: skip
        conn.execute(
            sql.SQL(
                "CREATE INDEX CONCURRENTLY IF NOT EXISTS {} ON root_filesystem_entries "
                "USING gin ((" + _TSV + ")) WHERE (path = {} OR path LIKE {} ESCAPE '!')"
            ).format(
                sql.Identifier(name),
                sql.Literal(prefix),
                sql.Literal(fts.scope_like_pattern(prefix)),
            )
        )
        log.info("made this scope's full-text index %s", name)

    def _spec(self, conn: psycopg.Connection[Any]) -> tuple[bool, str] | None:
        """The declared spec: whether its keys are IronClaw's, and its kind."""
        row = conn.execute(
            "SELECT keys = %s::jsonb, kind FROM root_filesystem_index_specs "
            "WHERE prefix = %s AND name = %s",
            (fts.FTS_SPEC_KEYS, self.scope.prefix, fts.FTS_SPEC_NAME),
        ).fetchone()
        return None if row is None else (bool(row[0]), str(row[1]))
