"""``.at/<time>/``: the whole workspace as it was at a past moment (issue 33), on every
engine: edits, a folder moved, a document deleted, a folder removed with ``rm -rf``, each
undone in the moment's tree; ``diff -r`` and ``cp -r`` across it."""

from __future__ import annotations

import filecmp
import os
import shutil
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.engines import Engine
from tests.mounting import Mount

pytestmark = [pytest.mark.mount, pytest.mark.libsql_too]


def moment() -> str:
    """Now, between two quiet spells (no save within 50 ms either side)."""
    time.sleep(0.05)
    now = datetime.now(UTC).isoformat(timespec="microseconds")
    time.sleep(0.05)
    return now


def tree_of(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): path.read_text()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def diff(one: Path, two: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["diff", "-r", str(one), str(two)], capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip


def test_the_tree_at_past_moments(
    engine: Engine, database_url: str, mount_factory: Any, tmp_path: Path
) -> None:
    mount: Mount = mount_factory(engine.mount_url(database_url))
    os.makedirs(mount.path("notes/deep"))
    mount.path("a.md").write_text("a one\n")
    mount.path("notes/b.md").write_text("b one\n")
    mount.path("notes/deep/c.md").write_text("c one\n")
    first = moment()
    mount.path("a.md").write_text("a two\n")
    os.rename(mount.path("notes"), mount.path("journal"))
    mount.path("journal/b.md").write_text("b two\n")
    second = moment()
    os.unlink(mount.path("a.md"))
    subprocess.run(["rm", "-rf", str(mount.path("journal/deep"))], check=True, timeout=30)
    mount.path("new.md").write_text("born later\n")
    mount.barrier()
    third = moment()

    assert tree_of(mount.path(f".at/{first}")) == {
        "a.md": "a one\n", "notes/b.md": "b one\n", "notes/deep/c.md": "c one\n",
    }  # fmt: skip
    assert tree_of(mount.path(f".at/{second}")) == {
        "a.md": "a two\n", "journal/b.md": "b two\n", "journal/deep/c.md": "c one\n",
    }  # fmt: skip
    copy = tmp_path / "copy-third"
    shutil.copytree(mount.path(f".at/{third}"), copy)
    live = tmp_path / "live"
    shutil.copytree(mount.path(), live, ignore=shutil.ignore_patterns(".*"))
    assert diff(copy, live).returncode == 0, diff(copy, live).stdout
    assert tree_of(copy) == {"journal/b.md": "b two\n", "new.md": "born later\n"}

    early = datetime.fromisoformat(first).replace(microsecond=0).isoformat()[:10]
    assert tree_of(mount.path(f".at/{early}")) == {}  # the day's midnight: nothing yet
    listed = os.listdir(mount.path(".at"))
    assert listed and all(name.endswith("Z") for name in listed), listed
    found = subprocess.run(["find", str(mount.path())], capture_output=True, text=True,
                           timeout=30, check=True).stdout  # fmt: skip
    assert "/.at" not in found
    assert not os.path.exists(mount.path(".at/not-a-time"))
    future = (datetime.now(UTC) + timedelta(days=400)).date().isoformat()
    assert not os.path.exists(mount.path(f".at/{future}"))  # no past there: ENOENT
    assert filecmp.cmp(mount.path(f".at/{second}/journal/b.md"), mount.path("journal/b.md"),
                       shallow=False)  # fmt: skip


def test_a_document_emptied_at_a_moment_is_empty_there(
    engine: Engine, database_url: str, mount_factory: Any
) -> None:
    """IronClaw keeps no version of an empty content: the moment a document was empty must
    still show it empty, not the content before or after."""
    mount: Mount = mount_factory(engine.mount_url(database_url))
    mount.path("x.md").write_text("one\n")
    before = moment()
    mount.path("x.md").write_text("")
    emptied = moment()
    mount.path("x.md").write_text("two\n")
    two = moment()
    mount.path("x.md").write_text("three\n")
    assert mount.path(f".at/{before}/x.md").read_text() == "one\n"
    assert mount.path(f".at/{emptied}/x.md").read_text() == ""
    assert mount.path(f".at/{two}/x.md").read_text() == "two\n"
