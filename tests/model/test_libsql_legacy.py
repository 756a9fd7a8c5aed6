"""IronClaw's legacy (<= v1.0) libSQL file, ``ironclaw.db``: read (writes are
``test_libsql_legacy_writes``).

The file is built as IronClaw v1.0 builds it (``tests.ironclaw_libsql.legacy_ironclaw_db``:
its memory tables, FTS5 external-content triggers and migrations table) and written as
IronClaw v1.0 writes (``legacy_write``: versions MAX+1 with IronClaw's hash, chunks
replaced in one ``BEGIN IMMEDIATE``).  memfs reads every document, version and chunk of
the mount's scope and searches as IronClaw v1.0 does on libSQL; mounted read-only (a Turso
replica), it refuses every write with EROFS and a reason naming the file, leaving the
file byte for byte as it was.
"""

from __future__ import annotations

import errno
import hashlib
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memfs.config import Settings
from memfs.db import file_read_only_reason, open_libsql
from memfs.db.interface import FileAttrs
from memfs.db.legacy.libsql.stores import fts5_query
from memfs.db.libsql.database import LibsqlDatabase
from memfs.db.records import Write
from memfs.db.workspace import HybridRanking
from memfs.errors import FsError
from tests.ironclaw_libsql import legacy_ironclaw_db, legacy_write

AGENT = "6b1f1a9e-8f0e-4a53-9d7e-2f1c3b4a5d6e"


@pytest.fixture
def file(tmp_path: Path) -> Path:
    db = legacy_ironclaw_db(tmp_path / "ironclaw.db")
    legacy_write(db, "MEMORY.md", "The user likes green tea.\n")
    legacy_write(db, "notes/a.md", "hello")
    legacy_write(db, "notes/a.md", "hello world\n", changed_by="agent")
    legacy_write(db, "notes/a.md", "tea time\n")
    legacy_write(db, "daily/2026-11-27.md", "George 1:1 meeting notes\n")
    legacy_write(db, "theirs.md", "another user's\n", user="someone-else")
    legacy_write(db, "agent.md", "an agent's own\n", agent=AGENT)
    return db


@pytest.fixture
def database(file: Path) -> Iterator[LibsqlDatabase]:
    opened = open_libsql(file)
    yield opened
    opened.close()


