"""Deleted memory recoverable (issue 33): what a mount deletes (``rm``, ``rm -rf``, a
move into ``.trash/``), and on the legacy layout with memfs's trigger what SQL deletes, is
kept with its versions and put back by ``memfs undelete``, on every engine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.engines import Engine
from tests.mounting import Mount, memfs_env

pytestmark = [pytest.mark.mount, pytest.mark.libsql_too]


def eventually(check: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def memfs(work_dir: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memfs", *args, "--database-url", url, "--user-id", "default"],
        env=memfs_env(work_dir / "runtime"), capture_output=True, text=True, timeout=120,
        check=False, cwd=work_dir,
    )  # fmt: skip


def kept(work_dir: Path, url: str) -> list[dict[str, Any]]:
    listed = memfs(work_dir, url, "undelete", "--list", "--json")
    assert listed.returncode == 0, listed.stderr
    items: list[dict[str, Any]] = json.loads(listed.stdout)["items"]
    return items


def test_deleted_documents_are_kept_and_put_back(
    engine: Engine, database_url: str, sql_conn: psycopg.Connection[Any],
    mount_factory: Any, work_dir: Path,
) -> None:  # fmt: skip
    url = engine.mount_url(database_url)
    mount: Mount = mount_factory(url)
    (mount.path("notes")).mkdir()
    mount.path("notes/a.md").write_text("first\n")
    mount.path("notes/a.md").write_text("second\n")  # a version of "first"
    os.makedirs(mount.path("projects/alpha/deep"))
    mount.path("projects/alpha/x.md").write_text("ex\n")
    mount.path("projects/alpha/deep/y.md").write_text("why\n")
    mount.path("gone.md").write_text("to the trash\n")
    os.unlink(mount.path("notes/a.md"))
    subprocess.run(["rm", "-rf", str(mount.path("projects/alpha"))], check=True, timeout=30)
    os.makedirs(mount.path(".trash"), exist_ok=True)
    os.rename(mount.path("gone.md"), mount.path(".trash/gone.md"))  # Obsidian's delete
    mount.barrier()
    eventually(lambda: len(kept(work_dir, url)) == 4, "four kept deletions")
    paths = sorted(item["path"] for item in kept(work_dir, url))
    assert paths == ["gone.md", "notes/a.md", "projects/alpha/deep/y.md", "projects/alpha/x.md"]

    back = memfs(work_dir, url, "undelete", str(mount.path("projects/alpha")))
    assert back.returncode == 0, back.stderr
    # One commit per document (y.md's first): the mount may show one before the other.
    eventually(lambda: mount.path("projects/alpha/deep/y.md").exists()
               and mount.path("projects/alpha/x.md").exists(), "y.md and x.md back")  # fmt: skip
    assert mount.path("projects/alpha/deep/y.md").read_text() == "why\n"
    assert mount.path("projects/alpha/x.md").read_text() == "ex\n"

    again = memfs(work_dir, url, "undelete", "projects/alpha/x.md")  # it is there now
    assert again.returncode != 0 and "Traceback" not in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1 and "holds a document" in again.stderr

    for nowhere in (".search/x.md", "/.versions/a.md", ".at/x.md"):  # no mount shows these
        refused = memfs(work_dir, url, "undelete", "notes/a.md", "--to", nowhere)
        assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1 and "--to" in refused.stderr
    moved = memfs(work_dir, url, "undelete", "notes/a.md", "--to", "notes/a-again.md")
    assert moved.returncode == 0, moved.stderr
    eventually(lambda: mount.path("notes/a-again.md").exists(), "a-again.md")
    assert mount.path("notes/a-again.md").read_text() == "second\n"

    missing = memfs(work_dir, url, "undelete", "never-was.md")
    assert missing.returncode != 0 and "nothing deleted" in missing.stderr
    assert "Traceback" not in missing.stderr

    if engine.name == "legacy":  # memfs's trigger keeps what SQL deletes too
        mount.path("agent.md").write_text("the agent deletes this\n")
        mount.barrier()
        sql_conn.execute("DELETE FROM memory_documents WHERE path = 'agent.md'")
        eventually(lambda: not mount.path("agent.md").exists(), "the SQL delete seen")
        by = {item["path"]: item["deleted_by"] for item in kept(work_dir, url)}
        assert by.get("agent.md") == "sql", by
        assert memfs(work_dir, url, "undelete", "agent.md").returncode == 0
        eventually(lambda: mount.path("agent.md").exists(), "agent.md back")
        assert mount.path("agent.md").read_text() == "the agent deletes this\n"
