"""``.status``, ``.status.json`` and ``memfs status MNT`` on real mounts (issue 33): what
is not yet where the user thinks, while the server answers, while it does not (held at a
proxy, as a stopped server looks), and after it is back."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.engines import Engine
from tests.mounting import Mount, memfs_env
from tests.netproxy import DelayProxy

pytestmark = [pytest.mark.mount, pytest.mark.libsql_too]


def eventually(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout}s: {what}"
        time.sleep(0.1)


def status_json(mount: Mount) -> dict[str, Any]:
    with open(mount.path(".status.json"), encoding="utf-8") as handle:
        report: dict[str, Any] = json.load(handle)
    return report


def test_status_is_a_fresh_report_at_each_open_hidden_and_read_only(
    engine: Engine, database_url: str, mount_factory: Any, work_dir: Path
) -> None:
    mount: Mount = mount_factory(engine.mount_url(database_url))
    text = mount.path(".status").read_text(encoding="utf-8")
    assert "database:" in text and "round trip:" in text and " ms" in text, text
    assert "unsaved files:      none" in text, text
    assert "other writers:" in text and "statistics:" in text, text
    first = status_json(mount)
    assert first["database"]["answering"] is True
    assert first["database"]["round_trip_ms"] > 0
    assert first["unsaved"] == [] and first["deferred_changes"] == 0
    assert first["last_commit"] is None
    names = os.listdir(mount.path())
    assert ".status" not in names and ".status.json" not in names  # find/grep -r skip them
    with pytest.raises(OSError) as refused:
        open(mount.path(".status"), "w").close()
    assert refused.value.errno == errno.EROFS

    mount.path("notes.md").write_text("hello\n")
    second = status_json(mount)
    assert second["last_commit"] is not None  # a new report: this save is in it
    commits = {k: v for k, v in second["statistics"].items() if k.startswith("memfs_commits")}
    assert commits.get('memfs_commits_total{outcome="created"}') == 1.0, commits

    # One open reads one report whole: its size is what stat says after the open.
    with open(mount.path(".status.json"), "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        data = handle.read()
    assert size == len(data) and json.loads(data)["database"]["answering"] is True

    shown = subprocess.run(
        [sys.executable, "-m", "memfs", "status", str(mount.path())],
        env=memfs_env(work_dir / "runtime"), capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert "round trip:" in shown.stdout and "last commit:" in shown.stdout, shown.stdout
    gone = subprocess.run(
        [sys.executable, "-m", "memfs", "status", str(work_dir / "nowhere")],
        env=memfs_env(work_dir / "runtime"), capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert gone.returncode != 0 and "Traceback" not in gone.stderr
    assert len(gone.stderr.strip().splitlines()) == 1 and "not mounted" in gone.stderr


def test_status_while_the_server_is_stopped_and_after_it_is_back(
    pg_server: Any, database_url: str, sql_conn: psycopg.Connection[Any],
    mount_factory: Any, work_dir: Path,
) -> None:  # fmt: skip
    """A save the database cannot take shows with where its copy is kept; the report
    comes within seconds while the server does not answer, and is clean once it does."""
    socket_dir = Path(pg_server.get_uri().split("host=")[-1].split("&")[0])
    proxy = DelayProxy(socket_dir / ".s.PGSQL.5432")
    name = database_url.split("?", maxsplit=1)[0].rsplit("/", 1)[1]
    mount = Mount(
        work_dir / "held" / "mnt", proxy.url(name), work_dir / "runtime",
        extra_args=["--listen-url", database_url],
        env=memfs_env(work_dir / "runtime", MEMFS_STATEMENT_TIMEOUT_MS="1000"),
    ).start()  # fmt: skip
    try:
        assert status_json(mount)["database"]["answering"] is True
        proxy.hold()
        with pytest.raises(OSError) as failed:
            mount.path("held.md").write_text("kept while the server is away\n")
        assert failed.value.errno == errno.EIO
        started = time.monotonic()
        report = status_json(mount)
        assert time.monotonic() - started < 8, "the report waited on the server"
        assert report["database"]["answering"] is False, report["database"]
        unsaved = {item["file"]: item for item in report["unsaved"]}
        held = next(item for what, item in unsaved.items() if "held.md" in what)
        assert held["kept_in"] is not None and Path(held["kept_in"]).read_text() == (
            "kept while the server is away\n"
        )
        text = mount.path(".status").read_text(encoding="utf-8")
        assert "NOT ANSWERING" in text and "held.md" in text, text
        proxy.release()
        eventually(
            lambda: status_json(mount)["database"]["answering"] and not status_json(mount)[
                "unsaved"
            ],
            60, "the save retried once the server answers",
        )  # fmt: skip
        stored = sql_conn.execute(
            "SELECT content FROM memory_documents WHERE path = 'held.md'"
        ).fetchall()
        assert stored == [("kept while the server is away\n",)]
    finally:
        proxy.release()
        mount.stop()
        proxy.close()


def test_recent_lists_documents_by_last_change_newest_first(
    engine: Engine, database_url: str, sql_conn: psycopg.Connection[Any], mount_factory: Any
) -> None:
    """``.recent/``: this mount's saves and another writer's change, newest first, named as
    ``.search`` names results; a client-set mtime does not move a document in it."""
    mount: Mount = mount_factory(engine.mount_url(database_url))
    mount.path("b.md").write_text("bee\n")
    time.sleep(0.05)
    (mount.path("projects")).mkdir()
    mount.path("projects/c.md").write_text("sea\n")
    time.sleep(0.05)
    mount.path("a.md").write_text("ay\n")
    mount.path("a.md").write_text("ay again\n")  # replaces a content: a version, its writer
    os.utime(mount.path("b.md"), (2_000_000_000, 2_000_000_000))  # a future mtime: not a change
    listing = sorted(os.listdir(mount.path(".recent")))
    assert listing == ["01-a.md", "02-projects\u2215c.md", "03-b.md"], listing
    assert ".recent" not in os.listdir(mount.path())
    found = subprocess.run(
        ["find", str(mount.path())], capture_output=True, text=True, timeout=30, check=True
    ).stdout
    assert ".recent" not in found
    entry = mount.path(".recent/02-projects\u2215c.md").read_text()
    header, _, body = entry.partition("---\n")
    assert body == "sea\n"
    assert "source: projects/c.md" in header and "changed_at: 20" in header, header
    with pytest.raises(OSError) as refused:
        open(mount.path(".recent/01-a.md"), "a").close()
    assert refused.value.errno == errno.EROFS

    first = mount.path(".recent/01-a.md").read_text()
    assert first.endswith("---\nay again\n"), first
    expected = "tenant:reborn-cli:user:default" if engine.layout != "legacy" else "default"
    assert f"changed_by: {expected}" in first, first
    created = mount.path(".recent/03-b.md").read_text()  # no version: IronClaw kept no writer
    assert "changed_by: not kept" in created, created

    time.sleep(0.05)
    assert engine.agent_appends(sql_conn, "b.md", "by the agent\n")  # another writer
    eventually(
        lambda: sorted(os.listdir(mount.path(".recent")))[0] == "01-b.md", 20,
        "the agent's change at the top",
    )  # fmt: skip
    entry = mount.path(".recent/01-b.md").read_text()
    assert entry.endswith("---\nbee\nby the agent\n"), entry
