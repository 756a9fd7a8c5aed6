"""The one-round-trip save decides on what the mount last saw; the server checks it.

Each test makes the remembered row (or folder) stale behind the store's back, the way the
agent or another mount would, and checks that the save still does what IronClaw's write
does on the row as it really is (``MetaStore._commit``'s careful path).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import psycopg
import pytest

from memfs.config import Settings
from memfs.db import Database, FileAttrs, MetaStore, Scope, open_database
from memfs.db.records import SaveOptions, Write
from memfs.errors import WriteRefused


@pytest.fixture
def store(database: Database) -> MetaStore:
    return database.store(Scope("default"))


def versions(conn: psycopg.Connection[Any], path: str) -> list[str]:
    rows = conn.execute(
        "SELECT v.content FROM memory_document_versions v JOIN memory_documents d "
        "ON d.id = v.document_id WHERE d.path = %s ORDER BY v.version",
        (path,),
    ).fetchall()
    return [r[0] for r in rows]


def content(conn: psycopg.Connection[Any], path: str) -> list[str]:
    return [r[0] for r in conn.execute("SELECT content FROM memory_documents WHERE path = %s",
                                       (path,))]  # fmt: skip


def save(store: MetaStore, path: str, text: str, previous: Any = None) -> Any:
    doc_id, updated_at = (previous.doc_id, previous.updated_at) if previous else (None, None)
    return store.commit_document(
        Write(doc_id, path, text), FileAttrs(), SaveOptions(expected=updated_at, index_now=False)
    )


def test_known_rows_make_saves_fast_and_identical(
    store: MetaStore, sql_conn: psycopg.Connection[Any]
) -> None:
    first = save(store, "notes/a.md", "one\n")
    second = save(store, "notes/a.md", "two\n", first)
    assert store.known.row(second.doc_id) is not None  # remembered: the next save is fast
    third = save(store, "notes/a.md", "three\n", second)
    assert (third.changed, third.versioned, third.created) == (True, True, False)
    assert content(sql_conn, "notes/a.md") == ["three\n"]
    assert versions(sql_conn, "notes/a.md") == ["one\n", "two\n"]
    queued = sql_conn.execute("SELECT count(*) FROM memfs.reindex_queue").fetchone()
    assert queued == (1,)  # re-chunked by the worker, as every save


def test_another_writers_change_is_kept(
    store: MetaStore, sql_conn: psycopg.Connection[Any]
) -> None:
    first = save(store, "a.md", "mine\n")
    second = save(store, "a.md", "mine, again\n", first)
    sql_conn.execute("UPDATE memory_documents SET content = 'agent\n' WHERE path = 'a.md'")
    third = save(store, "a.md", "mine, third\n", second)  # based on what this mount saw
    assert third.conflict is not None
    assert content(sql_conn, "a.md") == ["mine, third\n"]
    assert "agent\n" in versions(sql_conn, "a.md")


@pytest.mark.parametrize("where", ["own", "folder"])
def test_skip_versioning_set_behind_the_mount_is_honoured(
    store: MetaStore, sql_conn: psycopg.Connection[Any], where: str
) -> None:
    first = save(store, "cfg/doc.md", "v1\n")
    second = save(store, "cfg/doc.md", "v2\n", first)
    if where == "own":
        sql_conn.execute(
            "UPDATE memory_documents SET metadata = '{\"skip_versioning\": true}' "
            "WHERE path = 'cfg/doc.md'"
        )
        # The mount hears of the new version (change feed) but not of the metadata.
        moved = sql_conn.execute(
            "SELECT updated_at FROM memory_documents WHERE path = 'cfg/doc.md'"
        ).fetchone()
        assert moved is not None
        second = dataclasses.replace(second, updated_at=moved[0])
    else:
        sql_conn.execute(
            "INSERT INTO memory_documents (user_id, path, content, metadata) VALUES "
            "('default', 'cfg/.config', '', '{\"skip_versioning\": true}')"
        )
    save(store, "cfg/doc.md", "v3\n", second)
    assert content(sql_conn, "cfg/doc.md") == ["v3\n"]
    assert versions(sql_conn, "cfg/doc.md") == ["v1\n"]  # v2 was not kept: versioning is off


def test_a_folder_schema_added_behind_the_mount_refuses(
    store: MetaStore, sql_conn: psycopg.Connection[Any]
) -> None:
    save(store, "cfg/first.json", "{}")  # the folder is now known (no .config)
    schema = {"type": "object", "required": ["id"]}
    sql_conn.execute(
        "INSERT INTO memory_documents (user_id, path, content, metadata) VALUES "
        "('default', 'cfg/.config', '', %s)",
        (json.dumps({"schema": schema}),),
    )
    with pytest.raises(WriteRefused):
        save(store, "cfg/second.json", '{"name": "no id"}')
    assert content(sql_conn, "cfg/second.json") == []


def test_a_path_taken_behind_the_mount_gets_no_second_row(
    store: MetaStore, sql_conn: psycopg.Connection[Any]
) -> None:
    save(store, "d/first.md", "learns the folder\n")
    sql_conn.execute(
        "INSERT INTO memory_documents (user_id, path, content) "
        "VALUES ('default', 'd/x.md', 'agent\n')"
    )
    result = save(store, "d/x.md", "mine\n")  # the mount never saw the agent's row
    assert not result.created
    assert content(sql_conn, "d/x.md") == ["mine\n"]
    assert versions(sql_conn, "d/x.md") == ["agent\n"]


def test_a_guess_of_no_config_above_a_new_document_is_checked(
    store: MetaStore, sql_conn: psycopg.Connection[Any]
) -> None:
    """The mount sees no ``.config`` above a new file (its tree has none) and saves it in
    one round trip on that guess; a ``.config`` the mount has not seen yet (the agent wrote
    it a moment ago) is found by the guard and honoured by the careful save."""
    unconfigured = store.commit_document(
        Write(None, "fresh/a.md", "one\n"),
        FileAttrs(),
        SaveOptions(index_now=False, unconfigured=True),
    )
    assert unconfigured.created and content(sql_conn, "fresh/a.md") == ["one\n"]
    schema = {"type": "object", "required": ["id"]}
    sql_conn.execute(
        "INSERT INTO memory_documents (user_id, path, content, metadata) VALUES "
        "('default', 'cfg2/.config', '', %s)",
        (json.dumps({"schema": schema}),),
    )
    with pytest.raises(WriteRefused):
        store.commit_document(
            Write(None, "cfg2/x.json", '{"name": "no id"}'),
            FileAttrs(),
            SaveOptions(index_now=False, unconfigured=True),
        )
    assert content(sql_conn, "cfg2/x.json") == []


def test_a_guard_that_aborts_a_save_leaves_its_connection_fit_for_the_next(
    database_url: str, sql_conn: psycopg.Connection[Any]
) -> None:
    """A save's statements are prepared on the server (planned once per connection).  The
    first save that prepares them can be the one a stale guard aborts: the statements
    queued after the guard are never parsed, so a client that thought them prepared
    would fail the connection's next saves ("prepared statement does not exist")."""
    database = open_database(Settings(database_url=database_url, pool_size=1))
    try:
        store = database.store(Scope("default"))
        first = save(store, "a.md", "one\n")  # the insert path: no update prepared yet
        sql_conn.execute("UPDATE memory_documents SET content = 'agent\n' WHERE path = 'a.md'")
        second = save(store, "a.md", "two\n", first)  # guard fails; the careful path saves
        assert second.conflict is not None
        later = second
        for n in range(8):  # prepared and reused on the one connection
            later = save(store, "a.md", f"three {n}\n", later)
        assert content(sql_conn, "a.md") == ["three 7\n"]
        assert "agent\n" in versions(sql_conn, "a.md")
        with database.pool.connection() as conn:
            prepared = conn.execute(
                "SELECT statement FROM pg_prepared_statements WHERE from_sql IS FALSE"
            ).fetchall()
        assert any("memory_document_versions" in row[0] for row in prepared)
        assert any("UPDATE memory_documents SET content" in row[0] for row in prepared)
    finally:
        database.close()
