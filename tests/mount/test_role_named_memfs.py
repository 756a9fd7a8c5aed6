"""A database role named ``memfs``: PostgreSQL's default ``search_path`` (``"$user",
public``) then starts with memfs's own schema once it exists, so unqualified names
(IronClaw's tables, ``current_schema()``) resolved there: IronClaw's tables were created in
it, and ``memfs migrate`` reported "no IronClaw Reborn tables".  Every command is the real
one, connected as that role."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from memfs.config import Settings
from memfs.db import open_database
from tests.model.test_reborn_store import reborn_schema
from tests.mount.test_migrate import counts, legacy_workspace, migrate

pytestmark = pytest.mark.mount


@pytest.fixture
def as_memfs(database_url: str) -> Iterator[str]:
    """``database_url`` for a login role named ``memfs`` that owns the database's public
    schema's rights (as an operator would grant them)."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = 'memfs'").fetchone() is None:
            conn.execute("CREATE ROLE memfs LOGIN PASSWORD 'memfs-test'")
        name = conn.info.dbname
        conn.execute(sql.SQL("GRANT ALL ON DATABASE {} TO memfs").format(sql.Identifier(name)))
        conn.execute("GRANT ALL ON SCHEMA public TO memfs")
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    yield make_conninfo(database_url, user="memfs", password="memfs-test")
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("DROP OWNED BY memfs CASCADE")


def tables(url: str) -> set[str]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT table_schema || '.' || table_name FROM information_schema.tables "
            "WHERE table_name IN ('memory_documents', 'meta', 'root_filesystem_entries')"
        ).fetchall()
    return {str(row[0]) for row in rows}


def test_a_role_named_memfs_creates_and_finds_ironclaws_tables_in_public(
    database_url: str, as_memfs: str
) -> None:
    for _ in range(2):  # the second time memfs's schema exists, and leads the role's path
        database = open_database(Settings(database_url=as_memfs))
        with database.pool.connection() as conn:
            row = conn.execute("SELECT current_schema()").fetchone()
            assert row is not None and row[0] == "public"
            conn.execute("SELECT count(*) FROM memory_documents")
        database.close()
    assert tables(database_url) == {"public.memory_documents", "memfs.meta"}


def test_migrate_run_by_a_role_named_memfs_finds_the_reborn_tables(
    database_url: str, as_memfs: str, sql_conn: psycopg.Connection[Any]
) -> None:
    legacy_workspace(database_url)
    reborn_schema(database_url)
    sql_conn.execute("GRANT ALL ON ALL TABLES IN SCHEMA public, memfs TO memfs")
    sql_conn.execute("GRANT ALL ON ALL SEQUENCES IN SCHEMA public, memfs TO memfs")
    sql_conn.execute("GRANT ALL ON SCHEMA memfs TO memfs")
    done = migrate(as_memfs, "--json")
    assert done.returncode == 1, done.stderr  # 1: the fixture's one path Reborn refuses
    assert "no IronClaw Reborn tables" not in done.stderr
    assert counts(done)["documents_copied"] == 4
    assert "public.root_filesystem_entries" in tables(database_url)
