"""``.versions/`` on a real mount, on every engine: every kept version as a read-only file
with its exact content, size and time; diff and cp restore; another writer's save shows
up; nothing walks into it; ``memfs versions`` and ``memfs restore`` without a mount."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.conftest import apply_ironclaw_migrations
from tests.engines import Engine
from tests.mounting import Mount

pytestmark = [pytest.mark.mount, pytest.mark.libsql_too]


def wait_for(condition: Any, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def listing(directory: Path) -> list[str]:
    return sorted(os.listdir(directory))


def test_five_saves_show_five_versions_diff_and_cp_restore(
    engine: Engine, engine_mount: Mount, sql_conn: psycopg.Connection[Any]
) -> None:
    mnt = engine_mount.path()
    doc = mnt / "MEMORY.md"
    doc.write_text("v0\n")
    for i in range(1, 6):
        doc.write_text(f"v{i}\n" + "more\n" * i)
    versions = mnt / ".versions" / "MEMORY.md"
    names = listing(versions)
    assert len(names) == 6 and names[-1] == "current.md", names
    assert [n.split("_")[0] for n in names[:5]] == ["0001", "0002", "0003", "0004", "0005"]
    assert all(n.endswith("_default.md") or "default" in n for n in names[:5]), names
    assert [(versions / n).read_text() for n in names] == [
        "v0\n",
        *(f"v{i}\n" + "more\n" * i for i in range(1, 5)),
        doc.read_text(),
    ]
    assert engine.versions(sql_conn, "MEMORY.md") == [(versions / n).read_text() for n in names[:5]]
    for name in names:  # exact sizes; times stay put between two looks
        first, second = (versions / name).stat(), (versions / name).stat()
        assert first.st_size == len((versions / name).read_bytes())
        assert first.st_mtime_ns == second.st_mtime_ns
    diff = engine_mount.run("diff", f".versions/MEMORY.md/{names[2]}", "MEMORY.md", check=False)
    assert diff.returncode == 1 and b"< v2" in diff.stdout and b"> v5" in diff.stdout
    engine_mount.run("cp", f".versions/MEMORY.md/{names[2]}", "MEMORY.md")
    assert doc.read_text() == "v2\nmore\nmore\n"
    after = listing(versions)
    assert len(after) == 7, "the restore is a save: the content it replaced is a version"
    assert (versions / after[5]).read_text() == "v5\n" + "more\n" * 5
    # Read-only, and never walked into.
    for attempt in (lambda: (versions / "x.md").write_text("x"),
                    lambda: os.unlink(versions / after[0]),
                    lambda: (versions / after[0]).write_text("changed")):  # fmt: skip
        with pytest.raises(OSError) as refused:
            attempt()
        assert refused.value.errno in (errno.EROFS, errno.EACCES), refused.value
    found = engine_mount.run("find", ".").stdout.decode()
    assert ".versions" not in found and "./MEMORY.md" in found
    grep = engine_mount.run("grep", "-r", "v0", ".", check=False)
    assert grep.stdout == b"", "grep -r does not walk into .versions"
    assert listing(mnt / ".versions") == ["README.md"]


def test_folders_another_writers_save_and_deleted_documents(
    engine: Engine, engine_mount: Mount, sql_conn: psycopg.Connection[Any]
) -> None:
    mnt = engine_mount.path()
    (mnt / "daily").mkdir()
    note = mnt / "daily" / "2026-03-03.md"
    note.write_text("[09:00:00] standup\n")
    note.write_text("[09:00:00] standup\n[10:00:00] review\n")
    assert listing(mnt / ".versions" / "daily") == ["2026-03-03.md"]
    assert len(listing(mnt / ".versions" / "daily" / "2026-03-03.md")) == 2
    engine.agent_overwrites(sql_conn, "daily/2026-03-03.md", "rewritten by the agent\n")
    shown = mnt / ".versions" / "daily" / "2026-03-03.md"
    wait_for(lambda: len(listing(shown)) == 3, "the agent's save in .versions")
    names = listing(shown)
    assert (shown / names[1]).read_text() == "[09:00:00] standup\n[10:00:00] review\n"
    assert (shown / "current.md").read_text() == "rewritten by the agent\n"
    note.unlink()
    engine_mount.barrier()
    assert not (mnt / ".versions" / "daily" / "2026-03-03.md").exists()


def test_the_commands_list_and_restore_without_a_mount(
    engine: Engine, engine_mount: Mount, sql_conn: psycopg.Connection[Any]
) -> None:
    doc = engine_mount.path() / "notes.md"
    for text in ("one\n", "two\n", "three\n"):
        doc.write_text(text)
    engine_mount.barrier()
    assert engine_mount.database_url is not None
    where = ["--database-url", engine_mount.database_url, "--user-id", "default"]

    def memfs(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "memfs", *args, *where], env=engine_mount.env,
                              capture_output=True, text=True, timeout=60, check=False)  # fmt: skip

    listed = memfs("versions", "notes.md", "--json")
    assert listed.returncode == 0, listed.stderr
    items = json.loads(listed.stdout)["items"]
    assert [(i["version"], i["bytes"]) for i in items] == [(1, 4), (2, 4), ("current", 6)]
    restored = memfs("restore", "notes.md", "1")
    assert restored.returncode == 0, restored.stderr
    assert engine.contents(sql_conn)["notes.md"] == "one\n"
    assert engine.versions(sql_conn, "notes.md") == ["one\n", "two\n", "three\n"]
    missing = memfs("restore", "notes.md", "9")
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1
    assert "has no version 9" in missing.stderr
    bad = memfs("restore", "notes.md", "zero")
    assert bad.returncode == 2 and "version number" in bad.stderr


def test_a_database_without_versions_says_so(database_url: str, mount_factory: Any) -> None:
    apply_ironclaw_migrations(database_url, with_versions=False)
    mount = mount_factory(database_url)
    (mount.path() / "MEMORY.md").write_text("one\n")
    (mount.path() / "MEMORY.md").write_text("two\n")
    readme = (mount.path() / ".versions" / "README.md").read_text()
    assert "keeps no versions" in readme and "memory_document_versions" in readme
    assert not (mount.path() / ".versions" / "MEMORY.md").exists()
