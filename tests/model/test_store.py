"""Write-through semantics of MetaStore, checked row by row with SQL."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
import pytest

from memfs.config import Settings
from memfs.db import Database, FileAttrs, MetaStore, PlannerStatistics, Scope, open_database
from memfs.db.legacy.postgres.store import content_hash
from memfs.db.records import Overwritten, Rename, Write
from memfs.ironclaw.chunker import chunk_document
from tests.conftest import apply_ironclaw_migrations

NO_ATTRS = FileAttrs()


def rows(conn: psycopg.Connection[Any], user: str = "default") -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT path, content FROM memory_documents WHERE user_id = %s ORDER BY path", (user,)
    ).fetchall()


def chunks(conn: psycopg.Connection[Any], path: str) -> list[str]:
    return [
        r[0]
        for r in conn.execute(
            "SELECT c.content FROM memory_chunks c JOIN memory_documents d ON d.id = c.document_id "
            "WHERE d.path = %s ORDER BY c.chunk_index",
            (path,),
        )
    ]


def versions(conn: psycopg.Connection[Any], path: str) -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT v.version, v.content, v.content_hash, v.changed_by FROM memory_document_versions v "
        "JOIN memory_documents d ON d.id = v.document_id WHERE d.path = %s ORDER BY v.version",
        (path,),
    ).fetchall()


@pytest.fixture
def store(database: Database) -> MetaStore:
    return database.store(Scope("default"))


def test_insert_then_update_keeps_identity(
    store: MetaStore, sql_conn: psycopg.Connection[Any]
) -> None:
    first = store.commit_document(Write(None, "MEMORY.md", "first"), NO_ATTRS)
    assert first.created and first.changed and first.chunks == 1
    sql_conn.execute(
        "UPDATE memory_documents SET metadata = '{\"keep\": true}' WHERE id = %s", (first.doc_id,)
    )
    created = sql_conn.execute(
        "SELECT created_at FROM memory_documents WHERE id = %s", (first.doc_id,)
    ).fetchone()
    second = store.commit_document(Write(first.doc_id, "MEMORY.md", "second text"), NO_ATTRS)
    assert second.doc_id == first.doc_id and not second.created
    row = sql_conn.execute(
        "SELECT id, content, metadata, created_at, agent_id FROM memory_documents"
    ).fetchall()
    assert row == [(first.doc_id, "second text", {"keep": True}, created[0], None)]  # type: ignore[index]
    assert chunks(sql_conn, "MEMORY.md") == ["second text"]


def test_versions_follow_ironclaw_rules(
    store: MetaStore, sql_conn: psycopg.Connection[Any]
) -> None:
    a = store.commit_document(Write(None, "notes.md", "v1"), NO_ATTRS)
    assert versions(sql_conn, "notes.md") == []  # created: nothing previous to keep
    store.commit_document(Write(a.doc_id, "notes.md", "v2"), NO_ATTRS)
    unchanged = store.commit_document(Write(a.doc_id, "notes.md", "v2"), NO_ATTRS)
    assert not unchanged.changed and not unchanged.versioned
    store.commit_document(Write(a.doc_id, "notes.md", "v3"), NO_ATTRS)
    assert versions(sql_conn, "notes.md") == [
        (1, "v1", content_hash("v1"), "default"),
        (2, "v2", content_hash("v2"), "default"),
    ]
    assert content_hash("v1").startswith("sha256:") and len(content_hash("v1")) == 71
    # Empty previous content is never versioned.
    b = store.commit_document(Write(None, "empty.md", ""), NO_ATTRS)
    store.commit_document(Write(b.doc_id, "empty.md", "now text"), NO_ATTRS)
    assert versions(sql_conn, "empty.md") == []


def test_folder_config_controls_versioning_and_indexing(
    store: MetaStore, sql_conn: psycopg.Connection[Any]
) -> None:
    sql_conn.execute(
        "INSERT INTO memory_documents (user_id, path, content, metadata) VALUES "
        "('default', 'daily/.config', '', '{\"skip_versioning\": true}'), "
        "('default', '.system/.config', '', '{\"skip_indexing\": true}')"
    )
    d = store.commit_document(Write(None, "daily/2026-03-03.md", "one"), NO_ATTRS)
    store.commit_document(Write(d.doc_id, "daily/2026-03-03.md", "two"), NO_ATTRS)
    assert versions(sql_conn, "daily/2026-03-03.md") == []
    s = store.commit_document(Write(None, ".system/settings.json", '{"a": 1}'), NO_ATTRS)
    assert s.chunks == 0 and chunks(sql_conn, ".system/settings.json") == []
    # The document's own metadata overlays the folder's.
    sql_conn.execute(
        "UPDATE memory_documents SET metadata = '{\"skip_indexing\": false}' WHERE id = %s",
        (s.doc_id,),
    )
    again = store.commit_document(Write(s.doc_id, ".system/settings.json", '{"a": 2}'), NO_ATTRS)
    assert again.chunks == 1


def test_long_documents_are_chunked_like_ironclaw(
    store: MetaStore, sql_conn: psycopg.Connection[Any]
) -> None:
    text = "\n".join(f"word{i}" for i in range(1430))
    store.commit_document(Write(None, "big.md", text), NO_ATTRS)
    assert chunks(sql_conn, "big.md") == chunk_document(text)
    assert len(chunks(sql_conn, "big.md")) == 3
    indexes = sql_conn.execute("SELECT chunk_index FROM memory_chunks ORDER BY 1").fetchall()
    assert indexes == [(0,), (1,), (2,)]
    tsv = sql_conn.execute(
        "SELECT count(*) FROM memory_chunks WHERE content_tsv @@ "
        "plainto_tsquery('english', 'word1429')"
    ).fetchone()
    assert tsv == (2,)


def test_concurrent_creation_makes_one_row(
    database: Database, sql_conn: psycopg.Connection[Any]
) -> None:
    """IronClaw's UNIQUE does not stop duplicates while agent_id is NULL; our lock must."""
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        store = database.store(Scope("default"))
        barrier.wait()
        try:
            store.commit_document(Write(None, "race.md", f"writer {n}"), NO_ATTRS)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors
    count = sql_conn.execute("SELECT count(*) FROM memory_documents WHERE path = 'race.md'")
    assert count.fetchone() == (1,)


