"""IronClaw's libSQL files: found as IronClaw finds them, told apart by their tables, opened
without changing them, and written beside a writer that holds the lock (a real process)."""

from __future__ import annotations

import logging
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from memfs.db.libsql import connection
from memfs.db.libsql.connection import LibsqlFile, NotIronClawFile
from memfs.db.libsql.files import (
    NoIronClawFile,
    default_file,
    layout_of,
    legacy_file,
    reborn_file,
)
from memfs.ironclaw.fts_names import sql_index_name
from tests.ironclaw_libsql import reborn_local_dev, search_scope

SCOPE = "/memory/tenants/reborn-cli/users/reborn-cli/agents/reborn-cli-agent/projects/_none"


def test_the_local_dev_file_is_found_where_ironclaw_keeps_it(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path)}
    expected = tmp_path / ".ironclaw/reborn/local-dev/reborn-local-dev.db"
    assert reborn_file(env) == expected
    assert default_file(env) is None  # not there yet
    reborn_local_dev(expected)
    assert default_file(env) == expected


def test_the_profile_comes_from_the_environment_then_config_toml(tmp_path: Path) -> None:
    home = tmp_path / "rb"
    env = {"HOME": str(tmp_path), "IRONCLAW_REBORN_HOME": str(home)}
    home.mkdir()
    (home / "config.toml").write_text('[boot]\nprofile = "hosted-single-tenant-volume"\n')
    assert reborn_file(env) == home / "hosted-single-tenant-volume/reborn-local-dev.db"
    env["IRONCLAW_REBORN_PROFILE"] = "local-dev-yolo"
    assert reborn_file(env) == home / "local-dev/reborn-local-dev.db"
    env["IRONCLAW_REBORN_PROFILE"] = "production"  # PostgreSQL: no file
    assert reborn_file(env) is None


def test_a_home_ironclaw_refuses_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(NoIronClawFile, match="not a home IronClaw accepts"):
        reborn_file({"IRONCLAW_REBORN_HOME": "relative/home"})


def test_the_legacy_file_follows_libsql_path_then_the_base_dir(tmp_path: Path) -> None:
    assert legacy_file({"HOME": str(tmp_path)}) == tmp_path / ".ironclaw/ironclaw.db"
    assert legacy_file({"IRONCLAW_BASE_DIR": "/srv/ic"}) == Path("/srv/ic/ironclaw.db")
    assert legacy_file({"LIBSQL_PATH": "/x/y.db", "IRONCLAW_BASE_DIR": "/z"}) == Path("/x/y.db")


def test_the_layout_is_told_by_the_tables_and_nothing_is_changed(tmp_path: Path) -> None:
    path = reborn_local_dev(tmp_path / "reborn-local-dev.db")
    before = path.stat().st_mtime_ns
    opened = LibsqlFile(path)
    try:
        assert layout_of(opened.connection()) == "reborn"
        assert opened.journal_mode == "wal"
        projected = (
            opened.connection()
            .execute("SELECT index_name, path, k0 FROM root_filesystem_ordered_index_rows")
            .fetchall()
        )  # IronClaw's projection trigger ran for its thread row
        assert projected == [("thread_by_status", "/tenants/reborn-cli/threads/t1", "open")]
    finally:
        opened.close()
    assert path.stat().st_mtime_ns == before
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes (x)")
    opened = LibsqlFile(other)
    try:
        assert layout_of(opened.connection()) is None
    finally:
        opened.close()
    with pytest.raises(NotIronClawFile, match="never creates"):
        LibsqlFile(tmp_path / "missing.db")
    assert not (tmp_path / "missing.db").exists()


def test_the_fts_table_of_a_searched_scope_has_ironclaws_name(tmp_path: Path) -> None:
    path = reborn_local_dev(tmp_path / "reborn-local-dev.db")
    table = search_scope(path, SCOPE)
    assert table == "idx_rfs_memory_tenants_reborn_cli_users_reborn_cli_ag_05be41e0_fts"
    assert table == sql_index_name(SCOPE, "memory_chunks_content_fts") + "_fts"
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO root_filesystem_entries (path, contents, content_type, kind, indexed, "
            "version) VALUES (?, X'74', 'application/json', 'memory_chunk', ?, 1)",
            (f"{SCOPE}/a.md.chunks/0", '{"content":"green tea"}'),
        )
        found = conn.execute(f"SELECT path FROM {table} WHERE {table} MATCH '\"tea\"'").fetchall()
    assert found == [(f"{SCOPE}/a.md.chunks/0",)]


def test_another_connections_commit_moves_data_version(tmp_path: Path) -> None:
    path = reborn_local_dev(tmp_path / "reborn-local-dev.db")
    opened = LibsqlFile(path)
    try:
        first = opened.data_version()
        assert opened.data_version() == first
        with sqlite3.connect(path) as other:
            other.execute("INSERT INTO root_filesystem_sequences (path, next_seq) VALUES ('/x', 1)")
        assert opened.data_version() != first
    finally:
        opened.close()


def _hold_lock(path: Path, seconds: float) -> subprocess.Popen[str]:
    """Another process (IronClaw's writer, say) holding the write lock for ``seconds``."""
    script = textwrap.dedent(f"""
        import sqlite3, sys, time
        c = sqlite3.connect({str(path)!r}, isolation_level=None)
        c.execute("BEGIN IMMEDIATE")
        c.execute("INSERT INTO root_filesystem_sequences (path, next_seq) VALUES ('/held', 1)")
        print("held", flush=True)
        time.sleep({seconds})
        c.execute("COMMIT")
    """)
    holder = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


