"""The scope's GIN index a Reborn search declares (docs/ironclaw/reborn.md §5.4), made by
memfs as IronClaw's search makes it, but concurrently and off the search's path.

IronClaw's search inserts the scope's spec row and creates the index under its own name;
memfs must use exactly that name (facts, requirement 14), hold no long lock on the table
(requirement 16), and rank the same with the index as without it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from memfs.config import Settings
from memfs.db import open_database
from memfs.db.reborn.layout import RebornScope
from memfs.db.reborn.search_store import CANDIDATES, RebornSearchStore
from memfs.db.reborn.store import RebornStore
from memfs.ironclaw.fts_names import scope_like_pattern
from memfs.search.reborn import RebornSearch
from tests.model.test_reborn_store import reborn_schema, tea_documents

SCOPE = RebornScope("reborn-cli", "alice", "reborn-cli-agent")
#: 53 characters, ``_`` and 8 hex digits of BLAKE3 (the rule is checked against IronClaw's
#: own name for its CLI scope in tests/unit).
NAME = "idx_rfs_memory_tenants_reborn_cli_users_alice_agents__fa2ab14e"


async def _direct(fn: Any, *args: Any) -> Any:
    return fn(*args)


@pytest.fixture
def store(database_url: str) -> Iterator[RebornStore]:
    reborn_schema(database_url)
    pool: ConnectionPool[psycopg.Connection[tuple[Any, ...]]] = ConnectionPool(
        database_url, min_size=1, max_size=2, kwargs={"autocommit": True}, open=True
    )
    yield RebornStore(pool, SCOPE, origin="t")
    pool.close()


def _searcher(store: RebornStore, url: str) -> RebornSearchStore:
    return RebornSearchStore(
        store.pool, store.scope, index_session=lambda: psycopg.connect(url, autocommit=True)
    )


def _index(conn: psycopg.Connection[Any], name: str) -> tuple[bool, str] | None:
    row = conn.execute(
        "SELECT i.indisvalid, pg_get_indexdef(i.indexrelid) FROM pg_index i "
        "JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = %s",
        (name,),
    ).fetchone()
    return None if row is None else (bool(row[0]), str(row[1]))


async def test_a_search_declares_the_spec_and_makes_ironclaws_index(
    store: RebornStore, sql_conn: psycopg.Connection[Any], database_url: str
) -> None:
    """The spec row IronClaw's search inserts, and a valid GIN index under IronClaw's name
    over its tsvector, partial on the scope's range; the ranking the same before and
    after the index is there."""
    tea_documents(store)
    searcher = _searcher(store, database_url)
    engine = RebornSearch(searcher, _direct, store.id_of)
    before = [(r.path, r.fts_rank, r.score) for r in (await engine.search("user tea")).results]
    assert searcher.wait_for_index(30)
    assert sql_conn.execute(
        "SELECT prefix, name, keys::text, kind FROM root_filesystem_index_specs"
    ).fetchall() == [(SCOPE.prefix, "memory_chunks_content_fts", '["content"]', "fts")]
    name = searcher.index_name
    assert name == NAME
    found = _index(sql_conn, name)
    assert found is not None
    valid, definition = found
    assert valid
    assert "USING gin (to_tsvector('english'::regconfig, COALESCE((indexed ->> 'content'" in (
        definition
    )
    assert f"WHERE ((path = '{SCOPE.prefix}'::text) OR (path ~~ " in definition
    after = [(r.path, r.fts_rank, r.score) for r in (await engine.search("user tea")).results]
    assert after == before and [p for p, _, _ in after] == ["threads/2026-03-03.md", "MEMORY.md"]
    # Only one index of the kind: a second search makes none again.
    again = _searcher(store, database_url)
    await RebornSearch(again, _direct, store.id_of).search("tea")
    assert again.wait_for_index(30)
    assert sql_conn.execute(
        "SELECT count(*) FROM pg_indexes WHERE indexname LIKE 'idx_rfs_%'"
    ).fetchone() == (1,)


async def test_the_search_query_can_use_the_partial_index(
    store: RebornStore, sql_conn: psycopg.Connection[Any], database_url: str
) -> None:
    """The search gives the scope's range in the index's own form too, so the planner uses
    the partial index for a rare word among many chunks (a range-only query cannot be
    proved to imply the ``LIKE`` predicate, and scans every chunk of the scope at every
    search: 64 s at 100,000 documents).  Fails with the second range taken out."""
    tea_documents(store)
    sql_conn.execute(
        "INSERT INTO root_filesystem_entries (path, contents, kind, content_type, indexed, "
        "version) SELECT %s || '/n' || i || '.md.chunks/0', ''::bytea, 'memory_chunk', "
        "'application/json', jsonb_build_object('content', 'coffee black sugar ' || i, "
        "'doc_relative_path', 'n' || i || '.md', 'chunk_index', 0), 1 "
        "FROM generate_series(1, 3000) AS i",
        (SCOPE.prefix,),
    )
    sql_conn.execute("ANALYZE root_filesystem_entries")
    searcher = _searcher(store, database_url)
    searcher.make_index()
    p = SCOPE.prefix
    plan = "\n".join(
        row[0]
        for row in sql_conn.execute(
            "EXPLAIN " + CANDIDATES,
            {"q": "tea", "p": p, "like": scope_like_pattern(p), "limit": 20},
        )
    )
    assert f"Bitmap Index Scan on {searcher.index_name}" in plan, plan
    assert [r.path for r in searcher.search(["tea"], 20)] == [
        p + "/threads/2026-03-03.md.chunks/0", p + "/MEMORY.md.chunks/0",
    ]  # fmt: skip


async def test_an_index_build_cut_short_is_made_again(
    store: RebornStore, sql_conn: psycopg.Connection[Any], database_url: str
) -> None:
    """A concurrent build cancelled mid-way (a daemon killed) leaves an invalid index that
    IronClaw's ``IF NOT EXISTS`` would keep for ever; the next mount's search drops it and
    makes it again."""
    tea_documents(store)
    searcher = _searcher(store, database_url)
    name = searcher.index_name
    holder = psycopg.connect(database_url)  # an open writing transaction: the build waits
    holder.execute("UPDATE root_filesystem_entries SET version = version WHERE false")
    holder.execute("SELECT txid_current()")
    builder = psycopg.connect(database_url, autocommit=True)
    pid = builder.info.backend_pid
    failed: list[BaseException] = []

    def build() -> None:
        try:
            builder.execute(
                f"CREATE INDEX CONCURRENTLY {name} ON root_filesystem_entries USING gin "
                "((to_tsvector('english', coalesce(indexed ->> 'content', ''))))"
            )
        except psycopg.Error as error:
            failed.append(error)

    thread = threading.Thread(target=build)
    thread.start()
    deadline = time.monotonic() + 10
    while _index(sql_conn, name) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    sql_conn.execute("SELECT pg_cancel_backend(%s)", (pid,))
    thread.join(10)
    holder.rollback()
    holder.close()
    builder.close()
    assert failed, "the build was not cut short"
    cut = _index(sql_conn, name)
    assert cut is not None and not cut[0]  # invalid, as a killed build leaves it
    searcher.make_index()
    made = _index(sql_conn, name)
    assert made is not None and made[0]
    assert "WHERE ((path = " in made[1]  # memfs's, partial as IronClaw's


async def test_another_spec_for_the_name_makes_no_index(
    store: RebornStore, sql_conn: psycopg.Connection[Any], database_url: str
) -> None:
    """A spec row of the same name but other keys is IronClaw's error; memfs makes no index
    over it and still answers from a scan."""
    tea_documents(store)
    sql_conn.execute(
        "INSERT INTO root_filesystem_index_specs (prefix, name, keys, kind) "
        "VALUES (%s, 'memory_chunks_content_fts', '[\"title\"]', 'fts')",
        (SCOPE.prefix,),
    )
    searcher = _searcher(store, database_url)
    results = (await RebornSearch(searcher, _direct, store.id_of).search("tea")).results
    assert [r.path for r in results] == ["threads/2026-03-03.md", "MEMORY.md"]
    assert searcher.wait_for_index(30)
    assert _index(sql_conn, searcher.index_name) is None


def test_read_only_makes_no_index(database_url: str) -> None:
    """A read-only mount or command makes nothing: no session to build on."""
    reborn_schema(database_url)
    writable = open_database(Settings(database_url=database_url))
    try:
        assert writable.index_session(Settings(database_url=database_url)) is not None
        assert writable.index_session(Settings(database_url=database_url, read_only=True)) is None
    finally:
        writable.close()
    command = open_database(Settings(database_url=database_url), read_only=True)
    try:
        assert command.index_session(Settings(database_url=database_url)) is None
    finally:
        command.close()
