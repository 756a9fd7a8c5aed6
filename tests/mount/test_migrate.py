"""``memfs migrate``: a legacy workspace with its versions copied into IronClaw's Reborn
layout, then mounted: the same tree, the same bytes, the same version counts.

The legacy rows are written as IronClaw <= 1.0 leaves them (documents, versions with its
hash format, metadata); the Reborn tables are IronClaw's (``tests/fixtures``). Every run is
the real command in a subprocess; every Reborn row left must pass IronClaw's validators.
"""

from __future__ import annotations

import hashlib
import json
import os
import pty
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from memfs.config import Settings
from memfs.db import open_database
from tests.model.test_reborn_store import reborn_schema, rows
from tests.mounting import memfs_env

pytestmark = pytest.mark.mount

#: Where the legacy default user's memory goes when no --to-* option is given.
TARGET = "/memory/tenants/reborn-cli/users/reborn-cli/agents/reborn-cli-agent/projects/_none"
T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
OTHER_AGENT = "6b0f4b4c-2a8e-4a6b-9a1e-0c3f3b1d2e4f"

#: path -> (content, [older contents, oldest first], metadata)
LEGACY: dict[str, tuple[str, list[str], dict[str, Any]]] = {
    "MEMORY.md": (
        "# Memory\nthe launch is on Tuesday\n",
        ["# Memory\n", "# Memory\nthe launch is on Monday\n"],
        {},
    ),
    "daily/2026-03-03.md": ("[09:00:00] standup\n[10:00:00] tea ✓\n", ["[09:00:00] standup\n"], {}),
    "projects/alpha/notes.md": ("alpha notes\n", [], {}),
    "private/diary.md": ("dear diary\n", ["first words\n"], {"skip_indexing": True}),
    "engine/.runtime/state.json": ('{"engine": 1}', [], {}),
    "odd.meta/x.md": ("IronClaw's Reborn layout cannot hold this path\n", [], {}),
}


def legacy_workspace(url: str) -> None:
    """IronClaw's legacy tables with a workspace in them, then its Reborn tables beside."""
    open_database(Settings(database_url=url)).close()
    with psycopg.connect(url, autocommit=True) as conn:
        for n, (path, (content, older, metadata)) in enumerate(LEGACY.items()):
            created = T0 + timedelta(days=n)
            (doc_id,) = conn.execute(
                "INSERT INTO memory_documents (user_id, path, content, metadata, created_at) "
                "VALUES ('default', %s, %s, %s, %s) RETURNING id",
                (path, content, Jsonb(metadata), created),
            ).fetchone() or (None,)
            for number, old in enumerate(older, 1):
                conn.execute(
                    "INSERT INTO memory_document_versions (document_id, version, content, "
                    "content_hash, changed_by, created_at) VALUES (%s, %s, %s, %s, %s, %s)",
                    (doc_id, number, old, "sha256:" + hashlib.sha256(old.encode()).hexdigest(),
                     "default" if number == 1 else None, created + timedelta(hours=number)),
                )  # fmt: skip
        conn.execute(  # other workspaces: never copied
            "INSERT INTO memory_documents (user_id, agent_id, path, content) VALUES "
            "('default', %s, 'MEMORY.md', 'another agent''s memory'), "
            "('bob', NULL, 'MEMORY.md', 'bob''s memory')",
            (OTHER_AGENT,),
        )
    reborn_schema(url)


def legacy_snapshot(conn: psycopg.Connection[Any]) -> list[Any]:
    return [
        conn.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()
        for table in ("memory_documents", "memory_document_versions", "memory_chunks")
    ]


def env() -> dict[str, str]:
    runtime = Path(os.environ.get("TMPDIR", "/tmp")) / f"memfs-migrate-{os.getpid()}"
    runtime.mkdir(exist_ok=True)
    return memfs_env(runtime)


def migrate(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memfs", "migrate", "--database-url", url, *args],
        capture_output=True, text=True, timeout=120, env=env(), check=False,
    )  # fmt: skip


