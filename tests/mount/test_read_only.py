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

from tests.engines import ENGINES, Engine
from tests.mounting import Mount, memfs_env

pytestmark = pytest.mark.mount


@pytest.mark.parametrize("engine", ENGINES, ids=str)
@pytest.mark.libsql_too
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
    mount: Mount = mount_factory(engine.mount_url(database_url), extra_args=["--read-only"])
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


@pytest.mark.parametrize("engine", ENGINES, ids=str)
def test_a_select_only_role_mounts_read_only(
    engine: Engine,
    work_dir: Path,
    database_url: str,
    sql_conn: psycopg.Connection[Any],
    mount_factory: Any,
) -> None:
    """It could not mount at all, even with --read-only: the mount ran its schema's DDL
    first, though the owner had set everything up."""
    engine.prepare(database_url)
    engine.agent_writes(sql_conn, database_url, {"MEMORY.md": "remember this\n"})
    owner = mount_factory(database_url)  # the owner's mount has made memfs's schema
    assert (owner.path() / "MEMORY.md").read_text() == "remember this\n"
    owner.stop()
    role = f"reader_{os.getpid()}"
    sql_conn.execute(f"DROP ROLE IF EXISTS {role}")
    sql_conn.execute(f"CREATE ROLE {role} LOGIN")
    for schema in ("public", "memfs"):
        sql_conn.execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
        sql_conn.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {role}")
    reader_url = database_url.replace("postgresql://postgres", f"postgresql://{role}", 1)
    assert reader_url != database_url
    try:
        reader = mount_factory(reader_url, name="reader", extra_args=["--read-only"])
        assert (reader.path() / "MEMORY.md").read_text() == "remember this\n"
        assert os.listdir(reader.path() / ".search" / "remember") == ["01-MEMORY.md"]
        with pytest.raises(OSError) as refused:
            (reader.path() / "MEMORY.md").write_text("changed")
        assert refused.value.errno == errno.EROFS
        reader.stop()
        # Not asked for --read-only: the role cannot write, so the mount says so and
        # refuses each write at once, rather than keeping saves it can never commit.
        unasked = mount_factory(reader_url, name="unasked")
        assert f"the role {role!r} may not write" in unasked.log()
        written = subprocess.run(
            [sys.executable, "-m", "memfs", "log", "a line", "--database-url", reader_url],
            capture_output=True, text=True, timeout=60, check=False,
            env=memfs_env(work_dir / "runtime"),
        )  # fmt: skip
        assert written.returncode != 0 and "may not write" in written.stderr
        assert len(written.stderr.strip().splitlines()) == 1, written.stderr
        with pytest.raises(OSError) as refused:
            (unasked.path() / "MEMORY.md").write_text("changed")
        assert refused.value.errno == errno.EROFS
        assert (unasked.path() / "MEMORY.md").read_text() == "remember this\n"
        unasked.stop()
    finally:
        sql_conn.execute(f"DROP OWNED BY {role}")
        sql_conn.execute(f"DROP ROLE {role}")
