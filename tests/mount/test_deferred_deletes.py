"""Deletes left for the next transaction (``memfs.db.deferred``): ``rm -rf`` in a handful
of round trips, with what every process sees kept consistent.

Model tests run the filesystem with its background sender, as a mount does; mount tests
use real ``rm``, ``rm -rf`` and a second connection looking at the rows.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Any

import psycopg

from tests.model.test_deferred_deletes import rows


def test_rm_on_a_mount_reaches_other_writers_and_survives_unmount(
    mounted: Any, sql_conn: psycopg.Connection[Any]
) -> None:
    files = [f"t/{d}/{i}.md" for d in "ab" for i in range(30)]
    for name in files:
        mounted.path(name).parent.mkdir(parents=True, exist_ok=True)
        mounted.path(name).write_text("deploy\n")
    mounted.path("one.md").write_text("one\n")
    mounted.run("rm", "one.md")
    deadline = time.monotonic() + 5
    while "one.md" in rows(sql_conn):  # another writer sees the delete within moments
        assert time.monotonic() < deadline, "the delete did not reach the database"
        time.sleep(0.01)
    mounted.run("rm", "-rf", "t")
    assert not mounted.path("t").exists()
    mounted.barrier()  # fsync of a directory: nothing is pending after it
    assert rows(sql_conn) == []
    mounted.path("again.md").write_text("again\n")
    mounted.run("rm", "again.md")
    assert mounted.umount() == 0
    assert rows(sql_conn) == [], "unmount sends what was left"


def test_a_killed_daemon_loses_no_saved_file_only_unsent_deletes(
    mounted: Any, sql_conn: psycopg.Connection[Any]
) -> None:
    """The trade-off, shown: SIGKILL right after ``rm`` may leave the row (the file comes
    back at the next mount), never the reverse: a saved file is never lost."""
    mounted.path("keep.md").write_text("keep\n")
    mounted.path("gone.md").write_text("gone\n")
    subprocess.run(["rm", str(mounted.path("gone.md"))], check=True, timeout=30)
    assert mounted.proc is not None
    os.kill(mounted.proc.pid, signal.SIGKILL)
    mounted.proc.wait(timeout=30)
    subprocess.run(["fusermount3", "-u", "-z", str(mounted.mountpoint)], timeout=30, check=False)
    assert "keep.md" in rows(sql_conn)
    assert set(rows(sql_conn)) <= {"keep.md", "gone.md"}
