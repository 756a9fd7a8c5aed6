"""Other writers: SQL behind the mount's back, a second mount, conflicts, restarts, kills."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memfs.db.embedded import start_embedded
from tests.conftest import apply_ironclaw_migrations
from tests.mounting import Mount, memfs_env
from tests.netproxy import DelayProxy

pytestmark = pytest.mark.mount

VISIBLE_WITHIN = 1.0  # the bound for the change feed


def eventually(check: Callable[[], bool], timeout: float) -> float:
    """Seconds until ``check()`` held; fails after ``timeout``."""
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"not true within {timeout}s")
        time.sleep(0.005)
    return time.monotonic() - started


def read(path: Path) -> str | None:
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


def sql_insert(conn: psycopg.Connection[Any], path: str, content: str) -> None:
    conn.execute(
        "INSERT INTO memory_documents (user_id, path, content) VALUES ('default', %s, %s)",
        (path, content),
    )


def test_sql_changes_show_up_at_once(mounted: Mount, sql_conn: psycopg.Connection[Any]) -> None:
    mnt = mounted.path()
    sql_insert(sql_conn, "agent.md", "written by the agent\n")
    eventually(lambda: read(mnt / "agent.md") == "written by the agent\n", VISIBLE_WITHIN)
    assert (mnt / "agent.md").stat().st_size == 21  # cached in the kernel from here on
    sql_conn.execute("UPDATE memory_documents SET content = 'updated by the agent, longer\n'")
    eventually(lambda: read(mnt / "agent.md") == "updated by the agent, longer\n", VISIBLE_WITHIN)
    assert (mnt / "agent.md").stat().st_size == 29
    sql_conn.execute("UPDATE memory_documents SET path = 'notes/moved.md'")
    eventually(lambda: read(mnt / "notes/moved.md") is not None, VISIBLE_WITHIN)
    assert not (mnt / "agent.md").exists()
    assert "notes" in os.listdir(mnt)
    sql_conn.execute("DELETE FROM memory_documents")
    eventually(lambda: not (mnt / "notes/moved.md").exists(), VISIBLE_WITHIN)
    assert "notes" not in os.listdir(mnt)  # an implied directory goes with its last file
    # Our own writes are not echoed back as external changes.
    (mnt / "mine.md").write_text("mine\n")
    assert "external" not in mounted.log().split("mine.md")[-1]


def test_two_mounts_see_each_other(database_url: str, mount_factory: Any) -> None:
    a = mount_factory(database_url, name="a")
    b = mount_factory(database_url, name="b")
    (b.path() / "from-b.md").write_text("hello from b\n")
    eventually(lambda: read(a.path("from-b.md")) == "hello from b\n", VISIBLE_WITHIN)
    (a.path() / "from-b.md").write_text("a replied\n")
    eventually(lambda: read(b.path("from-b.md")) == "a replied\n", VISIBLE_WITHIN)
    os.rename(b.path("from-b.md"), b.path("renamed.md"))
    eventually(lambda: read(a.path("renamed.md")) == "a replied\n", VISIBLE_WITHIN)
    os.unlink(a.path("renamed.md"))
    eventually(lambda: not b.path("renamed.md").exists(), VISIBLE_WITHIN)


def test_polling_without_the_trigger(
    database_url: str, sql_conn: psycopg.Connection[Any], mount_factory: Any
) -> None:
    apply_ironclaw_migrations(database_url)  # an IronClaw database: no trigger unless init
    mount = mount_factory(database_url)
    assert "polling for other writers" in mount.log()
    sql_insert(sql_conn, "polled.md", "seen by polling\n")
    eventually(lambda: read(mount.path("polled.md")) == "seen by polling\n", 3.0)
    trigger = sql_conn.execute(
        "SELECT count(*) FROM pg_trigger WHERE tgname = 'memfs_notify_change'"
    ).fetchone()
    assert trigger == (0,)  # memfs never added it on its own to IronClaw's table


def test_memfs_init_installs_the_trigger_on_an_ironclaw_database(
    database_url: str, sql_conn: psycopg.Connection[Any], mount_factory: Any, work_dir: Path
) -> None:
    apply_ironclaw_migrations(database_url)
    env = memfs_env(work_dir / "runtime")
    subprocess.run(
        [sys.executable, "-m", "memfs", "init", "--database-url", database_url],
        env=env, check=True, timeout=60, capture_output=True,
    )  # fmt: skip
    subprocess.run(  # idempotent
        [sys.executable, "-m", "memfs", "init", "--database-url", database_url],
        env=env, check=True, timeout=60, capture_output=True,
    )  # fmt: skip
    mount = mount_factory(database_url)
    assert "change-feed trigger" in mount.log()
    sql_insert(sql_conn, "fast.md", "x\n")
    eventually(lambda: read(mount.path("fast.md")) == "x\n", VISIBLE_WITHIN)
    refinery = sql_conn.execute("SELECT count(*) FROM refinery_schema_history").fetchone()
    assert refinery == (4,)


#: What a mount logs when another writer's change reaches a file open for writing there.
OPEN_CHANGED = "changed in the database while open for writing here"


def versions(conn: psycopg.Connection[Any]) -> list[str]:
    return [r[0] for r in conn.execute("SELECT content FROM memory_document_versions")]


def test_a_concurrent_append_is_merged_and_the_row_it_replaced_kept_as_a_version(
    mounted: Mount, sql_conn: psycopg.Connection[Any]
) -> None:
    """The agent appends while a person has the file open; the person's save merges the
    two (issue 32): both lines are in the document, the agent's row became a version."""
    target = mounted.path("MEMORY.md")
    target.write_text("line 1\n")
    with open(target, "r+") as handle:  # opened by a person...
        assert handle.read() == "line 1\n"
        sql_conn.execute(  # ...while the agent appends with SQL
            "UPDATE memory_documents SET content = content || 'agent line\n'"
        )
        eventually(lambda: OPEN_CHANGED in mounted.log(), VISIBLE_WITHIN)  # the feed told it
        handle.write("person line\n")
    row = sql_conn.execute("SELECT content FROM memory_documents").fetchone()
    assert row == ("line 1\nagent line\nperson line\n",)
    assert "line 1\nagent line\n" in versions(sql_conn)
    assert "merged with another writer's change" in mounted.log()
    assert target.read_text() == "line 1\nagent line\nperson line\n"


