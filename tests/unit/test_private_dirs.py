"""memfs tightens only the folders it creates (issue 55, item 7): ``--log-file`` in a
shared folder leaves that folder's mode alone; a folder it makes is 0700."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from memfs import logs
from memfs.private import private_dir


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        root.removeHandler(handler)
        handler.close()
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_log_file_in_a_shared_folder_leaves_the_folder_open(
    tmp_path: Path, restore_logging: None
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o755)
    logs.configure("info", file=shared / "x.log")
    assert mode(shared) == 0o755
    assert mode(shared / "x.log") == 0o600


def test_a_log_folder_memfs_makes_is_private(tmp_path: Path, restore_logging: None) -> None:
    logs.configure("info", file=tmp_path / "new" / "deeper" / "x.log")
    assert mode(tmp_path / "new" / "deeper") == 0o700


def test_memfs_own_folders_made_wider_by_an_older_memfs_are_narrowed(tmp_path: Path) -> None:
    own = tmp_path / "state"
    own.mkdir()
    own.chmod(0o755)
    private_dir(own)
    assert mode(own) == 0o700
    user = tmp_path / "user"
    user.mkdir()
    user.chmod(0o755)
    private_dir(user, narrow=False)
    assert mode(user) == 0o755


def test_the_tests_run_in_a_home_of_their_own() -> None:
    """Issue 55, item 8: no test finds the user's memory, settings or remembered choice."""
    from tests.conftest import TEST_HOME, test_root

    assert Path.home() == TEST_HOME and TEST_HOME.is_relative_to(test_root())
    inherited = [n for n in os.environ if n.startswith("IRONCLAW_") or n == "DATABASE_URL"]
    assert not inherited
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"):
        assert Path(os.environ[var]).is_relative_to(TEST_HOME)
