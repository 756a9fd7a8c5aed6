"""Scopes: a mount reads other users' workspaces only when given, and never writes them."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memfs.db import Database
from tests.engines import ENGINES_WITH_LIBSQL, Engine
from tests.mounting import memfs_env

pytestmark = pytest.mark.mount

ROWS = [
    ("bob", "MEMORY.md", "bob remembers the launch date\n"),
    ("bob", "daily/2026-03-03.md", "[09:00:00] bob's log\n"),
    ("bob", "SOUL.md", "bob's soul: never shown to others\n"),
    ("bob", "USER.md", "bob's user file\n"),
    ("carol", "MEMORY.md", "carol's secret\n"),
    ("alice", "MEMORY.md", "alice's own memory\n"),
]


def seed_rows(conn: psycopg.Connection[Any]) -> None:
    for user, path, content in ROWS:
        conn.execute(
            "INSERT INTO memory_documents (user_id, path, content) VALUES (%s, %s, %s)",
            (user, path, content),
        )


def snapshot(conn: psycopg.Connection[Any], user: str) -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT id, path, content, updated_at FROM memory_documents WHERE user_id = %s "
        "ORDER BY path",
        (user,),
    ).fetchall()


@pytest.mark.parametrize("engine", ENGINES_WITH_LIBSQL, ids=str)
def test_read_scope_is_read_only_and_limited_to_what_was_given(
    engine: Engine, database_url: str, sql_conn: psycopg.Connection[Any], mount_factory: Any
) -> None:
    engine.prepare(database_url)
    for user in ("alice", "bob", "carol"):
        docs = {path: text for owner, path, text in ROWS if owner == user}
        engine.agent_writes(sql_conn, database_url, docs, user=user)
    bob_before, carol_before = engine.rows(sql_conn, "bob"), engine.rows(sql_conn, "carol")
    mount = mount_factory(
        engine.mount_url(database_url), user_id="alice", extra_args=["--read-scope", "bob"]
    )
    mnt = mount.path()
    assert sorted(os.listdir(mnt)) == ["MEMORY.md"]  # .scopes is not listed
    assert (mnt / "MEMORY.md").read_text() == "alice's own memory\n"
    bob = mnt / ".scopes" / "bob"
    assert sorted(os.listdir(bob)) == ["MEMORY.md", "daily"]  # identity files excluded
    assert (bob / "MEMORY.md").read_text() == "bob remembers the launch date\n"
    assert (bob / "daily/2026-03-03.md").stat().st_size == len("[09:00:00] bob's log\n")
    assert not (bob / "SOUL.md").exists() and not (bob / "USER.md").exists()
    assert not (mnt / ".scopes" / "carol").exists()  # never given: invisible
    attempts: list[Callable[[], object]] = [
        lambda: (bob / "MEMORY.md").write_text("overwritten by alice"),
        lambda: (bob / "new.md").write_text("planted"),
        lambda: os.unlink(bob / "MEMORY.md"),
        lambda: os.rename(bob / "MEMORY.md", mnt / "stolen.md"),
        lambda: os.rename(mnt / "MEMORY.md", bob / "MEMORY.md"),
        lambda: os.mkdir(bob / "dir"),
        lambda: os.rmdir(bob / "daily"),
        lambda: os.chmod(bob / "MEMORY.md", 0o600),
        lambda: os.truncate(bob / "MEMORY.md", 0),
    ]
    for attempt in attempts:
        with pytest.raises(OSError) as info:
            attempt()
        assert info.value.errno == errno.EROFS, (attempt, info.value)
    for crafted in (".scopes", ".search"):
        with pytest.raises(OSError) as info:
            os.mkdir(mnt / crafted)
        assert info.value.errno in (errno.EEXIST, errno.EPERM)
    # Reading is allowed, so a copy into alice's own workspace is alice's document.
    shutil.copy(bob / "MEMORY.md", mnt / "copied-from-bob.md")
    (mnt / "MEMORY.md").write_text("alice, edited\n")
    assert engine.rows(sql_conn, "bob") == bob_before
    assert engine.rows(sql_conn, "carol") == carol_before
    assert engine.contents(sql_conn, "alice") == {
        "MEMORY.md": "alice, edited\n",
        "copied-from-bob.md": "bob remembers the launch date\n",
    }


def test_crafted_user_ids_and_scope_names_reach_no_rows(
    database: Database, database_url: str, sql_conn: psycopg.Connection[Any], mount_factory: Any,
    work_dir: Path,
) -> None:  # fmt: skip
    seed_rows(sql_conn)
    mount = mount_factory(database_url, user_id="x' OR '1'='1")
    assert os.listdir(mount.path()) == []  # parameterised: the quote is just a user id
    (mount.path() / "MEMORY.md").write_text("injected?\n")
    users = {r[0] for r in sql_conn.execute("SELECT DISTINCT user_id FROM memory_documents")}
    assert users == {"alice", "bob", "carol", "x' OR '1'='1"}
    for bad in ("../bob", "bob,carol", "b" * 129, "%"):
        result = subprocess.run(
            [sys.executable, "-m", "memfs", "mount", "-f", "--database-url", database_url,
             "--read-scope", bad, str(work_dir / "never-mounted")],
            env=memfs_env(work_dir / "runtime"), capture_output=True, text=True, timeout=60,
            check=False,
        )  # fmt: skip
        assert result.returncode == 2 and "--read-scope" in result.stderr


def test_agent_id_scopes_rows_to_one_agent(
    database: Database, database_url: str, sql_conn: psycopg.Connection[Any], mount_factory: Any
) -> None:
    agent = "6f1c2d3e-0000-4000-8000-000000000001"
    sql_conn.execute(
        "INSERT INTO memory_documents (user_id, agent_id, path, content) VALUES "
        "('alice', NULL, 'MEMORY.md', 'shared (agent NULL)\n'), "
        "('alice', %s, 'MEMORY.md', 'this agent only\n'), "
        "('alice', '6f1c2d3e-0000-4000-8000-000000000002', 'other.md', 'another agent\n')",
        (agent,),
    )
    mount = mount_factory(database_url, user_id="alice", extra_args=["--agent-id", agent])
    assert sorted(os.listdir(mount.path())) == ["MEMORY.md"]
    assert mount.path("MEMORY.md").read_text() == "this agent only\n"
    mount.path("MEMORY.md").write_text("edited by this agent\n")
    mount.path("new.md").write_text("new for this agent\n")
    rows = sql_conn.execute(
        "SELECT agent_id::text, path, content FROM memory_documents ORDER BY 1 NULLS FIRST, 2"
    ).fetchall()
    assert rows == [
        (None, "MEMORY.md", "shared (agent NULL)\n"),
        (agent, "MEMORY.md", "edited by this agent\n"),
        (agent, "new.md", "new for this agent\n"),
        ("6f1c2d3e-0000-4000-8000-000000000002", "other.md", "another agent\n"),
    ]