def test_an_overlapping_concurrent_change_is_kept_as_a_version(
    mounted: Mount, sql_conn: psycopg.Connection[Any]
) -> None:
    target = mounted.path("MEMORY.md")
    target.write_text("line 1\n")
    with open(target, "r+") as handle:  # opened by a person...
        assert handle.read() == "line 1\n"
        sql_conn.execute(  # ...while the agent rewrites the same line
            "UPDATE memory_documents SET content = 'line one, the agent''s\n'"
        )
        eventually(lambda: OPEN_CHANGED in mounted.log(), VISIBLE_WITHIN)
        handle.seek(0)
        handle.write("LINE 1\n")  # the same line, edited
    row = sql_conn.execute("SELECT content FROM memory_documents").fetchone()
    assert row == ("LINE 1\n",)
    assert "line one, the agent's\n" in versions(sql_conn)
    assert "overlap" in mounted.log()


def test_concurrent_change_without_versions_merges_or_becomes_a_conflict_copy(
    database_url: str, sql_conn: psycopg.Connection[Any], mount_factory: Any
) -> None:
    """No versions table: another writer's change that does not overlap the save is merged
    in under the row lock (both edits live, the saver's bytes in the safety net); one that
    overlaps it is kept as a conflict copy beside the document, the save the content."""
    apply_ironclaw_migrations(database_url, with_versions=False)
    mount = mount_factory(database_url)
    target = mount.path("MEMORY.md")
    target.write_text("line 1\n")
    with open(target, "r+") as handle:
        handle.read()
        sql_conn.execute("UPDATE memory_documents SET content = 'line one, the agent''s\n'")
        handle.write("person line\n")
    rows = dict(sql_conn.execute("SELECT path, content FROM memory_documents").fetchall())
    assert rows == {"MEMORY.md": "line one, the agent's\nperson line\n"}
    kept = sql_conn.execute("SELECT content FROM memfs.saver_copies").fetchall()
    assert kept == [(b"line 1\nperson line\n",)]

    with open(target, "r+") as handle:
        handle.read()
        sql_conn.execute("UPDATE memory_documents SET content = 'the agent''s only line\n'")
        handle.seek(0)
        handle.write("the person's only line\n")
        handle.truncate()
    rows = dict(sql_conn.execute("SELECT path, content FROM memory_documents").fetchall())
    assert rows.pop("MEMORY.md") == "the person's only line\n"
    [(copy, content)] = rows.items()
    assert re.fullmatch(r"MEMORY\.conflict-\d{8}T\d{6}Z\.md", copy), copy
    assert content == "the agent's only line\n"
    eventually((mount.path() / copy).exists, 3.0)


