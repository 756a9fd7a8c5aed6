"""A real PgBouncer (Debian's) in transaction mode, for the pooler tests and benchmarks."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_pgbouncer(
    home: Path, server_port: int, *, pool_size: int = 4, max_clients: int = 200
) -> tuple[subprocess.Popen[bytes], int]:
    """Start PgBouncer in ``home`` (created) in front of 127.0.0.1:``server_port``, trusting
    user postgres, in transaction mode; return the process and its port.  As root it runs
    as the postgres user (PgBouncer refuses to run as root)."""
    home.mkdir(parents=True)
    port = free_port()
    (home / "userlist.txt").write_text('"postgres" ""\n')
    (home / "pgbouncer.ini").write_text(
        f"[databases]\n* = host=127.0.0.1 port={server_port}\n"
        f"[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {home}/userlist.txt\npool_mode = transaction\n"
        f"max_client_conn = {max_clients}\ndefault_pool_size = {pool_size}\n"
        f"logfile = {home}/pgbouncer.log\npidfile = {home}/pgbouncer.pid\n"
    )
    command = [PGBOUNCER, str(home / "pgbouncer.ini")]
    if os.geteuid() == 0:
        for item in [home, *home.iterdir()]:
            shutil.chown(item, "postgres")
        command[1:1] = ["-u", "postgres"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return process, port
