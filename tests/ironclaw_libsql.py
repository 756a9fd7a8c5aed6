"""IronClaw's libSQL files, built the way IronClaw builds them (libsql facts §2, §3, §10.1).

``reborn_local_dev`` makes ``reborn-local-dev.db`` as a v1.1+ IronClaw's first start does:
``journal_mode = WAL`` outside a transaction, then the Reborn schema in one ``BEGIN
IMMEDIATE`` transaction, in IronClaw's order (so the column order is IronClaw's: the four
columns added by ``ALTER TABLE`` come last).  ``used=True`` adds what a used database holds
besides memory: an ``exact`` index declaration outside ``/memory``, its ordered-projection
index and triggers, and a thread row.  ``search_scope`` does what IronClaw's first memory
search of a scope does: the FTS5 spec row, table, three triggers and backfill in one
transaction.  ``legacy_ironclaw_db`` makes the legacy (<= v1.0) ``ironclaw.db``'s memory
tables, and ``legacy_write`` writes a document there as IronClaw v1.0 does;
``legacy_vector_index`` adds the vector index IronClaw makes when embeddings are enabled.

Everything runs on stdlib ``sqlite3``, the driver memfs uses (one SQLite library per
process), except what only IronClaw's libSQL engine can do (the vector index, writes to
chunks under it), which runs in a child process (``libsql_statements``); the statements
are the facts' DDL, not IronClaw's source.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memfs.ironclaw.chunker import DEFAULT_CONFIG, chunk_document
from memfs.ironclaw.fts_names import sql_index_name

NOW = "(strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))"

REBORN_SCHEMA = [
    "CREATE TABLE IF NOT EXISTS root_filesystem_entries (path TEXT PRIMARY KEY, "
    "contents BLOB NOT NULL DEFAULT X'', is_dir INTEGER NOT NULL DEFAULT 0 "
    f"CHECK (is_dir IN (0, 1)), created_at TEXT NOT NULL DEFAULT {NOW}, "
    f"updated_at TEXT NOT NULL DEFAULT {NOW})",
    "ALTER TABLE root_filesystem_entries ADD COLUMN content_type TEXT NOT NULL "
    "DEFAULT 'application/octet-stream'",
    "ALTER TABLE root_filesystem_entries ADD COLUMN kind TEXT",
    "ALTER TABLE root_filesystem_entries ADD COLUMN indexed TEXT NOT NULL DEFAULT '{}'",
    "ALTER TABLE root_filesystem_entries ADD COLUMN version INTEGER NOT NULL DEFAULT 0",
    "CREATE TABLE IF NOT EXISTS root_filesystem_index_specs (prefix TEXT NOT NULL, "
    "name TEXT NOT NULL, keys TEXT NOT NULL, kind TEXT NOT NULL, PRIMARY KEY (prefix, name))",
    "CREATE TABLE IF NOT EXISTS root_filesystem_ordered_index_rows (index_name TEXT NOT NULL, "
    "path TEXT NOT NULL, k0, k1, k2, k3, k4, k5, k6, k7, PRIMARY KEY (index_name, path))",
    "CREATE INDEX IF NOT EXISTS idx_root_filesystem_ordered_values_v1 ON "
    "root_filesystem_ordered_index_rows (index_name, k0, k1, k2, k3, k4, k5, k6, k7, path)",
    "CREATE TABLE IF NOT EXISTS root_filesystem_events (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
    f"path TEXT NOT NULL, payload BLOB NOT NULL, created_at TEXT NOT NULL DEFAULT {NOW})",
    "CREATE INDEX IF NOT EXISTS idx_root_filesystem_events_path_seq ON "
    "root_filesystem_events (path, seq)",
    "CREATE TABLE IF NOT EXISTS root_filesystem_sequences (path TEXT PRIMARY KEY, "
    "next_seq INTEGER NOT NULL CHECK (next_seq > 0), "
    f"updated_at TEXT NOT NULL DEFAULT {NOW})",
]

#: The ordered projection (facts §3.1): for every ancestor prefix of a row's path, each
#: exact/prefix index declared there gets one row of the declared keys' values.
_PROJECTION_BODY = (
    "INSERT OR REPLACE INTO root_filesystem_ordered_index_rows (index_name, path, k0) "
    "SELECT s.name, new.path, json_extract(new.indexed, '$.' || json_extract(s.keys, '$[0]')) "
    "FROM root_filesystem_index_specs s JOIN (WITH RECURSIVE up(prefix) AS (SELECT new.path "
    "UNION ALL SELECT substr(prefix, 1, length(rtrim(prefix, replace(prefix, '/', ''))) - 1) "
    "FROM up WHERE prefix <> '') SELECT prefix FROM up) u ON s.prefix = u.prefix "
    "WHERE s.kind IN ('exact', 'prefix') AND new.is_dir = 0 "
    "AND json_extract(new.indexed, '$.' || json_extract(s.keys, '$[0]')) IS NOT NULL"
)

USED_SHAPE = [
    "INSERT INTO root_filesystem_index_specs (prefix, name, keys, kind) VALUES "
    "('/tenants', 'thread_by_status', '[\"status\"]', 'exact')",
    "CREATE INDEX IF NOT EXISTS idx_root_filesystem_ordered_rows_path ON "
    "root_filesystem_ordered_index_rows (path)",
    "CREATE TRIGGER IF NOT EXISTS rfs_ordered_projection_v3_ai AFTER INSERT ON "
    f"root_filesystem_entries BEGIN {_PROJECTION_BODY}; END",
    "CREATE TRIGGER IF NOT EXISTS rfs_ordered_projection_v3_au AFTER UPDATE ON "
    "root_filesystem_entries BEGIN DELETE FROM root_filesystem_ordered_index_rows "
    f"WHERE path = old.path; {_PROJECTION_BODY}; END",
    "CREATE TRIGGER IF NOT EXISTS rfs_ordered_projection_v3_ad AFTER DELETE ON "
    "root_filesystem_entries BEGIN DELETE FROM root_filesystem_ordered_index_rows "
    "WHERE path = old.path; END",
    "INSERT INTO root_filesystem_entries (path, contents, content_type, kind, indexed, version) "
    "VALUES ('/tenants/reborn-cli/threads/t1', X'7B7D', 'application/json', 'thread', "
    '\'{"status":"open"}\', 1)',
]


def reborn_local_dev(path: Path, *, used: bool = True) -> Path:
    """A Reborn libSQL file as IronClaw v1.1+ leaves it after its first start."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None, timeout=5.0)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("BEGIN IMMEDIATE")
        for statement in REBORN_SCHEMA:
            conn.execute(statement)
        if used:
            for statement in USED_SHAPE:
                conn.execute(statement)
        conn.execute("COMMIT")
    finally:
        conn.close()
    return path


