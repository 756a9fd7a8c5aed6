"""A save's guard on every engine: a row another writer changed since the save's base is
never overwritten as if unchanged, even when that writer left ``updated_at`` as it was
(two writes within one tick of the clock), and the save's merge runs under the row lock.

Issue 54, item 6: on IronClaw's Reborn libSQL file an agent that bumped ``version`` but
left ``updated_at`` lost 1, 4 and 12 lines to vim's saves; on Reborn PostgreSQL, before the
token held ``version``, 793 of 796 such agent lines ended only in versions.  IronClaw's
compare-and-swap key is ``version``; the legacy layouts have none, so their guard also
compares the content hash the saving mount knew at that ``updated_at``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from memfs.config import Settings
from memfs.db import open_database
from memfs.db.interface import DocumentStore, FileAttrs
from memfs.db.records import SaveOptions, Write
from tests.engines import Engine
from tests.model.conftest import filesystem_of


@pytest.fixture
def store(engine: Engine, database_url: str) -> Iterator[DocumentStore]:
    database = open_database(Settings(database_url=engine.mount_url(database_url)))
    try:
        yield filesystem_of(engine, database).store
    finally:
        database.close()


def test_a_change_within_one_tick_is_merged_under_the_lock(
    engine: Engine, store: DocumentStore, sql_conn: psycopg.Connection[Any]
) -> None:
    first = store.commit_document(Write(None, "a.md", "one\ntwo\n"), FileAttrs())
    engine.agent_rewrites_in_one_tick(sql_conn, "a.md", "ONE\ntwo\n")  # the same length
    given: list[bytes] = []

    def merge(theirs: bytes) -> str:
        given.append(theirs)
        return "ONE\ntwo\nthree\n"

    result = store.commit_document(
        Write(first.doc_id, "a.md", "one\ntwo\nthree\n"),
        FileAttrs(),
        SaveOptions(expected=first.updated_at, merge=merge),
    )
    assert given == [b"ONE\ntwo\n"]  # the row as it stood, read under the lock
    assert result.merged == "ONE\ntwo\nthree\n"
    assert result.conflict is None
    assert engine.contents(sql_conn)["a.md"] == "ONE\ntwo\nthree\n"
    assert "ONE\ntwo\n" in engine.versions(sql_conn, "a.md")  # IronClaw's version of it


def test_a_change_within_one_tick_is_kept_when_not_merged(
    engine: Engine, store: DocumentStore, sql_conn: psycopg.Connection[Any]
) -> None:
    first = store.commit_document(Write(None, "a.md", "one\ntwo\n"), FileAttrs())
    engine.agent_rewrites_in_one_tick(sql_conn, "a.md", "ONE\ntwo\n")
    result = store.commit_document(
        Write(first.doc_id, "a.md", "one\nTWO\n"),
        FileAttrs(),
        SaveOptions(expected=first.updated_at, merge=lambda _: None),
    )
    assert result.merged is None
    assert result.conflict is not None  # told: the other writer's content is kept
    assert engine.contents(sql_conn)["a.md"] == "one\nTWO\n"
    assert "ONE\ntwo\n" in engine.versions(sql_conn, "a.md")


def test_an_unchanged_row_never_calls_the_merge(
    engine: Engine, store: DocumentStore, sql_conn: psycopg.Connection[Any]
) -> None:
    first = store.commit_document(Write(None, "a.md", "one\n"), FileAttrs())

    def merge(theirs: bytes) -> str:
        raise AssertionError(f"no other writer, yet merged with {theirs!r}")

    result = store.commit_document(
        Write(first.doc_id, "a.md", "one\ntwo\n"),
        FileAttrs(),
        SaveOptions(expected=first.updated_at, merge=merge),
    )
    assert result.merged is None and result.conflict is None
    assert engine.contents(sql_conn)["a.md"] == "one\ntwo\n"
