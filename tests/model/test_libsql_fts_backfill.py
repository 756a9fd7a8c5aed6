"""The first search of a libSQL scope makes IronClaw's FTS5 index (facts §3.2) in short
transactions: the same table, triggers, rows and spec row as IronClaw's one transaction,
and no row indexed twice or missed while other writers change rows during the backfill."""

from __future__ import annotations

import errno
import json
import random
import sqlite3
from collections import Counter
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from memfs.db.libsql.connection import LibsqlFile
from memfs.db.reborn.layout import RebornScope
from memfs.db.reborn.libsql import stores as reborn_stores
from memfs.db.reborn.libsql.rows import open_file
from memfs.db.reborn.libsql.stores import Backfill, LibsqlSearchStore
from memfs.errors import FsError
from memfs.ironclaw.fts_names import sql_index_name
from tests.ironclaw_libsql import reborn_local_dev, search_scope

SCOPE = RebornScope()
S = SCOPE.prefix
TABLE = sql_index_name(S, "memory_chunks_content_fts") + "_fts"
NOW = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"


def fill(db: Path, documents: int) -> None:
    """``documents`` documents below the scope, each with one chunk (as IronClaw's write
    leaves them: the chunk's text in ``indexed``), and one row outside it."""
    with sqlite3.connect(db) as conn:
        for n in range(documents):
            path = f"{S}/d{n:05d}.md"
            conn.execute(
                "INSERT INTO root_filesystem_entries (path, contents, content_type, kind, "
                f"indexed, version, updated_at) VALUES (?, ?, 'text/markdown', "
                f"'memory_document', '{{}}', 1, {NOW})",
                (path, f"note {n}\n".encode()),
            )
            put_chunk(conn, f"{path}.chunks/0", f"note {n} about tea{n % 7}")
        put_chunk(conn, "/memory/tenants/other/x.md.chunks/0", "outside the scope")


def put_chunk(conn: sqlite3.Connection, path: str, text: str) -> None:
    conn.execute(
        "INSERT INTO root_filesystem_entries (path, contents, content_type, kind, indexed, "
        f"version, updated_at) VALUES (?, X'', 'application/json', 'memory_chunk', ?, 1, {NOW}) "
        f"ON CONFLICT (path) DO UPDATE SET indexed = excluded.indexed, version = version + 1, "
        f"updated_at = {NOW}",
        (path, json.dumps({"content": text})),
    )


def index_state(db: Path) -> tuple[list[tuple[str, str]], list[tuple[str, ...]], list[str]]:
    """The FTS rows (with duplicates), the spec rows and the triggers' SQL."""
    with sqlite3.connect(db) as conn:
        fts = sorted(conn.execute(f"SELECT path, content FROM {TABLE}"))
        specs = sorted(conn.execute("SELECT * FROM root_filesystem_index_specs"))
        triggers = sorted(r[0] for r in conn.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'idx_rfs%'"
        ))  # fmt: skip
    return fts, specs, triggers


def expected_rows(db: Path) -> list[tuple[str, str]]:
    """What the index must hold: one row per non-directory row below the scope."""
    with sqlite3.connect(db) as conn:
        return sorted(conn.execute(
            "SELECT path, COALESCE(json_extract(indexed, '$.content'), '') FROM "
            "root_filesystem_entries WHERE is_dir = 0 AND (path = ? OR "
            "(path >= ? || '/' AND path < ? || '0'))", (S, S, S),
        ))  # fmt: skip


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return reborn_local_dev(tmp_path / "reborn-local-dev.db")


@pytest.fixture
def opened(db: Path) -> Iterator[LibsqlFile]:
    file = open_file(db)
    yield file
    file.close()


def test_the_first_search_makes_ironclaws_index_in_short_transactions(
    db: Path, opened: LibsqlFile, tmp_path: Path
) -> None:
    fill(db, 3000)
    reference = tmp_path / "ironclaw.db"
    with sqlite3.connect(db) as source, sqlite3.connect(reference) as copy:
        source.backup(copy)  # (the rows may still be in the write-ahead log)
    search_scope(reference, S)  # IronClaw's first search: one transaction
    commits = opened.commits
    assert LibsqlSearchStore(opened, SCOPE, read_only=False).search(["tea3"], 10)
    assert index_state(db) == index_state(reference)
    assert opened.commits - commits >= 3, "the backfill was not split into transactions"
    # IronClaw's three triggers each fire only for a non-directory row below the scope:
    # the delete trigger's WHEN tests old.is_dir too (the schema text, not just the effect).
    triggers = index_state(db)[2]
    assert len(triggers) == 3
    for row, trigger in zip(("old", "new", "new"), triggers, strict=True):
        assert f" WHEN {row}.is_dir = 0 AND ({row}.path = '{S}' OR " in trigger, trigger


