"""The systemd user unit (verified by systemd-analyze) and the sd_notify protocol."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memfs.daemon import is_mounted
from tests.mounting import fuse_available, memfs_env


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


def test_ready_and_stopping_reach_notify_socket(database_url: str, work_dir: Path) -> None:
    if not fuse_available():
        pytest.skip("needs /dev/fuse")
    address = str(work_dir / "notify.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    server.bind(address)
    server.settimeout(30)
    mountpoint = work_dir / "notify-mnt"
    env = memfs_env(work_dir / "runtime", NOTIFY_SOCKET=address)
    proc: subprocess.Popen[Any] = subprocess.Popen(
        [sys.executable, "-m", "memfs", "mount", "--foreground", "--database-url", database_url,
         str(mountpoint)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        ready = server.recv(4096).decode()
        assert ready.startswith("READY=1")
        assert is_mounted(mountpoint)  # READY only once the mount is live
        (mountpoint / "MEMORY.md").write_text("x")
        proc.send_signal(signal.SIGTERM)
        assert server.recv(4096).decode() == "STOPPING=1"
        assert proc.wait(timeout=30) == 0
        assert not is_mounted(mountpoint)
    finally:
        server.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        subprocess.run(["fusermount3", "-u", "-z", str(mountpoint)], check=False, timeout=30)
