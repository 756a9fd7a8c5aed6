"""Run a real ``memfs mount`` in a subprocess, with a timeout on every step."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memfs.daemon import is_mounted

MOUNT_TIMEOUT = 30.0
COMMAND_TIMEOUT = 60.0


def fuse_available() -> bool:
    return Path("/dev/fuse").exists() and shutil.which("fusermount3") is not None


needs_fuse = pytest.mark.skipif(not fuse_available(), reason="needs /dev/fuse and fusermount3")


def memfs_env(runtime_dir: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["XDG_RUNTIME_DIR"] = str(runtime_dir)
    env["XDG_STATE_HOME"] = str(runtime_dir / "state")
    env.pop("DATABASE_URL", None)
    env.update(extra)
    return env


def fds_of(pid: int) -> dict[int, str]:
    """What each of a process's descriptors refers to (``socket:[inode]``, a path...)."""
    found: dict[int, str] = {}
    for name in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            found[int(name)] = os.readlink(f"/proc/{pid}/fd/{name}")
    return found


def helper_socket_of(pid: int) -> int | None:
    """The descriptor of ``pid``'s end of the socket to its fusermount3 helper."""
    ps = ["ps", "-o", "pid=", "--ppid", str(pid)]
    children = subprocess.run(ps, check=False, capture_output=True, text=True, timeout=10)
    helpers = [int(c) for c in children.stdout.split()
               if Path(f"/proc/{c}/comm").read_text().strip() == "fusermount3"]  # fmt: skip
    theirs = {t for h in helpers for t in fds_of(h).values() if t.startswith("socket:")}
    shown = subprocess.run(["ss", "-xH"], check=False, capture_output=True, text=True,
                           timeout=10).stdout  # fmt: skip
    peers = {f"socket:[{f[7]}]" for f in map(str.split, shown.splitlines())
             if len(f) >= 8 and f"socket:[{f[5]}]" in theirs}  # fmt: skip
    mine = [fd for fd, target in fds_of(pid).items() if target in peers]
    return mine[0] if len(mine) == 1 else None


def helpers_of(mountpoint: Path) -> str:
    """The fusermount3 helpers still running for ``mountpoint`` (state, wait channel)."""
    ps = ["ps", "-eo", "pid,ppid,stat,wchan:24,etimes,args"]
    shown = subprocess.run(ps, check=False, capture_output=True, text=True, timeout=10).stdout
    return "\n".join(line for line in shown.splitlines()
                     if "fusermount" in line and str(mountpoint) in line) or "none"  # fmt: skip


class Mount:
    """A memfs daemon serving ``mountpoint`` (foreground process owned by the test)."""

    def __init__(
        self,
        mountpoint: Path,
        database_url: str | None,
        runtime_dir: Path,
        *,
        user_id: str = "default",
        extra_args: Sequence[str] = (),
        env: dict[str, str] | None = None,
        plant: str | None = None,
    ) -> None:
        self.mountpoint = mountpoint
        #: A fault planted in the daemon (``tests.history.planted``), or None.
        self.plant = plant
        self.database_url = database_url
        self.runtime_dir = runtime_dir
        self.user_id = user_id
        self.extra_args = list(extra_args)
        self.env = env or memfs_env(runtime_dir)
        self.log_path = mountpoint.parent / f"{mountpoint.name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Mount:
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        program = ["memfs"] if self.plant is None else ["tests.history.planted", self.plant]
        args = [sys.executable, "-m", *program, "--log-level", "debug", "mount", "--foreground"]
        if self.database_url:
            args += ["--database-url", self.database_url]
        args += ["--user-id", self.user_id, *self.extra_args, str(self.mountpoint)]
        log = open(self.log_path, "ab")  # noqa: SIM115 - kept open for the daemon's lifetime
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=self.env)
        log.close()
        deadline = time.monotonic() + MOUNT_TIMEOUT
        while not is_mounted(self.mountpoint):
            if self.proc.poll() is not None:
                raise AssertionError(f"memfs exited with {self.proc.returncode}:\n{self.log()}")
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"mount did not appear in {MOUNT_TIMEOUT}s:\n{self.log()}")
            time.sleep(0.05)
        return self

    def log(self) -> str:
        """The mount's whole log (a tail would lose the start's lines, and what a test looks
        for, once the debug lines after it grow long)."""
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def path(self, relative: str = "") -> Path:
        return self.mountpoint / relative if relative else self.mountpoint

    def run(
        self,
        *cmd: str,
        cwd: Path | None = None,
        check: bool = True,
        input: bytes | None = None,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        result = subprocess.run(
            list(cmd),
            cwd=cwd or self.mountpoint,
            capture_output=True,
            timeout=COMMAND_TIMEOUT,
            check=False,
            input=input if input is not None else b"",
            env=env,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"{cmd} failed ({result.returncode}): {result.stderr.decode(errors='replace')}"
            )
        return result

    def barrier(self, relative: str = "") -> None:
        """fsync(2) of a directory: the namespace changes the mount left for its next
        transaction (removals, mkdir, directory renames) are in the database after it."""
        fd = os.open(self.path(relative), os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def shell(
        self, script: str, check: bool = True, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        return self.run("bash", "-c", script, check=check, env=env)

    def umount(self) -> int:
        """``memfs umount`` (commit and unmount); returns the daemon's exit code."""
        assert self.proc is not None
        subprocess.run(
            [sys.executable, "-m", "memfs", "umount", str(self.mountpoint)],
            env=self.env,
            timeout=COMMAND_TIMEOUT,
            check=True,
        )
        code = self.proc.wait(timeout=MOUNT_TIMEOUT)
        assert not is_mounted(self.mountpoint)
        return code

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=MOUNT_TIMEOUT)
        if is_mounted(self.mountpoint):
            subprocess.run(
                ["fusermount3", "-u", "-z", str(self.mountpoint)], timeout=30, check=False
            )

    def stop(self) -> None:
        """Clean up after a test whatever state the daemon is in."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.terminate()
                self.proc.wait(timeout=MOUNT_TIMEOUT)
            except subprocess.TimeoutExpired:
                pass
        self.kill()


def wait_reindex_queue_empty(conn: psycopg.Connection[Any], timeout: float = 10.0) -> None:
    """The mount re-chunks moments after each commit (``memfs.reindex``): wait for it."""
    deadline = time.monotonic() + timeout
    while conn.execute("SELECT count(*) FROM memfs.reindex_queue").fetchone() != (0,):
        left = conn.execute(
            "SELECT q.document_id, d.path, d.user_id FROM memfs.reindex_queue q "
            "LEFT JOIN memory_documents d ON d.id = q.document_id"
        ).fetchall()
        assert time.monotonic() < deadline, f"the reindex queue did not drain: {left}"
        time.sleep(0.01)
