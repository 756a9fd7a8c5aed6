"""Namespace changes left for the next transaction (``memfs.db.deferred``) on a real
mount: real ``rm``, ``rm -rf``, ``mv`` and ``mkdir``, a second connection looking at the
rows, and SIGKILL between a change and its send."""

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


def test_a_folder_rename_reaches_other_writers_and_a_save_after_it_is_no_conflict(
    mounted: Any, sql_conn: psycopg.Connection[Any]
) -> None:
    for i in range(40):
        mounted.path(f"projects/p/{i}.md").parent.mkdir(parents=True, exist_ok=True)
        mounted.path(f"projects/p/{i}.md").write_text(f"note {i}\n")
    mounted.shell("mv projects archive && echo more >> archive/p/3.md && mkdir archive/new")
    deadline = time.monotonic() + 5
    while "archive/p/0.md" not in rows(sql_conn):  # another writer sees the move soon
        assert time.monotonic() < deadline, "the move did not reach the database"
        time.sleep(0.01)
    mounted.barrier()
    assert sorted(rows(sql_conn)) == sorted(f"archive/p/{i}.md" for i in range(40))
    assert sql_conn.execute(
        "SELECT content FROM memory_documents WHERE path = 'archive/p/3.md'"
    ).fetchone() == ("note 3\nmore\n",)
    kept = {r[0] for r in sql_conn.execute("SELECT path FROM memfs.directories")}
    assert {"archive", "archive/new"} <= kept and not any(p.startswith("projects") for p in kept)
    assert os.listdir(mounted.path("archive/p")) and not mounted.path("projects").exists()


def test_a_killed_daemon_leaves_an_unsent_folder_rename_undone(
    mounted: Any, sql_conn: psycopg.Connection[Any]
) -> None:
    """SIGKILL right after ``mv``: the database holds either the old paths or the new ones,
    every document with its content (never a mixture, never a loss)."""
    for i in range(20):
        mounted.path(f"a/{i}.md").parent.mkdir(exist_ok=True)
        mounted.path(f"a/{i}.md").write_text(f"{i}\n")
    subprocess.run(["mv", str(mounted.path("a")), str(mounted.path("b"))], check=True, timeout=30)
    assert mounted.proc is not None
    os.kill(mounted.proc.pid, signal.SIGKILL)
    mounted.proc.wait(timeout=30)
    subprocess.run(["fusermount3", "-u", "-z", str(mounted.mountpoint)], timeout=30, check=False)
    found = dict(sql_conn.execute("SELECT path, content FROM memory_documents").fetchall())
    folders = {path.split("/")[0] for path in found}
    assert len(found) == 20 and len(folders) == 1 and folders <= {"a", "b"}
    assert sorted(found.values()) == sorted(f"{i}\n" for i in range(20))
