"""A Reborn document keeps its id while it is renamed, for every reader on both databases.

Reborn rows have no id column: the store names each document by an id it keeps per path
(``RebornStore.id_of``).  A listing read while a rename commits must still name the renamed
row by that id, whether its snapshot shows the old path or the new one.  When the store
moved the id only after the commit, a poll in between named the row at its new path by a
fresh id: the mount took the file for deleted and dropped it from its listing (seen in
CI as ``ls`` missing a file just renamed on the libSQL file).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from memfs.db.interface import FileAttrs
from memfs.db.reborn.layout import RebornScope
from memfs.db.reborn.libsql.rows import SqliteRows, open_file
from memfs.db.reborn.store import RebornStore
from memfs.db.records import Rename, SaveOptions, Write
from tests.ironclaw_libsql import reborn_local_dev
from tests.model.test_reborn_store import reborn_schema

#: Renames per run: the old defect showed in about one listing of 40 read during renames.
RENAMES = 400


@pytest.fixture(params=["postgres", "libsql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RebornStore]:
    if request.param == "libsql":
        opened = open_file(reborn_local_dev(tmp_path / "reborn-local-dev.db"))
        yield RebornStore(opened, RebornScope(), origin="t", rows=SqliteRows(opened))
        opened.close()
        return
    url: str = request.getfixturevalue("database_url")
    reborn_schema(url)
    pool: ConnectionPool[psycopg.Connection[tuple[Any, ...]]] = ConnectionPool(
        url, min_size=2, max_size=4, kwargs={"autocommit": True}, open=True
    )
    yield RebornStore(pool, RebornScope("reborn-cli", "alice", "reborn-cli-agent"), origin="t")
    pool.close()


def test_a_listing_during_renames_names_the_document_by_its_one_id(store: RebornStore) -> None:
    doc_id = store.commit_document(
        Write(None, "a.md", "x\n"), FileAttrs(), SaveOptions(index_now=False)
    ).doc_id
    done = threading.Event()
    failures: list[BaseException] = []

    def rename() -> None:
        try:
            for turn in range(RENAMES):
                old, new = ("a.md", "b.md") if turn % 2 == 0 else ("b.md", "a.md")
                store.rename_document(Rename(doc_id, new, old), FileAttrs())
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)
        finally:
            done.set()

    renamer = threading.Thread(target=rename)
    renamer.start()
    listings: list[list[Any]] = []
    while not done.is_set():
        listed = store.document_versions()
        assert listed is not None
        listings.append([(d, path) for d, path, _ in listed])
    renamer.join(timeout=60)
    assert not failures, failures
    assert len(listings) > 10, "the listings ran beside the renames"
    named = [listing for listing in listings if [d for d, _ in listing] != [doc_id]]
    assert not named, f"{len(named)} of {len(listings)} listings named it otherwise: {named[:3]}"
    assert store.path_of(doc_id) == "a.md"
