"""Renames are IronClaw writes: a document renamed over another keeps the target's identity.

For each save pattern (the exact syscall sequence, or the real program) the target row
keeps its id, created_at and metadata, its previous content becomes a version, the
source's row is gone, and nothing is duplicated.  A rename to a free path keeps the row
and re-applies the new location's indexing rules.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from memfs.db import Database, FileAttrs, Scope
from memfs.db.records import Rename, Write

pytestmark = pytest.mark.mount


def test_a_move_under_the_same_indexing_rules_keeps_the_chunks_and_queues_nothing(
    database: Database, sql_conn: psycopg.Connection[Any]
) -> None:
    """Chunks hold no path: moving a folder (or a file) where the nearest ``.config`` above
    is the same leaves them as they are, with no re-chunking behind it (500 documents of a
    renamed folder are not re-chunked); a move across a ``skip_indexing`` boundary is
    re-queued (test above)."""
    store = database.store(Scope("default"))
    store.commit_document(Write(None, ".config", ""), FileAttrs())  # the same above both places
    for i in range(3):
        store.commit_document(Write(None, f"projects/p/{i}.md", f"deploy {i}\n"), FileAttrs())
    chunk_ids = sorted(r[0] for r in sql_conn.execute("SELECT id FROM memory_chunks"))
    moved = store.rename_directory("projects", "archive/2026", None)
    assert len(moved) == 3
    doc = database.whole_documents(Scope("default")).find_document("archive/2026/p/0.md")
    assert doc is not None
    store.rename_document(
        Rename(doc[0], "elsewhere/0.md", "archive/2026/p/0.md"), FileAttrs(), None
    )
    assert sql_conn.execute("SELECT count(*) FROM memfs.reindex_queue").fetchone() == (0,)
    assert sorted(r[0] for r in sql_conn.execute("SELECT id FROM memory_chunks")) == chunk_ids