def counts(result: subprocess.CompletedProcess[str]) -> dict[str, int]:
    report = json.loads(result.stdout)
    assert report["details"]["to"] == TARGET
    found: dict[str, int] = report["counts"]
    found.pop("milliseconds")
    return found


def reborn_rows(conn: psycopg.Connection[Any]) -> dict[str, dict[str, Any]]:
    """Every Reborn row (validated as IronClaw reads them), relative to the target."""
    return {p.removeprefix(TARGET + "/"): r for p, r in rows(conn).items()}


def test_migrate_copies_every_version_resumes_and_mounts_the_same_tree(
    database_url: str, sql_conn: psycopg.Connection[Any], mount_factory: Any
) -> None:
    legacy_workspace(database_url)
    before = legacy_snapshot(sql_conn)

    dry = migrate(database_url, "--dry-run", "--json")
    assert dry.returncode == 1, dry.stderr  # one path cannot be copied: said, not hidden
    expected = {
        "documents_read": 6, "engine_state_skipped": 1, "documents_copied": 4,
        "versions_copied": 4, "chunks_built": 3, "metadata_sidecars": 1, "refused": 1,
    }  # fmt: skip
    assert counts(dry) == expected
    assert json.loads(dry.stdout)["items"] == [
        {"path": "odd.meta/x.md", "outcome": "refused",
         "reason": "IronClaw's path rules: it has a segment ending in .meta, .chunks, "
                   ".versions (IronClaw's sidecars)"},
    ]  # fmt: skip
    assert rows(sql_conn) == {}, "a dry run writes nothing"

    # A failure part-way (a trigger that raises on one document's insert) stops the run
    # with one line; what was copied before it is whole, and a second run goes on.
    sql_conn.execute(
        "CREATE FUNCTION test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "RAISE EXCEPTION 'injected failure'; END $$; "
        "CREATE TRIGGER test_refuse BEFORE INSERT ON root_filesystem_entries FOR EACH ROW "
        "WHEN (NEW.path LIKE '%/projects/alpha/notes.md') EXECUTE FUNCTION test_refuse()"
    )
    stopped = migrate(database_url, "--json")
    assert stopped.returncode != 0
    assert stopped.stderr.count("\n") == 1 and "injected failure" in stopped.stderr
    assert "Traceback" not in stopped.stderr
    partial = {p for p, r in reborn_rows(sql_conn).items() if r["kind"] == "memory_document"}
    assert partial == {"MEMORY.md", "daily/2026-03-03.md", "private/diary.md"}  # by path
    sql_conn.execute("DROP TRIGGER test_refuse ON root_filesystem_entries")

    resumed = migrate(database_url, "--json")
    assert resumed.returncode == 1, resumed.stderr
    assert counts(resumed) == {
        **expected, "already_there": 3, "documents_copied": 1, "versions_copied": 0,
        "chunks_built": 1, "metadata_sidecars": 0,
    }  # fmt: skip
    left = reborn_rows(sql_conn)
    for path, (content, older, metadata) in LEGACY.items():
        if path.startswith("engine/") or path.startswith("odd.meta/"):
            assert path not in left
            continue
        doc = left[path]
        assert doc["contents"] == content.encode()
        assert doc["version"] == len(older) + 1
        assert doc["kind"] == "memory_document" and doc["type"] == "application/json"
        for number, old in enumerate(older, 1):
            version = left[f"{path}.versions/{number}"]
            body = json.loads(version["contents"])
            assert body["content"] == old
            assert body["content_hash"] == "sha256:" + hashlib.sha256(old.encode()).hexdigest()
            assert body["changed_by"] == (
                "default" if number == 1
                else "tenant:reborn-cli:user:reborn-cli:agent:reborn-cli-agent:project:_none"
            )  # fmt: skip
            assert version["indexed"]["doc_relative_path"] == path
            assert version["indexed"]["version"] == number
        assert f"{path}.versions/{len(older) + 1}" not in left
        chunks = [p for p in left if p.startswith(f"{path}.chunks/")]
        assert chunks == ([] if metadata.get("skip_indexing") else [f"{path}.chunks/0"])
        if metadata:
            assert json.loads(left[f"{path}.meta"]["contents"]) == metadata
    assert not any("another agent" in r["contents"].decode(errors="replace")
                   or "bob" in r["contents"].decode(errors="replace")
                   for r in left.values())  # fmt: skip
    again = migrate(database_url, "--json")
    assert counts(again) == {
        "documents_read": 6, "engine_state_skipped": 1, "already_there": 4, "refused": 1,
    }  # fmt: skip
    assert reborn_rows(sql_conn) == left, "a re-run changes nothing"
    assert legacy_snapshot(sql_conn) == before, "the legacy rows are never written"

    mount = mount_factory(database_url, user_id="reborn-cli")
    mnt = mount.path()
    shown = {
        str(Path(root, name).relative_to(mnt)): Path(root, name).read_bytes()
        for root, _, names in os.walk(mnt)
        for name in names
    }
    assert shown == {
        path: content.encode()
        for path, (content, _, _) in LEGACY.items()
        if not path.startswith(("engine/", "odd.meta/"))
    }
    (updated,) = sql_conn.execute(
        "SELECT updated_at FROM memory_documents WHERE path = 'MEMORY.md' AND agent_id IS NULL "
        "AND user_id = 'default'"
    ).fetchone() or (None,)
    (version,) = sql_conn.execute(
        "SELECT version FROM root_filesystem_entries WHERE path = %s", (f"{TARGET}/MEMORY.md",)
    ).fetchone() or (None,)
    # The file's time is the row's version token: updated_at to the millisecond plus
    # version % 1000 microseconds (memfs.db.reborn.postgres.rows.token), updated_at the legacy one.
    millis = int(updated.timestamp() * 1e6) // 1000
    assert (mnt / "MEMORY.md").stat().st_mtime_ns == (millis * 1000 + version % 1000) * 1000
    assert left["MEMORY.md.versions/2"]["contents"]  # and the versions keep their own times
    assert sql_conn.execute(
        "SELECT created_at FROM root_filesystem_entries WHERE path = %s",
        (f"{TARGET}/MEMORY.md.versions/2",),
    ).fetchone() == (T0 + timedelta(hours=2),)


