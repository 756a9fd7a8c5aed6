"""Workspace commands without a mount: status, seed, reindex, export/import, log."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from memfs.config import redacted
from memfs.db import Database
from memfs.ironclaw.chunker import chunk_document
from tests.mounting import memfs_env


def memfs(work_dir: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memfs", *args, "--database-url", url],
        env=memfs_env(work_dir / "runtime"), capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip


def rows(conn: psycopg.Connection[Any]) -> dict[str, str]:
    return dict(conn.execute("SELECT path, content FROM memory_documents").fetchall())


def test_seed_creates_only_what_is_absent(
    database_url: str, sql_conn: psycopg.Connection[Any], work_dir: Path
) -> None:
    first = memfs(work_dir, database_url, "seed", "--json")
    assert json.loads(first.stdout)["counts"]["created"] == 9  # eight identity files + BOOTSTRAP.md
    assert {"MEMORY.md", "SOUL.md", "BOOTSTRAP.md", "HEARTBEAT.md"} <= set(rows(sql_conn))
    sql_conn.execute("UPDATE memory_documents SET content = 'mine' WHERE path = 'MEMORY.md'")
    second = json.loads(memfs(work_dir, database_url, "seed", "--json").stdout)
    assert "created" not in second["counts"] and rows(sql_conn)["MEMORY.md"] == "mine"


def test_export_import_round_trip_never_duplicates(
    database: Database, database_url: str, sql_conn: psycopg.Connection[Any], work_dir: Path
) -> None:
    for path, text in {"MEMORY.md": "m", "daily/2026-03-03.md": "d", "a/b/c.md": "c"}.items():
        sql_conn.execute(
            "INSERT INTO memory_documents (user_id, path, content) VALUES ('default', %s, %s)",
            (path, text),
        )
    out = work_dir / "export-tree"
    exported = json.loads(memfs(work_dir, database_url, "export", str(out), "--json").stdout)
    assert exported["counts"]["exported"] == 3
    assert (out / "a/b/c.md").read_text() == "c"
    (out / "new.md").write_text("new file\n")
    (out / "MEMORY.md").write_text("edited outside\n")
    (out / "MEMORY.md~").write_text("editor backup")  # scratch: never imported
    (out / "image.png").write_bytes(b"\x89PNG\x00\x01")  # binary: refused, reported
    imported = memfs(work_dir, database_url, "import", str(out), "--json")
    assert imported.returncode == 1  # a file was not imported: the command says so
    report = json.loads(imported.stdout)
    assert report["counts"] == {"skipped_existing": 3, "created": 1, "skipped_scratch": 1,
                                "skipped_not_text": 1}  # fmt: skip
    assert any("image.png" in p for p in report["problems"])
    assert rows(sql_conn)["MEMORY.md"] == "m"
    again = json.loads(
        memfs(work_dir, database_url, "import", str(out), "--overwrite", "--json").stdout
    )
    assert again["counts"]["overwritten"] == 4
    assert rows(sql_conn)["MEMORY.md"] == "edited outside\n"
    count = sql_conn.execute("SELECT count(*), count(DISTINCT path) FROM memory_documents")
    assert count.fetchone() == (4, 4)
    assert "MEMORY.md~" not in rows(sql_conn)


def test_reindex_and_log(
    database: Database, database_url: str, sql_conn: psycopg.Connection[Any], work_dir: Path
) -> None:
    text = " ".join(f"w{i}" for i in range(1000))
    sql_conn.execute(  # written behind memfs's back: no chunks yet
        "INSERT INTO memory_documents (user_id, path, content) VALUES ('default', 'big.md', %s)",
        (text,),
    )
    memfs(work_dir, database_url, "init")
    result = memfs(work_dir, database_url, "reindex", "--json")
    assert json.loads(result.stdout)["counts"]["chunks"] == 2
    stored = [
        r[0] for r in sql_conn.execute("SELECT content FROM memory_chunks ORDER BY chunk_index")
    ]
    assert stored == chunk_document(text)
    missing = memfs(work_dir, database_url, "reindex", "nope.md")
    assert missing.returncode == 1 and "no document at 'nope.md'" in missing.stderr
    env_tz = {"TZ": "Pacific/Kiritimati"}  # UTC+14: the local date and time differ from UTC
    local_now = datetime.now(UTC) + timedelta(hours=14)
    for words in (["deployed", "v2"], ["rolled", "back"]):
        logged = subprocess.run(
            [sys.executable, "-m", "memfs", "log", *words, "--database-url", database_url],
            env=memfs_env(work_dir / "runtime", **env_tz), capture_output=True, text=True,
            timeout=120, check=False,
        )  # fmt: skip
        assert logged.returncode == 0, logged.stderr
    content = rows(sql_conn)[f"daily/{local_now:%Y-%m-%d}.md"]
    assert content.endswith("\n"), "an `echo >>` afterwards must start its own line"
    lines = content.splitlines()
    assert [line[11:] for line in lines] == ["deployed v2", "rolled back"]
    assert all(line[0] == "[" and line[9] == "]" for line in lines)  # [HH:MM:SS]
    later = local_now + timedelta(minutes=2)  # the commands ran just after local_now
    assert lines[0][1:3] in {f"{local_now:%H}", f"{later:%H}"}


def test_status(database_url: str, sql_conn: psycopg.Connection[Any], work_dir: Path) -> None:
    memfs(work_dir, database_url, "seed")
    info = json.loads(memfs(work_dir, database_url, "status", "--json").stdout)
    assert info["counts"] == {"documents": 9, "chunks": 9, "embeddings_pending": 9}
    assert info["details"]["change_feed"] is True
    assert info["details"]["database"] == redacted(database_url)  # libpq key=value form
    text = memfs(work_dir, database_url, "status").stdout
    assert "documents:          9" in text
