"""Server profiles: ``memfs install-unit NAME --serve webdav|mcp`` writes a systemd user
unit and a private environment file; the unit's own command line, run with that
environment and a ``$NOTIFY_SOCKET``, serves the workspace and says READY=1 (with where it
listens) only once it does."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.mounting import memfs_env

#: How long a server may take to listen, stop, or a command to answer.
TIMEOUT = 60.0


def install(work_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = memfs_env(work_dir / "runtime", XDG_CONFIG_HOME=str(work_dir / "xdg"))
    return subprocess.run([sys.executable, "-m", "memfs", "install-unit", *args, "--no-enable"],
                          env=env, capture_output=True, text=True, timeout=TIMEOUT,
                          check=False)  # fmt: skip


def profile(work_dir: Path, name: str) -> dict[str, str]:
    env_file = work_dir / "xdg" / "memfs" / f"{name}.env"
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600  # its settings stay private
    return dict(line.split("=", 1) for line in env_file.read_text().splitlines() if "=" in line)


def unit_command(work_dir: Path, variables: dict[str, str]) -> list[str]:
    """The unit's ``ExecStart=``, with ``${VAR}`` filled in as systemd fills it."""
    text = (work_dir / "xdg" / "systemd" / "user" / "memfs-serve@.service").read_text()
    line = text.split("ExecStart=", 1)[1].splitlines()[0]
    return [re.sub(r"\$\{(\w+)\}", lambda m: variables[m.group(1)], word) for word in line.split()]


def serve_as_the_unit(work_dir: Path, name: str) -> tuple[subprocess.Popen[Any], int, str]:
    """Start the unit's command as systemd would; its port and READY status."""
    variables = profile(work_dir, name)
    address = str(work_dir / f"{name}-notify.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(address)
    listener.settimeout(TIMEOUT)
    env = memfs_env(work_dir / f"{name}-runtime", NOTIFY_SOCKET=address, **variables)
    log = open(work_dir / f"{name}.log", "wb")  # noqa: SIM115 - the server's whole life
    proc = subprocess.Popen(unit_command(work_dir, variables), env=env, stdout=log,
                            stderr=subprocess.STDOUT)  # fmt: skip
    try:
        said = listener.recv(4096).decode()
    except TimeoutError:
        proc.kill()
        raise AssertionError((work_dir / f"{name}.log").read_text()) from None
    finally:
        listener.close()
        log.close()
    assert said.startswith("READY=1\nSTATUS="), said
    return proc, int(said.rsplit(":", 1)[1]), said


def stop(proc: subprocess.Popen[Any]) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise


def test_a_webdav_profile_serves_from_its_unit(database_url: str, work_dir: Path) -> None:
    auth = work_dir / "webdav-users"
    fd = os.open(auth, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, b"alice:wonderland\n")
    os.close(fd)
    done = install(work_dir, "finder", "--serve", "webdav", "--listen", "127.0.0.1:0",
                   "--auth", str(auth), "--database-url", database_url,
                   "--user-id", "alice")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "systemctl --user enable --now memfs-serve@finder" in done.stdout
    variables = profile(work_dir, "finder")
    assert variables["MEMFS_FRONT"] == "webdav"
    assert variables["MEMFS_WEBDAV_LISTEN"] == "127.0.0.1:0"
    assert variables["MEMFS_WEBDAV_AUTH"] == str(auth)
    assert variables["MEMFS_USER_ID"] == "alice" and "MEMFS_MOUNTPOINT" not in variables
    unit = (work_dir / "xdg" / "systemd" / "user" / "memfs-serve@.service").read_text()
    assert "Type=notify" in unit and database_url not in unit  # secrets stay in the env file
    proc, port, said = serve_as_the_unit(work_dir, "finder")
    try:
        assert "WebDAV at 127.0.0.1:" in said
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            assert http.put("/plan.md", content=b"one\n").status_code == 401  # --auth applies
            put = http.put("/plan.md", content=b"one\n", auth=("alice", "wonderland"))
            assert put.status_code == 201, put.text
            got = http.get("/plan.md", auth=("alice", "wonderland"))
            assert got.content == b"one\n"
    finally:
        assert stop(proc) == 0, (work_dir / "finder.log").read_text()
    if shutil.which("systemd-analyze") is not None:
        instance = work_dir / "memfs-serve@finder.service"
        shutil.copy(work_dir / "xdg" / "systemd" / "user" / "memfs-serve@.service", instance)
        verify = subprocess.run(["systemd-analyze", "verify", str(instance)], capture_output=True,
                                text=True, timeout=TIMEOUT, check=False)  # fmt: skip
        assert verify.returncode == 0, verify.stderr


def test_an_mcp_profile_serves_http_from_its_unit(database_url: str, work_dir: Path) -> None:
    done = install(work_dir, "agents", "--serve", "mcp", "--listen", "127.0.0.1:0",
                   "--database-url", database_url)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert profile(work_dir, "agents")["MEMFS_MCP_HTTP"] == "127.0.0.1:0"
    proc, port, said = serve_as_the_unit(work_dir, "agents")
    try:
        assert "MCP over HTTP at 127.0.0.1:" in said
        hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "profile-test", "version": "1"}}}  # fmt: skip
        answer = httpx.post(f"http://127.0.0.1:{port}/mcp", json=hello, timeout=30,
                            headers={"Accept": "application/json, text/event-stream"})  # fmt: skip
        assert answer.status_code == 200 and "memfs" in answer.text, answer.text
    finally:
        assert stop(proc) == 0, (work_dir / "agents.log").read_text()


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["p", "--serve", "mcp"], "--serve mcp needs --listen HOST:PORT"),
        (["p", "/tmp/somewhere", "--serve", "webdav"], "--serve webdav mounts nothing"),
        (["p"], "install-unit NAME DIR: where the profile mounts"),
        (["p", "/tmp/m", "--listen", "127.0.0.1:1"], "--listen is for --serve profiles"),
        (["p", "--serve", "webdav", "--listen", "nowhere"], "--listen"),
    ],
)
def test_a_wrong_profile_is_one_line(work_dir: Path, args: list[str], said: str) -> None:
    done = install(work_dir, *args)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0] and "Traceback" not in done.stderr, done.stderr
    assert not (work_dir / "xdg" / "memfs" / "p.env").exists()
