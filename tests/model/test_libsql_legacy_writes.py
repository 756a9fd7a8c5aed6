"""Writing IronClaw's legacy (<= v1.0) libSQL file, ``ironclaw.db`` (libsql facts §8,
requirements 5-8, 12, 13).

Each test runs on the file as IronClaw v1.0 leaves it without embeddings (``plain``: stdlib
``sqlite3`` writes it) and with its vector index (``vector``: IronClaw's
``ensure_vector_index`` made by the libSQL engine; every memfs write then goes through the
libSQL engine in a child process, and IronClaw's side is checked with that engine too:
``PRAGMA integrity_check`` and ``vector_top_k``, which plain SQLite cannot run there).
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memfs.config import Settings
from memfs.db import open_libsql
from memfs.db.capabilities import ToolFile
from memfs.db.interface import FileAttrs
from memfs.db.legacy.libsql.writes import LegacyLibsqlWriter
from memfs.db.libsql.database import LibsqlDatabase
from memfs.db.records import Overwritten, Rename, Replacement, SaveOptions, Write
from memfs.db.workspace import Workspace
from memfs.errors import WriteRefused
from tests.ironclaw_libsql import (
    legacy_ironclaw_db,
    legacy_vector_index,
    legacy_write,
    legacy_write_by_libsql,
    libsql_statements,
)

TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


@pytest.fixture(params=["plain", "vector"])
def file(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    db = legacy_ironclaw_db(tmp_path / "ironclaw.db")
    legacy_write(db, "MEMORY.md", "The user likes green tea.\n")
    if request.param == "vector":
        legacy_vector_index(db, 4)
    return db


@pytest.fixture
def database(file: Path) -> Iterator[LibsqlDatabase]:
    opened = open_libsql(file)
    yield opened
    opened.close()


@pytest.fixture
def workspace(database: LibsqlDatabase) -> Workspace:
    settings = Settings(user_id="default")
    settings.given.add("user_id")
    return database.workspace(settings)


def store_of(workspace: Workspace) -> LegacyLibsqlWriter:
    store = workspace.documents
    assert isinstance(store, LegacyLibsqlWriter)
    return store


def rows(file: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with sqlite3.connect(f"file:{file}?mode=ro", uri=True) as conn:
        return conn.execute(sql, params).fetchall()


def ironclaw_checks(file: Path) -> None:
    """What IronClaw's own engine says of the file: intact, the vector index included."""
    (check,) = libsql_statements(file, ("PRAGMA integrity_check", ()))
    assert check == [["ok"]]


def ironclaw_writes(file: Path, path: str, text: str) -> None:
    """IronClaw v1.0's write, by its libSQL engine where it made its vector index."""
    if rows(file, "SELECT 1 FROM sqlite_master WHERE name = 'idx_memory_chunks_embedding'"):
        legacy_write_by_libsql(file, path, text)
    else:
        legacy_write(file, path, text)


def sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def test_a_save_leaves_ironclaw_s_rows(file: Path, workspace: Workspace) -> None:
    """A new document, then its overwrite: the document row (text id, UUIDv4, ``'{}'``
    metadata, IronClaw's timestamp format), the replaced content as version 1 with
    IronClaw's hash and the user as ``changed_by``, the chunks 0..n-1 in the FTS table."""
    store = store_of(workspace)
    first = store.commit_document(Write(None, "notes/a.md", "hello"), FileAttrs())
    second = store.commit_document(
        Write(first.doc_id, "notes/a.md", "hello world\n"),
        FileAttrs(),
        SaveOptions(expected=first.updated_at),
    )
    assert first.created and second.versioned and not second.created
    assert second.replaced_hash == sha("hello")
    (doc,) = rows(file, "SELECT id, user_id, agent_id, content, metadata, created_at, updated_at, "
                  "typeof(id) || typeof(content) || typeof(metadata) FROM memory_documents "
                  "WHERE path = 'notes/a.md'")  # fmt: skip
    assert doc[0] == str(first.doc_id) and UUID4.match(doc[0])
    assert doc[1:5] == ("default", None, "hello world\n", "{}")
    assert TIME.match(doc[5]) and TIME.match(doc[6]) and doc[7] == "texttexttext"
    (version,) = rows(file, "SELECT document_id, version, content, content_hash, changed_by, "
                      "created_at, typeof(id) FROM memory_document_versions")  # fmt: skip
    assert version[:5] == (str(first.doc_id), 1, "hello", sha("hello"), "default")
    assert TIME.match(version[5]) and version[6] == "text"
    chunks = rows(file, "SELECT chunk_index, content, typeof(embedding) FROM memory_chunks "
                  "WHERE document_id = ?", str(first.doc_id))  # fmt: skip
    assert chunks == [(0, "hello world\n", "null")]
    hits = rows(file, "SELECT content FROM memory_chunks_fts WHERE memory_chunks_fts MATCH 'world'")
    assert hits == [("hello world\n",)]
    ironclaw_checks(file)


