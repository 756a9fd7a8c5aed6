"""The one exception type the filesystem model raises: an errno plus a reason for the log."""

from __future__ import annotations

import errno
import os
from uuid import UUID


class FsError(Exception):
    """A filesystem error to be returned to the kernel as ``errno``.

    ``reason`` is for the daemon's log; the kernel only ever sees the errno.
    """

    def __init__(self, code: int, reason: str = "") -> None:
        super().__init__(code, reason or os.strerror(code))
        self.errno = code
        self.reason = reason or os.strerror(code)

    def __str__(self) -> str:
        return f"[{errno.errorcode.get(self.errno, self.errno)}] {self.reason}"


class DatabaseUnavailable(FsError):
    """The database could not be reached or timed out; reported as EIO."""

    def __init__(self, reason: str) -> None:
        super().__init__(errno.EIO, reason)


class DocumentGone(FsError):
    """A document's row is no longer in the database (another writer deleted it; its
    change-feed event may still be on its way)."""

    def __init__(self, doc_id: UUID) -> None:
        super().__init__(errno.ENOENT, f"document {doc_id} is gone from the database")
        self.doc_id = doc_id


class SchemaError(RuntimeError):
    """The database holds a layout memfs must not or cannot use."""


class Refused(Exception):
    """A command that must not run against this database; the message says why."""


class WriteRefused(FsError):
    """Content IronClaw's own write would refuse (a metadata ``schema``, its prompt-injection
    scan).  The save is abandoned, not retried: the database keeps its previous content."""

    def __init__(self, code: int, rule: str, reason: str) -> None:
        super().__init__(code, f"{rule}: {reason}")
        self.rule = rule


# -- command-line outcomes ----------------------------------------------------------------
#: Exit codes of every ``memfs`` command (documented in the README).
EXIT_OK = 0
#: The command ran but something it was asked to do failed (files not saved, not imported).
EXIT_FAILED = 1
#: A mistake on the command line or in a setting (a flag, an option value, a variable).
EXIT_USAGE = 2
#: The database cannot be reached, refuses memfs, or holds no memory memfs can use.
EXIT_DATABASE = 3
#: The mount point or FUSE cannot be used (busy, not empty, not a directory, no /dev/fuse).
EXIT_MOUNT = 4


class CommandError(Exception):
    """A command cannot go on; ``str()`` is the one line the user sees, plus an exit code."""

    exit_code = EXIT_FAILED

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class MountError(CommandError):
    """The mount point or FUSE cannot be used; the message says why and what to do."""

    exit_code = EXIT_MOUNT


class DatabaseError(CommandError):
    """The database cannot be used (unreachable, refused, no memory in it)."""

    exit_code = EXIT_DATABASE
