"""What the kernel keeps: a warm read costs one request (the open), a warm listing no
``readdir``, and every cached listing follows every change, the mount's own and other
writers', on every engine.

Requests are counted by the mount itself (``memfs stats``), so these figures are the
daemon's, not guessed from timings.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memfs.fuse_ops import OPEN_FLAGS
from memfs.stats import requests_by_op
from tests.engines import ENGINES, Engine
from tests.mounting import Mount, memfs_env

pytestmark = [pytest.mark.mount, pytest.mark.libsql_too]

LEGACY = next(engine for engine in ENGINES if engine.name == "legacy")

#: Another mount's change reaches this one's listings within this (the coherence bound
#: on polling engines is 500 ms p95; this leaves room on a loaded machine).
VISIBLE_WITHIN = 5.0


def requests(work_dir: Path, mountpoint: Path) -> dict[str, float]:
    """The mount's request counters by operation."""
    result = subprocess.run(
        [sys.executable, "-m", "memfs", "stats", "--json", str(mountpoint)],
        env=memfs_env(work_dir / "runtime"), capture_output=True, text=True, timeout=60,
        check=False, cwd=work_dir,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return requests_by_op(json.loads(result.stdout)["items"])


def grown(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {op: n - before.get(op, 0.0) for op, n in after.items() if n != before.get(op, 0.0)}


def eventually(check: Callable[[], bool], timeout: float = VISIBLE_WITHIN) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout}s")
        time.sleep(0.01)


def test_the_projects_pyfuse3_is_installed() -> None:
    """Set-up builds pyfuse3 with the two open flags (``patches/pyfuse3``)."""
    assert OPEN_FLAGS, "pyfuse3 without noflush/cache_readdir: run scripts/setup"


@pytest.mark.parametrize("engine", [LEGACY], ids=str, indirect=True)
def test_a_warm_read_is_one_request_and_a_warm_listing_no_readdir(
    engine_mount: Mount, work_dir: Path
) -> None:
    """Counted on one engine: what the kernel asks of a warm read or listing does not
    depend on the storage below (the next test covers every engine's invalidations)."""
    mnt = engine_mount.path()
    (mnt / "notes").mkdir()
    names = [f"n{i:02}.md" for i in range(20)]
    for name in names:
        (mnt / "notes" / name).write_text(f"note {name}\n")
    for name in names:  # cold: contents loaded, sizes learnt
        assert (mnt / "notes" / name).read_text() == f"note {name}\n"
    assert sorted(os.listdir(mnt / "notes")) == names

    before = requests(work_dir, mnt)
    for name in names:
        assert (mnt / "notes" / name).read_text() == f"note {name}\n"
    assert sorted(os.listdir(mnt / "notes")) == names
    warm = grown(before, requests(work_dir, mnt))
    # Each file: one open (synchronous); its release is sent without waiting, no flush,
    # no read (the page cache), no lookup (the entry cache).  The listing: one opendir.
    assert warm.get("open") == len(names), warm
    assert "flush" not in warm and "read" not in warm and "lookup" not in warm, warm
    assert warm.get("opendir") == 1 and "readdir" not in warm, warm

    # A writer's close still waits for its save, and reports it.
    before = requests(work_dir, mnt)
    (mnt / "notes" / names[0]).write_text("changed\n")
    assert grown(before, requests(work_dir, mnt)).get("flush", 0) >= 1


def test_a_cached_listing_follows_this_mounts_changes_and_another_writers(
    engine: Engine, database_url: str, mount_factory: Any
) -> None:
    url = engine.mount_url(database_url)
    here = mount_factory(url).path()
    there = mount_factory(url, name="other").path()
    (here / "f").mkdir()
    (here / "f" / "a.md").write_text("a\n")
    assert os.listdir(here / "f") == ["a.md"]
    assert os.listdir(here / "f") == ["a.md"]  # now held by the kernel

    (here / "f" / "b.md").write_text("b\n")  # this mount's own change: seen at once
    assert sorted(os.listdir(here / "f")) == ["a.md", "b.md"]
    os.rename(here / "f" / "b.md", here / "f" / "c.md")
    assert sorted(os.listdir(here / "f")) == ["a.md", "c.md"]
    os.unlink(here / "f" / "a.md")
    assert os.listdir(here / "f") == ["c.md"]

    eventually((there / "f" / "c.md").exists)
    (there / "f" / "d.md").write_text("d\n")  # another writer's
    eventually(lambda: sorted(os.listdir(here / "f")) == ["c.md", "d.md"])
    os.rename(there / "f" / "c.md", there / "f" / "e.md")
    eventually(lambda: sorted(os.listdir(here / "f")) == ["d.md", "e.md"])
    os.unlink(there / "f" / "d.md")
    eventually(lambda: os.listdir(here / "f") == ["e.md"])
    (there / "f" / "g").mkdir()
    (there / "f" / "g" / "h.md").write_text("h\n")
    eventually(lambda: sorted(os.listdir(here / "f")) == ["e.md", "g"])
    assert os.listdir(here / "f" / "g") == ["h.md"]
    # The folder IronClaw implies by a path goes with its last document, in the listing
    # of the folder above it too (which no change of the kernel's own touched).
    os.unlink(there / "f" / "g" / "h.md")
    eventually(lambda: os.listdir(here / "f") == ["e.md"])
    assert sorted(os.listdir(here)) == ["f"]