def test_unchanged_chunks_keep_ironclaw_s_embedding(file: Path, workspace: Workspace) -> None:
    """IronClaw embeds chunks after it writes them; a save rewrites only the chunks whose
    text changed (their embedding cleared for IronClaw's backfill), so the rest keep theirs
    and its vector index finds them."""
    if not rows(file, "SELECT 1 FROM sqlite_master WHERE name = 'idx_memory_chunks_embedding'"):
        pytest.skip("no vector index on the plain file")
    store = store_of(workspace)
    text = "".join(f"paragraph {n} " + "word " * 200 + "\n\n" for n in range(4))
    saved = store.commit_document(Write(None, "long.md", text), FileAttrs())
    assert saved.chunks >= 2
    embed = "UPDATE memory_chunks SET embedding = vector32(?) WHERE document_id = ?"
    libsql_statements(file, (embed, ("[1,0,0,0]", str(saved.doc_id))))
    store.commit_document(
        Write(saved.doc_id, "long.md", text + "one more line\n"),
        FileAttrs(),
        SaveOptions(expected=saved.updated_at),
    )
    embedded = rows(file, "SELECT chunk_index, embedding IS NOT NULL FROM memory_chunks "
                    "WHERE document_id = ? ORDER BY chunk_index", str(saved.doc_id))  # fmt: skip
    assert embedded[0] == (0, 1) and embedded[-1] == (len(embedded) - 1, 0)
    (found,) = libsql_statements(file, (
        "SELECT c.chunk_index FROM vector_top_k('idx_memory_chunks_embedding', vector32(?), 10) "
        "t JOIN memory_chunks c ON c._rowid = t.id ORDER BY 1", ("[1,0,0,0]",)))  # fmt: skip
    assert [r[0] for r in found] == [i for i, e in embedded if e]
    ironclaw_checks(file)


def test_renames_deletes_and_folders(file: Path, workspace: Workspace) -> None:
    """A rename keeps the row (id, versions) and notes the move; a folder move moves every
    document below it and memfs's kept folders; a delete takes chunks and versions with the
    row (foreign keys on, as IronClaw has them) after keeping the document with its versions
    for ``memfs undelete``."""
    store = store_of(workspace)
    a = store.commit_document(Write(None, "notes/a.md", "one\n"), FileAttrs(mode=0o600))
    a2 = store.commit_document(
        Write(a.doc_id, "notes/a.md", "two\n"),
        FileAttrs(mode=0o600),
        SaveOptions(expected=a.updated_at),
    )
    store.create_directory("notes/empty")
    moved = store.rename_document(
        Rename(a.doc_id, "notes/b.md", "notes/a.md"), FileAttrs(mode=0o600)
    )
    assert moved is not None and moved.before == a2.updated_at
    folder = store.rename_directory("notes", "kept", None)
    assert set(folder) == {a.doc_id}
    listed = {r.path: r for r in store.load_documents()}
    assert sorted(listed) == ["MEMORY.md", "kept/b.md"]
    assert listed["kept/b.md"].attrs.mode == 0o600  # a move is not an edit
    assert listed["kept/b.md"].updated_at == folder[a.doc_id].after
    assert store.load_directories() == ["kept/empty"]
    assert rows(file, "SELECT count(*) FROM memory_document_versions") == [(1,)]
    assert store.delete_document(a.doc_id, seen=folder[a.doc_id].after)
    assert rows(file, "SELECT count(*) FROM memory_documents WHERE path = 'kept/b.md'") == [(0,)]
    assert rows(file, "SELECT count(*) FROM memory_document_versions") == [(0,)]
    assert rows(file, "SELECT count(*) FROM memory_chunks WHERE document_id = ?",
                str(a.doc_id)) == [(0,)]  # fmt: skip
    assert workspace.kept is not None
    (gone,) = workspace.kept.deletions("kept/b.md")
    kept = workspace.kept.kept_document(gone.id)
    assert kept is not None and kept.content == "two\n"
    assert [v.content for v in kept.versions] == ["one\n"]
    moves = workspace.kept.moves(a.updated_at)
    assert [(m.old_path, m.new_path) for m in moves] == [
        ("notes/a.md", "notes/b.md"), ("notes/b.md", "kept/b.md"),
    ]  # fmt: skip
    ironclaw_checks(file)


