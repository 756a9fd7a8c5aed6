"""The one exception type the filesystem model raises: an errno plus a reason for the log."""

from __future__ import annotations

import errno
import os


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
