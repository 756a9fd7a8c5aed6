"""The systemd user unit (verified by systemd-analyze) and the sd_notify protocol."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memfs.daemon import is_mounted
from tests.mounting import fuse_available, memfs_env


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