def test_another_writer_s_change_is_kept(file: Path, workspace: Workspace) -> None:
    """IronClaw wrote the document after the mount read it: the save keeps IronClaw's
    content as a version before it replaces it, and a removal at the old version leaves
    the row."""
    store = store_of(workspace)
    (memory,) = store.load_documents()
    ironclaw_writes(file, "MEMORY.md", "The user likes oolong.\n")
    saved = store.commit_document(
        Write(memory.id, "MEMORY.md", "The user likes black tea.\n"),
        FileAttrs(),
        SaveOptions(expected=memory.updated_at),
    )
    assert saved.conflict == "version 2"
    versions = rows(file, "SELECT version, content FROM memory_document_versions ORDER BY 1")
    assert versions == [(1, "The user likes green tea.\n"), (2, "The user likes oolong.\n")]
    assert not store.delete_document(memory.id, seen=memory.updated_at)
    assert [r.path for r in store.load_documents()] == ["MEMORY.md"]


def test_a_rename_over_another_carries_its_versions(file: Path, workspace: Workspace) -> None:
    """An editor's save by rename: the target keeps its id and takes the content, its own
    content a version, then the source's versions after it; the source row goes."""
    store = store_of(workspace)
    (memory,) = store.load_documents()
    tmp = store.commit_document(Write(None, "MEMORY.md.tmp", "draft\n"), FileAttrs())
    tmp = store.commit_document(
        Write(tmp.doc_id, "MEMORY.md.tmp", "final\n"),
        FileAttrs(),
        SaveOptions(expected=tmp.updated_at),
    )
    done = store.replace_document(
        Replacement(
            tmp.doc_id, memory.id, "MEMORY.md", "final\n", FileAttrs(), source_at=tmp.updated_at
        ),
        SaveOptions(expected=memory.updated_at, index_now=False),
    )
    assert done is not None and done.doc_id == memory.id
    assert [r.path for r in store.load_documents()] == ["MEMORY.md"]
    versions = rows(file, "SELECT document_id, version, content FROM memory_document_versions "
                    "ORDER BY version")  # fmt: skip
    assert versions == [(str(memory.id), 1, "The user likes green tea.\n"),
                        (str(memory.id), 2, "draft\n")]  # fmt: skip
    ironclaw_checks(file)


def test_a_held_lock_is_waited_for(file: Path, workspace: Workspace) -> None:
    """IronClaw holds the file's write lock for 1.5 s (its own transaction, another
    process): the save waits and is made, no error."""
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sqlite3, sys, time\n"
         "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
         "c.execute('BEGIN IMMEDIATE'); print('held', flush=True); time.sleep(1.5)\n"
         "c.execute('COMMIT')\n", str(file)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        began = time.monotonic()
        saved = store_of(workspace).commit_document(Write(None, "late.md", "waited\n"), FileAttrs())
        waited = time.monotonic() - began
    finally:
        holder.wait(timeout=10)
    assert saved.created and waited > 0.5
    assert rows(file, "SELECT content FROM memory_documents WHERE path = 'late.md'") == [
        ("waited\n",)
    ]


def test_the_engine_process_killed(file: Path, database: LibsqlDatabase,
                                   workspace: Workspace) -> None:  # fmt: skip
    """SIGKILL of the libSQL engine's process inside a transaction: the transaction fails
    with a clear error and nothing of it is written (its next statement never runs on a
    new process outside it); between transactions the next save starts a new process."""
    writer = database.file.writer
    if writer is None:
        pytest.skip("the plain file is written by this process")
    store = store_of(workspace)
    store.commit_document(Write(None, "first.md", "one\n"), FileAttrs())
    ended = pytest.raises(sqlite3.OperationalError, match="ended during a transaction")
    with ended, database.file.transaction() as conn:
        conn.execute("UPDATE memory_documents SET content = 'half' WHERE path = 'first.md'")
        assert writer.pid is not None
        os.kill(writer.pid, signal.SIGKILL)
        time.sleep(0.1)
        conn.execute("DELETE FROM memory_documents WHERE path = 'MEMORY.md'")
    assert rows(file, "SELECT path, content FROM memory_documents ORDER BY path") == [
        ("MEMORY.md", "The user likes green tea.\n"), ("first.md", "one\n"),
    ]  # fmt: skip
    old = writer.pid
    assert old is not None
    os.kill(old, signal.SIGKILL)
    time.sleep(0.1)
    store.commit_document(Write(None, "second.md", "two\n"), FileAttrs())
    assert writer.pid not in (None, old)
    assert rows(file, "SELECT content FROM memory_documents WHERE path = 'second.md'") == [
        ("two\n",)
    ]
    ironclaw_checks(file)


