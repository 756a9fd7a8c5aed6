"""``--read-only`` mounts: every change is refused with EROFS and the database is untouched."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.conftest import StatementLog
from tests.mounting import Mount

pytestmark = pytest.mark.mount


def test_read_only_mount_refuses_every_change(
    database_url: str,
    sql_conn: psycopg.Connection[Any],
    statements: StatementLog,
    mount_factory: Any,
) -> None:
    sql_conn.execute(
        "INSERT INTO memory_documents (user_id, path, content) VALUES "
        "('default', 'MEMORY.md', 'remember this\n'), ('default', 'd/x.md', 'x\n')"
    )
    subprocess.run(  # chunk the rows written behind memfs's back, so search finds them
        [sys.executable, "-m", "memfs", "reindex", "--database-url", database_url],
        check=True, timeout=60, capture_output=True,
    )  # fmt: skip
    statements.take()
    mount: Mount = mount_factory(database_url, extra_args=["--read-only"])
    mnt = mount.path()
    assert (mnt / "MEMORY.md").read_text() == "remember this\n"
    assert sorted(os.listdir(mnt)) == ["MEMORY.md", "d"]
    assert os.listdir(mnt / ".search" / "remember") == ["01-MEMORY.md"]
    actions: list[Callable[[], object]] = [
        lambda: (mnt / "MEMORY.md").write_text("changed"),
        lambda: open(mnt / "MEMORY.md", "a").close(),
        lambda: (mnt / "new.md").write_text("new"),
        lambda: os.mkdir(mnt / "newdir"),
        lambda: os.unlink(mnt / "MEMORY.md"),
        lambda: os.rename(mnt / "MEMORY.md", mnt / "OTHER.md"),
        lambda: os.rmdir(mnt / "d"),
        lambda: os.chmod(mnt / "MEMORY.md", 0o600),
        lambda: os.utime(mnt / "MEMORY.md", (0, 0)),
        lambda: os.truncate(mnt / "MEMORY.md", 0),
        lambda: os.symlink("MEMORY.md", mnt / ".#lock"),
        lambda: (mnt / ".MEMORY.md.swp").write_bytes(b"swap"),
    ]
    for action in actions:
        with pytest.raises(OSError) as info:
            action()
        assert info.value.errno == errno.EROFS, (action, info.value)
    assert statements.take() == []
    rows = dict(sql_conn.execute("SELECT path, content FROM memory_documents").fetchall())
    assert rows == {"MEMORY.md": "remember this\n", "d/x.md": "x\n"}
    mounts = Path("/proc/self/mounts").read_text().splitlines()
    options = [line.split()[3].split(",") for line in mounts if str(mnt) in line]
    assert options and "ro" in options[0]
