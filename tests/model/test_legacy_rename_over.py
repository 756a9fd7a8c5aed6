"""A document renamed over another on the legacy layout, on both legacy engines (PostgreSQL
and IronClaw's libSQL file, ``memfs.db.legacy.rename_over``): each of the steps is seen in the
rows, so one engine leaving one out fails here."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from memfs.config import Settings
from memfs.db import open_database
from memfs.db.interface import FileAttrs
from memfs.db.records import Replacement, SaveOptions, Write
from memfs.db.workspace import Workspace
from tests.engines import ENGINES, LIBSQL_LEGACY, Engine

LEGACY_ENGINES = [ENGINES[0], LIBSQL_LEGACY]


@pytest.fixture(params=LEGACY_ENGINES, ids=str)
def engine(request: pytest.FixtureRequest, database_url: str) -> Engine:
    chosen: Engine = request.param
    chosen.prepare(database_url)
    return chosen


@pytest.fixture
def workspace(engine: Engine, database_url: str) -> Iterator[Workspace]:
    settings = Settings(database_url=engine.mount_url(database_url), user_id="default")
    settings.given.add("user_id")
    database = open_database(settings)
    try:
        yield database.workspace(settings)
    finally:
        database.close()


@pytest.fixture
def conn(database_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(database_url, autocommit=True) as opened:
        yield opened


def contents(workspace: Workspace, path: str) -> list[str]:
    """The versions kept of ``path``, oldest first."""
    store = workspace.versions
    return [
        bytes(store.version_content(path, v.number) or b"").decode()
        for v in sorted(store.versions(path), key=lambda v: v.number)
    ]


def test_the_steps_of_a_rename_over_another(
    engine: Engine, workspace: Workspace, conn: psycopg.Connection[Any]
) -> None:
    """The source is kept as deleted; the target keeps its id and takes the content; the
    source's versions follow the target's own; a change another writer made to the source
    after the mount read it is a version too; the source row is gone."""
    store = workspace.documents
    target = store.commit_document(Write(None, "notes.md", "target one\n"), FileAttrs())
    target = store.commit_document(
        Write(target.doc_id, "notes.md", "target two\n"),
        FileAttrs(),
        SaveOptions(expected=target.updated_at),
    )
    source = store.commit_document(Write(None, "draft.md", "source one\n"), FileAttrs())
    source = store.commit_document(
        Write(source.doc_id, "draft.md", "source two\n"),
        FileAttrs(),
        SaveOptions(expected=source.updated_at),
    )
    engine.agent_overwrites(conn, "draft.md", "the agent's change\n")  # after the mount read it
    done = store.replace_document(
        Replacement(
            source.doc_id,
            target.doc_id,
            "notes.md",
            "source two\n",
            FileAttrs(),
            source_at=source.updated_at,
        ),
        SaveOptions(expected=target.updated_at, index_now=False),
    )
    assert done is not None and done.doc_id == target.doc_id
    assert [r.path for r in store.load_documents()] == ["notes.md"]
    assert contents(workspace, "notes.md") == [
        "target one\n", "target two\n",  # the target's own
        "source one\n", "source two\n",  # carried from the source, after them
        "the agent's change\n",  # the source as the other writer left it
    ]  # fmt: skip
    assert workspace.kept is not None
    kept = [d.path for d in workspace.kept.deletions()]
    assert kept == ["draft.md"]  # undelete finds the source


def test_a_rename_that_leaves_the_target_as_it_is_versions_it_once(
    workspace: Workspace,
) -> None:
    """The target already holds the renamed content (a merge holding both): that content is
    one of its versions before the source's carried ones, and not twice in a row."""
    store = workspace.documents
    target = store.commit_document(Write(None, "notes.md", "same\n"), FileAttrs())
    source = store.commit_document(Write(None, "draft.md", "draft\n"), FileAttrs())
    source = store.commit_document(
        Write(source.doc_id, "draft.md", "same\n"),
        FileAttrs(),
        SaveOptions(expected=source.updated_at),
    )
    done = store.replace_document(
        Replacement(
            source.doc_id,
            target.doc_id,
            "notes.md",
            "same\n",
            FileAttrs(),
            source_at=source.updated_at,
        ),
        SaveOptions(expected=target.updated_at, index_now=False),
    )
    assert done is not None
    assert contents(workspace, "notes.md") == ["same\n", "draft\n"]
    again = store.commit_document(
        Write(target.doc_id, "notes.md", "newer\n"),
        FileAttrs(),
        SaveOptions(expected=done.updated_at),
    )
    assert contents(workspace, "notes.md") == ["same\n", "draft\n", "same\n"]
    assert again.changed