def _like_escaped(scope: str) -> str:
    return scope.replace("!", "!!").replace("_", "!_").replace("%", "!%")


def search_scope(path: Path, scope: str) -> str:
    """IronClaw's first memory search of ``scope`` (facts §3.2); returns the FTS table."""
    name = sql_index_name(scope, "memory_chunks_content_fts")
    when = f"(%s.path = '{scope}' OR %s.path LIKE '{_like_escaped(scope)}/%%' ESCAPE '!')"
    insert = (f"INSERT INTO {name}_fts(path, content) VALUES (new.path, "
              "COALESCE(json_extract(new.indexed, '$.content'), ''))")  # fmt: skip
    conn = sqlite3.connect(path, isolation_level=None, timeout=5.0)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT INTO root_filesystem_index_specs (prefix, name, keys, kind) VALUES "
            "(?, 'memory_chunks_content_fts', '[\"content\"]', 'fts') ON CONFLICT DO NOTHING",
            (scope,),
        )
        conn.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {name}_fts USING fts5(path UNINDEXED, content)"
        )
        conn.execute(
            f"CREATE TRIGGER IF NOT EXISTS {name}_ai AFTER INSERT ON root_filesystem_entries "
            f"WHEN new.is_dir = 0 AND {when % ('new', 'new')} BEGIN {insert}; END"
        )
        conn.execute(
            f"CREATE TRIGGER IF NOT EXISTS {name}_au AFTER UPDATE ON root_filesystem_entries "
            f"WHEN new.is_dir = 0 AND {when % ('new', 'new')} BEGIN DELETE FROM {name}_fts "
            f"WHERE path = old.path; {insert}; END"
        )
        conn.execute(
            f"CREATE TRIGGER IF NOT EXISTS {name}_ad AFTER DELETE ON root_filesystem_entries "
            f"WHEN old.is_dir = 0 AND {when % ('old', 'old')} BEGIN DELETE FROM {name}_fts "
            "WHERE path = old.path; END"
        )
        conn.execute(
            f"INSERT INTO {name}_fts(path, content) SELECT path, "
            "COALESCE(json_extract(indexed, '$.content'), '') FROM root_filesystem_entries "
            "WHERE is_dir = 0 AND (path = ? OR (path >= ? || '/' AND path < ? || '0')) "
            f"AND path NOT IN (SELECT path FROM {name}_fts)",
            (scope, scope, scope),
        )
        conn.execute("COMMIT")
    finally:
        conn.close()
    return f"{name}_fts"