def test_migrate_refuses_without_reborn_tables_and_bad_targets(
    database_url: str, sql_conn: psycopg.Connection[Any]
) -> None:
    open_database(Settings(database_url=database_url)).close()  # legacy only
    no_tables = migrate(database_url)
    assert no_tables.returncode == 3
    assert "no IronClaw Reborn tables" in no_tables.stderr
    assert no_tables.stderr.count("\n") == 1
    reborn_schema(database_url)
    bad = migrate(database_url, "--to-user", "_none")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
    assert "_none" in bad.stderr


def test_migrate_draws_progress_on_a_terminal(database_url: str) -> None:
    legacy_workspace(database_url)
    with psycopg.connect(database_url, autocommit=True) as conn:
        for i in range(40):
            conn.execute(
                "INSERT INTO memory_documents (user_id, path, content) VALUES ('default', %s, 'x')",
                (f"many/{i:02}.md",),
            )
    parent, child = pty.openpty()
    try:
        result = subprocess.run(
            [sys.executable, "-m", "memfs", "migrate", "--database-url", database_url],
            stdout=subprocess.PIPE, stderr=child, timeout=120, env=env(), text=True, check=False,
        )  # fmt: skip
        os.close(child)
        drawn = b""
        while True:
            try:
                chunk = os.read(parent, 65536)
            except OSError:
                break
            if not chunk:
                break
            drawn += chunk
    finally:
        os.close(parent)
    assert result.returncode == 1  # odd.meta/x.md is refused
    assert "memfs migrate: 46 documents read" in result.stdout
    # tqdm's bar: the label, the count, and the rate and time left.
    assert b"memfs migrate:" in drawn and b"46/46" in drawn and b"doc/s]" in drawn, drawn
    quiet = subprocess.run(  # stderr not a terminal: no bar at all
        [sys.executable, "-m", "memfs", "migrate", "--database-url", database_url],
        capture_output=True, timeout=120, env=env(), text=True, check=False,
    )  # fmt: skip
    assert "46/46" not in quiet.stderr and "doc/s" not in quiet.stderr
