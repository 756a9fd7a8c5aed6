"""Settings from command-line flags and the environment (IronClaw's variables included)."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import platformdirs

from memfs.options import from_environment

#: How a URL or path names IronClaw's libSQL file: ``sqlite:PATH``, ``file:PATH``, a path.
LIBSQL_PREFIXES = ("sqlite://", "sqlite:", "file://", "file:", "libsql://", "libsql:")


def libsql_path(url: str) -> Path | None:
    """The file a database URL names if it names a SQLite-format file (None: PostgreSQL)."""
    for prefix in LIBSQL_PREFIXES:
        if url.startswith(prefix):
            return Path(url[len(prefix) :]).expanduser()
    if url.startswith(("/", "./", "~")) or url.endswith((".db", ".sqlite", ".sqlite3")):
        return Path(url).expanduser()
    return None


DEFAULT_USER_ID = "default"


def default_data_dir() -> Path:
    """Where the embedded PostgreSQL keeps its data (``$XDG_DATA_HOME/memfs``)."""
    return Path(platformdirs.user_data_dir("memfs", appauthor=False))


def default_runtime_dir() -> Path:
    """Where pid files and spill files go: per user, and the same for every process of
    the same environment (``$XDG_RUNTIME_DIR/memfs``, else ``/run/user/<uid>/memfs``
    when it exists, else ``$XDG_STATE_HOME/memfs/run``)."""
    # Not platformdirs.user_runtime_dir: it falls back to a shared /tmp/runtime-<uid> when
    # the directory is missing or not mode 0700, so two processes of one user could choose
    # differently (a mount's pid file invisible to `memfs status` and `memfs umount`).
    if os.environ.get("XDG_RUNTIME_DIR"):
        return Path(os.environ["XDG_RUNTIME_DIR"]) / "memfs"
    per_user = Path(f"/run/user/{os.getuid()}")
    if per_user.is_dir() and os.access(per_user, os.W_OK):
        return per_user / "memfs"
    return default_state_dir() / "run"


def default_config_dir() -> Path:
    """Where profiles live (``$XDG_CONFIG_HOME``, ``~/.config``)."""
    return Path(platformdirs.user_config_dir(appauthor=False))


def default_state_dir() -> Path:
    """Logs and the recovery area (``$XDG_STATE_HOME/memfs``)."""
    return Path(platformdirs.user_state_dir("memfs", appauthor=False))


def default_log_dir() -> Path:
    return default_state_dir() / "log"


#: libpq connection parameters that carry secrets.
SECRET_PARAMETERS = ("password", "sslpassword")


def _parameters(url: str, secrets: str | None) -> dict[str, str | int | None] | None:
    """A URL's or DSN's parameters by libpq's rules (psycopg's conninfo), each secret
    replaced by ``secrets`` (None: left out); None if it cannot be parsed."""
    import psycopg  # here: `memfs --version` and `--help` should not pay for it

    try:
        params = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return None
    for key in SECRET_PARAMETERS:
        if params.pop(key, None) and secrets is not None:
            params[key] = secrets
    return params


def redacted(url: str) -> str:
    """A database URL or key=value DSN for display, secrets masked whatever form they came
    in (``user:pw@``, ``?password=``, ``password=`` in a DSN), rebuilt as key=value."""
    if url.startswith("sqlite:"):
        return url  # a file's path holds no secret
    params = _parameters(url, "***")
    if params is None:
        return "(unparsable connection string)"
    from psycopg.conninfo import make_conninfo

    return make_conninfo("", **params)


@dataclass
class Settings:
    """Everything a mount needs to know; built by ``from_env`` and then the CLI flags."""

    database_url: str | None = None
    user_id: str = DEFAULT_USER_ID
    #: As given: a UUID in the legacy layout, an agent name in Reborn.
    agent_id: str | None = None
    #: Reborn's scope beyond user and agent (``memfs.db.reborn.layout``).
    tenant: str | None = None
    project: str | None = None
    data_dir: Path = field(default_factory=default_data_dir)
    runtime_dir: Path = field(default_factory=default_runtime_dir)
    #: Connections in the pool, and the number of concurrent worker threads using them.
    pool_size: int = 4
    #: Server-side statement timeout; a stuck query fails with EIO instead of hanging.
    statement_timeout_ms: int = 10_000
    lock_timeout_ms: int = 5_000
    #: How long the kernel may cache entries and attributes; None: 60 s while the change
    #: feed invalidates the kernel's caches on every outside change, 1 s when polling.
    attr_timeout: float | None = None
    #: Bytes of document content kept in the daemon's LRU cache.
    cache_bytes: int = 64 * 1024 * 1024
    #: Extra scratch-name patterns (regular expressions matched against one name).
    scratch_patterns: list[str] = field(default_factory=list)
    #: Extra tool folders (besides ``memfs.scratch.DEFAULT_TOOL_FOLDERS``).
    tool_folders: list[str] = field(default_factory=list)
    #: Seconds a ``.search`` query's results are kept (so ``ls`` then ``cat`` agree).
    search_ttl: float = 30.0
    #: Seconds a ``.search`` lookup may take in all before it fails with ETIMEDOUT.
    search_timeout: float = 10.0
    #: Days deleted documents (and moves) are kept for ``memfs undelete`` and ``.at/``.
    keep_deleted_days: int = 30
    #: Other users whose workspaces are shown read-only under ``.scopes/`` (IronClaw's
    #: ``WORKSPACE_READ_SCOPES``).
    read_scopes: list[str] = field(default_factory=list)
    #: Refuse every change (EROFS); the kernel mount is read-only too.
    read_only: bool = False
    #: Poll instead of using (or installing) the change-feed trigger.
    no_trigger: bool = False
    #: The URL is a transaction-mode pooler: no session state (startup options, prepared
    #: statements, LISTEN) on its connections.
    pooler: bool = False
    #: A direct URL for LISTEN (None: the database URL, unless it is a pooler).
    listen_url: str | None = None
    #: Where the Prometheus endpoint listens (``--metrics``; None: not served).
    metrics: tuple[str, int] | None = None
    allow_other: bool = False
    #: Mount over a directory that holds files (hidden until unmount).
    allow_non_empty: bool = False
    #: Owner and group every file is shown with (None: the mounting user's).
    uid: int | None = None
    gid: int | None = None
    #: Permission bits taken away from every mode shown.
    umask: int = 0
    #: Extra libfuse/kernel mount options (``-o`` items that are not memfs settings).
    fuse_options: list[str] = field(default_factory=list)
    debug_fuse: bool = False
    #: Names of the options set by the environment, ``-o`` or a flag (not defaults).
    given: set[str] = field(default_factory=set)
    #: The daemon's log file (None: one per mount point in the state directory).
    log_file: Path | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Settings from the environment: ``MEMFS_*`` and the IronClaw variables memfs reads
        (``DATABASE_URL``, ``IRONCLAW_OWNER_ID``, ``WORKSPACE_READ_SCOPES``).

        A bad value raises ``SettingError`` naming the variable."""
        settings = cls()
        settings.apply(from_environment(os.environ if env is None else env))
        return settings

    def apply(self, values: Mapping[str, Any]) -> None:
        """Set the given options (names as in ``memfs.options.OPTIONS``); lists extend."""
        for name, value in values.items():
            if value is None:
                continue
            self.given.add(name)
            current = getattr(self, name)
            if isinstance(current, list):
                setattr(self, name, current + [v for v in value if v not in current])
            else:
                setattr(self, name, value)

    def database_identity(self) -> str:
        """Which database this is, without secrets (the embedded one by its data dir)."""
        if not self.database_url:
            return f"embedded:{self.pgdata}"
        libsql = libsql_path(self.database_url)
        if libsql is not None:
            return f"libsql:{libsql.resolve()}"
        params = _parameters(self.database_url, None)
        if params is None:
            return "unparsable"
        return " ".join(f"{k}={params[k]}" for k in sorted(params))

    @property
    def recovery_dir(self) -> Path:
        """This workspace's recovery area (``memfs.recovery``): per database and scope."""
        scope = f"{self.user_id}:{self.agent_id or ''}:{self.database_identity()}"
        digest = hashlib.sha256(scope.encode()).hexdigest()[:12]
        readable = re.sub(r"[^A-Za-z0-9_.-]", "_", self.user_id)[:40]
        return default_state_dir() / "recovery" / f"{readable}-{digest}"

    @property
    def call_deadline(self) -> float:
        """Seconds a database call may take client-side before it is cut off with EIO.

        Longer than the server's statement timeout, so a slow statement still fails with
        the server's own error; this bound is for a server that stopped answering.
        """
        return self.statement_timeout_ms / 1000 + 2.0

    @property
    def pgdata(self) -> Path:
        return self.data_dir / "pgdata"


def check_database_url(url: str, source: str = "--database-url") -> None:
    """Refuse a connection string libpq cannot parse, before anything is started."""
    from memfs.options import SettingError

    if libsql_path(url) is not None or url == "embedded":
        return  # IronClaw's libSQL file (memfs.db.libsql), or memfs's embedded server
    if _parameters(url, None) is None:
        raise SettingError(
            f"{source}: not a PostgreSQL URL or key=value connection string "
            "(e.g. postgresql://user@host:5432/ironclaw)"
        )
