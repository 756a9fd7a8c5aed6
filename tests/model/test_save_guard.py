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
from memfs.db.records import ByHash, MergeWith, SaveOptions, Write
from memfs.ironclaw.hashing import content_hash
from tests.engines import Engine
from tests.model.conftest import filesystem_of


@pytest.fixture
def store(engine: Engine, database_url: str) -> Iterator[DocumentStore]:
    database = open_database(Settings(database_url=engine.mount_url(database_url)))
    try:
        yield filesystem_of(engine, database).store
    finally:
        database.close()


def recording_merge(answer: str) -> tuple[list[bytes], MergeWith]:
    """A merge that answers ``answer`` and records the row's bytes it was given."""
    given: list[bytes] = []

    def merge(theirs: bytes, by_hash: ByHash) -> str:
        given.append(theirs)
        return answer

    return given, merge


def test_a_change_within_one_tick_is_merged_under_the_lock(
    engine: Engine, store: DocumentStore, sql_conn: psycopg.Connection[Any]
) -> None:
    first = store.commit_document(Write(None, "a.md", "one\ntwo\n"), FileAttrs())
    engine.agent_rewrites_in_one_tick(sql_conn, "a.md", "ONE\ntwo\n")  # the same length
    given, merge = recording_merge("ONE\ntwo\nthree\n")
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
        SaveOptions(expected=first.updated_at, merge=lambda _theirs, _by_hash: None),
    )
    assert result.merged is None
    assert result.conflict is not None  # told: the other writer's content is kept
    assert engine.contents(sql_conn)["a.md"] == "one\nTWO\n"
    assert "ONE\ntwo\n" in engine.versions(sql_conn, "a.md")


def test_an_unchanged_row_never_calls_the_merge(
    engine: Engine, store: DocumentStore, sql_conn: psycopg.Connection[Any]
) -> None:
    first = store.commit_document(Write(None, "a.md", "one\n"), FileAttrs())

    def merge(theirs: bytes, by_hash: ByHash) -> str:
        raise AssertionError(f"no other writer, yet merged with {theirs!r}")

    result = store.commit_document(
        Write(first.doc_id, "a.md", "one\ntwo\n"),
        FileAttrs(),
        SaveOptions(expected=first.updated_at, merge=merge),
    )
    assert result.merged is None and result.conflict is None
    assert engine.contents(sql_conn)["a.md"] == "one\ntwo\n"


def test_the_merge_reads_earlier_contents_by_hash_in_the_saves_transaction(
    engine: Engine, store: DocumentStore, sql_conn: psycopg.Connection[Any]
) -> None:
    """A merge whose base is known by IronClaw's hash alone reads it under the row lock:
    the row's bytes, a kept version's, and None for a hash the document never held."""
    first = store.commit_document(Write(None, "h.md", "first\n"), FileAttrs())
    second = store.commit_document(
        Write(first.doc_id, "h.md", "second\n"), FileAttrs(), SaveOptions(expected=first.updated_at)
    )
    engine.agent_rewrites_in_one_tick(sql_conn, "h.md", "THIRD\n")
    found: dict[str, bytes | None] = {}

    def merge(theirs: bytes, by_hash: ByHash) -> str:
        for text in ("first\n", "THIRD\n", "never held\n"):
            found[text] = by_hash(content_hash(text))
        return "THIRD\nfourth\n"

    result = store.commit_document(
        Write(first.doc_id, "h.md", "second\nfourth\n"),
        FileAttrs(),
        SaveOptions(expected=second.updated_at, merge=merge),
    )
    assert found == {"first\n": b"first\n", "THIRD\n": b"THIRD\n", "never held\n": None}
    assert result.merged == "THIRD\nfourth\n"
    assert engine.contents(sql_conn)["h.md"] == "THIRD\nfourth\n"


def test_a_create_over_a_document_made_meanwhile_is_merged_under_the_lock(
    engine: Engine, store: DocumentStore, sql_conn: psycopg.Connection[Any]
) -> None:
    """A save whose writer found no document (``stale_base``), landing where another writer
    has just made one: the row found is merged with, not overwritten as if unchanged."""
    made = store.commit_document(Write(None, "c.md", "theirs\n"), FileAttrs())
    given, merge = recording_merge("theirs\nmine\n")
    result = store.commit_document(
        Write(made.doc_id, "c.md", "mine\n"),
        FileAttrs(),
        SaveOptions(expected=made.updated_at, merge=merge, stale_base=True),
    )
    assert given == [b"theirs\n"]
    assert result.merged == "theirs\nmine\n" and result.conflict is None
    assert engine.contents(sql_conn)["c.md"] == "theirs\nmine\n"


def test_a_create_over_a_document_made_meanwhile_keeps_it_when_not_merged(
    engine: Engine, store: DocumentStore, sql_conn: psycopg.Connection[Any]
) -> None:
    made = store.commit_document(Write(None, "k.md", "theirs\n"), FileAttrs())
    result = store.commit_document(
        Write(made.doc_id, "k.md", "mine\n"),
        FileAttrs(),
        SaveOptions(expected=made.updated_at, merge=lambda _t, _b: None, stale_base=True),
    )
    assert result.merged is None
    assert result.conflict is not None  # told: the other writer's content is kept
    assert engine.contents(sql_conn)["k.md"] == "mine\n"
    assert "theirs\n" in engine.versions(sql_conn, "k.md")
