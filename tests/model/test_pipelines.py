"""A pipeline aborted by a guard leaves its connection fit for the next call.

In pipeline mode psycopg records a statement as prepared when it sends it; when an earlier
statement of the pipeline fails (a save's ``memfs.expect`` guard), the server skips the
Parse and never prepares it, so the statement's next use on that connection failed with
``InvalidSqlStatementName`` (issue 26, defect 1: two mounts appending to one file in turn,
11 of 20 appends EIO).  memfs runs no server-side prepared statements.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from memfs.db import Database, FileAttrs, Scope
from memfs.db.records import SaveOptions, Write

QUERY = "SELECT %s::int + 1"


def test_a_pipeline_aborted_at_a_statements_sixth_use_leaves_the_connection_usable(
    database: Database,
) -> None:
    with database.pool.connection() as conn:
        for n in range(5):
            assert conn.execute(QUERY, (n,)).fetchone() == (n + 1,)
        with pytest.raises(psycopg.DatabaseError, match="changed since"), conn.pipeline():
            conn.execute("SELECT memfs.expect(false, 'document')")
            conn.execute(QUERY, (6,))  # the sixth use: skipped with the aborted pipeline
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert conn.execute(QUERY, (7,)).fetchone() == (8,)
        with conn.pipeline():
            cur = conn.execute(QUERY, (8,))
        assert cur.fetchone() == (9,)


def test_saves_whose_guard_fails_again_and_again_all_land(
    database: Database, sql_conn: psycopg.Connection[Any]
) -> None:
    """Every save is made over a row another writer changed (the one-round-trip save's
    guard fails, the careful save follows on the same pooled connection); none may fail.
    (Serial, this did not show defect 1 on the old code: the test above does.)"""
    store = database.store(Scope("default"))
    last = store.commit_document(
        Write(None, "f.md", "start\n"), FileAttrs(), SaveOptions(expected=None, index_now=False)
    )
    text = "start\n"
    for n in range(20):
        text += f"mount {n}\n"
        last = store.commit_document(
            Write(last.doc_id, "f.md", text),
            FileAttrs(),
            SaveOptions(expected=last.updated_at, index_now=False),
        )
        text += f"agent {n}\n"
        sql_conn.execute(
            "UPDATE memory_documents SET content = content || %s WHERE path = 'f.md'",
            (f"agent {n}\n",),
        )
    row = sql_conn.execute("SELECT content FROM memory_documents WHERE path = 'f.md'").fetchone()
    assert row is not None and "mount 19\n" in row[0]
