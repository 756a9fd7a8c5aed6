"""Faults on a real mount: a killed daemon, a stuck database, an unexpected error."""

from __future__ import annotations

import errno
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memfs.daemon import is_mounted
from tests.faults import frozen, timed, write_file
from tests.mounting import fds_of, helper_socket_of, helpers_of, memfs_env

pytestmark = pytest.mark.mount


def test_sigkill_leaves_no_dead_mount(mounted: Any) -> None:
    (mounted.path() / "a.md").write_text("x")
    mounted.proc.send_signal(signal.SIGKILL)
    mounted.proc.wait(timeout=30)
    deadline = time.monotonic() + 10
    while is_mounted(mounted.mountpoint) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not is_mounted(mounted.mountpoint), (
        f"auto_unmount did not clean up; helpers left: {helpers_of(mounted.mountpoint)}"
    )
    assert os.listdir(mounted.mountpoint) == []


def test_the_helpers_socket_is_released_after_the_fuse_device(mounted: Any) -> None:
    """A SIGKILLed daemon's files are released highest descriptor first.  With the
    fusermount3 helper's socket above /dev/fuse (libfuse's own layout), the helper woke
    while the connection was still up, its check of the mountpoint failed with
    ECONNABORTED, and it left a dead mount: 8 of 80 SIGKILLs under the suite's load.
    This check fails on that layout every time."""
    pid = mounted.proc.pid
    device = [fd for fd, target in fds_of(pid).items() if target == "/dev/fuse"]
    helper = helper_socket_of(pid)
    assert len(device) == 1, fds_of(pid)
    assert helper is not None, f"no fusermount3 helper socket in {fds_of(pid)}"
    assert helper < device[0], f"helper socket fd {helper} is above /dev/fuse fd {device[0]}"


def test_stuck_database_fails_with_eio_and_keeps_serving(
    database_url: str, sql_conn: psycopg.Connection[Any], mount_factory: Any, work_dir: Path
) -> None:
    env = memfs_env(work_dir / "runtime", MEMFS_LOCK_TIMEOUT_MS="1500")
    mount = mount_factory(database_url, env=env)
    mnt = mount.path()
    (mnt / "MEMORY.md").write_text("v1\n")
    (mnt / "other.md").write_text("o\n")
    with psycopg.connect(database_url) as locker:
        locker.execute("SELECT * FROM memory_documents WHERE path = 'MEMORY.md' FOR UPDATE")
        listings: list[list[str]] = []

        def keep_listing() -> None:  # other requests must not wait for the stuck commit
            listings.append(sorted(os.listdir(mnt)))

        started = time.monotonic()
        fd = os.open(mnt / "MEMORY.md", os.O_WRONLY | os.O_APPEND)
        os.write(fd, b"v2\n")
        lister = threading.Timer(0.3, keep_listing)
        lister.start()
        with pytest.raises(OSError) as info:
            os.close(fd)
        elapsed = time.monotonic() - started
        lister.join(timeout=10)
        assert info.value.errno == errno.EIO
        assert elapsed < 6, f"close took {elapsed:.1f}s despite a 1.5s lock timeout"
        assert listings == [["MEMORY.md", "other.md"]]
        assert (mnt / "other.md").read_text() == "o\n"
        locker.rollback()
    # The change was kept in memory and is committed at unmount.
    assert (mnt / "MEMORY.md").read_text() == "v1\nv2\n"
    mount.umount()
    row = sql_conn.execute("SELECT content FROM memory_documents WHERE path = 'MEMORY.md'")
    assert row.fetchone() == ("v1\nv2\n",)
    assert "lock timeout" in mount.log()


def test_unexpected_error_becomes_eio_and_mount_survives(
    mounted: Any, sql_conn: psycopg.Connection[Any]
) -> None:
    mnt = mounted.path()
    (mnt / "a.md").write_text("x")
    sql_conn.execute("ALTER TABLE memfs.file_attrs RENAME TO file_attrs_gone")
    with pytest.raises(OSError) as info:
        os.chmod(mnt / "a.md", 0o600)
    assert info.value.errno == errno.EIO
    # A statement the server refused is an errno and one log line naming the file and
    # the database's reason (not an unexpected error): the mount goes on.
    assert "setattr 'a.md': [EIO] the database refused set_attrs" in mounted.log()
    assert 'relation "memfs.file_attrs" does not exist' in mounted.log()
    sql_conn.execute("ALTER TABLE memfs.file_attrs_gone RENAME TO file_attrs")
    os.chmod(mnt / "a.md", 0o600)
    assert (mnt / "a.md").stat().st_mode & 0o777 == 0o600
    assert (mnt / "a.md").read_text() == "x"


def test_frozen_database_answers_every_syscall_within_the_bound(
    database_url: str, sql_conn: psycopg.Connection[Any], mount_factory: Any, work_dir: Path
) -> None:
    """SIGSTOP of the server's processes: syscalls get EIO within the deadline (here
    2 s statement timeout + 2 s), later ones at once, and the mount recovers by itself."""
    env = memfs_env(work_dir / "runtime", MEMFS_STATEMENT_TIMEOUT_MS="2000")
    mount = mount_factory(database_url, env=env)
    mnt = mount.path()
    (mnt / "a.md").write_text("a\n")
    with frozen(work_dir / "pgdata"):
        first = timed(write_file("b.md", "w", "frozen\n"), cwd=mnt, limit=30)
        second = timed(write_file("a.md", "a", "more\n"), cwd=mnt, limit=30)
        listing = timed(["ls", "-l"], cwd=mnt, limit=30)
    assert first.returncode is not None, "a write hung on the frozen server"
    assert first.returncode != 0 and "Errno 5" in first.stderr, first
    assert first.seconds < 8, f"the first syscall took {first.seconds:.1f}s (bound 2 x 4s)"
    assert second.returncode is not None and second.returncode != 0
    assert second.seconds < 2, f"the breaker did not fail fast: {second.seconds:.1f}s"
    assert listing.returncode == 0, "cached metadata must stay readable"
    assert "did not answer commit_document within 4.0s" in mount.log()
    assert "'b.md'" in mount.log(), "the error line names the file"
    # Unfrozen: the mount recovers by itself and saves what it kept in memory.
    deadline = time.monotonic() + 20
    while True:
        try:
            (mnt / "c.md").write_text("after\n")
            break
        except OSError:
            assert time.monotonic() < deadline, "the mount did not recover"
            time.sleep(0.2)
    while True:
        rows = dict(sql_conn.execute("SELECT path, content FROM memory_documents").fetchall())
        if rows.get("b.md") == "frozen\n" and rows.get("a.md") == "a\nmore\n":
            break
        assert time.monotonic() < deadline, f"kept changes were not saved: {rows}"
        time.sleep(0.2)
    assert rows["c.md"] == "after\n"
    assert "the database answers again" in mount.log()