def test_scopes_never_touch_other_users(
    database: Database, sql_conn: psycopg.Connection[Any]
) -> None:
    alice = database.store(Scope("alice"))
    bob = database.store(Scope("bob"))
    secret = bob.commit_document(Write(None, "secret.md", "bob only"), NO_ATTRS)
    assert [d.path for d in alice.load_documents()] == []
    assert alice.read_content(secret.doc_id) is None
    # Alice naming Bob's id writes her own document, never his.
    mine = alice.commit_document(Write(secret.doc_id, "secret.md", "alice"), NO_ATTRS)
    assert mine.doc_id != secret.doc_id
    assert not alice.delete_document(secret.doc_id)
    assert alice.rename_document(Rename(secret.doc_id, "stolen.md"), NO_ATTRS) is None
    alice.rename_directory("", "x", None)  # a crafted empty prefix moves nothing of Bob's
    assert rows(sql_conn, "bob") == [("secret.md", "bob only")]


def test_rename_document_replaces_target(
    store: MetaStore, sql_conn: psycopg.Connection[Any]
) -> None:
    a = store.commit_document(Write(None, "a.md", "A"), NO_ATTRS)
    b = store.commit_document(Write(None, "b.md", "B"), NO_ATTRS)
    store.rename_document(
        Rename(a.doc_id, "b.md"), FileAttrs(0o600, 123_000), Overwritten(b.doc_id)
    )
    assert rows(sql_conn) == [("b.md", "A")]
    [doc] = store.load_documents()
    assert doc.id == a.doc_id and doc.attrs == FileAttrs(0o600, 123_000)
    assert chunks(sql_conn, "b.md") == ["A"]


def test_attrs_are_trusted_only_against_their_version(
    store: MetaStore, sql_conn: psycopg.Connection[Any]
) -> None:
    a = store.commit_document(Write(None, "a.md", "A"), NO_ATTRS)
    assert store.set_attrs(a.doc_id, FileAttrs(0o600, 42))
    assert store.load_documents()[0].attrs == FileAttrs(0o600, 42)
    sql_conn.execute("UPDATE memory_documents SET content = 'changed by the agent'")
    assert store.load_documents()[0].attrs == FileAttrs()


