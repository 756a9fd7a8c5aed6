"""Live statistics (``memfs stats``, ``--metrics``): what a mount did, counted, on every
engine, through both channels."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from memfs.stats import sample_name
from tests.engines import Engine
from tests.mounting import memfs_env

pytestmark = pytest.mark.mount


def stats(work_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memfs", "stats", *args], env=memfs_env(work_dir / "runtime"),
        capture_output=True, text=True, timeout=60, check=False, cwd=work_dir,
    )  # fmt: skip


def samples(work_dir: Path, mountpoint: Path) -> dict[str, float]:
    result = stats(work_dir, "--json", str(mountpoint))
    assert result.returncode == 0, result.stderr
    return {sample_name(s): s["value"] for s in json.loads(result.stdout)["items"]}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.mark.libsql_too
def test_stats_count_requests_errors_commits_and_database_calls(
    engine: Engine, database_url: str, mount_factory: Any, work_dir: Path
) -> None:
    port = free_port()
    mount = mount_factory(
        engine.mount_url(database_url), extra_args=["--metrics", f"127.0.0.1:{port}"]
    )
    mnt = mount.mountpoint
    before = samples(work_dir, mnt)
    (mnt / "d").mkdir()
    for n in range(3):
        (mnt / ("d" if n == 2 else "") / f"s{n}.md").write_text(f"stats {n}\n")
    (mnt / "s0.md").write_text("stats 0, changed\n")
    (mnt / "s1.md").write_text("stats 1\n")  # the same content: no change
    assert not (mnt / "missing.md").exists()
    with pytest.raises(OSError, match="not empty"):
        os.rmdir(mnt / "d")
    after = samples(work_dir, mnt)

    def grew(name: str) -> float:
        return after.get(name, 0.0) - before.get(name, 0.0)

    assert grew('memfs_commits_total{outcome="created"}') == 3
    # The same content again: legacy IronClaw changes no row; Reborn's write is a write
    # (its version goes up), so it counts as an update there.
    unchanged = 1 if engine.layout == "legacy" else 0
    assert grew('memfs_commits_total{outcome="updated"}') == 2 - unchanged
    assert grew('memfs_commits_total{outcome="unchanged"}') == unchanged
    assert grew('memfs_requests_total{op="create"}') == 3
    assert grew('memfs_errors_total{errno="ENOTEMPTY",op="rmdir"}') == 1
    assert grew('memfs_errors_total{errno="ENOENT",op="lookup"}') >= 1
    assert grew('memfs_database_call_seconds_count{outcome="ok"}') >= 5  # 5 commits at least
    assert after["memfs_deferred_changes"] == 0 and after["memfs_unsaved_files"] == 0
    assert not any(name.endswith("_bucket") for name in after)  # only with --all

    # Prometheus reads the same registry.
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    created = after['memfs_commits_total{outcome="created"}']
    assert f'memfs_commits_total{{outcome="created"}} {created}' in text

    shown = stats(work_dir, str(mnt))
    assert shown.returncode == 0 and 'memfs_requests_total{op="create"}' in shown.stdout


def test_stats_of_what_is_not_mounted_is_one_line(work_dir: Path) -> None:
    result = stats(work_dir, str(work_dir))
    assert result.returncode != 0
    assert result.stderr.count("\n") == 1 and "is not mounted" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_metrics_port_in_use_is_logged_and_the_mount_serves(
    database_url: str, mount_factory: Any
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        mount = mount_factory(database_url, extra_args=["--metrics", f"127.0.0.1:{port}"])
        (mount.mountpoint / "still.md").write_text("served\n")
        assert (mount.mountpoint / "still.md").read_text() == "served\n"
        assert f"no metrics endpoint at 127.0.0.1:{port}" in mount.log()
