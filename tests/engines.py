"""The two storage engines as tests see them: how to prepare a database for each, how to
mount it, and what its rows say, in one shape so the same real-client test runs on both.

``rows`` answers path -> (identity, content) for the mounted workspace's documents. The
identity is what a save must keep: the legacy row's ``id``, the Reborn row's ``created_at``
(its path is its key, so a delete and re-insert would show as a new ``created_at``).
``statement_log`` counts what saves do to document rows: every statement on
``memory_documents``; on Reborn every row change of a ``memory_document`` row (sidecars, whose
number follows from the content, are checked by the Reborn tests themselves).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from memfs.config import Settings
from memfs.db import open_database
from memfs.ironclaw.chunker import chunk_document
from tests.conftest import StatementLog


def reborn_prefix(user: str) -> str:
    """Where a test mount of ``user`` (IronClaw's default tenant and agent) writes."""
    return f"/memory/tenants/reborn-cli/users/{user}/agents/reborn-cli-agent/projects/_none"


def agent_version_body(old: bytes) -> str:
    """The JSON body of the version row IronClaw's agent writes when it replaces ``old``."""
    return json.dumps(
        {"changed_by": "tenant:reborn-cli:user:default:agent:reborn-cli-agent:project:_none",
         "content": old.decode(), "content_hash": "sha256:" + hashlib.sha256(old).hexdigest()},
        ensure_ascii=False, separators=(",", ":"), sort_keys=True,
    )  # fmt: skip


REBORN_STATEMENT_LOG_SQL = """
CREATE TABLE test_statement_log (op TEXT NOT NULL, at TIMESTAMPTZ DEFAULT clock_timestamp());
CREATE FUNCTION test_log_document_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (CASE WHEN TG_OP = 'DELETE' THEN OLD.kind ELSE NEW.kind END) = 'memory_document' THEN
        INSERT INTO test_statement_log (op) VALUES (TG_OP);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER test_count_document_rows
    AFTER INSERT OR UPDATE OR DELETE ON root_filesystem_entries
    FOR EACH ROW EXECUTE FUNCTION test_log_document_row();
"""


class RebornRowLog(StatementLog):
    """Row changes of Reborn document rows, in order (a save is one UPDATE of one row)."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        conn.execute(REBORN_STATEMENT_LOG_SQL)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Engine:
    name: str

    def __str__(self) -> str:
        return self.name

    @property
    def layout(self) -> str:
        """IronClaw's layout of the rows: ``legacy`` (<= v1.0) or ``reborn``."""
        return "legacy" if self.name in ("legacy", "libsql-legacy") else "reborn"

    @property
    def table(self) -> str:
        """The table holding the documents' rows."""
        return "memory_documents" if self.name == "legacy" else "root_filesystem_entries"

    def mount_url(self, url: str) -> str:
        """What a mount of this engine is given for the test's database ``url``."""
        return url

    def row_state(self, conn: psycopg.Connection[Any], path: str) -> tuple[Any, ...]:
        """What a write changes on a document's row: legacy (content, updated_at); Reborn
        (content, updated_at, version)."""
        if self.name == "legacy":
            query = "SELECT content, updated_at FROM memory_documents WHERE path = %s"
            found = conn.execute(query, (path,)).fetchall()
        else:
            query = (
                "SELECT convert_from(contents, 'UTF8'), updated_at, version "
                "FROM root_filesystem_entries WHERE path = %s AND kind = 'memory_document'"
            )
            found = conn.execute(query, (f"{reborn_prefix('default')}/{path}",)).fetchall()
        assert len(found) == 1, found
        return tuple(found[0])

    def prepare(self, url: str) -> None:
        """Make the database this engine mounts (before any mount starts)."""
        if self.name == "reborn":
            from tests.model.test_reborn_store import reborn_schema

            reborn_schema(url)
        else:
            open_database(Settings(database_url=url)).close()

    def rows(
        self, conn: psycopg.Connection[Any], user: str = "default"
    ) -> dict[str, tuple[Any, str]]:
        """path -> (identity, content) of ``user``'s documents."""
        if self.name == "legacy":
            return {
                r[0]: (r[1], r[2])
                for r in conn.execute(
                    "SELECT path, id, content FROM memory_documents WHERE user_id = %s", (user,)
                )
            }
        prefix = reborn_prefix(user)
        from tests.model.test_reborn_store import assert_ironclaw_can_read

        found = {}
        for path, created, contents, kind, ctype, indexed in conn.execute(
            "SELECT path, created_at, contents, kind, content_type, indexed "
            "FROM root_filesystem_entries WHERE path LIKE %s ORDER BY path",
            (prefix + "/%",),
        ):
            assert_ironclaw_can_read(path, kind, ctype, indexed)
            relative = path.removeprefix(prefix + "/")
            if kind == "memory_document" and not any(
                s.endswith((".meta", ".chunks", ".versions")) for s in relative.split("/")
            ):
                found[relative] = (created, bytes(contents).decode())
        return found

    def contents(self, conn: psycopg.Connection[Any], user: str = "default") -> dict[str, str]:
        """path -> content of ``user``'s documents."""
        return {path: text for path, (_, text) in self.rows(conn, user).items()}

    def paths_holding(self, conn: psycopg.Connection[Any], needle: str) -> list[str]:
        """Every row of IronClaw's store, of any kind (documents, sidecars, entries that
        are no document), whose content holds ``needle``: where a save's text went."""
        if self.layout == "legacy":
            found = conn.execute(
                "SELECT path FROM memory_documents WHERE strpos(content, %s) > 0 ORDER BY path",
                (needle,),
            ).fetchall()
        else:
            found = conn.execute(
                "SELECT path FROM root_filesystem_entries "
                "WHERE position(convert_to(%s, 'UTF8') IN contents) > 0 ORDER BY path",
                (needle,),
            ).fetchall()
        return [row[0] for row in found]

    def agent_writes(
        self, conn: psycopg.Connection[Any], url: str, docs: dict[str, str], user: str = "default"
    ) -> None:
        """Documents of ``user`` written behind memfs's back, chunked, as the agent leaves
        them (each under 800 words: one chunk holding the whole text, as both layouts do)."""
        if self.name == "legacy":
            for path, text in docs.items():
                conn.execute(
                    "INSERT INTO memory_documents (user_id, path, content) VALUES (%s, %s, %s)",
                    (user, path, text),
                )
            subprocess.run(
                [sys.executable, "-m", "memfs", "reindex", "--database-url", url],
                check=True, timeout=60, capture_output=True,
            )  # fmt: skip
            return
        keys = {"agent_id": "reborn-cli-agent", "tenant_id": "reborn-cli", "user_id": user}
        prefix = reborn_prefix(user)
        for path, text in docs.items():
            chunk = {**keys, "chunk_index": 0, "content": text, "doc_relative_path": path}
            conn.execute(
                "INSERT INTO root_filesystem_entries (path, contents, kind, content_type, "
                "indexed, version) VALUES (%s, %s, 'memory_document', 'application/json', %s, 1),"
                " (%s, %s, 'memory_chunk', 'application/json', %s, 1)",
                (f"{prefix}/{path}", text.encode(), Jsonb(keys),
                 f"{prefix}/{path}.chunks/0", text.encode(), Jsonb(chunk)),
            )  # fmt: skip

    def assert_chunked(self, conn: psycopg.Connection[Any], user: str = "default") -> None:
        """Every document's chunks are exactly IronClaw's chunker output for its content
        (legacy: once the reindex queue is empty; Reborn: chunked in the save), and no
        chunk belongs to a document that is not there."""
        if self.name == "legacy":
            from tests.mount.test_mount import assert_reindexed

            assert_reindexed(conn, user)
            return
        prefix = reborn_prefix(user)
        docs = self.contents(conn, user)
        chunks: dict[str, list[tuple[int, str]]] = {}
        for indexed, contents in self.chunk_rows(conn, prefix):
            chunks.setdefault(indexed["doc_relative_path"], []).append(
                (indexed["chunk_index"], bytes(contents).decode())
            )
        assert set(chunks) <= set(docs), f"orphan chunks: {set(chunks) - set(docs)}"
        for path, content in docs.items():
            stored = [text for _, text in sorted(chunks.get(path, []))]
            assert stored == chunk_document(content), f"chunks of {path!r} are stale"

    def tool_file_paths(self, conn: psycopg.Connection[Any]) -> list[str]:
        """The paths memfs keeps in editors' tool folders (``memfs.tool_files``), sorted."""
        return [r[0] for r in conn.execute("SELECT path FROM memfs.tool_files ORDER BY path")]

    def chunk_rows(
        self, conn: psycopg.Connection[Any], prefix: str
    ) -> list[tuple[dict[str, Any], bytes]]:
        """(indexed, contents) of every Reborn chunk row under ``prefix``."""
        return [
            (indexed, bytes(contents))
            for indexed, contents in conn.execute(
                "SELECT indexed, contents FROM root_filesystem_entries "
                "WHERE kind = 'memory_chunk' AND path LIKE %s",
                (prefix + "/%",),
            )
        ]

    def identity(self, conn: psycopg.Connection[Any], path: str) -> tuple[Any, ...]:
        """What a save must keep of the one row at ``path``: legacy id, created_at and
        metadata; Reborn created_at and the ``.meta`` sidecar."""
        if self.name == "legacy":
            found = conn.execute(
                "SELECT id, created_at, metadata FROM memory_documents "
                "WHERE user_id = 'default' AND path = %s",
                (path,),
            ).fetchall()
        else:
            full = f"{reborn_prefix('default')}/{path}"
            found = conn.execute(
                "SELECT d.created_at, convert_from(m.contents, 'UTF8') "
                "FROM root_filesystem_entries d LEFT JOIN root_filesystem_entries m "
                "ON m.path = d.path || '.meta' WHERE d.path = %s AND d.kind = 'memory_document'",
                (full,),
            ).fetchall()
        assert len(found) == 1, f"{len(found)} rows at {path}"
        return tuple(found[0])

    def set_metadata(self, conn: psycopg.Connection[Any], path: str, meta: dict[str, Any]) -> None:
        """Metadata as the agent leaves it (legacy column; Reborn ``.meta`` sidecar)."""
        if self.name == "legacy":
            conn.execute(
                "UPDATE memory_documents SET metadata = %s WHERE path = %s", (Jsonb(meta), path)
            )
            return
        conn.execute(
            "INSERT INTO root_filesystem_entries (path, contents, content_type, indexed, "
            "version) VALUES (%s, %s, 'application/octet-stream', '{}', 1) ON CONFLICT (path) "
            "DO UPDATE SET contents = EXCLUDED.contents, version = "
            "root_filesystem_entries.version + 1",
            (f"{reborn_prefix('default')}/{path}.meta",
             json.dumps(meta, separators=(",", ":"), sort_keys=True).encode()),
        )  # fmt: skip

    def versions(self, conn: psycopg.Connection[Any], path: str) -> list[str]:
        """The kept contents of the document at ``path``, oldest first."""
        if self.name == "legacy":
            return [
                r[0]
                for r in conn.execute(
                    "SELECT v.content FROM memory_document_versions v JOIN memory_documents d "
                    "ON d.id = v.document_id WHERE d.path = %s ORDER BY v.version",
                    (path,),
                )
            ]
        base = f"{reborn_prefix('default')}/{path}.versions/"
        found = conn.execute(
            "SELECT (indexed ->> 'version')::int, contents FROM root_filesystem_entries "
            "WHERE kind = 'memory_document_version' AND left(path, length(%s)) = %s",
            (base, base),
        ).fetchall()
        return [json.loads(bytes(body))["content"] for _, body in sorted(found)]

    def chunk_texts(self, conn: psycopg.Connection[Any], user: str = "default") -> list[str]:
        """Every chunk's text in the workspace, by document path and chunk index."""
        if self.name == "legacy":
            return [
                r[0]
                for r in conn.execute(
                    "SELECT c.content FROM memory_chunks c JOIN memory_documents d "
                    "ON d.id = c.document_id WHERE d.user_id = %s ORDER BY d.path, c.chunk_index",
                    (user,),
                )
            ]
        return [
            bytes(r[0]).decode()
            for r in conn.execute(
                "SELECT contents FROM root_filesystem_entries WHERE kind = 'memory_chunk' "
                "AND path LIKE %s ORDER BY indexed ->> 'doc_relative_path', "
                "(indexed ->> 'chunk_index')::int",
                (reborn_prefix(user) + "/%",),
            )
        ]

    def agent_appends(
        self, conn: psycopg.Connection[Any], path: str, line: str, *, touch: bool = True
    ) -> bool:
        """The agent appends ``line`` in one statement (Reborn: a compare-and-swap step,
        ``version + 1``); False if there was no such document.  ``touch`` False leaves
        ``updated_at`` as it was: what two of IronClaw's writes within one tick of its
        clock leave (issue 54)."""
        when = ", updated_at = now()" if touch else ""
        if self.name == "legacy":
            query = (
                f"UPDATE memory_documents SET content = content || %s{when} "
                "WHERE user_id = 'default' AND agent_id IS NULL AND path = %s"
            )
            return conn.execute(query, (line, path)).rowcount > 0  # type: ignore[arg-type]
        return (
            conn.execute(
                "UPDATE root_filesystem_entries SET contents = contents || %s, "  # type: ignore[arg-type]
                f"version = version + 1{when} WHERE path = %s AND kind = 'memory_document'",
                (line.encode(), f"{reborn_prefix('default')}/{path}"),
            ).rowcount
            > 0
        )

    def agent_rewrites_in_one_tick(
        self, conn: psycopg.Connection[Any], path: str, text: str
    ) -> None:
        """Another writer's ``text`` at ``path`` that leaves ``updated_at`` as it was: two
        writes within one tick of the clock (legacy: the trigger that sets it is held off
        for the statement; Reborn: IronClaw's ``version + 1`` alone)."""
        if self.name == "legacy":
            with conn.transaction():
                conn.execute("ALTER TABLE memory_documents DISABLE TRIGGER "
                             "update_memory_documents_updated_at")  # fmt: skip
                conn.execute("UPDATE memory_documents SET content = %s WHERE user_id = "
                             "'default' AND path = %s", (text, path))  # fmt: skip
                conn.execute("ALTER TABLE memory_documents ENABLE TRIGGER "
                             "update_memory_documents_updated_at")  # fmt: skip
            return
        conn.execute(
            "UPDATE root_filesystem_entries SET contents = %s, version = version + 1 "
            "WHERE path = %s AND kind = 'memory_document'",
            (text.encode(), f"{reborn_prefix('default')}/{path}"),
        )

    def agent_overwrites(self, conn: psycopg.Connection[Any], path: str, text: str) -> None:
        """The agent replaces ``path``'s content, keeping the old one as IronClaw does (the
        next version number, its hash; chunks left to the next reindex)."""
        if self.name == "legacy":
            conn.execute(
                "WITH d AS (SELECT id, content FROM memory_documents WHERE user_id = 'default' "
                "  AND agent_id IS NULL AND path = %(p)s) "
                "INSERT INTO memory_document_versions (document_id, version, content, "
                "  content_hash, changed_by) "
                "SELECT d.id, COALESCE((SELECT max(version) FROM memory_document_versions v "
                "  WHERE v.document_id = d.id), 0) + 1, d.content, "
                "  'sha256:' || encode(sha256(convert_to(d.content, 'UTF8')), 'hex'), 'agent' "
                "FROM d",
                {"p": path},
            )
            conn.execute(
                "UPDATE memory_documents SET content = %s WHERE user_id = 'default' "
                "AND agent_id IS NULL AND path = %s",
                (text, path),
            )
            return
        full = f"{reborn_prefix('default')}/{path}"
        (old,) = conn.execute(
            "SELECT contents FROM root_filesystem_entries WHERE path = %s", (full,)
        ).fetchone() or (b"",)
        (number,) = conn.execute(
            "SELECT COALESCE(max((indexed ->> 'version')::int), 0) + 1 FROM "
            "root_filesystem_entries WHERE path LIKE %s AND kind = 'memory_document_version'",
            (full + ".versions/%",),
        ).fetchone() or (1,)
        keys = {"agent_id": "reborn-cli-agent", "tenant_id": "reborn-cli", "user_id": "default"}
        body = agent_version_body(bytes(old))
        conn.execute(
            "UPDATE root_filesystem_entries SET contents = %s, version = version + 1, "
            "updated_at = now() WHERE path = %s",
            (text.encode(), full),
        )
        conn.execute(
            "INSERT INTO root_filesystem_entries (path, contents, kind, content_type, indexed, "
            "version) VALUES (%s, %s, 'memory_document_version', 'application/json', %s, 1)",
            (f"{full}.versions/{number}", body.encode(),
             Jsonb({**keys, "doc_relative_path": path, "version": number})),
        )  # fmt: skip

    @contextlib.contextmanager
    def overwrite_held(self, conn: psycopg.Connection[Any], path: str, text: str) -> Iterator[None]:
        """``agent_overwrites`` in one transaction held open for the block: the row stays
        locked (on libSQL, the file's write lock is held) and the change unseen by others
        until the block ends, when it commits.  Used from one thread (SQLite's rule)."""
        with conn.transaction():
            self.agent_overwrites(conn, path, text)
            yield

    def agent_deletes(self, conn: psycopg.Connection[Any], path: str) -> None:
        """The agent deletes ``path`` as IronClaw does (Reborn: with its sidecars)."""
        if self.name == "legacy":
            conn.execute("DELETE FROM memory_documents WHERE user_id = 'default' "
                         "AND agent_id IS NULL AND path = %s", (path,))  # fmt: skip
            return
        full = f"{reborn_prefix('default')}/{path}"
        conn.execute("DELETE FROM root_filesystem_entries WHERE path = %s OR path LIKE %s",
                     (full, full + ".%"))  # fmt: skip

    def chunks_containing(self, conn: psycopg.Connection[Any], *needles: str) -> int:
        """How many chunk rows hold any of ``needles`` (scratch content that leaked)."""
        patterns = [f"%{n}%" for n in needles]
        if self.name == "legacy":
            query = "SELECT count(*) FROM memory_chunks WHERE content LIKE ANY(%s)"
        else:
            query = (
                "SELECT count(*) FROM root_filesystem_entries WHERE kind = 'memory_chunk' "
                "AND convert_from(contents, 'UTF8') LIKE ANY(%s)"
            )
        row = conn.execute(query, (patterns,)).fetchone()  # type: ignore[arg-type]
        assert row is not None
        return int(row[0])

    def statement_log(self, conn: psycopg.Connection[Any]) -> StatementLog:
        return RebornRowLog(conn) if self.name == "reborn" else StatementLog(conn)


ENGINES = [Engine("legacy"), Engine("reborn")]


#: Where the libSQL engine's files are made, one per test database.
LIBSQL_ROOT = "/var/tmp/memfs-libsql-tests"


#: The write transaction a test holds open on a libSQL file (``overwrite_held``).
_HELD: dict[str, sqlite3.Connection] = {}


def _sqlite_put(file: str, statement: str, params: tuple[Any, ...]) -> int:
    """One of IronClaw's writes: its own short ``BEGIN IMMEDIATE`` transaction, or a
    statement of the transaction held open on ``file``."""
    held = _HELD.get(file)
    if held is not None:
        return int(held.execute(statement, params).rowcount)
    db = sqlite3.connect(file, isolation_level=None, timeout=5.0)
    try:
        db.execute("BEGIN IMMEDIATE")
        changed = db.execute(statement, params).rowcount
        db.execute("COMMIT")
        return int(changed)
    finally:
        db.close()


@contextlib.contextmanager
def _sqlite_held(file: str) -> Iterator[None]:
    """A write transaction on ``file`` held for the block (its write lock taken at once),
    committed at the end."""
    db = sqlite3.connect(file, isolation_level=None, timeout=5.0)
    try:
        db.execute("BEGIN IMMEDIATE")
        _HELD[file] = db
        try:
            yield
        finally:
            del _HELD[file]
        db.execute("COMMIT")
    finally:
        db.close()


def hold_overwrite(
    engine: Engine,
    conn: psycopg.Connection[Any],
    path: str,
    text: str,
    seconds: float,
    taken: threading.Event,
) -> float:
    """The agent's overwrite of ``path``, held uncommitted for ``seconds`` (``taken`` set
    once it is made); the monotonic time its commit was sent (a writer waiting on the
    lock may be answered before this thread hears the commit's own answer).  Run in a
    thread of its own."""
    with engine.overwrite_held(conn, path, text):
        taken.set()
        time.sleep(seconds)
        releasing = time.monotonic()
    return releasing


class LibsqlRowLog:
    """Row changes of document rows in IronClaw's libSQL file, in order (test triggers on
    the test's own file, named as IronClaw never names its own)."""

    def __init__(self, path: str) -> None:
        self.path = path
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE test_statement_log (n INTEGER PRIMARY KEY, op TEXT)")
            for op, row in (("INSERT", "new"), ("UPDATE", "new"), ("DELETE", "old")):
                conn.execute(
                    f"CREATE TRIGGER test_log_{op.lower()} AFTER {op} ON root_filesystem_entries "
                    f"WHEN {row}.kind = 'memory_document' BEGIN "
                    f"INSERT INTO test_statement_log (op) VALUES ('{op}'); END"
                )

    def take(self) -> list[str]:
        with sqlite3.connect(self.path) as conn:
            ops = [r[0] for r in conn.execute("SELECT op FROM test_statement_log ORDER BY n")]
            conn.execute("DELETE FROM test_statement_log")
        return ops


class LibsqlEngine(Engine):
    """IronClaw's libSQL file (the Reborn layout) as the real-client tests see it: the test's
    database URL names a file of its own (``mount_url``); ``conn`` arguments are the
    PostgreSQL test connection, not used here."""

    def __init__(self) -> None:
        super().__init__("libsql")

    @staticmethod
    def file_for(url: str) -> str:
        name = url.split("?", maxsplit=1)[0].rsplit("/", 1)[-1]
        return f"{LIBSQL_ROOT}/{name}/reborn-local-dev.db"

    def prepare(self, url: str) -> None:
        from pathlib import Path

        from tests.ironclaw_libsql import reborn_local_dev

        reborn_local_dev(Path(self.file_for(url)))
        object.__setattr__(self, "_current", self.file_for(url))

    def mount_url(self, url: str) -> str:
        return f"sqlite:{self.file_for(url)}"

    def _rows(self) -> list[tuple[Any, ...]]:
        with sqlite3.connect(self._current) as conn:
            return conn.execute(
                "SELECT path, created_at, contents, kind, content_type, indexed, "
                "typeof(contents) || typeof(indexed) FROM root_filesystem_entries "
                "WHERE path LIKE '/memory/%' ORDER BY path"
            ).fetchall()

    def rows(
        self, conn: psycopg.Connection[Any], user: str = "default"
    ) -> dict[str, tuple[Any, str]]:
        from tests.model.test_reborn_store import assert_ironclaw_can_read

        prefix = reborn_prefix(user)
        found = {}
        for path, created, contents, kind, ctype, indexed, classes in self._rows():
            if not path.startswith(prefix + "/"):
                continue
            assert classes == "blobtext", (path, classes)  # IronClaw's storage classes
            assert_ironclaw_can_read(path, kind, ctype, json.loads(indexed))
            relative = path.removeprefix(prefix + "/")
            if kind == "memory_document" and not any(
                s.endswith((".meta", ".chunks", ".versions")) for s in relative.split("/")
            ):
                found[relative] = (created, bytes(contents).decode())
        return found

    def paths_holding(self, conn: psycopg.Connection[Any], needle: str) -> list[str]:
        with sqlite3.connect(self._current) as db:
            found = db.execute(
                "SELECT path FROM root_filesystem_entries "
                "WHERE instr(contents, CAST(? AS BLOB)) > 0 ORDER BY path",
                (needle,),
            ).fetchall()
        return [row[0] for row in found]

    def tool_file_paths(self, conn: psycopg.Connection[Any]) -> list[str]:
        """Kept in memfs's own file beside IronClaw's (``<file>.memfs``), never in IronClaw's."""
        with sqlite3.connect(self._current + ".memfs") as db:
            return [r[0] for r in db.execute("SELECT path FROM tool_files ORDER BY path")]

    def chunk_rows(
        self, conn: psycopg.Connection[Any], prefix: str
    ) -> list[tuple[dict[str, Any], bytes]]:
        return [
            (json.loads(indexed), bytes(contents))
            for path, _, contents, kind, _, indexed, _ in self._rows()
            if kind == "memory_chunk" and path.startswith(prefix + "/")
        ]

    def row_state(self, conn: psycopg.Connection[Any], path: str) -> tuple[Any, ...]:
        with sqlite3.connect(self._current) as db:
            found = db.execute(
                "SELECT contents, updated_at, version FROM root_filesystem_entries "
                "WHERE path = ? AND kind = 'memory_document'",
                (f"{reborn_prefix('default')}/{path}",),
            ).fetchall()
        assert len(found) == 1, found
        contents, updated_at, version = found[0]
        return (bytes(contents).decode(), updated_at, version)

    def chunks_containing(self, conn: psycopg.Connection[Any], *needles: str) -> int:
        return sum(
            1 for _, _, contents, kind, *_ in self._rows()
            if kind == "memory_chunk" and any(n in bytes(contents).decode() for n in needles)
        )  # fmt: skip

    def chunk_texts(self, conn: psycopg.Connection[Any], user: str = "default") -> list[str]:
        prefix = reborn_prefix(user)
        found = []
        for path, _, contents, kind, _, indexed, _ in self._rows():
            if kind == "memory_chunk" and path.startswith(prefix + "/"):
                keys = json.loads(indexed)
                found.append(((keys["doc_relative_path"], keys["chunk_index"]),
                              bytes(contents).decode()))  # fmt: skip
        return [text for _, text in sorted(found)]

    def versions(self, conn: psycopg.Connection[Any], path: str) -> list[str]:
        base = f"{reborn_prefix('default')}/{path}.versions/"
        found = []
        for row_path, _, contents, kind, _, indexed, _ in self._rows():
            if kind == "memory_document_version" and row_path.startswith(base):
                found.append(
                    (json.loads(indexed)["version"], json.loads(bytes(contents))["content"])
                )
        return [text for _, text in sorted(found)]

    def identity(self, conn: psycopg.Connection[Any], path: str) -> tuple[Any, ...]:
        full = f"{reborn_prefix('default')}/{path}"
        rows = {r[0]: r for r in self._rows()}
        assert full in rows and rows[full][3] == "memory_document", f"no row at {path}"
        meta = rows.get(full + ".meta")
        return (rows[full][1], bytes(meta[2]).decode() if meta else None)

    def set_metadata(self, conn: psycopg.Connection[Any], path: str, meta: dict[str, Any]) -> None:
        with sqlite3.connect(self._current) as db:
            db.execute(
                "INSERT INTO root_filesystem_entries (path, contents, content_type, indexed, "
                "version) VALUES (?, ?, 'application/octet-stream', '{}', 1) ON CONFLICT (path) "
                "DO UPDATE SET contents = excluded.contents, version = version + 1",
                (f"{reborn_prefix('default')}/{path}.meta",
                 json.dumps(meta, separators=(",", ":"), sort_keys=True).encode()),
            )  # fmt: skip

    def statement_log(self, conn: psycopg.Connection[Any]) -> Any:
        return LibsqlRowLog(self._current)

    def _put(self, statement: str, params: tuple[Any, ...]) -> int:
        return _sqlite_put(self._current, statement, params)

    @contextlib.contextmanager
    def overwrite_held(self, conn: psycopg.Connection[Any], path: str, text: str) -> Iterator[None]:
        with _sqlite_held(self._current):
            self.agent_overwrites(conn, path, text)
            yield

    def agent_overwrites(self, conn: psycopg.Connection[Any], path: str, text: str) -> None:
        """IronClaw's overwrite as its libSQL backend makes it: the document put at its
        version, then the old content put as the next version row (two transactions)."""
        full = f"{reborn_prefix('default')}/{path}"
        rows = {row[0]: row for row in self._rows()}
        old = bytes(rows[full][2])
        number = 1 + max(
            (json.loads(r[5])["version"] for p, r in rows.items()
             if p.startswith(full + ".versions/") and r[3] == "memory_document_version"),
            default=0,
        )  # fmt: skip
        keys = {"agent_id": "reborn-cli-agent", "tenant_id": "reborn-cli", "user_id": "default"}
        body = agent_version_body(bytes(old))
        self._put(
            "UPDATE root_filesystem_entries SET contents = ?, version = version + 1, "
            "updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE path = ?",
            (text.encode(), full),
        )
        indexed = {**keys, "doc_relative_path": path, "version": number}
        self._put(
            "INSERT INTO root_filesystem_entries (path, contents, kind, content_type, indexed, "
            "version, updated_at) VALUES (?, ?, 'memory_document_version', 'application/json', "
            "?, 1, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))",
            (f"{full}.versions/{number}", body.encode(),
             json.dumps(indexed, separators=(",", ":"), sort_keys=True)),
        )  # fmt: skip

    def agent_deletes(self, conn: psycopg.Connection[Any], path: str) -> None:
        full = f"{reborn_prefix('default')}/{path}"
        self._put("DELETE FROM root_filesystem_entries WHERE path = ? OR path LIKE ?",
                  (full, full + ".%"))  # fmt: skip

    def agent_appends(
        self, conn: psycopg.Connection[Any], path: str, line: str, *, touch: bool = True
    ) -> bool:
        when = ", updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')" if touch else ""
        return (
            self._put(
                "UPDATE root_filesystem_entries SET contents = CAST(contents || ? AS BLOB), "
                f"version = version + 1{when} WHERE path = ? AND kind = 'memory_document'",
                (line.encode(), f"{reborn_prefix('default')}/{path}"),
            )
            > 0
        )

    def agent_rewrites_in_one_tick(
        self, conn: psycopg.Connection[Any], path: str, text: str
    ) -> None:
        self._put(
            "UPDATE root_filesystem_entries SET contents = CAST(? AS BLOB), version = version + 1 "
            "WHERE path = ? AND kind = 'memory_document'",
            (text.encode(), f"{reborn_prefix('default')}/{path}"),
        )

    def agent_writes(
        self, conn: psycopg.Connection[Any], url: str, docs: dict[str, str], user: str = "default"
    ) -> None:
        keys = {"agent_id": "reborn-cli-agent", "tenant_id": "reborn-cli", "user_id": user}
        prefix = reborn_prefix(user)
        for path, text in docs.items():
            chunk = {**keys, "chunk_index": 0, "content": text, "doc_relative_path": path}
            for row, kind, indexed in (
                (f"{prefix}/{path}", "memory_document", keys),
                (f"{prefix}/{path}.chunks/0", "memory_chunk", chunk),
            ):
                self._put(
                    "INSERT INTO root_filesystem_entries (path, contents, kind, content_type, "
                    "indexed, version, updated_at) VALUES (?, ?, ?, 'application/json', ?, 1, "
                    "strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))",
                    (row, text.encode(), kind, json.dumps(indexed, ensure_ascii=False,
                                                          separators=(",", ":"), sort_keys=True)),
                )  # fmt: skip


class LibsqlLegacyRowLog(LibsqlRowLog):
    """Row changes of ``memory_documents`` in a legacy libSQL file, in order."""

    def __init__(self, path: str) -> None:
        self.path = path
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE test_statement_log (n INTEGER PRIMARY KEY, op TEXT)")
            for op in ("INSERT", "UPDATE", "DELETE"):
                conn.execute(
                    f"CREATE TRIGGER test_log_{op.lower()} AFTER {op} ON memory_documents "
                    f"BEGIN INSERT INTO test_statement_log (op) VALUES ('{op}'); END"
                )


class LibsqlLegacyEngine(Engine):
    """IronClaw v1.0's legacy libSQL file, ``ironclaw.db``, with the vector index IronClaw
    makes when embeddings are enabled: every memfs write goes through IronClaw's libSQL
    engine in a child process, and the agent's writes that touch chunks are made by that
    engine too (``tests.ironclaw_libsql.libsql_statements``)."""

    def __init__(self) -> None:
        super().__init__("libsql-legacy")

    @property
    def table(self) -> str:
        return "memory_documents"

    @staticmethod
    def file_for(url: str) -> str:
        name = url.split("?", maxsplit=1)[0].rsplit("/", 1)[-1]
        return f"{LIBSQL_ROOT}/{name}-legacy/ironclaw.db"

    def prepare(self, url: str) -> None:
        import shutil
        from pathlib import Path

        from tests.ironclaw_libsql import legacy_ironclaw_db, legacy_vector_index

        file = Path(self.file_for(url))
        shutil.rmtree(file.parent, ignore_errors=True)
        legacy_vector_index(legacy_ironclaw_db(file), 4)
        object.__setattr__(self, "_current", str(file))

    def mount_url(self, url: str) -> str:
        return f"sqlite:{self.file_for(url)}"

    def _read(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        with sqlite3.connect(self._current) as conn:
            return conn.execute(sql, params).fetchall()

    def _ironclaw(self, *statements: tuple[str, tuple[Any, ...]]) -> list[list[Any]]:
        from pathlib import Path

        from tests.ironclaw_libsql import libsql_statements

        return libsql_statements(Path(self._current), *statements)

    def paths_holding(self, conn: psycopg.Connection[Any], needle: str) -> list[str]:
        found = self._read("SELECT path FROM memory_documents WHERE instr(content, ?) > 0 "
                           "ORDER BY path", needle)  # fmt: skip
        return [row[0] for row in found]

    def row_state(self, conn: psycopg.Connection[Any], path: str) -> tuple[Any, ...]:
        found = self._read("SELECT content, updated_at FROM memory_documents WHERE path = ?", path)
        assert len(found) == 1, found
        return tuple(found[0])

    def rows(
        self, conn: psycopg.Connection[Any], user: str = "default"
    ) -> dict[str, tuple[Any, str]]:
        found = self._read("SELECT path, id, content, typeof(content) FROM memory_documents "
                           "WHERE user_id = ?", user)  # fmt: skip
        assert all(r[3] == "text" for r in found), found  # IronClaw reads text
        return {path: (doc_id, text) for path, doc_id, text, _ in found}

    def agent_writes(
        self, conn: psycopg.Connection[Any], url: str, docs: dict[str, str], user: str = "default"
    ) -> None:
        statements = []
        for path, text in docs.items():
            doc_id = str(uuid.uuid4())
            statements.append((
                "INSERT INTO memory_documents (id, user_id, agent_id, path, content, metadata) "
                "VALUES (?, ?, NULL, ?, ?, '{}')", (doc_id, user, path, text)))  # fmt: skip
            for index, chunk in enumerate(chunk_document(text)):
                statements.append((
                    "INSERT INTO memory_chunks (id, document_id, chunk_index, content) "
                    "VALUES (?, ?, ?, ?)", (str(uuid.uuid4()), doc_id, index, chunk)))  # fmt: skip
        self._ironclaw(*statements)

    def assert_chunked(self, conn: psycopg.Connection[Any], user: str = "default") -> None:
        docs = dict(self._read("SELECT id, content FROM memory_documents WHERE user_id = ?", user))
        chunks: dict[str, list[tuple[int, str]]] = {}
        for doc_id, index, text in self._read(
            "SELECT document_id, chunk_index, content FROM memory_chunks"
        ):
            chunks.setdefault(doc_id, []).append((index, text))
        assert set(chunks) <= set(docs), "orphan chunks"
        for doc_id, content in docs.items():
            stored = [text for _, text in sorted(chunks.get(doc_id, []))]
            assert stored == chunk_document(content), f"chunks of {doc_id} are stale"

    def tool_file_paths(self, conn: psycopg.Connection[Any]) -> list[str]:
        with sqlite3.connect(self._current + ".memfs") as db:
            return [r[0] for r in db.execute("SELECT path FROM tool_files ORDER BY path")]

    def identity(self, conn: psycopg.Connection[Any], path: str) -> tuple[Any, ...]:
        found = self._read("SELECT id, created_at, metadata FROM memory_documents "
                           "WHERE user_id = 'default' AND path = ?", path)  # fmt: skip
        assert len(found) == 1, f"{len(found)} rows at {path}"
        return tuple(found[0])

    def set_metadata(self, conn: psycopg.Connection[Any], path: str, meta: dict[str, Any]) -> None:
        with sqlite3.connect(self._current) as db:
            db.execute("UPDATE memory_documents SET metadata = ? WHERE path = ?",
                       (json.dumps(meta), path))  # fmt: skip

    def versions(self, conn: psycopg.Connection[Any], path: str) -> list[str]:
        return [r[0] for r in self._read(
            "SELECT v.content FROM memory_document_versions v JOIN memory_documents d "
            "ON d.id = v.document_id WHERE d.path = ? ORDER BY v.version", path)]  # fmt: skip

    def chunk_texts(self, conn: psycopg.Connection[Any], user: str = "default") -> list[str]:
        return [r[0] for r in self._read(
            "SELECT c.content FROM memory_chunks c JOIN memory_documents d "
            "ON d.id = c.document_id WHERE d.user_id = ? ORDER BY d.path, c.chunk_index",
            user)]  # fmt: skip

    def _put(self, statement: str, params: tuple[Any, ...]) -> int:
        return _sqlite_put(self._current, statement, params)

    @contextlib.contextmanager
    def overwrite_held(self, conn: psycopg.Connection[Any], path: str, text: str) -> Iterator[None]:
        with _sqlite_held(self._current):
            self.agent_overwrites(conn, path, text)
            yield

    def agent_appends(
        self, conn: psycopg.Connection[Any], path: str, line: str, *, touch: bool = True
    ) -> bool:
        """IronClaw v1.0's update of the content, its time from its clock (chunks follow
        in IronClaw's next step, left to the next save here as on PostgreSQL)."""
        when = ", updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')" if touch else ""
        return self._put(
            f"UPDATE memory_documents SET content = content || ?{when} WHERE user_id = "
            "'default' AND agent_id IS NULL AND path = ?", (line, path)) > 0  # fmt: skip

    def agent_rewrites_in_one_tick(
        self, conn: psycopg.Connection[Any], path: str, text: str
    ) -> None:
        """IronClaw's trigger sets ``updated_at`` when an UPDATE leaves it: it is held off
        for the statement (dropped and made again in the same transaction)."""
        db = sqlite3.connect(self._current, isolation_level=None, timeout=5.0)
        try:
            db.execute("BEGIN IMMEDIATE")
            (trigger,) = db.execute(
                "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND "
                "name = 'update_memory_documents_updated_at'"
            ).fetchone()
            db.execute("DROP TRIGGER update_memory_documents_updated_at")
            db.execute("UPDATE memory_documents SET content = ? WHERE user_id = 'default' "
                       "AND agent_id IS NULL AND path = ?", (text, path))  # fmt: skip
            db.execute(trigger)
            db.execute("COMMIT")
        finally:
            db.close()

    def agent_overwrites(self, conn: psycopg.Connection[Any], path: str, text: str) -> None:
        (old,) = self._read("SELECT id, content FROM memory_documents WHERE user_id = 'default' "
                            "AND agent_id IS NULL AND path = ?", path)  # fmt: skip
        digest = "sha256:" + hashlib.sha256(old[1].encode()).hexdigest()
        self._put(
            "INSERT INTO memory_document_versions (id, document_id, version, content, "
            "content_hash, changed_by) VALUES (?, ?, (SELECT COALESCE(max(version), 0) + 1 "
            "FROM memory_document_versions WHERE document_id = ?), ?, ?, 'agent')",
            (str(uuid.uuid4()), old[0], old[0], old[1], digest))  # fmt: skip
        self._put("UPDATE memory_documents SET content = ?, updated_at = "
                  "strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = ?", (text, old[0]))  # fmt: skip

    def agent_deletes(self, conn: psycopg.Connection[Any], path: str) -> None:
        """IronClaw's delete: chunks, then the document (its vector index needs its engine)."""
        found = self._read("SELECT id FROM memory_documents WHERE user_id = 'default' "
                           "AND agent_id IS NULL AND path = ?", path)  # fmt: skip
        for (doc_id,) in found:
            self._ironclaw(("DELETE FROM memory_chunks WHERE document_id = ?", (doc_id,)),
                           ("DELETE FROM memory_documents WHERE id = ?", (doc_id,)))  # fmt: skip

    def chunks_containing(self, conn: psycopg.Connection[Any], *needles: str) -> int:
        return sum(1 for (text,) in self._read("SELECT content FROM memory_chunks")
                   if any(n in text for n in needles))  # fmt: skip

    def statement_log(self, conn: psycopg.Connection[Any]) -> Any:
        return LibsqlLegacyRowLog(self._current)


#: The libSQL engines, for the test modules that run on them too (``ENGINES_WITH_LIBSQL``).
LIBSQL = LibsqlEngine()
LIBSQL_LEGACY = LibsqlLegacyEngine()
ENGINES_WITH_LIBSQL = [*ENGINES, LIBSQL, LIBSQL_LEGACY]