def test_agent_appender_racing_vim_saves_loses_nothing(
    mounted: Mount, sql_conn: psycopg.Connection[Any], work_dir: Path
) -> None:
    mounted.path("MEMORY.md").write_text("# Memory\n")
    stop = threading.Event()
    appended: list[str] = []

    def agent() -> None:  # IronClaw's append: a read-modify-write in its own transactions
        with psycopg.connect(mounted_url(sql_conn), autocommit=True) as conn:
            for i in range(40):
                if stop.is_set():
                    break
                (content,) = conn.execute(
                    "SELECT content FROM memory_documents WHERE path = 'MEMORY.md'"
                ).fetchone()  # type: ignore[misc]
                line = f"agent {i}"
                conn.execute(
                    "UPDATE memory_documents SET content = %s WHERE path = 'MEMORY.md'",
                    (content + "\n" + line,),
                )
                appended.append(line)
                time.sleep(0.02)

    thread = threading.Thread(target=agent)
    thread.start()
    env = dict(os.environ, HOME=str(work_dir / "vimhome"))
    try:
        for n in range(6):
            mounted.run(
                "vim", "--clean", "-c", f"normal! Govim {n}", "-c", "wq", "MEMORY.md", env=env
            )
    finally:
        stop.set()
        thread.join(timeout=30)
    final = sql_conn.execute("SELECT content FROM memory_documents").fetchone()[0]  # type: ignore[index]
    everything = final + "\n".join(versions(sql_conn))
    lost = [line for line in appended if line not in everything]
    assert appended and not lost, f"lost agent lines: {lost}"
    assert "vim 5" in final


def mounted_url(conn: psycopg.Connection[Any]) -> str:
    info = conn.info
    return f"postgresql://{info.user}@/{info.dbname}?host={info.host}"


def test_two_mounts_writing_one_file_lose_nothing(
    database_url: str, sql_conn: psycopg.Connection[Any], mount_factory: Any
) -> None:
    a = mount_factory(database_url, name="a")
    b = mount_factory(database_url, name="b")
    a.path("shared.md").write_text("base\n")
    eventually(lambda: read(b.path("shared.md")) == "base\n", VISIBLE_WITHIN)
    with open(a.path("shared.md"), "r+") as from_a, open(b.path("shared.md"), "r+") as from_b:
        from_a.read()
        from_b.read()
        from_a.write("from a\n")
        from_a.flush()
        os.fsync(from_a.fileno())
        eventually(lambda: OPEN_CHANGED in b.log(), VISIBLE_WITHIN)  # b heard of it
        from_b.write("from b\n")
    final = sql_conn.execute("SELECT content FROM memory_documents").fetchone()[0]  # type: ignore[index]
    assert final == "base\nfrom a\nfrom b\n"  # both appends, merged (issue 32)
    assert "base\nfrom a\n" in versions(sql_conn)


