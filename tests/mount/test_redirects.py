"""A shell redirect is one IronClaw write (issue 28, items 1 to 3), on every engine.

bash's ``printf x > f`` opens ``f`` with O_TRUNC, ``dup2``s the descriptor onto 1 and closes
the original *before* it writes: the filesystem sees a flush of an emptied file, then the
write, then a flush at exit.  IronClaw's write is one put of the new content; a flush whose
only change is the truncation must commit nothing.  Each shell run here is traced (strace)
to show the sequence really happened.  What each layout's IronClaw does with one write:

- legacy (v1.0): different content is one UPDATE; unchanged content changes nothing.
- Reborn (v1.1+), on PostgreSQL and in IronClaw's libSQL file: one UPDATE, ``version + 1``;
  a version row of the old content only if it differs; a blank protected file (SOUL.md ...)
  is refused (EINVAL).
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.engines import Engine
from tests.mounting import Mount

pytestmark = [pytest.mark.mount, pytest.mark.libsql_too]

OLD = "The old text of this file, longer than the new one.\n"
NEW = "Short text.\n"


def eventually(check: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "not true in time"
        time.sleep(0.01)


def mount_with_old(
    engine: Engine, database_url: str, sql_conn: psycopg.Connection[Any], mount_factory: Any,
    name: str,
) -> Mount:  # fmt: skip
    """A mount showing ``name`` with the agent's content ``OLD``."""
    engine.agent_writes(sql_conn, database_url, {name: OLD})
    mount: Mount = mount_factory(engine.mount_url(database_url))
    eventually(lambda: mount.path(name).exists())
    return mount


def row_state(engine: Engine, conn: psycopg.Connection[Any], path: str) -> tuple[Any, ...]:
    """What a write changes on the document row (``Engine.row_state``)."""
    return engine.row_state(conn, path)


