"""Commands against databases IronClaw owns: settings table, seeding, upgraded layouts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from tests.conftest import FIXTURES, apply_ironclaw_migrations
from tests.fake_embeddings import FakeEmbeddingServer
from tests.mounting import memfs_env

#: IronClaw's key/value settings table, as its V8 migration describes it (facts §1).
SETTINGS_DDL = (
    "CREATE TABLE settings (user_id TEXT NOT NULL, key TEXT NOT NULL, value JSONB NOT NULL, "
    "updated_at TIMESTAMPTZ NOT NULL DEFAULT NOW(), PRIMARY KEY (user_id, key))"
)


REBORN_FIXTURE = FIXTURES / "reborn_schema.sql"


def memfs(work_dir: Path, url: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memfs", *args, "--database-url", url],
        env=memfs_env(work_dir / "runtime", **env), capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip


def test_seed_refuses_on_ironclaws_database(
    database_url: str, sql_conn: psycopg.Connection[Any], work_dir: Path
) -> None:
    apply_ironclaw_migrations(database_url)
    result = memfs(work_dir, database_url, "seed")
    assert result.returncode == 3  # EXIT_DATABASE: refused on this database
    assert "IronClaw writes its own identity files" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert sql_conn.execute("SELECT count(*) FROM memory_documents").fetchone() == (0,)


def test_seed_on_memfs_database_says_ironclaw_keeps_them(
    database_url: str, sql_conn: psycopg.Connection[Any], work_dir: Path
) -> None:
    result = memfs(work_dir, database_url, "seed")
    assert result.returncode == 0, result.stderr
    assert "IronClaw, if pointed at this database later, keeps them" in result.stdout
    count = sql_conn.execute("SELECT count(*) FROM memory_documents").fetchone()
    assert count is not None and count[0] >= 8


def _take_over_by_reborn(conn: psycopg.Connection[Any], *, live: bool) -> None:
    """IronClaw's Reborn tables as v0.28-1.0 created them (V26-V32: no V33 table) and,
    with ``live``, a memory document a Reborn process wrote."""
    ddl = REBORN_FIXTURE.read_text().split("-- V33")[0]
    conn.execute(ddl)  # type: ignore[arg-type]
    if live:
        conn.execute(
            "INSERT INTO root_filesystem_entries (path, contents, kind, content_type, indexed, "
            "version) VALUES ('/memory/tenants/reborn-cli/users/reborn-cli/agents/"
            "reborn-cli-agent/projects/_none/MEMORY.md', 'live', 'memory_document', "
            "'application/json', '{}', 1)"
        )


def test_legacy_database_taken_over_by_reborn_mounts_the_live_layout(
    database_url: str, sql_conn: psycopg.Connection[Any], work_dir: Path
) -> None:
    """v0.28-1.0 create the Reborn tables but keep memory in memory_documents; once a
    Reborn process wrote memory, memory_documents is the frozen copy: status says which
    layout is live, the workspace commands work on the live layout, and memfs seeds nothing
    (IronClaw seeds its own files)."""
    apply_ironclaw_migrations(database_url)
    sql_conn.execute("INSERT INTO memory_documents (user_id, path, content) VALUES "
                     "('default', 'MEMORY.md', 'frozen')")  # fmt: skip
    _take_over_by_reborn(sql_conn, live=False)
    legacy = memfs(work_dir, database_url, "status")
    assert legacy.returncode == 0 and "Reborn" not in legacy.stdout
    _take_over_by_reborn(sql_conn, live=True)
    status = memfs(work_dir, database_url, "status")
    assert status.returncode == 0, status.stderr
    assert "IronClaw Reborn memory" in status.stdout and "documents:          1" in status.stdout
    exported = memfs(work_dir, database_url, "export", str(work_dir / "out"))
    assert exported.returncode == 0, exported.stderr
    assert (work_dir / "out" / "MEMORY.md").read_text() == "live", "the live layout's memory"
    result = memfs(work_dir, database_url, "seed")
    assert result.returncode != 0  # IronClaw >= 1.1 takes no identity from memory
    assert "IronClaw >= 1.1 seeds nothing" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    frozen = sql_conn.execute("SELECT content FROM memory_documents").fetchall()
    assert frozen == [("frozen",)], "the legacy copy is left as it was"


def test_v33_table_alone_marks_a_takeover(
    database_url: str, sql_conn: psycopg.Connection[Any], work_dir: Path
) -> None:
    apply_ironclaw_migrations(database_url)
    _take_over_by_reborn(sql_conn, live=False)
    sql_conn.execute(
        "CREATE TABLE root_filesystem_ordered_index_rows (index_name TEXT, path TEXT, "
        "PRIMARY KEY (index_name, path))"
    )
    result = memfs(work_dir, database_url, "status")
    assert result.returncode == 0 and "IronClaw Reborn memory" in result.stdout


def test_settings_table_configures_embeddings(
    database_url: str, sql_conn: psycopg.Connection[Any], work_dir: Path
) -> None:
    """A user configured by IronClaw's wizard (settings table, no env) gets embeddings."""
    apply_ironclaw_migrations(database_url)
    sql_conn.execute(SETTINGS_DDL)
    with FakeEmbeddingServer(dimension=768) as fake:
        stored = {
            "embeddings.enabled": True,
            "embeddings.provider": "ollama",
            "embeddings.model": "nomic-embed-text",
            "ollama_base_url": fake.url,
            "search.rrf_k": 30,
        }
        for key, value in stored.items():
            sql_conn.execute(
                "INSERT INTO settings (user_id, key, value) VALUES ('default', %s, %s)",
                (key, Jsonb(value)),
            )
        sql_conn.execute(
            "INSERT INTO settings (user_id, key, value) VALUES ('someone-else', "
            "'embeddings.provider', '\"bedrock\"')"
        )
        env = {"EMBEDDING_ENABLED": "false", "SEARCH_RRF_K": "90"}
        status = memfs(work_dir, database_url, "status", "--json", **env)
        assert status.returncode == 0, status.stderr
        settings = json.loads(status.stdout)["details"]["settings"]
        assert settings["embeddings enabled"] == {"value": True, "source": "settings table"}
        assert settings["embedding provider"] == {"value": "ollama", "source": "settings table"}
        assert settings["embedding dimension"] == {"value": 768, "source": "default"}
        assert settings["search k"] == {"value": 30, "source": "settings table"}
        assert settings["search fusion"]["source"] == "default"
        text = memfs(work_dir, database_url, "status", **env).stdout
        assert "embedding provider: ollama (settings table)" in text
        sql_conn.execute(
            "INSERT INTO memory_documents (user_id, path, content) VALUES "
            "('default', 'notes.md', 'the deploy schedule is on fridays')"
        )
        memfs(work_dir, database_url, "reindex", **env)
        found = memfs(work_dir, database_url, "search", "deploy schedule", "--json", **env)
        assert found.returncode == 0, found.stderr
        assert [r["path"] for r in fake.requests][:1] == ["/api/embed"]
        assert json.loads(found.stdout)["items"][0]["path"] == "notes.md"


def test_bad_settings_are_refused_like_ironclaw(database_url: str, work_dir: Path) -> None:
    assert memfs(work_dir, database_url, "init").returncode == 0
    for env in ({"EMBEDDING_ENABLED": "yes"}, {"SEARCH_RRF_K": "-5"}):
        result = memfs(work_dir, database_url, "search", "x", **env)
        assert result.returncode == 2, env  # EXIT_USAGE: a setting
        assert "Invalid configuration value for" in result.stderr
        assert "Traceback" not in result.stderr