def test_postgres_restart_under_a_running_mount(work_dir: Path, mount_factory: Any) -> None:
    url, server = start_embedded(work_dir / "restart-pg", database="restart", cleanup_mode="delete")
    try:
        env = memfs_env(work_dir / "runtime", MEMFS_STATEMENT_TIMEOUT_MS="3000")
        mount = mount_factory(url, env=env)
        mount.path("before.md").write_text("cached content\n")
        assert mount.path("before.md").read_text() == "cached content\n"
        server._stop()  # the embedded server goes down under the mount
        # Reads of cached files and listings keep working.
        assert mount.path("before.md").read_text() == "cached content\n"
        assert "before.md" in os.listdir(mount.path())
        started = time.monotonic()
        fd = os.open(mount.path("during.md"), os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, b"written while the database was down\n")
        with pytest.raises(OSError) as info:
            os.close(fd)  # close reports the failure honestly...
        assert info.value.errno == 5  # EIO
        failed_after = time.monotonic() - started
        assert failed_after < 15  # ...within the timeouts, nothing hangs
        server.ensure_postgres_running()
        with psycopg.connect(url, autocommit=True) as conn:

            def saved() -> bool:
                row = conn.execute(
                    "SELECT content FROM memory_documents WHERE path = 'during.md'"
                ).fetchone()
                return row == ("written while the database was down\n",)

            saved_after = eventually(saved, 20)  # committed once the database is back
            print(
                f"\nrestart: close failed with EIO after {failed_after:.1f}s; "
                f"saved {saved_after:.1f}s after the server was back"
            )
            mount.path("after.md").write_text("the mount recovered\n")
            rows = dict(conn.execute("SELECT path, content FROM memory_documents").fetchall())
            assert rows["after.md"] == "the mount recovered\n"
            sql_insert(conn, "feed.md", "the change feed reconnected\n")
            eventually(lambda: read(mount.path("feed.md")) is not None, 15)
        assert mount.umount() == 0
    finally:
        server.cleanup()


