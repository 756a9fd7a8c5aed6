"""``--read-only`` mounts: every change is refused with EROFS and the database is untouched."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.engines import ENGINES, Engine
from tests.mounting import Mount

pytestmark = pytest.mark.mount


@pytest.mark.parametrize("engine", ENGINES, ids=str)
def test_read_only_mount_refuses_every_change(
    engine: Engine,
    database_url: str,
    sql_conn: psycopg.Connection[Any],
    mount_factory: Any,
) -> None:
    engine.prepare(database_url)
    written = {"MEMORY.md": "remember this\n", "d/x.md": "x\n"}
    engine.agent_writes(sql_conn, database_url, written)
    statements = engine.statement_log(sql_conn)
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
    assert engine.contents(sql_conn) == written
    mounts = Path("/proc/self/mounts").read_text().splitlines()
    options = [line.split()[3].split(",") for line in mounts if str(mnt) in line]
    assert options and "ro" in options[0]