# -- the legacy layout (IronClaw <= v1.0: libsql facts §8) -------------------------------------

#: The memory tables of IronClaw v1.0's consolidated libSQL schema, in its order, with the
#: migrations table (names, types, defaults and triggers as the facts state them).
LEGACY_SCHEMA = [
    "CREATE TABLE IF NOT EXISTS _migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
    f"applied_at TEXT NOT NULL DEFAULT {NOW})",
    "CREATE TABLE IF NOT EXISTS memory_documents (id TEXT PRIMARY KEY, user_id TEXT NOT NULL, "
    "agent_id TEXT, path TEXT NOT NULL, content TEXT NOT NULL, "
    f"created_at TEXT NOT NULL DEFAULT {NOW}, updated_at TEXT NOT NULL DEFAULT {NOW}, "
    "metadata TEXT NOT NULL DEFAULT '{}', UNIQUE (user_id, agent_id, path))",
    "CREATE INDEX IF NOT EXISTS idx_memory_documents_user ON memory_documents(user_id)",
    "CREATE INDEX IF NOT EXISTS idx_memory_documents_path ON memory_documents(user_id, path)",
    "CREATE INDEX IF NOT EXISTS idx_memory_documents_updated ON memory_documents(updated_at DESC)",
    "CREATE TRIGGER IF NOT EXISTS update_memory_documents_updated_at AFTER UPDATE ON "
    "memory_documents FOR EACH ROW WHEN NEW.updated_at = OLD.updated_at BEGIN "
    f"UPDATE memory_documents SET updated_at = {NOW} WHERE id = NEW.id; END",
    "CREATE TABLE IF NOT EXISTS memory_chunks (_rowid INTEGER PRIMARY KEY AUTOINCREMENT, "
    "id TEXT NOT NULL UNIQUE, document_id TEXT NOT NULL REFERENCES memory_documents(id) "
    "ON DELETE CASCADE, chunk_index INTEGER NOT NULL, content TEXT NOT NULL, embedding BLOB, "
    f"created_at TEXT NOT NULL DEFAULT {NOW}, UNIQUE (document_id, chunk_index))",
    "CREATE INDEX IF NOT EXISTS idx_memory_chunks_document ON memory_chunks(document_id)",
    "CREATE VIRTUAL TABLE IF NOT EXISTS memory_chunks_fts USING fts5(content, "
    "content='memory_chunks', content_rowid='_rowid')",
    "CREATE TRIGGER IF NOT EXISTS memory_chunks_fts_insert AFTER INSERT ON memory_chunks BEGIN "
    "INSERT INTO memory_chunks_fts(rowid, content) VALUES (new._rowid, new.content); END",
    "CREATE TRIGGER IF NOT EXISTS memory_chunks_fts_delete AFTER DELETE ON memory_chunks BEGIN "
    "INSERT INTO memory_chunks_fts(memory_chunks_fts, rowid, content) "
    "VALUES ('delete', old._rowid, old.content); END",
    "CREATE TRIGGER IF NOT EXISTS memory_chunks_fts_update AFTER UPDATE ON memory_chunks BEGIN "
    "INSERT INTO memory_chunks_fts(memory_chunks_fts, rowid, content) "
    "VALUES ('delete', old._rowid, old.content); "
    "INSERT INTO memory_chunks_fts(rowid, content) VALUES (new._rowid, new.content); END",
    "CREATE TABLE IF NOT EXISTS memory_document_versions (id TEXT PRIMARY KEY, "
    "document_id TEXT NOT NULL REFERENCES memory_documents(id) ON DELETE CASCADE, "
    "version INTEGER NOT NULL, content TEXT NOT NULL, content_hash TEXT NOT NULL, "
    f"created_at TEXT NOT NULL DEFAULT {NOW}, changed_by TEXT, UNIQUE(document_id, version))",
    "CREATE INDEX IF NOT EXISTS idx_doc_versions_lookup "
    "ON memory_document_versions(document_id, version DESC)",
    "CREATE TABLE IF NOT EXISTS settings (user_id TEXT NOT NULL, key TEXT NOT NULL, "
    f"value TEXT NOT NULL, updated_at TEXT NOT NULL DEFAULT {NOW}, PRIMARY KEY (user_id, key))",
    "CREATE INDEX IF NOT EXISTS idx_settings_user ON settings(user_id)",
]
#: The incremental migrations a v1.0 file has recorded (16: document versions).
LEGACY_MIGRATIONS = (9, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 24, 25)


