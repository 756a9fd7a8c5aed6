"""A libSQL mistake is one true line naming the file, never an internal error (issue 55,
items 1 and 10): a file that is no SQLite database, and a damaged one, for every command
that opens IronClaw's file."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

COMMANDS = [["status"], ["doctor"], ["mount", "{mnt}"], ["import", "{src}"]]


def run(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    (tmp_path / "mnt").mkdir(exist_ok=True)
    (tmp_path / "src").mkdir(exist_ok=True)
    args = [a.format(mnt=tmp_path / "mnt", src=tmp_path / "src") for a in args]
    return subprocess.run(
        [sys.executable, "-m", "memfs", *args], capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_a_file_that_is_no_database_is_named_in_one_line(
    command: list[str], tmp_path: Path
) -> None:
    not_db = tmp_path / "passwd"
    not_db.write_text("root:x:0:0:root:/root:/bin/bash\n" * 40)
    done = run([*command, "--database-url", f"sqlite:{not_db}"], tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and "internal error" not in done.stderr, done.stderr
    assert str(not_db) in lines[0] and "not an SQLite database" in lines[0]


@pytest.mark.parametrize("command", COMMANDS[:2], ids=lambda c: c[0])
def test_a_damaged_file_is_named_in_one_line(command: list[str], tmp_path: Path) -> None:
    whole = tmp_path / "whole.db"
    with sqlite3.connect(whole) as conn:
        conn.execute("CREATE TABLE t (x TEXT)")
        conn.executemany("INSERT INTO t VALUES (?)", [("a" * 1000,)] * 200)
    damaged = tmp_path / "damaged.db"
    damaged.write_bytes(whole.read_bytes()[:20000])
    done = run([*command, "--database-url", f"sqlite:{damaged}"], tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 3, done.stderr
    assert len(lines) == 1 and "internal error" not in done.stderr, done.stderr
    assert str(damaged) in lines[0] and "damaged" in lines[0]


@pytest.mark.parametrize("flag", ["--uid", "--gid"])
def test_an_id_the_kernel_cannot_carry_is_refused_in_one_line(flag: str, tmp_path: Path) -> None:
    """Issue 55: ``--gid 99999999999`` mounted, then every ``ls`` answered EIO."""
    done = run(["mount", "{mnt}", flag, "99999999999"], tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert flag in done.stderr and "4294967294" in done.stderr
