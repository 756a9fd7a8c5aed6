"""Mounts through a transaction-mode pooler (a real PgBouncer from Debian), as on a shared
managed server: no session state on pooled connections, LISTEN on a direct one."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.mounting import Mount
from tests.netproxy import DelayProxy
from tests.pgbouncer import PGBOUNCER, start_pgbouncer

pytestmark = pytest.mark.skipif(not Path(PGBOUNCER).exists(), reason="pgbouncer not installed")


@pytest.fixture
def bouncer_url(pg_server: Any, database_url: str, work_dir: Path) -> Iterator[str]:
    """A PgBouncer in transaction mode in front of the test server; its URL for this
    test's database.  It reaches the server's Unix socket through a TCP bridge."""
    socket_dir = Path(pg_server.get_uri().split("host=")[-1].split("&")[0])
    bridge = DelayProxy(socket_dir / ".s.PGSQL.5432")
    home = work_dir / f"pgbouncer-{os.getpid()}-{time.monotonic_ns()}"
    process, port = start_pgbouncer(home, bridge.port)
    name = database_url.split("?", maxsplit=1)[0].rsplit("/", 1)[1]
    url = f"postgresql://postgres@127.0.0.1:{port}/{name}"
    deadline = time.monotonic() + 30
    while True:
        try:
            with psycopg.connect(url, connect_timeout=2, prepare_threshold=None) as conn:
                conn.execute("SELECT 1")
            break
        except psycopg.OperationalError:
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            assert time.monotonic() < deadline, "pgbouncer did not start"
            time.sleep(0.1)
    yield url
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=30)
    bridge.close()


def documents(conn: psycopg.Connection[Any]) -> dict[str, str]:
    return dict(conn.execute("SELECT path, content FROM memory_documents").fetchall())


def wait_for(predicate: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_mount_through_a_transaction_pooler(
    bouncer_url: str, database_url: str, mount_factory: Any, sql_conn: psycopg.Connection[Any]
) -> None:
    mount: Mount = mount_factory(bouncer_url, extra_args=["--pooler", "--listen-url", database_url])
    root = mount.path()
    (root / "MEMORY.md").write_text("deploy on tuesday\n")
    for i in range(10):  # more than psycopg's prepare threshold: nothing is prepared
        with open(root / "MEMORY.md", "a") as handle:
            handle.write(f"- note {i}\n")
    (root / "projects").mkdir()
    (root / "projects" / "a.md").write_text("alpha\n")
    os.rename(root / "projects", root / "archive")
    (root / "archive" / "a.md").chmod(0o600)
    mount.run("sed", "-i", "s/alpha/beta/", "archive/a.md")
    (root / "gone.md").write_text("x\n")
    os.unlink(root / "gone.md")
    mount.barrier()  # fsync of the folder: the unlink's delete has been sent
    assert documents(sql_conn) == {
        "MEMORY.md": "deploy on tuesday\n" + "".join(f"- note {i}\n" for i in range(10)),
        "archive/a.md": "beta\n",
    }
    assert os.listdir(root / ".search" / "deploy --fts") == ["01-MEMORY.md"]
    sql_conn.execute(  # the agent writes; the direct LISTEN connection tells the mount
        "INSERT INTO memory_documents (user_id, path, content) VALUES ('default', 'b.md', 'b')"
    )
    assert wait_for((root / "b.md").exists)
    log = mount.log_path.read_text(errors="replace")  # the whole log: the start's line is
    # the first, and the debug lines of the work since may be more than ``log()``'s tail
    assert "watching other writers through the change-feed trigger" in log, log[-3000:]
    for refused in ("unsupported startup parameter", "prepared statement", "ERROR"):
        assert refused not in log, log[-3000:]


def test_a_pooler_without_a_listen_url_polls(
    bouncer_url: str, mount_factory: Any, sql_conn: psycopg.Connection[Any]
) -> None:
    mount: Mount = mount_factory(bouncer_url, extra_args=["--pooler"])
    (mount.path() / "a.md").write_text("a\n")
    sql_conn.execute(
        "INSERT INTO memory_documents (user_id, path, content) VALUES ('default', 'b.md', 'b')"
    )
    assert wait_for((mount.path() / "b.md").exists)
    whole_log = mount.log_path.read_text(errors="replace")
    assert "transaction-mode pooler, where LISTEN cannot work" in whole_log


def test_a_pooler_without_pooler_mode_says_what_to_do(bouncer_url: str, work_dir: Path) -> None:
    from tests.mounting import memfs_env

    result = subprocess.run(
        [sys.executable, "-m", "memfs", "status", "--database-url", bouncer_url],
        env=memfs_env(work_dir / "runtime"), capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert result.returncode == 3 and "Traceback" not in result.stderr
    assert "pass --pooler" in result.stderr and len(result.stderr.splitlines()) == 1
    init = subprocess.run(
        [sys.executable, "-m", "memfs", "init", "--pooler", "--database-url", bouncer_url],
        env=memfs_env(work_dir / "runtime"), capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert init.returncode == 0, init.stderr
