"""The first day's mistakes around IronClaw's libSQL file, swept (issue 55): every command
that opens a database, given each kind of wrong file, answers in one line that names the
file, with a non-zero exit, never an internal error or a traceback, and leaves the file
byte for byte as it was.

The kinds of wrong file (``BAD_FILES``) times the commands (``COMMANDS``) are the cases;
``test_the_sweep_covers_every_class`` states how many there are.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.ironclaw_libsql import reborn_local_dev
from tests.mounting import fuse_available, memfs_env


def _not_a_database(path: Path) -> None:
    path.write_text("root:x:0:0:root:/root:/bin/bash\n" * 20)


def _damaged(path: Path) -> None:
    source = reborn_local_dev(path.with_name("whole.db"))
    with sqlite3.connect(source) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    path.write_bytes(source.read_bytes()[:8192])  # truncated mid-file


def _not_ironclaws(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _missing(path: Path) -> None:
    """Nothing at the path."""


def _a_folder(path: Path) -> None:
    path.mkdir()


#: Each kind of wrong file, made at a path, and a word its line must hold.
BAD_FILES: dict[str, tuple[Callable[[Path], None], str]] = {
    "not a database": (_not_a_database, "not an SQLite database"),
    "damaged": (_damaged, "damaged"),
    "another program's SQLite file": (_not_ironclaws, "IronClaw"),
    "an empty file": (_empty, ""),
    "no file there": (_missing, ""),
    "a folder": (_a_folder, ""),
}

#: The commands that open a database (``DIR`` and ``NEW`` are folders made for the case).
COMMANDS: list[list[str]] = [
    ["status"],
    ["search", "tea"],
    ["doctor"],
    ["doctor", "--repair"],
    ["log", "a line"],
    ["import", "DIR"],
    ["export", "NEW"],
    ["undelete", "--list"],
    ["restore", "notes.md", "1"],
    ["reindex"],
    ["versions", "notes.md"],
    ["mount", "NEW"],
]


def _cases() -> list[tuple[str, list[str]]]:
    return [(kind, command) for kind in BAD_FILES for command in COMMANDS]


def test_the_sweep_covers_every_class() -> None:
    """72 cases: 6 kinds of wrong file, 12 commands (the report of issue 55 counts them)."""
    assert len(_cases()) == len(BAD_FILES) * len(COMMANDS) == 72


@pytest.mark.parametrize(("kind", "command"), _cases(), ids=lambda x: str(x).replace(" ", "-"))
def test_a_wrong_file_is_one_line_naming_it(kind: str, command: list[str], work_dir: Path) -> None:
    if command[0] == "mount" and not fuse_available():
        pytest.skip("needs /dev/fuse and fusermount3")
    case = work_dir / f"mistake-{abs(hash((kind, tuple(command)))):x}"
    shutil.rmtree(case, ignore_errors=True)
    case.mkdir(parents=True)
    make, needle = BAD_FILES[kind]
    path = case / "reborn-local-dev.db"
    make(path)
    before = path.read_bytes() if path.is_file() else None
    (case / "DIR").mkdir()
    (case / "DIR" / "a.md").write_text("imported\n")
    args = [str(case / a) if a in ("DIR", "NEW") else a for a in command]
    env = memfs_env(case / "runtime", HOME=str(case / "home"), XDG_DATA_HOME=str(case / "data"))
    done = subprocess.run(
        [sys.executable, "-m", "memfs", *args, "--database-url", f"sqlite:{path}"],
        capture_output=True, text=True, timeout=90, check=False, env=env, cwd=case,
    )  # fmt: skip
    said = done.stderr.strip().splitlines()
    assert done.returncode in (2, 3, 4), (done.returncode, done.stderr)
    assert len(said) == 1, done.stderr
    assert "Traceback" not in done.stderr + done.stdout and "internal error" not in said[0]
    assert str(path) in said[0] and needle in said[0], said[0]
    assert (path.read_bytes() if path.is_file() else None) == before  # nothing written
    assert not (case / "NEW").exists() or not any((case / "NEW").iterdir())
