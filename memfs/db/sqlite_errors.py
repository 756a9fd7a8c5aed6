"""What SQLite's errors on IronClaw's file mean to the person who named it: one line each,
naming the file and what to do, and the exit code (``memfs.errors``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from memfs.errors import EXIT_DATABASE, EXIT_USAGE

#: (words in SQLite's message, the exit code, what the line says after the file's name).
_MEANINGS: tuple[tuple[str, int, str], ...] = (
    ("file is not a database", EXIT_USAGE,
     "not an SQLite database: name IronClaw's libSQL file (reborn-local-dev.db or "
     "ironclaw.db)"),
    ("malformed", EXIT_DATABASE,
     "the SQLite file is damaged (truncated or overwritten): restore it from a backup, or "
     "let `sqlite3 FILE .recover` save what it can into a new file"),
    ("unable to open database file", EXIT_DATABASE,
     "SQLite cannot open it (its folder must be writable for the -wal and -shm files "
     "beside it): mount with --read-only, or make the folder writable"),
    ("readonly database", EXIT_DATABASE,
     "it is read-only for this user: mount with --read-only, or ask its owner for write "
     "access"),
    ("database is locked", EXIT_DATABASE,
     "another program (IronClaw) holds its write lock and did not let go: try again when "
     "it is idle"),
    ("no such table", EXIT_DATABASE,
     "it lacks a table memfs needs (is it IronClaw's file, and has IronClaw opened it "
     "once?)"),
)  # fmt: skip


def explain(exc: sqlite3.Error, path: Path | str | None = None) -> tuple[int, str]:
    """The exit code and the one line of ``exc`` on the file at ``path``."""
    text = str(exc)
    where = f"{path}: " if path is not None else "IronClaw's libSQL file: "
    for words, code, meaning in _MEANINGS:
        if words in text.lower():
            return code, f"{where}{meaning} (SQLite: {text})"
    return EXIT_DATABASE, f"{where}SQLite refused: {text}"
