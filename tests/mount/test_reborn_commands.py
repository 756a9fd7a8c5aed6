"""The workspace commands on a Reborn database: export, import, search, log and reindex
go through the storage interface (rows as a mount's saves write them); seed refuses, as on
IronClaw's legacy database (IronClaw seeds its own files)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.model.test_reborn_store import A, rows
from tests.mount.test_migrate import env, reborn_schema

pytestmark = pytest.mark.mount


def test_export_import_and_search_work_on_a_reborn_database(
    database_url: str, sql_conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    """export and import go through the storage interface: on Reborn, rows as IronClaw
    writes them; a name the layout refuses is reported, not imported, and not fatal."""
    reborn_schema(database_url)
    source = tmp_path / "notes"
    (source / "daily").mkdir(parents=True)
    (source / "MEMORY.md").write_text("remember ✓\n")
    (source / "daily" / "2026-11-24.md").write_text("[09:00:00] standup\n")
    (source / "bad.chunks").write_text("IronClaw cannot hold this name\n")
    os.utime(source / "MEMORY.md", ns=(1_700_000_000_000_000_000,) * 2)
    run = [sys.executable, "-m", "memfs"]
    where = ["--database-url", database_url, "--user-id", "alice", "--json"]
    imported = subprocess.run([*run, "import", str(source), *where], capture_output=True,
                              text=True, timeout=120, env=env(), check=False)  # fmt: skip
    assert imported.returncode == 1, imported.stderr  # bad.chunks: said, exit 1
    report = json.loads(imported.stdout)
    assert report["counts"] == {"created": 2, "refused": 1}
    assert [p for p in report["problems"] if "bad.chunks" in p] == report["problems"]
    assert imported.stderr == "", "nothing about vectors: Reborn memory has none"
    left = rows(sql_conn)
    assert left["MEMORY.md"]["contents"] == "remember ✓\n".encode()
    assert left["MEMORY.md"]["kind"] == "memory_document"
    assert left["daily/2026-11-24.md.chunks/0"]["kind"] == "memory_chunk"
    out = tmp_path / "out"
    exported = subprocess.run([*run, "export", str(out), *where], capture_output=True,
                              text=True, timeout=120, env=env(), check=False)  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    assert json.loads(exported.stdout)["counts"] == {"exported": 2}
    assert (out / "MEMORY.md").read_text() == "remember ✓\n"
    assert (out / "daily" / "2026-11-24.md").read_text() == "[09:00:00] standup\n"
    assert (out / "MEMORY.md").stat().st_mtime_ns == 1_700_000_000_000_000_000
    searched = subprocess.run([*run, "search", "what", "to", "remember", *where],
                              capture_output=True, text=True, timeout=120, env=env(),
                              check=False)  # fmt: skip
    assert searched.returncode == 0, searched.stderr
    found = json.loads(searched.stdout)
    assert [(r["path"], r["score"]) for r in found["items"]] == [("MEMORY.md", 1.0)]
    assert found["details"]["fusion"] == "per-document RRF (IronClaw v1.3)"


def test_log_reindex_and_seed_on_a_reborn_database(
    database_url: str, sql_conn: psycopg.Connection[Any]
) -> None:
    reborn_schema(database_url)
    run = [sys.executable, "-m", "memfs"]
    where = ["--database-url", database_url, "--user-id", "alice"]

    def memfs(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*run, *args, *where], capture_output=True, text=True,
                              timeout=120, env=env(), check=False)  # fmt: skip

    first, second = memfs("log", "standup"), memfs("log", "deployed v2")
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    daily = [p for p, r in rows(sql_conn).items()
             if p.startswith("daily/") and r["kind"] == "memory_document"]  # fmt: skip
    assert len(daily) == 1
    doc = rows(sql_conn)[daily[0]]
    lines = doc["contents"].decode().splitlines()
    assert [line.split("] ", 1)[1] for line in lines] == ["standup", "deployed v2"]
    assert doc["version"] == 2 and f"{daily[0]}.versions/1" in rows(sql_conn)
    # Chunks removed behind memfs's back (an older indexer, a crash) come back.
    sql_conn.execute("DELETE FROM root_filesystem_entries WHERE kind = 'memory_chunk'")
    reindexed = memfs("reindex", "--json")
    assert reindexed.returncode == 0, reindexed.stderr
    assert json.loads(reindexed.stdout)["counts"] == {"chunks": 1, "documents": 1}
    chunk = rows(sql_conn)[f"{daily[0]}.chunks/0"]
    assert chunk["contents"] == doc["contents"] and chunk["indexed"]["chunk_index"] == 0
    seeded = memfs("seed")
    assert seeded.returncode != 0 and "IronClaw >= 1.1 seeds nothing" in seeded.stderr
    assert seeded.stderr.count("\n") == 1


def test_sync_once_both_ways_on_a_reborn_database(
    database_url: str, sql_conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    """``memfs sync DIR --once`` without FUSE: local files pushed as IronClaw's rows, the
    agent's documents pulled, a change on both sides keeps the agent's as a version."""
    reborn_schema(database_url)
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "MEMORY.md").write_text("local memory\n")
    where = ["--database-url", database_url, "--user-id", "alice", "--json", "--once"]

    def sync() -> dict[str, Any]:
        done = subprocess.run([sys.executable, "-m", "memfs", "sync", str(folder), *where],
                              capture_output=True, text=True, timeout=120, env=env(),
                              check=False)  # fmt: skip
        assert done.returncode == 0, done.stderr
        report: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
        assert report["command"] == "sync" and report["problems"] == []
        by_action: dict[str, list[str]] = {}
        for item in report["items"]:
            by_action.setdefault(item["action"], []).append(item["path"])
        return by_action

    assert sync()["pushed"] == ["MEMORY.md"]
    left = rows(sql_conn)
    assert left["MEMORY.md"]["contents"] == b"local memory\n"
    assert left["MEMORY.md"]["kind"] == "memory_document" and "MEMORY.md.chunks/0" in left
    keys = '{"agent_id":"reborn-cli-agent","tenant_id":"reborn-cli","user_id":"alice"}'
    sql_conn.execute(  # the agent writes a new document
        "INSERT INTO root_filesystem_entries (path, contents, kind, content_type, indexed, "
        "version) VALUES (%s, 'from the agent\n', 'memory_document', 'application/json', %s, 1)",
        (A + "/daily/2026-11-24.md", keys),
    )
    assert sync()["pulled"] == ["daily/2026-11-24.md"]
    assert (folder / "daily" / "2026-11-24.md").read_text() == "from the agent\n"
    assert sync() == {}, "in sync: nothing to do"
    # Both sides change MEMORY.md: the local file wins, the agent's content is a version.
    sql_conn.execute(
        "UPDATE root_filesystem_entries SET contents = 'the agent changed it\n', "
        "version = version + 1, updated_at = now() WHERE path = %s",
        (A + "/MEMORY.md",),
    )
    (folder / "MEMORY.md").write_text("changed here too\n")
    assert sync()["conflicts"]
    left = rows(sql_conn)
    assert left["MEMORY.md"]["contents"] == b"changed here too\n"
    kept = [json.loads(r["contents"])["content"] for p, r in left.items()
            if p.startswith("MEMORY.md.versions/")]  # fmt: skip
    assert "the agent changed it\n" in kept