def test_without_the_libsql_engine_a_vector_file_is_read_only(
    file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where no ``libsql`` wheel exists (Linux aarch64, musl), a file with IronClaw's vector
    index mounts read-only and says why; a file without one is written by stdlib SQLite."""
    monkeypatch.setitem(sys.modules, "libsql", None)  # its import fails, as without a wheel
    database = open_libsql(file)
    try:
        indexed = rows(
            file, "SELECT 1 FROM sqlite_master WHERE name = 'idx_memory_chunks_embedding'"
        )
        reason = database.read_only_reason()
        if indexed:
            assert database.read_only and reason is not None
            assert "idx_memory_chunks_embedding" in reason and "libsql" in reason
        else:
            assert not database.read_only and reason is None
    finally:
        database.close()


def test_memfs_s_own_state_stays_out_of_ironclaw_s_file(file: Path, workspace: Workspace) -> None:
    """Folders, attributes and moves go to ``<file>.memfs``, deleted documents to
    ``<file>.memfs-deleted``, both 0600; IronClaw's file gains no table of memfs's."""
    before = {r[0] for r in rows(file, "SELECT name FROM sqlite_master")}
    store = store_of(workspace)
    saved = store.commit_document(Write(None, "d/x.md", "x\n"), FileAttrs(mode=0o640))
    store.create_directory("e")
    store.rename_directory("d", "f", None)
    store.delete_document(saved.doc_id)
    assert {r[0] for r in rows(file, "SELECT name FROM sqlite_master")} == before
    for own in (Path(f"{file}.memfs"), Path(f"{file}.memfs-deleted")):
        assert own.stat().st_mode & 0o777 == 0o600
    assert store.load_directories() == ["e"]


def test_a_move_re_chunks_where_the_indexing_rules_differ(file: Path, workspace: Workspace) -> None:
    """A document under a ``.config`` with ``skip_indexing`` has no chunks; moved (alone,
    then with its folder) where no such rule holds, it is re-chunked in the move's
    transaction; ``reindex`` rebuilds chunks IronClaw's way."""
    store = store_of(workspace)
    config = store.commit_document(Write(None, "quiet/.config", ""), FileAttrs())
    with sqlite3.connect(file) as conn:
        conn.execute("UPDATE memory_documents SET metadata = ? WHERE id = ?",
                     ('{"skip_indexing": true}', str(config.doc_id)))  # fmt: skip
    saved = store.commit_document(Write(None, "quiet/a.md", "hush\n"), FileAttrs())
    assert saved.chunks == 0
    count = "SELECT count(*) FROM memory_chunks WHERE document_id = ?"
    assert rows(file, count, str(saved.doc_id)) == [(0,)]
    store.rename_document(Rename(saved.doc_id, "loud/a.md", "quiet/a.md"), FileAttrs())
    assert rows(file, count, str(saved.doc_id)) == [(1,)]
    other = store.commit_document(Write(None, "quiet/sub/b.md", "also hush\n"), FileAttrs())
    assert rows(file, count, str(other.doc_id)) == [(0,)]
    store.rename_directory("quiet/sub", "loud/sub", None)
    assert rows(file, count, str(other.doc_id)) == [(1,)]
    assert store.reindex(saved.doc_id, "loud/a.md") == 1
    ironclaw_checks(file)


def test_renames_refused_or_over_another_and_attributes(file: Path, workspace: Workspace) -> None:
    """A rename onto a document the mount did not show is refused (EEXIST, nothing
    changed); onto one it showed, that one is removed (kept for ``undelete``) in the same
    transaction.  ``set_attrs`` keeps a mode against the row as it is; a folder dropped."""
    store = store_of(workspace)
    (memory,) = store.load_documents()
    a = store.commit_document(Write(None, "a.md", "a\n"), FileAttrs())
    ironclaw_writes(file, "b.md", "IronClaw's b\n")
    with pytest.raises(WriteRefused) as refused:
        store.rename_document(Rename(a.doc_id, "b.md", "a.md"), FileAttrs())
    assert refused.value.errno == errno.EEXIST
    assert sorted(rows(file, "SELECT path FROM memory_documents")) == [
        ("MEMORY.md",), ("a.md",), ("b.md",)]  # fmt: skip
    shown = {r.path: r for r in store.load_documents()}
    b = shown["b.md"]
    moved = store.rename_document(
        Rename(a.doc_id, "b.md", "a.md"), FileAttrs(), Overwritten(b.id, b.updated_at)
    )
    assert moved is not None
    assert rows(file, "SELECT path, content FROM memory_documents ORDER BY path") == [
        ("MEMORY.md", "The user likes green tea.\n"), ("b.md", "a\n")]  # fmt: skip
    assert workspace.kept is not None and [d.path for d in workspace.kept.deletions()] == ["b.md"]
    assert store.set_attrs(memory.id, FileAttrs(mode=0o640))
    listed = {r.path: r for r in store.load_documents()}
    assert listed["MEMORY.md"].attrs.mode == 0o640
    assert not store.set_attrs(shown["b.md"].id, FileAttrs(mode=0o600))  # gone
    store.create_directory("d")
    store.delete_directory("d", keep_dirs=["e"])
    assert store.load_directories() == ["e"]
    again = store.replace_document(
        Replacement(a.doc_id, memory.id, "MEMORY.md", None, FileAttrs()),
        SaveOptions(index_now=False),
    )
    assert again is not None and again.doc_id == memory.id
    assert rows(file, "SELECT path, content FROM memory_documents ORDER BY path") == [
        ("MEMORY.md", "a\n")]  # fmt: skip


def test_a_nanosecond_time_is_kept_to_the_nanosecond(workspace: Workspace) -> None:
    """The libsql package binds a Python int beyond 32 bits as a REAL: through the engine
    process a file's mtime came back rounded to 256 ns, so every tool file this mount
    wrote looked changed by another mount at the next poll, and one renamed away while
    that poll read was brought back (``test_obsidian_vault_state_persists_and_never_
    becomes_memory[libsql-legacy]``, a leftover ``app.json.tmp``, about 1 run in 20)."""
    store = store_of(workspace)
    (memory,) = store.load_documents()
    mtime = 1_796_641_636_632_431_763  # 2026-12-07, to the nanosecond
    assert store.set_attrs(memory.id, FileAttrs(mode=0o640, mtime_ns=mtime))
    (shown,) = store.load_documents()
    assert shown.attrs == FileAttrs(mode=0o640, mtime_ns=mtime)
    tools = workspace.tool_files
    tools.apply([ToolFile(".obsidian/app.json", False, b"{}", 0o644, mtime)], [])
    assert tools.digests()[".obsidian/app.json"][2] == mtime
    assert tools.load()[0].mtime_ns == mtime
    written = store.commit_document(Write(None, "b.md", "b\n"), FileAttrs(mtime_ns=mtime + 1))
    assert {r.path: r.attrs.mtime_ns for r in store.load_documents()}["b.md"] == mtime + 1
    assert written.doc_id is not None


def test_a_file_without_versions_keeps_a_conflict_copy(tmp_path: Path) -> None:
    """IronClaw before v0.25 kept no versions (no ``memory_document_versions``): another
    writer's change the save did not see is kept as a conflict copy beside it."""
    db = legacy_ironclaw_db(tmp_path / "ironclaw.db")
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TABLE memory_document_versions")
        conn.execute("DELETE FROM _migrations WHERE version >= 16")
    legacy_write(db, "MEMORY.md", "first\n")
    database = open_libsql(db)
    try:
        settings = Settings(user_id="default")
        settings.given.add("user_id")
        store = store_of(database.workspace(settings))
        (memory,) = store.load_documents()
        time.sleep(0.002)
        with sqlite3.connect(db) as conn:  # IronClaw's v0.24 write: content, no version
            conn.execute(
                "UPDATE memory_documents SET content = 'theirs\n', updated_at = "
                "strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = ?",
                (str(memory.id),),
            )
        saved = store.commit_document(
            Write(memory.id, "MEMORY.md", "mine\n"),
            FileAttrs(),
            SaveOptions(expected=memory.updated_at),
        )
        assert saved.conflict is not None and saved.conflict.startswith("copy MEMORY.conflict-")
        found = dict(rows(db, "SELECT path, content FROM memory_documents"))
        assert found.pop("MEMORY.md") == "mine\n"
        assert list(found.values()) == ["theirs\n"]
    finally:
        database.close()
