"""The safety net under the merge (issue 54, requirement 3), on a real mount of every
engine: a save merged with the agent's change is kept exactly as written, in memfs's own
storage (no extra IronClaw row), listed under ``.versions/<file>/as-saved_*`` and put back
by ``cp`` or ``memfs restore PATH as-saved_<n>``; a save nothing changed keeps no copy."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.engines import Engine
from tests.mounting import Mount

pytestmark = [pytest.mark.mount, pytest.mark.libsql_too]


def wait_for(condition: Any, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def copies(mnt: Path, name: str) -> list[str]:
    return sorted(n for n in os.listdir(mnt / ".versions" / name) if n.startswith("as-saved_"))


def test_a_merged_save_is_kept_as_written_and_restorable(
    engine: Engine, engine_mount: Mount, sql_conn: psycopg.Connection[Any]
) -> None:
    mnt = engine_mount.path()
    doc = mnt / "notes.md"
    doc.write_text("# notes\n")
    engine_mount.barrier()
    assert doc.read_text() == "# notes\n"  # this process's read: its save's base
    doc.write_text("# notes\nplain save\n")  # no other writer: stored as written
    assert copies(mnt, "notes.md") == []
    assert doc.read_text() == "# notes\nplain save\n"
    assert engine.agent_appends(sql_conn, "notes.md", "agent line\n")
    wait_for(lambda: "agent line" in doc.read_text(), "the mount to show the agent's line")
    rows_before = len(engine.rows(sql_conn))
    mine = "# notes\nplain save\nmy line\n"
    with open(doc, "w") as out:  # written from what it read before the agent's line
        out.write(mine)
    stored = engine.contents(sql_conn)["notes.md"]
    assert stored == "# notes\nplain save\nagent line\nmy line\n"
    (name,) = copies(mnt, "notes.md")
    assert (mnt / ".versions" / "notes.md" / name).read_text() == mine
    assert len(engine.rows(sql_conn)) == rows_before, "the copy is no row of IronClaw's"
    assert mine not in engine.versions(sql_conn, "notes.md")

    subprocess.run(["cp", str(mnt / ".versions" / "notes.md" / name), str(doc)], check=True,
                   timeout=30)  # fmt: skip
    wait_for(
        lambda: engine.contents(sql_conn)["notes.md"] == mine,
        f"cp to restore it: {engine.contents(sql_conn)} {engine_mount.log()[-3000:]}",
    )

    doc.write_text("something else\n")
    engine_mount.barrier()
    assert engine_mount.database_url is not None
    restored = subprocess.run(
        [sys.executable, "-m", "memfs", "restore", "notes.md", name.removesuffix(".md"),
         "--database-url", engine_mount.database_url, "--user-id", "default"],
        env=engine_mount.env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert restored.returncode == 0, restored.stderr
    assert engine.contents(sql_conn)["notes.md"] == mine
    other = subprocess.run(
        [sys.executable, "-m", "memfs", "restore", "other.md", name,
         "--database-url", engine_mount.database_url, "--user-id", "default"],
        env=engine_mount.env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert other.returncode == 1 and other.stderr.count("\n") == 1, other.stderr
