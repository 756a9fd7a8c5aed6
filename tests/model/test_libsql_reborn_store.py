"""The Reborn rules on IronClaw's libSQL file (``RebornStore`` over ``SqliteRows``).

The file is built as IronClaw v1.1+ builds it (``tests.ironclaw_libsql``, a used database:
its projection triggers fire on every write); the store writes through the same rules as on
PostgreSQL.  The rows are compared with the libsql facts' conformance examples (§10.2) byte
for byte, JSON text included, with IronClaw's storage classes (§4: a wrong one crashes it)
and timestamp format; IronClaw's FTS triggers, once a search created them, follow memfs's
writes.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memfs.db.interface import FileAttrs
from memfs.db.reborn.layout import RebornScope
from memfs.db.reborn.libsql.rows import SqliteRows, open_file, own_file
from memfs.db.reborn.store import RebornStore
from memfs.db.records import Rename, Replacement, SaveOptions, Write
from memfs.errors import WriteRefused
from tests.ironclaw_libsql import reborn_local_dev, search_scope

S = "/memory/tenants/reborn-cli/users/reborn-cli/agents/reborn-cli-agent/projects/_none"
K = '{"agent_id":"reborn-cli-agent","tenant_id":"reborn-cli","user_id":"reborn-cli"}'
CHANGED_BY = "tenant:reborn-cli:user:reborn-cli:agent:reborn-cli-agent:project:_none"
HELLO_HASH = "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
HELLOWORLD_HASH = "sha256:8cd07f3a5ff98f2a78cfc366c13fb123eb8d29c1ca37c79df190425d5b9e424d"
TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
NO_ATTRS = FileAttrs()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return reborn_local_dev(tmp_path / "reborn-local-dev.db")


@pytest.fixture
def store(db: Path) -> Iterator[RebornStore]:
    opened = open_file(db)
    yield RebornStore(opened, RebornScope(), origin="t", rows=SqliteRows(opened))
    opened.close()


def rows(db: Path) -> dict[str, dict[str, Any]]:
    """Every memory row, by path relative to the scope, with its columns' storage classes
    checked against IronClaw's (§4) and its times against IronClaw's format."""
    found = {}
    with sqlite3.connect(db) as conn:
        for row in conn.execute(
            "SELECT path, contents, typeof(contents), kind, content_type, indexed, "
            "typeof(indexed), version, typeof(version), is_dir, typeof(is_dir), created_at, "
            "updated_at FROM root_filesystem_entries WHERE path LIKE '/memory/%' ORDER BY path"
        ):
            path, contents, contents_class, kind, ctype, indexed, indexed_class = row[:7]
            version, version_class, is_dir, is_dir_class, created, updated = row[7:]
            assert (contents_class, indexed_class, version_class, is_dir_class) == (
                "blob", "text", "integer", "integer"), path  # fmt: skip
            assert TIME.match(created) and TIME.match(updated), (path, created, updated)
            assert created <= updated
            found[path.removeprefix(S + "/")] = {
                "contents": contents, "kind": kind, "type": ctype, "indexed": indexed,
                "version": version, "is_dir": is_dir,
            }  # fmt: skip
    return found


def doc(contents: bytes, version: int) -> dict[str, Any]:
    return {"contents": contents, "kind": "memory_document", "type": "application/json",
            "indexed": K, "version": version, "is_dir": 0}  # fmt: skip


def chunk(indexed: str, contents: bytes) -> dict[str, Any]:
    return {"contents": contents, "kind": "memory_chunk", "type": "application/json",
            "indexed": indexed, "version": 1, "is_dir": 0}  # fmt: skip


def test_l1_l2_l3_l5_memfs_writes_the_rows_ironclaw_writes(store: RebornStore, db: Path) -> None:
    """The facts' §10.2 rows, byte for byte (L2 is IronClaw's append; memfs writes the
    same content as an overwrite, which leaves the same rows)."""
    store.commit_document(Write(None, "notes/a.md", "hello"), NO_ATTRS)  # L1
    chunk_a = ('{"agent_id":"reborn-cli-agent","chunk_index":0,"content":"hello",'
               '"doc_relative_path":"notes/a.md","tenant_id":"reborn-cli",'
               '"user_id":"reborn-cli"}')  # fmt: skip
    assert rows(db) == {"notes/a.md": doc(b"hello", 1),
                        "notes/a.md.chunks/0": chunk(chunk_a, b"hello")}  # fmt: skip
    store.commit_document(Write(None, "notes/a.md", "helloworld\n"), NO_ATTRS)  # L2
    found = rows(db)
    assert found["notes/a.md"] == doc(b"helloworld\n", 2)
    assert found["notes/a.md.versions/1"] == {
        "contents": ('{"changed_by":"' + CHANGED_BY + '","content":"hello","content_hash":"'
                     + HELLO_HASH + '"}').encode(),
        "kind": "memory_document_version", "type": "application/json",
        "indexed": ('{"agent_id":"reborn-cli-agent","doc_relative_path":"notes/a.md",'
                    '"tenant_id":"reborn-cli","user_id":"reborn-cli","version":1}'),
        "version": 1, "is_dir": 0,
    }  # fmt: skip
    store.commit_document(Write(None, "MEMORY.md", "The user likes green tea.\n"), NO_ATTRS)  # L3
    assert rows(db)["MEMORY.md.chunks/0"]["indexed"] == (
        '{"agent_id":"reborn-cli-agent","chunk_index":0,"content":"The user likes green tea.\\n",'
        '"doc_relative_path":"MEMORY.md","tenant_id":"reborn-cli","user_id":"reborn-cli"}'
    )
    store.commit_document(Write(None, "notes/a.md", "tea time"), NO_ATTRS)  # L5
    found = rows(db)
    assert found["notes/a.md"] == doc(b"tea time", 3)
    assert HELLOWORLD_HASH.encode() in found["notes/a.md.versions/2"]["contents"]
    assert sorted(found) == ["MEMORY.md", "MEMORY.md.chunks/0", "notes/a.md",
                             "notes/a.md.chunks/0", "notes/a.md.versions/1",
                             "notes/a.md.versions/2"]  # fmt: skip


def test_created_at_is_the_column_default_and_updated_at_moves(
    store: RebornStore, db: Path
) -> None:
    store.commit_document(Write(None, "a.md", "one\n"), NO_ATTRS)
    with sqlite3.connect(db) as conn:
        (created, first), = conn.execute(
            "SELECT created_at, updated_at FROM root_filesystem_entries WHERE path = ?",
            (f"{S}/a.md",),
        )  # fmt: skip
    store.commit_document(Write(None, "a.md", "two\n"), NO_ATTRS)
    with sqlite3.connect(db) as conn:
        (created_after, second), = conn.execute(
            "SELECT created_at, updated_at FROM root_filesystem_entries WHERE path = ?",
            (f"{S}/a.md",),
        )  # fmt: skip
    assert created_after == created and second >= first


def test_ironclaws_full_text_triggers_follow_memfs_writes(store: RebornStore, db: Path) -> None:
    """Once IronClaw's first search made the scope's FTS5 table, its triggers index what
    memfs writes, moves and deletes (memfs never writes that table itself)."""
    store.commit_document(Write(None, "MEMORY.md", "The user likes green tea.\n"), NO_ATTRS)
    table = search_scope(db, S)
    store.commit_document(Write(None, "notes/a.md", "tea time"), NO_ATTRS)

    def matches(term: str) -> list[str]:
        with sqlite3.connect(db) as conn:
            return sorted(r[0].removeprefix(S + "/") for r in conn.execute(
                f"SELECT path FROM {table} WHERE {table} MATCH ?", (f'"{term}"',)
            ))  # fmt: skip

    assert matches("tea") == ["MEMORY.md.chunks/0", "notes/a.md.chunks/0"]
    moved = store.rename_document(Rename(store.id_of("notes/a.md"), "b.md"), NO_ATTRS)
    assert moved is not None
    assert matches("tea") == ["MEMORY.md.chunks/0", "b.md.chunks/0"]
    assert store.delete_document(store.id_of("b.md"))
    assert matches("tea") == ["MEMORY.md.chunks/0"]


def test_delete_rename_and_a_folder_move_carry_the_sidecars(store: RebornStore, db: Path) -> None:
    store.commit_document(Write(None, "d/a.md", "one\n"), NO_ATTRS)
    store.commit_document(Write(None, "d/a.md", "two\n"), NO_ATTRS)
    store.commit_document(Write(None, "d/b.md", "bee\n"), NO_ATTRS)
    moved = store.rename_directory("d", "e", None)
    assert set(moved) == {store.id_of("e/a.md"), store.id_of("e/b.md")}
    found = rows(db)
    assert sorted(found) == ["e/a.md", "e/a.md.chunks/0", "e/a.md.versions/1", "e/b.md",
                             "e/b.md.chunks/0"]  # fmt: skip
    assert '"doc_relative_path":"e/a.md"' in found["e/a.md.versions/1"]["indexed"]
    assert '"doc_relative_path":"e/a.md"' in found["e/a.md.chunks/0"]["indexed"]
    assert [d.path for d in store.load_documents()] == ["e/a.md", "e/b.md"]
    assert store.delete_document(store.id_of("e/a.md"))
    assert sorted(rows(db)) == ["e/b.md", "e/b.md.chunks/0"]


def test_a_file_renamed_over_another_keeps_both_histories(store: RebornStore, db: Path) -> None:
    store.commit_document(Write(None, "a.md", "a1\n"), NO_ATTRS)
    store.commit_document(Write(None, "a.md", "a2\n"), NO_ATTRS)
    store.commit_document(Write(None, "b.md", "b1\n"), NO_ATTRS)
    store.commit_document(Write(None, "b.md", "b2\n"), NO_ATTRS)
    result = store.replace_document(
        Replacement(store.id_of("a.md"), store.id_of("b.md"), "b.md", None, NO_ATTRS),
        SaveOptions(index_now=False),
    )
    assert result is not None
    found = rows(db)
    assert found["b.md"]["contents"] == b"a2\n"
    versions = sorted(p for p in found if ".versions/" in p)
    assert versions == ["b.md.versions/1", "b.md.versions/2", "b.md.versions/3"]
    assert b'"content":"b1\\n"' in found["b.md.versions/1"]["contents"]
    assert b'"content":"b2\\n"' in found["b.md.versions/2"]["contents"]  # what it replaced
    assert b'"content":"a1\\n"' in found["b.md.versions/3"]["contents"]  # a.md's, carried
    assert "a.md" not in found


def test_another_writers_change_is_kept_as_a_version(store: RebornStore, db: Path) -> None:
    first = store.commit_document(Write(None, "a.md", "mine\n"), NO_ATTRS)
    with sqlite3.connect(db) as conn:  # the agent's put: compare-and-swap on version
        conn.execute(
            "UPDATE root_filesystem_entries SET contents = ?, version = version + 1, "
            "updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE path = ? AND version = 1",
            (b"agent\n", f"{S}/a.md"),
        )
    result = store.commit_document(
        Write(first.doc_id, "a.md", "mine, edited\n"),
        NO_ATTRS,
        SaveOptions(expected=first.updated_at),
    )
    assert result.conflict == "version 1"
    assert result.replaced_hash is not None
    assert store.content_by_hash(first.doc_id, result.replaced_hash) == b"agent\n"
    assert rows(db)["a.md"]["contents"] == b"mine, edited\n"


def test_contents_another_tool_wrote_as_text_read_and_are_saved_as_a_blob(
    store: RebornStore, db: Path
) -> None:
    """``contents || 'x'`` in SQL leaves text where IronClaw keeps a blob (found by the
    scale benchmark's agent: every open of such a row answered EIO).  memfs reads it as its
    UTF-8 bytes, and its next save writes a blob again."""
    first = store.commit_document(Write(None, "a.md", "mine\n"), NO_ATTRS)
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE root_filesystem_entries SET contents = contents || ?, version = version + 1 "
            "WHERE path = ?",
            ("agent\n", f"{S}/a.md"),
        )
        (kind,) = conn.execute(
            "SELECT typeof(contents) FROM root_filesystem_entries WHERE path = ?", (f"{S}/a.md",)
        ).fetchone()
    assert kind == "text"
    content = store.read_content(first.doc_id)
    assert content is not None and content.data == b"mine\nagent\n"
    store.commit_document(
        Write(first.doc_id, "a.md", "mine\nagent\nmore\n"),
        NO_ATTRS,
        SaveOptions(expected=content.version),
    )
    assert rows(db)["a.md"]["contents"] == b"mine\nagent\nmore\n"  # a blob, checked there


def test_two_writes_within_one_millisecond_are_two_versions_to_the_mount(
    store: RebornStore,
) -> None:
    """IronClaw's timestamps have millisecond resolution: the mount's version token adds
    the row's version, so back-to-back writes are never taken for one."""
    tokens = {store.commit_document(Write(None, "a.md", f"{n}\n"), NO_ATTRS).updated_at
              for n in range(20)}  # fmt: skip
    assert len(tokens) == 20


def test_attributes_and_kept_folders_live_in_memfss_own_file(store: RebornStore, db: Path) -> None:
    result = store.commit_document(Write(None, "a.md", "x\n"), FileAttrs(0o600, 123))
    store.create_directory("empty")
    assert store.load_directories() == ["empty"]
    assert [d.attrs for d in store.load_documents()] == [FileAttrs(0o600, 123)]
    assert store.set_attrs(result.doc_id, FileAttrs(0o640, 456))
    assert [d.attrs for d in store.load_documents()] == [FileAttrs(0o640, 456)]
    own = own_file(db)
    assert own.stat().st_mode & 0o777 == 0o600
    with sqlite3.connect(db) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert not any("memfs" in t or "reborn_attrs" in t for t in tables)


def test_ironclaws_refusals_hold(store: RebornStore) -> None:
    with pytest.raises(WriteRefused):
        store.commit_document(Write(None, "a.md.versions/x.md", "x"), NO_ATTRS)
    store.commit_document(Write(None, "p.md", "x"), NO_ATTRS)
    with pytest.raises(WriteRefused):
        store.commit_document(Write(None, "p.md/child.md", "x"), NO_ATTRS)


def test_the_fingerprint_moves_with_every_change(store: RebornStore) -> None:
    before = store.fingerprint()
    store.commit_document(Write(None, "a.md", "x\n"), NO_ATTRS)
    created = store.fingerprint()
    store.commit_document(Write(None, "a.md", "y\n"), NO_ATTRS)
    updated = store.fingerprint()
    store.rename_document(Rename(store.id_of("a.md"), "b.md"), NO_ATTRS)
    moved = store.fingerprint()
    assert len({before, created, updated, moved}) == 4


def test_the_poll_reads_the_scope_only_when_another_connection_committed(
    store: RebornStore, db: Path
) -> None:
    """``PRAGMA data_version`` first: the scope's rows are read again only after another
    connection's commit (IronClaw's heartbeat here), and a change shows."""
    rows_engine = store.rows
    assert isinstance(rows_engine, SqliteRows)
    reads = []
    real = rows_engine._scope_fingerprint
    rows_engine._scope_fingerprint = lambda c, p: reads.append(p) or real(c, p)  # type: ignore[method-assign]
    first = store.fingerprint()
    assert store.fingerprint() == first and len(reads) == 1
    with sqlite3.connect(db) as conn:  # a heartbeat: not memory
        conn.execute("INSERT INTO root_filesystem_sequences (path, next_seq) VALUES ('/hb', 1)")
    assert store.fingerprint() == first and len(reads) == 2
    with sqlite3.connect(db) as conn:  # the agent's new document
        conn.execute(
            "INSERT INTO root_filesystem_entries (path, contents, kind, indexed, version) "
            "VALUES (?, X'78', 'memory_document', ?, 1)",
            (f"{S}/agent.md", K),
        )
    assert store.fingerprint() != first and len(reads) == 3