def ironclaw_write(conn: sqlite3.Connection, rng: random.Random, latest: str | None) -> None:
    """One IronClaw-style write below the scope: a chunk written (new or changed), one
    deleted, or one moved over another path; now and then of ``latest`` (the row the
    index holds with the highest rowid, whose going frees that rowid)."""
    path = f"{S}/d{rng.randrange(400):05d}.md.chunks/0"
    if latest is not None and rng.random() < 0.2:
        path = latest
    conn.execute("BEGIN IMMEDIATE")
    choice = rng.random()
    if choice < 0.5:
        put_chunk(conn, path, f"written during the backfill {rng.random()}")
    elif choice < 0.75:
        conn.execute("DELETE FROM root_filesystem_entries WHERE path = ?", (path,))
    else:
        to = f"{S}/d{rng.randrange(400):05d}.md.chunks/1"
        conn.execute("DELETE FROM root_filesystem_entries WHERE path = ?", (to,))
        conn.execute("UPDATE root_filesystem_entries SET path = ? WHERE path = ?", (to, path))
    conn.execute("COMMIT")


@pytest.mark.parametrize("seed", range(1, 9))
def test_rows_written_during_the_backfill_are_indexed_once(
    db: Path, opened: LibsqlFile, seed: int
) -> None:
    """Between batches of random sizes another connection makes random IronClaw writes
    (new rows, changed chunks, deletions, moves); each seed must leave exactly one FTS row
    per entry below the scope, with its current text.  Without the skip of rows the
    triggers indexed, 8 of 8 seeds fail; without the check of a freed rowid, 6 of 8."""
    rng = random.Random(seed)
    fill(db, 300)
    store = LibsqlSearchStore(opened, SCOPE, read_only=False)
    writes = 0
    with sqlite3.connect(db, isolation_level=None, timeout=5) as other:
        backfill: Backfill = opened.write(store._table_and_triggers)
        done = False
        while not done:
            for _ in range(rng.randrange(4)):
                ironclaw_write(other, rng, backfill.mark[1])
                writes += 1
            done, backfill = opened.write(
                partial(Backfill.batch, backfill, size=rng.randrange(1, 40))
            )
    fts, _, _ = index_state(db)
    assert writes > 20
    duplicated = [p for p, n in Counter(p for p, _ in fts).items() if n > 1]
    assert not duplicated, f"indexed twice: {duplicated[:5]}"
    assert fts == expected_rows(db)


def test_a_row_taking_a_rowid_freed_by_a_deletion_is_not_indexed_twice(
    db: Path, opened: LibsqlFile
) -> None:
    """The row with the highest rowid is deleted after a batch, and a row beyond the
    copied range takes its rowid: the next batch must still see it as indexed."""
    fill(db, 40)
    store = LibsqlSearchStore(opened, SCOPE, read_only=False)
    backfill: Backfill = opened.write(store._table_and_triggers)
    done, backfill = opened.write(partial(Backfill.batch, backfill, size=10))
    assert not done and backfill.mark[1] == backfill.after  # the last copied, highest
    with sqlite3.connect(db, isolation_level=None) as conn:
        conn.execute("DELETE FROM root_filesystem_entries WHERE path = ?", (backfill.after,))
        put_chunk(conn, f"{S}/z-new.md.chunks/0", "beyond the copied range")
        (reused,) = conn.execute(f"SELECT rowid FROM {TABLE} WHERE path = ?",
                                 (f"{S}/z-new.md.chunks/0",)).fetchone()  # fmt: skip
    assert reused == backfill.mark[0], "SQLite did not reuse the rowid: nothing tested"
    while not done:
        done, backfill = opened.write(partial(Backfill.batch, backfill, size=10))
    fts, _, _ = index_state(db)
    assert fts == expected_rows(db)


def test_a_search_out_of_time_fails_alone_and_the_next_one_goes_on(
    db: Path, opened: LibsqlFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The making of a large index spans searches: one that runs out of its budget fails
    with EAGAIN (that lookup only), the next continues where it stopped, and the index is
    whole at the end."""
    monkeypatch.setattr(reborn_stores, "BACKFILL_BUDGET", 0.0)
    monkeypatch.setattr(reborn_stores, "BACKFILL_FIRST_BATCH", 100)
    monkeypatch.setattr(reborn_stores, "BACKFILL_TARGET", 1e-6)
    fill(db, 600)
    store = LibsqlSearchStore(opened, SCOPE, read_only=False)
    refused = 0
    while True:
        try:
            found = store.search(["tea3"], 10)
            break
        except FsError as exc:
            assert exc.errno == errno.EAGAIN and "rows so far" in exc.reason
            refused += 1
            assert refused < 50, "the backfill does not go on between searches"
    assert refused >= 2 and found
    fts, specs, _ = index_state(db)
    assert fts == expected_rows(db)
    assert (S, "memory_chunks_content_fts", '["content"]', "fts") in specs
