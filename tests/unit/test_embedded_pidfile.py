"""A ``postmaster.pid`` read while PostgreSQL is still writing it (CI at 4c9a363,
``test_a_killed_embedded_server_is_restarted_by_its_mounts``: pgserver's parser asserted
on 7 of its 8 lines and the mount failed with an internal error)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from memfs.db import embedded

LINES = ["10137", "/data/pgdata", "1796648548", "5432", "", "", " 2990522 1572916"]


def test_a_pidfile_being_written_is_read_once_complete(tmp_path: Path) -> None:
    pidfile = tmp_path / "postmaster.pid"
    pidfile.write_text("\n".join(LINES) + "\n")  # the status line not written yet

    def finish() -> None:
        time.sleep(0.3)
        pidfile.write_text("\n".join([*LINES, "ready   "]) + "\n")

    writer = threading.Thread(target=finish)
    writer.start()
    info = embedded._postmaster(SimpleNamespace(pgdata=tmp_path))
    writer.join(timeout=10)
    assert info is not None and info.pid == 10137


def test_a_pidfile_that_stays_incomplete_is_no_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "postmaster.pid").write_text("\n".join(LINES) + "\n")
    monkeypatch.setattr(embedded, "PIDFILE_PATIENCE", 0.2)
    assert embedded._postmaster(SimpleNamespace(pgdata=tmp_path)) is None
