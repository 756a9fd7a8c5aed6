"""Nothing anyone saved is lost: unsaved changes survive unmount, SIGTERM and SIGKILL in
the recovery area; a refused new file leaves no trap behind; ``--log-file`` is honoured."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.mounting import (
    memfs_env,
)

pytestmark = pytest.mark.mount


def test_memfs_env_isolates_state(work_dir: Path) -> None:
    env = memfs_env(work_dir / "runtime")
    assert env["XDG_STATE_HOME"].startswith(str(work_dir))