def test_sigkill_during_a_write_storm_keeps_every_closed_file(
    mounted: Mount, sql_conn: psycopg.Connection[Any], work_dir: Path
) -> None:
    done_log = work_dir / "storm-done.txt"
    writer = textwrap.dedent(
        """
        import os, sys
        mnt, log = sys.argv[1], sys.argv[2]
        os.makedirs(os.path.join(mnt, "storm"), exist_ok=True)
        with open(log, "w") as done:
            for i in range(100000):
                path = os.path.join(mnt, "storm", f"f{i}.md")
                try:
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                    os.write(fd, f"file {i}\\n".encode() * 20)
                    if i % 2:
                        os.fsync(fd)
                    os.close(fd)
                except OSError:
                    break
                done.write(f"{i}\\n")
                done.flush()
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", writer, str(mounted.path()), str(done_log)])
    eventually(lambda: done_log.exists() and len(done_log.read_text().split()) > 300, 60)
    assert mounted.proc is not None
    os.kill(mounted.proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    closed = [int(x) for x in done_log.read_text().split()]
    rows = dict(sql_conn.execute("SELECT path, content FROM memory_documents").fetchall())
    missing = [i for i in closed if rows.get(f"storm/f{i}.md") != f"file {i}\n" * 20]
    print(f"\nstorm: {len(closed)} files closed before SIGKILL, {len(missing)} lost")
    assert len(closed) > 300 and not missing, f"{len(missing)} closed files lost: {missing[:5]}"


def test_a_second_row_for_a_shown_path_shows_the_newest_live_and_after_remount(
    database_url: str, sql_conn: psycopg.Connection[Any], mount_factory: Any
) -> None:
    """IronClaw's NULL agent_id lets two rows share a path; every view shows the newest."""
    mount = mount_factory(database_url)
    (mount.path() / "dup.md").write_text("older\n")
    sql_conn.execute(
        "INSERT INTO memory_documents (user_id, path, content, updated_at) "
        "VALUES ('default', 'dup.md', 'newer\n', now() + interval '1 second')"
    )
    deadline = time.monotonic() + 10
    while (mount.path() / "dup.md").read_text() != "newer\n":
        assert time.monotonic() < deadline, "the newer duplicate was not shown"
        time.sleep(0.05)
    assert "now showing the newer" in mount.log()
    mount.umount()
    again = mount_factory(database_url)
    assert (again.path() / "dup.md").read_text() == "newer\n"


def test_a_write_to_a_file_another_mount_deleted_while_it_was_open_is_saved_anew(
    database_url: str, mount_factory: Any
) -> None:
    """The history checker's lost append (1 in 20 legacy runs): ``rm`` on one mount, then at
    once ``>>`` on another whose open found the file before the removal's event arrived."""
    a = mount_factory(database_url, name="a")
    b = mount_factory(database_url, name="b")
    a.path("x.md").write_text("old\n")
    a.path("kept.md").write_text("untouched\n")
    eventually(lambda: read(b.path("x.md")) == "old\n" and b.path("kept.md").exists(), 5)
    appending = os.open(b.path("x.md"), os.O_WRONLY | os.O_APPEND)
    idle = os.open(b.path("kept.md"), os.O_WRONLY)
    try:
        os.unlink(a.path("x.md"))
        os.unlink(a.path("kept.md"))
        a.path("after.md").write_text("feed\n")  # events arrive in order: both removals first
        eventually(lambda: b.path("after.md").exists(), 5)
        assert os.write(appending, b"marker\n") == 7
    finally:
        os.close(appending)
        os.close(idle)
    eventually(lambda: read(a.path("x.md")) == "old\nmarker\n", 5)
    assert read(b.path("x.md")) == "old\nmarker\n"
    # Opened for writing and never written: the removal stands once it is closed.
    assert not b.path("kept.md").exists()
    assert not a.path("kept.md").exists()


@pytest.mark.parametrize("held", ["answer", "statement"])
def test_an_open_that_finds_a_file_removed_while_its_content_loads_creates_it_anew(
    held: str,
    pg_server: Any,
    database_url: str,
    sql_conn: psycopg.Connection[Any],
    mount_factory: Any,
) -> None:
    """The history checker's other lost append (``lost: m0w1 append x.md``): ``>>`` on a
    mount whose open found the file, then, while the open read the content, the removal's
    event arrived.  The write went to a file no name led to (``answer``: the read found the
    row), or the open failed with ENOENT (``statement``: the read ran after the delete).
    On one disk the open would have come after the removal and created the file."""
    socket_dir = Path(pg_server.get_uri().split("host=")[-1].split("&")[0])
    proxy = DelayProxy(socket_dir / ".s.PGSQL.5432")
    name = database_url.split("?", maxsplit=1)[0].rsplit("/", 1)[1]
    b = mount_factory(proxy.url(name), name="b", extra_args=["--listen-url", database_url])
    try:
        sql_insert(sql_conn, "x.md", "old\n")
        eventually(lambda: "x.md" in os.listdir(b.path()), 5)  # known, content never read
        outcome: list[object] = []

        def append() -> None:
            try:
                fd = os.open(b.path("x.md"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                try:
                    outcome.append(os.write(fd, b"marker\n"))
                finally:
                    os.close(fd)
            except OSError as exc:
                outcome.append(exc)

        proxy.hold(answers=held == "answer")  # the open's read waits at the proxy ...
        appender = threading.Thread(target=append, daemon=True)
        appender.start()
        eventually(lambda: proxy.waiting > 0, 5)
        sql_conn.execute("DELETE FROM memory_documents WHERE path = 'x.md'")
        eventually(lambda: not b.path("x.md").exists(), 5)  # ... while the removal arrives
        proxy.release()
        appender.join(10)
        assert not appender.is_alive()
        assert outcome == [7]
        eventually(lambda: read(b.path("x.md")) == "marker\n", 5)
        b.barrier()
        stored = sql_conn.execute(
            "SELECT content FROM memory_documents WHERE path = 'x.md'"
        ).fetchall()
        assert stored == [("marker\n",)]
    finally:
        proxy.release()
        b.stop()  # before its database goes away
        proxy.close()
