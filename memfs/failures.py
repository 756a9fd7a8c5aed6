"""One line and an exit code for whatever ended a command or a mount.

``CommandError``s carry their own; database errors name the cause and what to check; any
other exception is an internal error (its traceback goes to the log at debug level).
"""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING

from memfs.errors import (
    EXIT_DATABASE,
    EXIT_FAILED,
    EXIT_MOUNT,
    EXIT_USAGE,
    CommandError,
    FsError,
    Refused,
    SchemaError,
)
from memfs.options import SettingError

if TYPE_CHECKING:
    import sqlite3

    import psycopg


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def describe_failure(failure: BaseException) -> tuple[int, str]:
    exc = _task_failure(failure)
    if isinstance(exc, CommandError):
        return exc.exit_code, str(exc)
    if isinstance(exc, SettingError):
        return EXIT_USAGE, str(exc)
    if isinstance(exc, KeyboardInterrupt):
        return 130, "interrupted"
    # Imported here: a usage error must not pay for the database driver.
    import sqlite3

    import psycopg

    from memfs.db import NoIronClawFile, NotIronClawFile
    from memfs.embeddings.config import EmbeddingConfigError
    from memfs.search.config import SearchConfigError

    if isinstance(exc, (SearchConfigError, EmbeddingConfigError, NoIronClawFile)):
        return EXIT_USAGE, str(exc)  # IronClaw's configuration names no usable file
    if isinstance(exc, NotIronClawFile):
        return EXIT_DATABASE, str(exc)
    if isinstance(exc, (SchemaError, Refused)):
        return EXIT_DATABASE, str(exc)
    if isinstance(exc, FsError) and exc.errno == errno.EROFS:
        return EXIT_DATABASE, exc.reason  # a store memfs does not write (says which)
    if isinstance(exc, (psycopg.Error, sqlite3.Error)):
        return _database_failure(exc)
    if isinstance(exc, RuntimeError) and "fuse" in str(exc).lower():
        return EXIT_MOUNT, f"FUSE refused the mount: {_one_line(exc)}"
    return EXIT_FAILED, (
        f"internal error: {type(exc).__name__}: {_one_line(exc)}{_raised_at(exc)} (run with "
        "--log-level debug for the details, and please report it)"
    )


def _task_failure(exc: BaseException) -> BaseException:
    """A task's own failure, out of the groups trio's nurseries wrap it in."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _raised_at(exc: BaseException) -> str:
    """Where in memfs an internal error was raised (`` at memfs/vfs/x.py:12 in f``), so the
    one line a report quotes names the place."""
    import traceback

    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "/memfs/" in f.filename]
    if not frames:
        return ""
    last = frames[-1]
    return f" at memfs/{last.filename.rsplit('/memfs/', 1)[1]}:{last.lineno} in {last.name}"


def _database_failure(exc: psycopg.Error | sqlite3.Error) -> tuple[int, str]:
    """A database driver's error (psycopg's or sqlite3's), in the words of what to do
    about it."""
    import psycopg

    if isinstance(exc, psycopg.OperationalError) and "unsupported startup parameter" in str(exc):
        return EXIT_DATABASE, (
            f"the server refused memfs's session settings ({_one_line(exc)}): this looks "
            "like a transaction-mode pooler (PgBouncer); pass --pooler, and --listen-url "
            "with a direct URL for the change feed"
        )
    if isinstance(exc, psycopg.OperationalError):
        return EXIT_DATABASE, (
            f"cannot reach the database: {_one_line(exc)} (check --database-url or "
            "DATABASE_URL, and that the server is running)"
        )
    if isinstance(exc, psycopg.Error):
        return EXIT_DATABASE, f"the database refused: {_one_line(exc)}"
    # sqlite3's: IronClaw's libSQL file, met past its opening.
    from memfs.db.sqlite_errors import explain

    return explain(exc, getattr(exc, "memfs_path", None))