def traced_redirect(mount: Mount, work: Path, name: str, text: str) -> tuple[int, list[str]]:
    """``printf text > name`` in bash under strace; (exit status, the calls on the file)."""
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed (scripts/setup-tests installs it)")
    trace = work / f"trace-{name}-{time.monotonic_ns()}"
    target = mount.path(name)
    done = subprocess.run(
        ["strace", "-f", "-qq", "-e", "trace=openat,dup2,close,write", "-o", str(trace),
         "bash", "-c", 'printf "%s" "$1" > "$2"', "redirect", text, str(target)],
        check=False, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    lines = trace.read_text().splitlines()
    opened = next((re.search(r"= (\d+)$", line) for line in lines if f'"{target}"' in line), None)
    assert opened is not None, lines
    fd = opened.group(1)
    start = next(i for i, line in enumerate(lines) if f'"{target}"' in line)
    calls = [
        line.split(None, 1)[1]
        for line in lines[start:]
        if re.search(rf"(dup2\({fd}, 1\)|close\({fd}\)|write\(1,)", line)
    ]
    assert "O_TRUNC" in lines[start], lines[start]
    return done.returncode, calls


def assert_truncate_dup_close_then_write(calls: list[str]) -> None:
    """The sequence the rule is about: the truncated descriptor's close comes before the
    write (the close is the flush of an emptied file)."""
    kinds = [call.split("(", 1)[0] for call in calls]
    assert kinds[:3] == ["dup2", "close", "write"], calls


@pytest.mark.parametrize("same", [False, True], ids=["different", "identical"])
@pytest.mark.parametrize("name", ["notes.md", "SOUL.md"])
def test_a_shell_redirect_is_one_ironclaw_write(
    engine: Engine,
    database_url: str,
    sql_conn: psycopg.Connection[Any],
    mount_factory: Any,
    work_dir: Path,
    name: str,
    same: bool,
) -> None:
    mount = mount_with_old(engine, database_url, sql_conn, mount_factory, name)
    before = row_state(engine, sql_conn, name)
    versions = engine.versions(sql_conn, name)
    log = engine.statement_log(sql_conn)
    text = OLD if same else NEW

    status, calls = traced_redirect(mount, work_dir, name, text)

    assert status == 0
    assert_truncate_dup_close_then_write(calls)
    if name == "SOUL.md" and engine.layout != "legacy":
        # The lone truncation is refused at that first close (bash ignores it), and the
        # buffer keeps the truncation: the write lands in an empty file.
        assert "EINVAL" in calls[1], calls
    else:
        assert calls[1].endswith("= 0"), calls
    after = row_state(engine, sql_conn, name)
    assert after[0] == text
    assert mount.path(name).read_text() == text
    writes = log.take()
    if engine.layout == "legacy":
        if same:  # IronClaw v1.0 writing unchanged content updates nothing, keeps nothing
            assert writes == [] and after == before
            assert engine.versions(sql_conn, name) == versions
        else:
            assert writes == ["UPDATE"]
            assert engine.versions(sql_conn, name) == [*versions, OLD]
    else:
        assert writes == ["UPDATE"]  # one put: never an empty document in between
        assert after[2] == before[2] + 1
        expected = versions if same else [*versions, OLD]
        assert engine.versions(sql_conn, name) == expected
    engine.assert_chunked(sql_conn)


@pytest.mark.parametrize("name", ["notes.md", "SOUL.md"])
def test_ftruncate_a_flush_then_writes_is_one_write(
    engine: Engine,
    database_url: str,
    sql_conn: psycopg.Connection[Any],
    mount_factory: Any,
    name: str,
) -> None:
    """The other way to empty then refill one open file: ftruncate, a close of a duplicate
    (a flush with only the truncation), then the write."""
    mount = mount_with_old(engine, database_url, sql_conn, mount_factory, name)
    log = engine.statement_log(sql_conn)
    fd = os.open(mount.path(name), os.O_WRONLY)
    try:
        os.ftruncate(fd, 0)
        duplicate = os.dup(fd)
        try:
            os.close(duplicate)
        except OSError as exc:  # a protected file may not be left empty
            assert (engine.layout != "legacy", name, exc.errno) == (True, "SOUL.md", errno.EINVAL)
        assert row_state(engine, sql_conn, name)[0] == OLD  # nothing committed yet
        assert os.write(fd, NEW.encode()) == len(NEW)
    finally:
        os.close(fd)
    assert row_state(engine, sql_conn, name)[0] == NEW
    assert log.take() == ["UPDATE"]


@pytest.mark.parametrize("name", ["notes.md", "SOUL.md"])
def test_a_lone_truncation(
    engine: Engine,
    database_url: str,
    sql_conn: psycopg.Connection[Any],
    mount_factory: Any,
    name: str,
) -> None:
    """Emptying a file and closing it: an empty document (memfs's documented extension),
    except a protected file on Reborn, which IronClaw refuses: EINVAL at close, and the
    mount shows the stored content again."""
    mount = mount_with_old(engine, database_url, sql_conn, mount_factory, name)
    refused = engine.layout != "legacy" and name == "SOUL.md"
    done = subprocess.run(
        [sys.executable, "-c", "import sys; open(sys.argv[1], 'w').close()", str(mount.path(name))],
        check=False, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    if refused:
        assert done.returncode == 1 and "Invalid argument" in done.stderr, done.stderr
        eventually(lambda: mount.path(name).read_text() == OLD)  # at the last close
        assert row_state(engine, sql_conn, name)[0] == OLD
        assert "may not be empty" in mount.log() and name in mount.log()
    else:
        assert done.returncode == 0, done.stderr
        eventually(lambda: row_state(engine, sql_conn, name)[0] == "")  # at the last close
        assert mount.path(name).read_text() == ""


@pytest.mark.parametrize("name", ["notes.md", "SOUL.md"])
def test_truncate_by_path_commits_at_once(
    engine: Engine,
    database_url: str,
    sql_conn: psycopg.Connection[Any],
    mount_factory: Any,
    name: str,
) -> None:
    mount = mount_with_old(engine, database_url, sql_conn, mount_factory, name)
    done = subprocess.run(  # truncate(2) (coreutils' truncate opens and uses ftruncate)
        [sys.executable, "-c", "import os, sys; os.truncate(sys.argv[1], 0)",
         str(mount.path(name))],
        check=False, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    if engine.layout != "legacy" and name == "SOUL.md":
        assert done.returncode == 1 and "Invalid argument" in done.stderr, done.stderr
        assert row_state(engine, sql_conn, name)[0] == OLD
        assert mount.path(name).read_text() == OLD
    else:
        assert done.returncode == 0, done.stderr
        assert row_state(engine, sql_conn, name)[0] == ""  # no close follows: committed now
