"""A poll of a workspace no change feed tells of (Reborn) reads whole only the rows that
differ from what the mount shows (docs/ironclaw/libsql.md, requirement 11), and ends with
the tree a whole reload would give."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import psycopg

from memfs.config import Settings
from memfs.db import open_database
from memfs.db.interface import DocRow
from memfs.vfs import Filesystem, OtherWriters
from tests.engines import Engine
from tests.model.conftest import filesystem_of


def _shown(fs: Filesystem) -> dict[str, tuple[Any, int]]:
    """path -> (version, size) of every document the mount shows."""
    shown = fs.state.tree.shown_documents()
    return {found[1]: (found[0], fs.state.tree.docs[d].size) for d, found in shown.items()
            if found is not None}  # fmt: skip


async def test_a_poll_reads_whole_only_the_rows_that_changed(
    engine: Engine, database_url: str, sql_conn: psycopg.Connection[Any]
) -> None:
    engine.agent_writes(sql_conn, database_url,
                        {f"notes/n{i}.md": f"note {i}\n" for i in range(40)})  # fmt: skip
    database = open_database(Settings(database_url=engine.mount_url(database_url)))
    try:
        fs = filesystem_of(engine, database)
        await fs.load()
        # The agent changes one document, removes one and writes a new one.
        engine.agent_overwrites(sql_conn, "notes/n3.md", "changed\n")
        engine.agent_deletes(sql_conn, "notes/n7.md")
        engine.agent_writes(sql_conn, database_url, {"notes/new.md": "a new note\n"})

        read_whole: list[list[UUID]] = []
        listed: list[int] = []
        store: Any = fs.store
        real_rows, real_load = store.document_rows, store.load_documents

        def document_rows(doc_ids: list[UUID]) -> dict[UUID, DocRow]:
            read_whole.append(list(doc_ids))
            return real_rows(doc_ids)  # type: ignore[no-any-return]

        def load_documents() -> list[DocRow]:
            rows = real_load()
            listed.append(len(rows))
            return rows  # type: ignore[no-any-return]

        store.document_rows, store.load_documents = document_rows, load_documents
        await OtherWriters(fs).resync()

        if engine.name == "legacy":  # a change feed tells of each change: a poll is rare
            assert listed == [40] and read_whole == []
        else:
            assert listed == []
            paths = {row.id: row.path for row in real_load()}
            assert [sorted(paths[d] for d in ids) for ids in read_whole] == [
                ["notes/n3.md", "notes/new.md"]
            ]
        # What a fresh mount shows.
        fresh = filesystem_of(engine, database)
        await fresh.load()
        assert _shown(fs) == _shown(fresh)
        assert "notes/n7.md" not in _shown(fs) and _shown(fs)["notes/n3.md"][1] == 8
    finally:
        database.close()