def test_a_legacy_file_opens_writable_unless_it_must_not(
    file: Path, database: LibsqlDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert database.layout == "legacy" and not database.read_only
    assert database.read_only_reason() is None and file_read_only_reason(file) is None
    assert "memory_documents" in database.schema.describe()
    monkeypatch.setenv("LIBSQL_URL", "libsql://mem-x.turso.io")
    replica = open_libsql(file)
    try:
        reason = replica.read_only_reason()
        assert replica.read_only and reason is not None and "read-only" in reason
        assert "legacy" in reason and file_read_only_reason(file) == reason
    finally:
        replica.close()
    with sqlite3.connect(file) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_the_scope_s_documents_and_their_contents(database: LibsqlDatabase) -> None:
    store = database.workspace(Settings()).documents
    rows = {row.path: row for row in store.load_documents()}
    assert sorted(rows) == ["MEMORY.md", "daily/2026-11-27.md", "notes/a.md"]
    assert rows["notes/a.md"].size == len(b"tea time\n")
    contents = store.read_contents([r.id for r in rows.values()])
    assert contents[rows["MEMORY.md"].id].data == b"The user likes green tea.\n"
    assert contents[rows["notes/a.md"].id].version == rows["notes/a.md"].updated_at
    found = store.find_document("notes/a.md")
    assert found is not None and found.content == "tea time\n"
    assert [r.path for r in store.export_rows()] == sorted(rows)
    agent = database.workspace(Settings(agent_id=AGENT)).documents
    assert [r.path for r in agent.load_documents()] == ["agent.md"]


def test_versions_as_ironclaw_kept_them(database: LibsqlDatabase) -> None:
    workspace = database.workspace(Settings())
    versions = workspace.versions.versions("notes/a.md")
    assert [(v.number, v.changed_by, v.size) for v in versions] == [
        (1, "agent", 5),
        (2, None, len(b"hello world\n")),
    ]
    assert workspace.versions.version_content("notes/a.md", 1) == b"hello"
    assert workspace.versions.version_content("notes/a.md", 3) is None
    doc_id = next(r.id for r in workspace.documents.load_documents() if r.path == "notes/a.md")
    old = "sha256:" + hashlib.sha256(b"hello").hexdigest()
    assert workspace.documents.content_by_hash(doc_id, old) == b"hello"
    now = "sha256:" + hashlib.sha256(b"tea time\n").hexdigest()
    assert workspace.documents.content_by_hash(doc_id, now) == b"tea time\n"
    before = workspace.versions.as_of(datetime.now(UTC) - timedelta(hours=1))
    assert before.born_after == {"MEMORY.md", "notes/a.md", "daily/2026-11-27.md"}
    assert before.earliest["notes/a.md"].number == 1


def test_search_is_ironclaw_v1_0_s_on_libsql(database: LibsqlDatabase) -> None:
    ranking = database.workspace(Settings()).ranking
    assert isinstance(ranking, HybridRanking)
    search = ranking.store
    assert fts5_query('George 1:1 "notes"') == '"George" "1:1" """notes"""'
    assert fts5_query("   ") is None
    hits = search.search_fts("George 1:1 meeting", 50)  # punctuation: no FTS5 syntax error
    assert [h.path for h in hits] == ["daily/2026-11-27.md"]
    assert [h.path for h in search.search_fts("tea", 50)] == ["notes/a.md", "MEMORY.md"]
    assert search.search_fts("tea green", 50)[0].content == "The user likes green tea.\n"
    assert search.search_fts("another", 50) == []  # another user's row
    assert [h.path for h in search.search_fts("another", 50, users=["someone-else"])] == [
        "theirs.md"
    ]


def test_equal_ranks_keep_ironclaw_s_order_not_the_path_s(tmp_path: Path) -> None:
    """Chunks of equal bm25 come in the order FTS5's ``ORDER BY rank`` gives them, as
    IronClaw's own query returns them, not sorted by path."""
    db = legacy_ironclaw_db(tmp_path / "ironclaw.db")
    for name in ("m", "c", "x", "a", "q", "b"):  # the same text: equal ranks
        legacy_write(db, f"{name}.md", "the same oolong line\n")
    with sqlite3.connect(db) as conn:
        ironclaw = [path for (path,) in conn.execute(
            "SELECT d.path FROM memory_chunks_fts f JOIN memory_chunks c ON c._rowid = f.rowid "
            "JOIN memory_documents d ON d.id = c.document_id WHERE d.user_id = 'default' "
            "AND d.agent_id IS NULL AND memory_chunks_fts MATCH ? ORDER BY rank LIMIT 50",
            ('"oolong"',),
        )]  # fmt: skip
    assert ironclaw != sorted(ironclaw), "the ranks did not tie: the test proves nothing"
    opened = open_libsql(db)
    try:
        ranking = opened.workspace(Settings()).ranking
        assert isinstance(ranking, HybridRanking)
        assert [h.path for h in ranking.store.search_fts("oolong", 50)] == ironclaw
    finally:
        opened.close()


def test_every_write_is_refused_naming_the_file(file: Path) -> None:
    before = file.read_bytes()
    database = open_libsql(file, read_only=True)
    store = database.workspace(Settings()).documents
    doc = store.load_documents()[0]
    for write in (
        lambda: store.commit_document(Write(None, "new.md", "x"), FileAttrs()),
        lambda: store.delete_document(doc.id),
        lambda: store.create_directory("d"),
        lambda: store.set_attrs(doc.id, FileAttrs(mode=0o600)),
    ):
        with pytest.raises(FsError) as refused:
            write()
        assert refused.value.errno == errno.EROFS and str(file) in refused.value.reason
    database.close()
    assert file.read_bytes() == before


def test_another_writer_moves_the_fingerprint(file: Path, database: LibsqlDatabase) -> None:
    store = database.workspace(Settings()).documents
    first = store.fingerprint()
    assert store.fingerprint() == first
    legacy_write(file, "new.md", "from IronClaw\n")
    assert store.fingerprint() != first
    assert "new.md" in {r.path for r in store.load_documents()}


def test_the_workspace_with_its_versions_for_migrate(database: LibsqlDatabase) -> None:
    history = database.legacy_history(Settings())
    assert history is not None and history.count() == 3
    found = {doc.path: doc for doc in history.histories(batch=2)}
    assert sorted(found) == ["MEMORY.md", "daily/2026-11-27.md", "notes/a.md"]
    assert [v.content for v in found["notes/a.md"].versions] == ["hello", "hello world\n"]
    assert found["notes/a.md"].content == "tea time\n"


def test_ironclaw_s_settings_rows_are_read(file: Path, database: LibsqlDatabase) -> None:
    """The ``settings`` table (JSON text values): search keys, and onboarding for
    ``.prompt``; another owner's rows and keys memfs does not resolve are left out."""
    assert database.ironclaw_settings("default") == {}
    assert not database.onboarding_completed("default")
    with sqlite3.connect(file) as conn:
        conn.executemany(
            "INSERT INTO settings (user_id, key, value) VALUES (?, ?, ?)",
            [("default", "search.rrf_k", "30"), ("default", "search.fusion_strategy", '"rrf"'),
             ("default", "profile_onboarding_completed", "true"),
             ("default", "unrelated", "1"), ("someone-else", "search.rrf_k", "99")],
        )  # fmt: skip
    assert database.ironclaw_settings("default") == {
        "search.rrf_k": 30,
        "search.fusion_strategy": "rrf",
    }
    assert database.onboarding_completed("default")
    onboarded = database.workspace(Settings()).onboarded
    assert onboarded is not None and onboarded()


def test_a_turso_replica_says_so(tmp_path: Path) -> None:
    """IronClaw opens the legacy file as a Turso embedded replica when ``LIBSQL_URL`` is
    set, in its environment or its ``~/.ironclaw/.env``: the read-only line names the
    primary's host (never its token)."""
    from memfs.db.libsql.database import _legacy_reason

    file = legacy_ironclaw_db(tmp_path / "ironclaw.db")
    assert _legacy_reason(file, {"HOME": str(tmp_path)}) is None
    named = _legacy_reason(file, {"HOME": str(tmp_path), "LIBSQL_URL": "libsql://mem-x.turso.io"})
    assert named is not None and "Turso embedded replica of mem-x.turso.io" in named
    (tmp_path / ".ironclaw").mkdir()
    (tmp_path / ".ironclaw" / ".env").write_text(
        'DATABASE_BACKEND=libsql\nexport LIBSQL_URL="libsql://db-y.turso.io?authToken=s3cret"\n'
    )
    from_file = _legacy_reason(file, {"HOME": str(tmp_path)})
    assert from_file is not None
    assert "replica of db-y.turso.io" in from_file and "s3cret" not in from_file
    (tmp_path / ".ironclaw" / ".env").unlink()
    for metadata in ("ironclaw.db-client_wal_index", "ironclaw.db-info"):
        (tmp_path / metadata).write_bytes(b"\0" * 32)  # what libSQL's replica leaves beside it
        beside = _legacy_reason(file, {"HOME": str(tmp_path)})
        assert beside is not None and f"Turso embedded replica ({metadata}" in beside
        (tmp_path / metadata).unlink()


def test_reads_by_id_do_not_walk_the_users_rows(tmp_path: Path) -> None:
    """A read of a few documents by id uses the id's index: counted in SQLite's virtual
    machine instructions (a progress callback every 100), it costs the same at 3,000
    documents as at 30 (the planner preferred the (user, agent, path) index and walked every
    row of the user: a cold ``grep -r`` of 100,000 documents took 39 times the disk)."""
    import uuid

    costs = []
    for count in (30, 3000):
        db = legacy_ironclaw_db(tmp_path / f"n{count}" / "ironclaw.db")
        with sqlite3.connect(db) as conn:
            conn.executemany(
                "INSERT INTO memory_documents (id, user_id, agent_id, path, content, metadata) "
                "VALUES (?, 'default', NULL, ?, ?, '{}')",
                [(str(uuid.uuid4()), f"d/{n}.md", f"note {n}\n") for n in range(count)],
            )
        opened = open_libsql(db)
        try:
            store = opened.workspace(Settings()).documents
            ids = [r.id for r in store.load_documents()][:10]
            steps = [0]

            def step(steps: list[int] = steps) -> int:
                steps[0] += 1
                return 0

            opened.file.connection().set_progress_handler(step, 100)
            assert len(store.read_contents(ids)) == 10
            assert len(store.document_rows(ids)) == 10
            costs.append(steps[0])
        finally:
            opened.close()
    assert costs[1] <= costs[0] + 5, costs
