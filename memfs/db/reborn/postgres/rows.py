"""The Reborn rows on PostgreSQL (``RebornRows``): IronClaw's ``root_filesystem_entries``
plus memfs's own ``memfs.reborn_attrs`` and ``memfs.reborn_directories``.

Reads the rules wait for are sent in the transaction's pipeline and read after it
(cursors are answers); a guarded update that finds no row fails the transaction through
``memfs.expect`` rather than update nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

import psycopg

from memfs.db.deferred import PartsLog, is_refusal, pipelined_transaction
from memfs.db.health import invalid_indexes
from memfs.db.interface import FileAttrs
from memfs.db.reborn.rows import (
    TABLE,
    Answer,
    Family,
    KeepAs,
    Record,
    SharedRows,
    psycopg_named,
)
from memfs.db.scoped import Pool

#: SQLSTATE of ``memfs.expect`` (memfs's schema): a guarded statement found no row.
GUARD_FAILED = "MF001"
#: Rows at P or below it (bytewise ranges: '/' is 0x2F, '0' is 0x30), as IronClaw selects.
AT_OR_BELOW = "(path = %(p)s OR (path >= %(p)s || '/' AND path < %(p)s || '0'))"
BELOW = "(path >= %(p)s || '/' AND path < %(p)s || '0')"


def token(alias: str = "") -> str:
    """SQL of a row's version token (``memfs.db.libsql.row_times``' rule on this engine):
    ``updated_at`` to the millisecond plus ``version % 1000`` microseconds.  IronClaw's
    compare-and-swap key is ``version``; a writer that leaves ``updated_at`` as it was
    (two writes within one tick, a raw UPDATE) still changes the token, so a guard on it
    holds on the version too."""
    t = f"{alias}." if alias else ""
    return (f"(date_trunc('milliseconds', {t}updated_at) "
            f"+ mod({t}version, 1000) * interval '1 microsecond')")  # fmt: skip


TOKEN = token()
_DOCUMENT_COLUMNS = (
    f"SELECT e.path, octet_length(e.contents), e.created_at, {token('e')}, a.mode, a.mtime_ns "
    f"FROM {TABLE} e LEFT JOIN memfs.reborn_attrs a "
    "  ON a.path = e.path AND a.set_against = e.updated_at "
)


class PostgresRows(SharedRows):
    """``RebornRows`` on PostgreSQL."""

    named = staticmethod(psycopg_named)

    error: type[Exception] = psycopg.Error
    move_limit: int | None = None  # a transaction locks only the rows it changes
    move_log: PartsLog | None = None

    @contextlib.contextmanager
    def read_connection(self, pool: Pool) -> Iterator[Any]:
        with pool.connection() as conn:
            yield conn

    def open_transaction(self, pool: Pool) -> contextlib.AbstractContextManager[Any]:
        return pipelined_transaction(pool)

    @contextlib.contextmanager
    def plain_transaction(self, pool: Pool) -> Iterator[Any]:
        with pool.connection() as conn, conn.transaction():
            yield conn

    def is_refusal(self, exc: Exception) -> bool:
        return is_refusal(exc)

    def is_unique_violation(self, exc: Exception) -> bool:
        return isinstance(exc, psycopg.errors.UniqueViolation)

    def guard_failure(self, exc: Exception) -> str | None:
        if getattr(exc, "sqlstate", None) != GUARD_FAILED:
            return None
        return str(exc).split("\n")[0]

    # -- what ``memfs doctor`` reads and mends ----------------------------------------------

    def file_rows(self, conn: Any, prefix: str) -> list[tuple[str, str | None, bytes]]:
        rows = conn.execute(
            f"SELECT path, kind, contents FROM {TABLE} WHERE path >= %(p)s || '/' "
            "AND path < %(p)s || '0' AND NOT is_dir ORDER BY path",
            {"p": prefix},
            binary=True,
        ).fetchall()
        return [(path, kind, bytes(data)) for path, kind, data in rows]

    def delete_chunk_rows(self, conn: Any, paths: Sequence[str]) -> int:
        return int(conn.execute(
            f"DELETE FROM {TABLE} WHERE path = ANY(%s) AND kind = 'memory_chunk'",
            (list(paths),),
        ).rowcount)  # fmt: skip

    def orphan_attrs(self, conn: Any, prefix: str, *, delete: bool) -> int:
        verb = "DELETE" if delete else "SELECT count(*)"
        cur = conn.execute(
            f"{verb} FROM memfs.reborn_attrs a WHERE a.path >= %(p)s || '/' "
            "AND a.path < %(p)s || '0' AND NOT EXISTS "
            f"(SELECT 1 FROM {TABLE} e WHERE e.path = a.path)",
            {"p": prefix},
        )
        if delete:
            return int(cur.rowcount)
        row = cur.fetchone()
        return int(row[0]) if row else 0

    def invalid_indexes(self, pool: Pool) -> list[str]:
        return invalid_indexes(pool, [TABLE])

    # -- reads -----------------------------------------------------------------------------

    def documents(self, conn: Any, prefix: str) -> list[tuple[Any, ...]]:
        return conn.execute(  # type: ignore[no-any-return]
            f"{_DOCUMENT_COLUMNS} WHERE e.path >= %(p)s || '/' AND e.path < %(p)s || '0' "
            "  AND NOT e.is_dir AND e.kind = 'memory_document' ORDER BY e.path",
            {"p": prefix},
        ).fetchall()

    def documents_at(self, conn: Any, paths: Sequence[str]) -> list[tuple[Any, ...]]:
        return conn.execute(  # type: ignore[no-any-return]
            f"{_DOCUMENT_COLUMNS} WHERE e.path = ANY(%(paths)s) AND NOT e.is_dir "
            "AND e.kind = 'memory_document'",
            {"paths": list(paths)},
        ).fetchall()

    def folder_documents(
        self, conn: Any, folder: str, after: str, limit: int
    ) -> list[tuple[str, Any]]:
        return conn.execute(  # type: ignore[no-any-return]
            f"SELECT path, {TOKEN} FROM {TABLE} WHERE path >= %(p)s || '/' "
            "AND path < %(p)s || '0' AND path > %(after)s AND NOT is_dir "
            "AND kind = 'memory_document' ORDER BY path LIMIT %(limit)s",
            {"p": folder, "after": after, "limit": limit},
        ).fetchall()

    def versions(self, conn: Any, prefix: str) -> list[tuple[str, Any]]:
        return conn.execute(  # type: ignore[no-any-return]
            f"SELECT path, {TOKEN} FROM {TABLE} WHERE path >= %(p)s || '/' "
            "AND path < %(p)s || '0' AND NOT is_dir AND kind = 'memory_document'",
            {"p": prefix},
        ).fetchall()

    def contents(self, conn: Any, paths: Sequence[str]) -> list[tuple[str, bytes, Any]]:
        rows = conn.execute(
            f"SELECT path, contents, {TOKEN} FROM {TABLE} "
            "WHERE path = ANY(%(paths)s) AND NOT is_dir AND kind = 'memory_document'",
            {"paths": list(paths)},
            binary=True,
        ).fetchall()
        return [(full, bytes(data), updated) for full, data, updated in rows]

    def by_hash(self, conn: Any, doc: str, versions: str, digest: str) -> list[tuple[bytes, str]]:
        rows = conn.execute(
            f"SELECT contents, kind FROM {TABLE} WHERE (path = %(doc)s "
            "  AND kind = 'memory_document' "
            "  AND 'sha256:' || encode(sha256(contents), 'hex') = %(hash)s) "
            "OR (path >= %(p)s || '/' AND path < %(p)s || '0' "
            "  AND kind = 'memory_document_version' "
            "  AND position(convert_to(%(hash)s, 'UTF8') IN contents) > 0)",
            {"doc": doc, "p": versions, "hash": digest},
            binary=True,
        ).fetchall()
        return [(bytes(data), kind) for data, kind in rows]

    def fingerprint(self, conn: Any, prefix: str) -> tuple[int, str]:
        row = conn.execute(
            "SELECT count(*), COALESCE(sum(hashtextextended(path || ':' || version::text, 0)),"
            f" 0)::text FROM {TABLE} WHERE path >= %(p)s || '/' AND path < %(p)s || '0' "
            "AND kind = 'memory_document'",
            {"p": prefix},
        ).fetchone()
        return (int(row[0]), str(row[1])) if row else (0, "0")

    def lock_row(self, conn: Any, path: str) -> Answer:
        return conn.execute(  # type: ignore[no-any-return]
            f"SELECT contents, version, {TOKEN}, is_dir, kind FROM {TABLE} "
            "WHERE path = %(p)s FOR UPDATE",
            {"p": path},
            binary=True,
            prepare=True,
        )

    def blocker(self, conn: Any, path: str, ancestors: Sequence[str]) -> Answer:
        return conn.execute(  # type: ignore[no-any-return]
            f"SELECT path FROM {TABLE} WHERE {BELOW} OR (path = ANY(%(up)s) AND NOT is_dir "
            "AND kind = 'memory_document') LIMIT 1",
            {"p": path, "up": list(ancestors)},
            prepare=True,
        )

    def taken(self, conn: Any, path: str) -> Answer:
        return conn.execute(  # type: ignore[no-any-return]
            f"SELECT 1 FROM {TABLE} WHERE {AT_OR_BELOW} LIMIT 1", {"p": path}, prepare=True
        )

    def rows_at(self, conn: Any, paths: Sequence[str]) -> Answer:
        return conn.execute(  # type: ignore[no-any-return]
            f"SELECT path, contents FROM {TABLE} WHERE path = ANY(%(paths)s) AND NOT is_dir",
            {"paths": list(paths)},
            binary=True,
            prepare=True,
        )

    def chunked(self, conn: Any, docs: Sequence[str]) -> Answer:
        return conn.execute(  # type: ignore[no-any-return]
            f"SELECT m.doc FROM unnest(%(docs)s::text[]) AS m(doc) WHERE EXISTS (SELECT 1 "
            f"FROM {TABLE} t WHERE t.path >= m.doc || '.chunks/' AND t.path < m.doc || "
            "'.chunks0')",
            {"docs": list(docs)},
            prepare=True,
        )

    def lock_documents(self, conn: Any, paths: Sequence[str]) -> Answer:
        return conn.execute(  # type: ignore[no-any-return]
            f"SELECT path, {TOKEN} FROM {TABLE} WHERE path = ANY(%s) "
            "AND kind = 'memory_document' AND NOT is_dir ORDER BY path FOR UPDATE",
            (list(paths),),
        )

    def lock_folder(
        self, conn: Any, old: str, new: str, replaced: str | None
    ) -> list[tuple[Any, ...]]:
        conn.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", ("memfs-dir\n" + new,)
        )
        return conn.execute(  # type: ignore[no-any-return]
            f"WITH locked AS (SELECT path, {TOKEN} AS token FROM {TABLE} WHERE "
            "  path >= %(old)s || '/' AND path < %(old)s || '0' AND kind = 'memory_document' "
            "  AND NOT is_dir ORDER BY path FOR UPDATE) "
            f"SELECT EXISTS (SELECT 1 FROM {TABLE} WHERE {AT_OR_BELOW}) "
            "  OR EXISTS (SELECT 1 FROM memfs.reborn_directories WHERE "
            "    (path = %(p)s AND path IS DISTINCT FROM %(replaced)s) OR "
            "    (path >= %(p)s || '/' AND path < %(p)s || '0')), l.path, l.token "
            "FROM (SELECT 1) AS one LEFT JOIN locked l ON true",
            {"p": new, "old": old, "replaced": replaced},
        ).fetchall()

    def locked_contents(self, conn: Any, path: str) -> bytes | None:
        row = conn.execute(
            f"SELECT contents FROM {TABLE} WHERE path = %s AND NOT is_dir "
            "AND kind = 'memory_document' FOR UPDATE",
            (path,),
            binary=True,
        ).fetchone()
        return bytes(row[0]) if row is not None else None

    def row_kind(self, conn: Any, path: str) -> tuple[bytes, bool, str | None] | None:
        row = conn.execute(
            f"SELECT contents, is_dir, kind FROM {TABLE} WHERE path = %(p)s",
            {"p": path},
            binary=True,
        ).fetchone()
        return (bytes(row[0]), bool(row[1]), row[2]) if row is not None else None

    def version_rows(self, conn: Any, paths: Sequence[str]) -> list[tuple[str, bytes, Any]]:
        rows = conn.execute(
            f"SELECT t.path, t.contents, t.created_at FROM unnest(%(v)s::text[]) AS m(v) "
            f"JOIN {TABLE} t ON t.path >= m.v || '/' AND t.path < m.v || '0' "
            "AND t.kind = 'memory_document_version' ORDER BY t.path",
            {"v": list(paths)},
            binary=True,
        ).fetchall()
        return [(path, bytes(data), created) for path, data, created in rows]

    # -- writes ----------------------------------------------------------------------------

    def insert(self, conn: Any, record: Record) -> Answer:
        return conn.execute(  # type: ignore[no-any-return]
            f"INSERT INTO {TABLE} (path, contents, content_type, kind, indexed, version) "
            "VALUES (%(p)s, %(data)s, %(type)s, %(kind)s, %(indexed)s::jsonb, %(v)s) "
            f"RETURNING {TOKEN}",
            {"p": record.path, "data": record.contents, "type": record.content_type,
             "kind": record.kind, "indexed": record.indexed, "v": record.version},
            prepare=True,
        )  # fmt: skip

    def insert_many(self, conn: Any, records: Sequence[Record]) -> None:
        if not records:
            return
        # Not closed here: closing a cursor in pipeline mode waits for its answers.
        conn.cursor().executemany(
            f"INSERT INTO {TABLE} (path, contents, content_type, kind, indexed, version, "
            "created_at, updated_at) VALUES (%s, %s, %s, %s, %s::jsonb, %s, "
            "COALESCE(%s, now()), COALESCE(%s, now()))",
            [tuple(r) for r in records],
        )

    def update(self, conn: Any, record: Record, version: int, below: str) -> Answer:
        return conn.execute(  # type: ignore[no-any-return]
            f"WITH u AS (UPDATE {TABLE} SET contents = %(data)s, content_type = %(type)s, "
            "  kind = %(kind)s, indexed = %(indexed)s::jsonb, version = version + 1, "
            "  updated_at = now() "
            "WHERE path = %(path)s AND NOT is_dir AND version = %(v)s "
            f"  AND NOT EXISTS (SELECT 1 FROM {TABLE} WHERE {BELOW}) RETURNING {TOKEN} AS token) "
            "SELECT (SELECT token FROM u), "
            "  memfs.expect(EXISTS (SELECT 1 FROM u), 'path (it has rows below it) ' || %(path)s)",
            {"path": record.path, "p": below, "data": record.contents,
             "type": record.content_type, "kind": record.kind, "indexed": record.indexed,
             "v": version},
            prepare=True,
        )  # fmt: skip

    def insert_version(self, conn: Any, below: str, record: Record) -> Answer:
        return conn.execute(  # type: ignore[no-any-return]
            f"INSERT INTO {TABLE} (path, contents, content_type, kind, indexed, version) "
            "SELECT %(p)s || '/' || n, %(data)s, %(type)s, %(kind)s, "
            "  %(indexed)s::jsonb || jsonb_build_object('version', n), 1 "
            "FROM (SELECT COALESCE(max((indexed ->> 'version')::bigint), 0) + 1 AS n "
            f"  FROM {TABLE} WHERE {BELOW} AND kind = 'memory_document_version') AS next "
            "RETURNING (indexed ->> 'version')::bigint",
            {"p": below, "data": record.contents, "type": record.content_type,
             "kind": record.kind, "indexed": record.indexed},
            prepare=True,
        )  # fmt: skip

    def write_attrs(self, conn: Any, path: str, attrs: FileAttrs, against: Any) -> None:
        if attrs.empty:
            conn.execute("DELETE FROM memfs.reborn_attrs WHERE path = %s", (path,), prepare=True)
            return
        conn.execute(
            "INSERT INTO memfs.reborn_attrs (path, mode, mtime_ns, set_against) "
            "VALUES (%s, %s, %s, COALESCE(%s, now())) ON CONFLICT (path) DO UPDATE "
            "SET mode = EXCLUDED.mode, mtime_ns = EXCLUDED.mtime_ns, "
            "set_against = EXCLUDED.set_against",
            (path, attrs.mode, attrs.mtime_ns, against),
            prepare=True,
        )

    def set_attrs(self, conn: Any, path: str, attrs: FileAttrs) -> Answer:
        if attrs.empty:
            found = conn.execute(
                f"SELECT 1 FROM {TABLE} WHERE path = %(p)s AND kind = 'memory_document'",
                {"p": path},
            )
            conn.execute("DELETE FROM memfs.reborn_attrs WHERE path = %(p)s", {"p": path})
            return found  # type: ignore[no-any-return]
        return conn.execute(  # type: ignore[no-any-return]
            "INSERT INTO memfs.reborn_attrs (path, mode, mtime_ns, set_against) "
            f"SELECT path, %(mode)s, %(mtime)s, updated_at FROM {TABLE} "
            "WHERE path = %(p)s AND kind = 'memory_document' "
            "ON CONFLICT (path) DO UPDATE SET mode = EXCLUDED.mode, "
            "mtime_ns = EXCLUDED.mtime_ns, set_against = EXCLUDED.set_against "
            "RETURNING 1",
            {"p": path, "mode": attrs.mode, "mtime": attrs.mtime_ns},
        )

    def carry_versions(
        self, conn: Any, source: Family, target: str, relative: str, seen: Any
    ) -> None:
        conn.execute(
            f"UPDATE {TABLE} t SET "
            "  path = %(tv)s || '/' || ((t.indexed ->> 'version')::int + o.off)::text, "
            "  indexed = jsonb_set(jsonb_set(t.indexed, '{version}', "
            "    to_jsonb((t.indexed ->> 'version')::int + o.off)), "
            "    '{doc_relative_path}', to_jsonb(%(rel)s::text)), "
            "  version = t.version + 1, updated_at = now() "
            "FROM (SELECT COALESCE(max((indexed ->> 'version')::int), 0) AS off "
            f"  FROM {TABLE} WHERE path >= %(tv)s || '/' AND path < %(tv)s || '0' "
            "  AND kind = 'memory_document_version') AS o "
            "WHERE t.path >= %(sv)s || '/' AND t.path < %(sv)s || '0' "
            "  AND t.kind = 'memory_document_version' "
            f"  AND EXISTS (SELECT 1 FROM {TABLE} s WHERE s.path = %(sd)s "
            "    AND s.kind = 'memory_document' "
            f"    AND (%(seen)s::timestamptz IS NULL OR {token('s')} = %(seen)s))",
            {"sv": source.versions, "sd": source.doc, "tv": target, "rel": relative,
             "seen": seen},
        )  # fmt: skip

    def keep_family(self, conn: Any, family: Family, seen: Any, keep: KeepAs) -> None:
        conn.execute(
            "INSERT INTO memfs.deleted_documents (workspace, path, content, created_at, "
            "  updated_at, versions, deleted_by) "
            "SELECT %(workspace)s, %(relative)s, convert_from(d.contents, 'UTF8'), "
            "  d.created_at, d.updated_at, COALESCE((SELECT jsonb_agg(jsonb_build_object("
            "    'version', (v.indexed ->> 'version')::int, "
            "    'content', convert_from(v.contents, 'UTF8')::jsonb ->> 'content', "
            "    'changed_by', convert_from(v.contents, 'UTF8')::jsonb ->> 'changed_by', "
            "    'created_at', v.created_at) ORDER BY (v.indexed ->> 'version')::int) "
            f"   FROM {TABLE} v WHERE v.path >= %(versions)s || '/' "
            "    AND v.path < %(versions)s || '0' AND v.kind = 'memory_document_version'), "
            "  '[]'::jsonb), 'mount' "
            f"FROM (SELECT contents, created_at, updated_at FROM {TABLE} WHERE path = %(doc)s "
            "  AND kind = 'memory_document' AND NOT is_dir "
            f"  AND (%(seen)s::timestamptz IS NULL OR {TOKEN} = %(seen)s) FOR UPDATE) AS d",
            {**family._asdict(), "seen": seen, **keep._asdict()},
            prepare=True,
        )

    def delete_family(self, conn: Any, family: Family, seen: Any) -> Answer:
        return conn.execute(  # type: ignore[no-any-return]
            "WITH gone AS ("
            f"  DELETE FROM {TABLE} WHERE path = %(doc)s AND kind = 'memory_document' "
            f"  AND NOT is_dir AND (%(seen)s::timestamptz IS NULL OR {TOKEN} = %(seen)s) "
            "  RETURNING path), "
            "sidecars AS ("
            f"  DELETE FROM {TABLE} WHERE EXISTS (SELECT 1 FROM gone) AND (path = %(meta)s "
            "  OR (path >= %(chunks)s || '/' AND path < %(chunks)s || '0' "
            "      AND kind = 'memory_chunk') "
            "  OR (path >= %(versions)s || '/' AND path < %(versions)s || '0' "
            "      AND kind = 'memory_document_version'))), "
            "attrs AS (DELETE FROM memfs.reborn_attrs WHERE path = %(doc)s "
            "  AND EXISTS (SELECT 1 FROM gone)) "
            "SELECT (SELECT count(*) FROM gone), "
            f"  (SELECT count(*) FROM {TABLE} WHERE path = %(doc)s AND kind = 'memory_document')",
            {**family._asdict(), "seen": seen},
            prepare=True,
        )

    def note_moves(self, conn: Any, workspace: str, moves: Sequence[tuple[str, str]]) -> None:
        if moves:
            conn.execute(
                "INSERT INTO memfs.path_history (workspace, old_path, new_path) "
                "SELECT %s, o, n FROM unnest(%s::text[], %s::text[]) AS m(o, n)",
                (workspace, [o for o, _ in moves], [n for _, n in moves]),
            )

    def note_empty_spell(self, conn: Any, workspace: str, path: str, emptied_at: datetime) -> None:
        conn.execute(
            "INSERT INTO memfs.empty_spells (workspace, path, emptied_at) VALUES (%s, %s, %s)",
            (workspace, path, emptied_at),
            prepare=True,
        )

    def move_families(
        self, conn: Any, olds: Sequence[str], news: Sequence[str], relatives: Sequence[str]
    ) -> Answer:
        """Five statements whatever the number of documents.

        Attributes follow the documents, and a move is not an edit: each keeps its mtime
        (its client's, or its version token's time before the move) and its valid mode, trusted
        against the moved row's ``updated_at`` (``now()``, the transaction's, as the
        document's UPDATE sets it).  Attributes a document deleted behind the mount left at
        a new path (IronClaw's delete does not know them) are stale and go."""
        pairs = {"olds": list(olds), "news": list(news), "rels": list(relatives)}
        conn.execute(
            "DELETE FROM memfs.reborn_attrs WHERE path = ANY(%(news)s::text[]) "
            "AND path <> ALL(%(olds)s::text[])",
            pairs,
        )
        conn.execute(
            "INSERT INTO memfs.reborn_attrs (path, mode, mtime_ns, set_against) "
            "SELECT m.new, CASE WHEN a.set_against = e.updated_at THEN a.mode END, "
            "  CASE WHEN a.set_against = e.updated_at AND a.mtime_ns IS NOT NULL "
            "    THEN a.mtime_ns "
            f"    ELSE (extract(epoch FROM {token('e')}) * 1000000000)::bigint END, now() "
            "FROM unnest(%(olds)s::text[], %(news)s::text[]) AS m(old, new) "
            f"JOIN {TABLE} e ON e.path = m.old AND e.kind = 'memory_document' "
            "LEFT JOIN memfs.reborn_attrs a ON a.path = m.old "
            "ON CONFLICT (path) DO UPDATE SET mode = EXCLUDED.mode, "
            "  mtime_ns = EXCLUDED.mtime_ns, set_against = EXCLUDED.set_against",
            pairs,
        )
        conn.execute(
            "DELETE FROM memfs.reborn_attrs WHERE path = ANY(%(olds)s::text[]) "
            "AND path <> ALL(%(news)s::text[])",
            pairs,
        )
        conn.execute(
            f"UPDATE {TABLE} t SET path = m.new || substr(t.path, length(m.old) + 1), "
            "  indexed = CASE WHEN t.kind IN ('memory_chunk', 'memory_document_version') "
            "    THEN jsonb_set(t.indexed, '{doc_relative_path}', to_jsonb(m.rel)) "
            "    ELSE t.indexed END, "
            "  version = t.version + 1, updated_at = now() "
            "FROM unnest(%(olds)s::text[], %(news)s::text[], %(rels)s::text[]) AS m(old, new, rel) "
            "WHERE t.path = m.old || '.meta' "
            "  OR (t.path >= m.old || '.chunks/' AND t.path < m.old || '.chunks0') "
            "  OR (t.path >= m.old || '.versions/' AND t.path < m.old || '.versions0')",
            pairs,
        )
        moved = conn.execute(
            f"UPDATE {TABLE} t SET path = m.new, version = t.version + 1, updated_at = now() "
            "FROM unnest(%(olds)s::text[], %(news)s::text[]) AS m(old, new) "
            "WHERE t.path = m.old AND t.kind = 'memory_document' "
            f"RETURNING t.path, {token('t')}",
            pairs,
        )
        return moved  # type: ignore[no-any-return]

    def keep_directories(self, conn: Any, paths: Sequence[str]) -> None:
        if paths:
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO memfs.reborn_directories (path) VALUES (%s) "
                    "ON CONFLICT DO NOTHING",
                    [(p,) for p in paths],
                )