def test_a_write_waits_for_a_lock_another_process_holds_briefly(tmp_path: Path) -> None:
    path = reborn_local_dev(tmp_path / "reborn-local-dev.db")
    opened = LibsqlFile(path)
    holder = _hold_lock(path, 1.0)
    try:
        started = time.monotonic()
        opened.write(lambda c: c.execute(
            "INSERT INTO root_filesystem_sequences (path, next_seq) VALUES ('/mine', 1)"
        ))  # fmt: skip
        waited = time.monotonic() - started
    finally:
        holder.wait(timeout=30)
        opened.close()
    assert 0.5 < waited < 5.0  # it waited for the lock instead of failing
    with sqlite3.connect(path) as conn:
        rows = {r[0] for r in conn.execute("SELECT path FROM root_filesystem_sequences")}
    assert rows == {"/held", "/mine"}


def test_a_lock_held_past_the_bound_fails_the_write_and_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(connection, "BUSY_MS", 200)
    monkeypatch.setattr(connection, "LOCKED_FOR", 1.0)
    path = reborn_local_dev(tmp_path / "reborn-local-dev.db")
    opened = LibsqlFile(path)
    holder = _hold_lock(path, 4.0)
    try:
        started = time.monotonic()
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            opened.write(lambda c: c.execute(
                "INSERT INTO root_filesystem_sequences (path, next_seq) VALUES ('/mine', 1)"
            ))  # fmt: skip
        assert time.monotonic() - started < 3.0  # bounded, not IronClaw's whole hold
    finally:
        holder.wait(timeout=30)
        opened.close()
    with sqlite3.connect(path) as conn:
        rows = {r[0] for r in conn.execute("SELECT path FROM root_filesystem_sequences")}
    assert rows == {"/held"}


def test_a_lock_held_past_the_bound_names_the_file_in_the_users_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memfs.failures import describe_failure

    monkeypatch.setattr(connection, "BUSY_MS", 100)
    path = reborn_local_dev(tmp_path / "reborn-local-dev.db")
    opened = LibsqlFile(path)
    holder = _hold_lock(path, 3.0)
    try:
        with pytest.raises(sqlite3.OperationalError) as caught:
            opened.wait_until_writable(patience=0.5)
        assert opened.held_since is None  # nobody waits any more
    finally:
        holder.wait(timeout=30)
        opened.close()
    code, line = describe_failure(caught.value)
    assert code != 0 and "internal error" not in line
    assert line.startswith(f"{path}: another program (IronClaw) holds its write lock")


def test_a_mount_waits_for_a_lock_longer_than_a_write_does_and_says_since_when(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A running IronClaw mid-transaction at memfs's start: one warning naming the file
    and since when, ``held_since`` set while it waits (``.status`` says it), and the
    start goes on once the lock is let go, past the bound of one write."""
    monkeypatch.setattr(connection, "BUSY_MS", 100)
    monkeypatch.setattr(connection, "LOCKED_FOR", 0.5)
    path = reborn_local_dev(tmp_path / "reborn-local-dev.db")
    opened = LibsqlFile(path)
    seen: list[float | None] = []
    holder = _hold_lock(path, 2.0)
    watcher = threading.Thread(target=lambda: (time.sleep(1.0), seen.append(opened.held_since)))
    watcher.start()
    try:
        before = time.time()
        with caplog.at_level(logging.INFO, logger="memfs.db.libsql.connection"):
            opened.wait_until_writable(patience=20.0)
        waited = time.time() - before
    finally:
        holder.wait(timeout=30)
        watcher.join(timeout=10)
        opened.close()
    assert 1.0 < waited < 10.0
    assert seen and seen[0] is not None and before - 1 <= seen[0] <= before + 1
    assert opened.held_since is None
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and str(path) in warnings[0].getMessage()
    assert "holds its write lock since" in warnings[0].getMessage()
    assert getattr(warnings[0], "tell_user", False)  # forwarded to the user's terminal
    assert any("free again" in r.getMessage() for r in caplog.records)


async def test_a_commit_by_another_process_wakes_the_poll(tmp_path: Path) -> None:
    """IronClaw's commit writes the file's -wal; the watch wakes the poll (it never opens
    the files: only inotify)."""
    import trio

    from memfs.db.libsql.watch import wake_on_commits

    path = reborn_local_dev(tmp_path / "reborn-local-dev.db")
    woken = trio.Event()
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(wake_on_commits, path, woken.set)
            await trio.sleep(0.3)  # the watch is set up
            writer = subprocess.run(
                [sys.executable, "-c", textwrap.dedent(f"""
                    import sqlite3
                    c = sqlite3.connect({str(path)!r})
                    c.execute("INSERT INTO root_filesystem_sequences (path, next_seq) "
                              "VALUES ('/hb', 1)")
                    c.commit()
                """)],
                timeout=30, check=True,
            )  # fmt: skip
            assert writer.returncode == 0
            await woken.wait()
            nursery.cancel_scope.cancel()


def test_a_mount_transaction_waits_past_sqlites_busy_timeout_for_a_brief_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mount's writes (``transaction``) retry their BEGIN while the file stays locked,
    as ``write`` does, up to ``LOCKED_FOR``: a lock held past SQLite's busy timeout is
    not an EIO."""
    monkeypatch.setattr(connection, "BUSY_MS", 200)
    path = reborn_local_dev(tmp_path / "reborn-local-dev.db")
    opened = LibsqlFile(path)
    holder = _hold_lock(path, 1.5)
    try:
        with opened.transaction() as conn:
            conn.execute("INSERT INTO root_filesystem_sequences (path, next_seq) VALUES ('/m', 1)")
    finally:
        holder.wait(timeout=30)
        opened.close()
    with sqlite3.connect(path) as conn:
        rows = {r[0] for r in conn.execute("SELECT path FROM root_filesystem_sequences")}
    assert rows == {"/held", "/m"}