def legacy_ironclaw_db(path: Path) -> Path:
    """A legacy libSQL file as IronClaw v1.0 leaves it after its first start."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None, timeout=5.0)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        for statement in LEGACY_SCHEMA:
            conn.execute(statement)
        for version in LEGACY_MIGRATIONS:
            conn.execute("INSERT INTO _migrations (version, name) VALUES (?, ?)",
                         (version, f"v{version}"))  # fmt: skip
    finally:
        conn.close()
    return path


def _rfc3339_now() -> str:
    """IronClaw's Rust clock as it writes ``updated_at``: UTC, milliseconds, ``Z``."""
    now = datetime.now(UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def legacy_write(path: Path, doc_path: str, content: str, *, user: str = "default",
                 agent: str | None = None, changed_by: str | None = None,
                 connect: Any = sqlite3.connect) -> str:  # fmt: skip
    """IronClaw v1.0's ``write`` of a document: get or create the row, keep the content it
    replaces as version MAX+1 (unless the newest version holds it), update the content
    and ``updated_at``, then replace the chunks in one ``BEGIN IMMEDIATE``; the id.
    ``connect``: the driver (``libsql.connect`` in a child: ``legacy_write_by_libsql``)."""
    conn = connect(str(path), isolation_level=None, timeout=5.0)
    try:
        conn.execute("PRAGMA foreign_keys = ON")
        find = (
            "SELECT id, content FROM memory_documents WHERE user_id = ? AND agent_id IS ? "
            "AND path = ?"
        )
        found = conn.execute(find, (user, agent, doc_path)).fetchone()
        if found is None:  # get, then create (NULL agents never conflict: no upsert)
            conn.execute(
                "INSERT INTO memory_documents (id, user_id, agent_id, path, content, metadata) "
                "VALUES (?, ?, ?, ?, '', '{}') ON CONFLICT (user_id, agent_id, path) DO NOTHING",
                (str(uuid.uuid4()), user, agent, doc_path),
            )
            found = conn.execute(find, (user, agent, doc_path)).fetchone()
        doc_id, old = found
        if old and old != content:
            digest = "sha256:" + hashlib.sha256(old.encode()).hexdigest()
            conn.execute("BEGIN IMMEDIATE")
            latest = conn.execute(
                "SELECT content_hash FROM memory_document_versions WHERE document_id = ? "
                "ORDER BY version DESC LIMIT 1",
                (doc_id,),
            ).fetchone()
            if latest is None or latest[0] != digest:
                conn.execute(
                    "INSERT INTO memory_document_versions (id, document_id, version, content, "
                    "content_hash, created_at, changed_by) VALUES (?, ?, (SELECT "
                    "COALESCE(MAX(version), 0) + 1 FROM memory_document_versions "
                    "WHERE document_id = ?), ?, ?, ?, ?)",
                    (str(uuid.uuid4()), doc_id, doc_id, old, digest, _rfc3339_now(), changed_by),
                )
            conn.execute("COMMIT")
        conn.execute(
            "UPDATE memory_documents SET content = ?, updated_at = ? WHERE id = ?",
            (content, _rfc3339_now(), doc_id),
        )
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("DELETE FROM memory_chunks WHERE document_id = ?", (doc_id,))
        for index, chunk in enumerate(chunk_document(content, DEFAULT_CONFIG)):
            conn.execute(
                "INSERT INTO memory_chunks (id, document_id, chunk_index, content, embedding) "
                "VALUES (?, ?, ?, ?, NULL)",
                (str(uuid.uuid4()), doc_id, index, chunk),
            )
        conn.execute("COMMIT")
        return str(doc_id)
    finally:
        conn.close()


# -- IronClaw's libSQL engine, in a process of its own (one SQLite library per process) -----

#: Run in a child: IronClaw v1.0's ``ensure_vector_index`` as its steps go (chunks rebuilt
#: with ``F32_BLOB(dim)`` keeping ``_rowid``, wrong-length embeddings dropped, the
#: document and vector indexes, the FTS triggers again, the dimension as migration 0),
#: one transaction, on the libSQL engine.
_VECTOR_INDEX_STEPS = r"""
import json, sys, libsql
path, dim = sys.argv[1], int(sys.argv[2])
conn = libsql.connect(path, isolation_level=None)
steps = [
    "BEGIN IMMEDIATE",
    "DROP TRIGGER IF EXISTS memory_chunks_fts_insert",
    "DROP TRIGGER IF EXISTS memory_chunks_fts_delete",
    "DROP TRIGGER IF EXISTS memory_chunks_fts_update",
    "DROP INDEX IF EXISTS idx_memory_chunks_embedding",
    "DROP TABLE IF EXISTS memory_chunks_new",
    "CREATE TABLE memory_chunks_new (_rowid INTEGER PRIMARY KEY AUTOINCREMENT, "
    "id TEXT NOT NULL UNIQUE, document_id TEXT NOT NULL REFERENCES memory_documents(id) "
    "ON DELETE CASCADE, chunk_index INTEGER NOT NULL, content TEXT NOT NULL, "
    f"embedding F32_BLOB({dim}), created_at TEXT NOT NULL DEFAULT "
    "(strftime('%Y-%m-%dT%H:%M:%fZ', 'now')), UNIQUE (document_id, chunk_index))",
    "INSERT INTO memory_chunks_new (_rowid, id, document_id, chunk_index, content, embedding, "
    "created_at) SELECT _rowid, id, document_id, chunk_index, content, CASE WHEN "
    f"length(embedding) = {dim * 4} THEN embedding ELSE NULL END, created_at FROM memory_chunks",
    "DROP TABLE memory_chunks",
    "ALTER TABLE memory_chunks_new RENAME TO memory_chunks",
    "CREATE INDEX IF NOT EXISTS idx_memory_chunks_document ON memory_chunks(document_id)",
    "CREATE INDEX IF NOT EXISTS idx_memory_chunks_embedding "
    "ON memory_chunks(libsql_vector_idx(embedding))",
    *json.loads(sys.argv[3]),  # the FTS triggers again, as LEGACY_SCHEMA has them
]
for step in steps:
    conn.execute(step)
conn.execute("INSERT INTO _migrations (version, name) VALUES (0, ?) ON CONFLICT(version) DO "
             "UPDATE SET name = excluded.name", (str(dim),))
conn.execute("COMMIT")
"""

#: Run in a child: statements on the libSQL engine, each ``(sql, params)`` of a JSON list,
#: answering a JSON list of each one's rows (blobs as hex).
_LIBSQL_STATEMENTS = r"""
import json, sys, libsql
conn = libsql.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA foreign_keys = ON")
answers = []
for sql, params in json.loads(sys.argv[2]):
    cursor = conn.execute(sql, tuple(params))
    rows = cursor.fetchall() if cursor.description else []
    answers.append([[v.hex() if isinstance(v, bytes) else v for v in row] for row in rows])
print(json.dumps(answers))
"""


def legacy_write_by_libsql(path: Path, doc_path: str, content: str) -> str:
    """``legacy_write`` by IronClaw's libSQL engine, in a child process (a file with its
    vector index, where plain SQLite cannot write chunks)."""
    script = ("import sys, libsql; from pathlib import Path; "
              "from tests.ironclaw_libsql import legacy_write; "
              "print(legacy_write(Path(sys.argv[1]), sys.argv[2], sys.argv[3], "
              "connect=libsql.connect))")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", script, str(path), doc_path, content],
                          check=True, timeout=60, capture_output=True, text=True)  # fmt: skip
    return done.stdout.strip()


def legacy_vector_index(path: Path, dim: int = 4) -> Path:
    """IronClaw v1.0's vector index on a legacy file (``EMBEDDING_ENABLED`` at its start),
    made by the libSQL engine in a child process."""
    triggers = [
        s for s in LEGACY_SCHEMA if s.startswith("CREATE TRIGGER IF NOT EXISTS memory_chunks_fts")
    ]
    subprocess.run([sys.executable, "-c", _VECTOR_INDEX_STEPS, str(path), str(dim),
                    json.dumps(triggers)], check=True, timeout=60)  # fmt: skip
    return path


def libsql_statements(path: Path, *statements: tuple[str, Sequence[Any]]) -> list[list[Any]]:
    """``statements`` run by the libSQL engine in a child process (IronClaw's side of a
    legacy file with a vector index: its writes, ``vector_top_k``, ``integrity_check``)."""
    done = subprocess.run(
        [sys.executable, "-c", _LIBSQL_STATEMENTS, str(path),
         json.dumps([[sql, list(params)] for sql, params in statements])],
        check=True, timeout=60, capture_output=True, text=True,
    )  # fmt: skip
    answers: list[list[Any]] = json.loads(done.stdout)
    return answers