def test_ironclaw_database_without_versions(
    database_url: str, sql_conn: psycopg.Connection[Any]
) -> None:
    apply_ironclaw_migrations(database_url, with_versions=False)
    db = open_database(Settings(database_url=database_url))
    try:
        store = db.store(Scope("default"))
        a = store.commit_document(Write(None, "MEMORY.md", "one"), NO_ATTRS)
        b = store.commit_document(Write(a.doc_id, "MEMORY.md", "two"), NO_ATTRS)
        assert not b.versioned
        assert rows(sql_conn) == [("MEMORY.md", "two")]
        assert chunks(sql_conn, "MEMORY.md") == ["two"]
    finally:
        db.close()


def test_reindex_rewrites_only_changed_chunks(
    store: MetaStore, sql_conn: psycopg.Connection[Any]
) -> None:
    text = " ".join(f"w{i}" for i in range(2000))  # 3 chunks
    doc = store.commit_document(Write(None, "long.md", text), NO_ATTRS)
    sql_conn.execute("UPDATE memory_chunks SET embedding = '[1,0,0]'")
    before = dict(sql_conn.execute("SELECT chunk_index, id FROM memory_chunks").fetchall())
    store.commit_document(Write(doc.doc_id, "long.md", text + " appended"), NO_ATTRS)
    assert chunks(sql_conn, "long.md") == chunk_document(text + " appended")
    after = sql_conn.execute(
        "SELECT chunk_index, id, embedding IS NULL FROM memory_chunks ORDER BY chunk_index"
    ).fetchall()
    assert [(i, cid == before[i], cleared) for i, cid, cleared in after] == [
        (0, True, False),  # unchanged text keeps its row and embedding
        (1, True, False),
        (2, True, True),  # changed text: rewritten, embedding cleared for the backfill
    ]
    store.commit_document(Write(doc.doc_id, "long.md", "short now"), NO_ATTRS)
    assert chunks(sql_conn, "long.md") == ["short now"]
    store.commit_document(Write(doc.doc_id, "long.md", "   "), NO_ATTRS)
    assert chunks(sql_conn, "long.md") == []


def test_stale_planner_statistics_are_refreshed(
    store: MetaStore, sql_conn: psycopg.Connection[Any]
) -> None:
    # Keep autovacuum from analyzing first (this test's own throwaway database).
    for table in ("memory_documents", "memory_chunks"):
        sql_conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")  # type: ignore[arg-type]
    store.commit_documents(
        [(None, f"bulk/{i}.md", f"note {i} about deploys", NO_ATTRS) for i in range(600)]
    )
    analyzed_tables: list[str] = []
    deadline = time.monotonic() + 15  # cumulative statistics reach the view asynchronously
    while not analyzed_tables and time.monotonic() < deadline:
        analyzed_tables = PlannerStatistics(store.pool).refresh() or []
        time.sleep(0.2)
    assert sorted(analyzed_tables) == ["memory_chunks", "memory_documents"]
    analyzed = sql_conn.execute(
        "SELECT count(*) FROM pg_stat_user_tables WHERE relname IN "
        "('memory_chunks', 'memory_documents') AND last_analyze IS NOT NULL"
    ).fetchone()
    assert analyzed == (2,)
    assert PlannerStatistics(store.pool).refresh() == []  # fresh: nothing to do


def test_the_workspace_is_read_page_by_page_for_migrate_and_doctor(
    database: Database, sql_conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``memfs migrate``'s read of every document with its versions, and ``memfs doctor``'s
    comparison of every document's chunks, go by path a page at a time (``scoped.pages``):
    every document once, each with its own versions, across page boundaries."""
    store = database.store(Scope("default"))
    for n in range(5):
        store.commit_document(Write(None, f"p{n}.md", f"first {n}\n"), FileAttrs())
        store.commit_document(Write(None, f"p{n}.md", f"second {n}\n"), FileAttrs())
    history = database.legacy_history(Settings())
    assert history is not None
    found = {doc.path: doc for doc in history.histories(batch=2)}
    assert sorted(found) == [f"p{n}.md" for n in range(5)]
    for n in range(5):
        doc = found[f"p{n}.md"]
        assert (doc.content, [v.content for v in doc.versions]) == (
            f"second {n}\n",
            [f"first {n}\n"],
        )
    monkeypatch.setattr("memfs.db.legacy.health.BATCH", 2)
    sql_conn.execute(
        "DELETE FROM memory_chunks WHERE document_id IN "
        "(SELECT id FROM memory_documents WHERE path IN ('p1.md', 'p4.md'))"
    )
    assert database.health(Settings()).stale_chunks() == ["p1.md", "p4.md"]
