"""Schema detection and creation on empty, IronClaw-built and Reborn-only databases."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from memfs.config import Settings
from memfs.db import open_database
from memfs.db.schema import ensure_schema
from tests.conftest import apply_ironclaw_migrations

CATALOG_QUERIES = {
    "columns": "SELECT table_name, column_name, data_type, udt_name, is_nullable, "
    "column_default, is_generated, generation_expression FROM information_schema.columns "
    "WHERE table_schema = 'public' ORDER BY 1, 2",
    "indexes": "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1",
    "triggers": "SELECT c.relname, t.tgname, pg_get_triggerdef(t.oid) FROM pg_trigger t "
    "JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = 'public' ORDER BY 1, 2",
    "functions": "SELECT p.proname, pg_get_functiondef(p.oid) FROM pg_proc p "
    "JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public' "
    "AND p.prokind = 'f' AND p.proname NOT LIKE 'vector%' ORDER BY 1, 2",
    "views": "SELECT viewname, definition FROM pg_views WHERE schemaname = 'public' ORDER BY 1",
    "constraints": "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) "
    "FROM pg_constraint WHERE connamespace = 'public'::regnamespace ORDER BY 1, 2",
    "refinery": "SELECT * FROM refinery_schema_history ORDER BY version",
}


def catalog(conn: psycopg.Connection[Any]) -> dict[str, list[tuple[Any, ...]]]:
    return {name: conn.execute(query).fetchall() for name, query in CATALOG_QUERIES.items()}  # type: ignore[arg-type]


def test_empty_database_gets_ironclaw_compatible_schema(
    database_url: str, sql_conn: psycopg.Connection[Any]
) -> None:
    info = ensure_schema(sql_conn)
    assert (info.kind, info.has_versions, info.has_escape_like) == ("created", True, True)
    columns = dict(
        sql_conn.execute(
            "SELECT column_name, format_type(atttypid, atttypmod) FROM information_schema.columns "
            "JOIN pg_attribute ON attrelid = 'memory_chunks'::regclass AND attname = column_name "
            "WHERE table_name = 'memory_chunks'"
        ).fetchall()
    )
    assert columns["embedding"] == "vector"  # dimensionless, as after IronClaw's V9
    generated = sql_conn.execute(
        "SELECT is_generated FROM information_schema.columns "
        "WHERE table_name = 'memory_chunks' AND column_name = 'content_tsv'"
    ).fetchone()
    assert generated == ("ALWAYS",)
    # The updated_at trigger overrides an explicit value, as IronClaw's does.
    sql_conn.execute(
        "INSERT INTO memory_documents (user_id, path, content) VALUES ('u', 'a.md', 'x')"
    )
    sql_conn.execute(
        "UPDATE memory_documents SET content = 'y', updated_at = '2000-01-01' WHERE path = 'a.md'"
    )
    year = sql_conn.execute("SELECT extract(year FROM updated_at) FROM memory_documents").fetchone()
    assert year is not None and year[0] > 2000
    # Idempotent: a second run finds the schema and changes nothing.
    before = {k: v for k, v in catalog_without_refinery(sql_conn).items()}
    again = ensure_schema(sql_conn)
    assert again.kind == "compatible"
    assert catalog_without_refinery(sql_conn) == before


def catalog_without_refinery(conn: psycopg.Connection[Any]) -> dict[str, list[tuple[Any, ...]]]:
    return {
        name: conn.execute(query).fetchall()  # type: ignore[arg-type]
        for name, query in CATALOG_QUERIES.items()
        if name != "refinery"
    }


def test_list_workspace_files_escapes_like(sql_conn: psycopg.Connection[Any]) -> None:
    ensure_schema(sql_conn)
    for path in ["foo_bar/a.md", "fooXbar/b.md", "top.md", "foo_bar/sub/c.md"]:
        sql_conn.execute(
            "INSERT INTO memory_documents (user_id, path, content) VALUES ('u', %s, 'hello')",
            (path,),
        )
    root = sql_conn.execute("SELECT path, is_directory FROM list_workspace_files('u', NULL, '')")
    # C collation (the embedded server's default) sorts "X" before "_".
    assert root.fetchall() == [("fooXbar", True), ("foo_bar", True), ("top.md", False)]
    sub = sql_conn.execute(
        "SELECT path, is_directory, content_preview FROM list_workspace_files('u', NULL, 'foo_bar')"
    ).fetchall()
    assert sub == [("foo_bar/a.md", False, "hello"), ("foo_bar/sub", True, None)]


@pytest.mark.parametrize("with_versions", [True, False])
def test_ironclaw_database_is_used_as_is(
    database_url: str, sql_conn: psycopg.Connection[Any], with_versions: bool
) -> None:
    apply_ironclaw_migrations(database_url, with_versions=with_versions)
    before = catalog(sql_conn)
    db = open_database(Settings(database_url=database_url))
    try:
        assert db.schema.kind == "ironclaw"
        assert db.schema.has_versions is with_versions
        assert db.schema.has_escape_like is with_versions
    finally:
        db.close()
    assert catalog(sql_conn) == before, "memfs altered an IronClaw object"
    tables = {
        r[0]
        for r in sql_conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'memfs'"
        )
    }
    assert tables == {
        "meta", "directories", "file_attrs", "reindex_queue", "reborn_directories", "reborn_attrs",
        "tool_files", "deleted_documents", "path_history", "history_start", "empty_spells",
        "saver_copies",
    }  # fmt: skip


def test_reborn_only_database_is_mounted_as_reborn(sql_conn: psycopg.Connection[Any]) -> None:
    sql_conn.execute(
        "CREATE TABLE root_filesystem_entries (path TEXT PRIMARY KEY, contents BYTEA, "
        "created_at TIMESTAMPTZ, updated_at TIMESTAMPTZ, is_dir BOOLEAN, content_type TEXT, "
        "kind TEXT, indexed JSONB, version BIGINT)"
    )
    assert ensure_schema(sql_conn).kind == "reborn"
    created = sql_conn.execute("SELECT to_regclass('memory_documents')").fetchone()
    assert created == (None,)
