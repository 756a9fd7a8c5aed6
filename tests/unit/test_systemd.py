"""The systemd user unit (verified by systemd-analyze) and the sd_notify protocol."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest


def test_install_unit_writes_a_verifiable_unit(work_dir: Path) -> None:
    config = work_dir / "xdg-config"
    env = dict(os.environ, XDG_CONFIG_HOME=str(config))
    result = subprocess.run(
        [sys.executable, "-m", "memfs", "install-unit", "notes", str(work_dir / "notes-mnt"),
         "--database-url", "postgresql://me@/ironclaw", "--user-id", "alice",
         "--env", "EMBEDDING_ENABLED=true", "--no-enable"],
        env=env, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert "memfs@notes" in result.stdout
    unit = config / "systemd/user/memfs@.service"
    env_file = config / "memfs/notes.env"
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600  # secrets stay private
    settings = dict(line.split("=", 1) for line in env_file.read_text().splitlines() if "=" in line)
    assert settings == {
        "MEMFS_MOUNTPOINT": str(work_dir / "notes-mnt"),
        "MEMFS_DATABASE_URL": "postgresql://me@/ironclaw",
        "MEMFS_USER_ID": "alice",
        "EMBEDDING_ENABLED": "true",
    }
    text = unit.read_text()
    assert "Type=notify" in text and "Restart=on-failure" in text
    assert "EnvironmentFile=%E/memfs/%i.env" in text
    for hiding in ("PrivateTmp=", "ProtectHome=", "ProtectSystem="):
        assert f"\n{hiding}" not in text  # they would hide the mount from the host
    command = text.split("ExecStart=", 1)[1].split()[0]
    assert os.access(command, os.X_OK) and "postgresql" not in text
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed")
    instance = work_dir / "memfs@notes.service"
    shutil.copy(unit, instance)
    verify = subprocess.run(
        ["systemd-analyze", "verify", str(instance)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert verify.returncode == 0, verify.stderr
