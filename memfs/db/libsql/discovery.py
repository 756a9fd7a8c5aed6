"""Which memory a command opens when no database is named (issue 31's first day).

With no ``--database-url`` (nor ``MEMFS_DATABASE_URL``), memfs opens IronClaw's own libSQL
file when IronClaw's configuration names one that exists (``files.default_file``), and its
embedded PostgreSQL otherwise, as before.  When both memfs's embedded workspace (its data
folder exists) and IronClaw's file are there, it refuses with one line naming both and the
flag that chooses; ``--database-url sqlite:PATH`` or ``--database-url embedded`` given
then is remembered (``<data dir>/database-choice``), so later commands need no flag.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from memfs.config import Settings, libsql_path
from memfs.db.libsql.files import default_file
from memfs.options import SettingError
from memfs.private import write_private

#: ``--database-url embedded``: memfs's embedded PostgreSQL, whatever else is here.
EMBEDDED = "embedded"
CHOICE_FILE = "database-choice"


def _remembered(settings: Settings) -> str | None:
    try:
        return (settings.data_dir / CHOICE_FILE).read_text("utf-8").strip() or None
    except OSError:
        return None


def _remember(settings: Settings, choice: str) -> None:
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    write_private(settings.data_dir / CHOICE_FILE, (choice + "\n").encode("utf-8"))


def choose_database(settings: Settings, env: Mapping[str, str] | None = None) -> Path | None:
    """Settle ``settings.database_url`` (see the module docstring); returns IronClaw's file
    when it was found rather than named."""
    env = os.environ if env is None else env
    url = settings.database_url
    both = settings.pgdata.exists()
    if url == EMBEDDED:
        settings.database_url = None
        if both:
            _remember(settings, EMBEDDED)
        return None
    if url:
        named = libsql_path(url)
        if named is not None and both and named.exists():
            _remember(settings, str(named.resolve()))
        return None
    found = default_file(env)
    if found is None:
        return None
    remembered = _remembered(settings)
    if remembered == EMBEDDED:
        return None
    if both and remembered != str(found.resolve()):
        raise SettingError(
            f"both memfs's own workspace ({settings.pgdata}) and IronClaw's memory ({found}) "
            f"are here: choose with --database-url sqlite:{found} or --database-url embedded "
            "(remembered for later commands)"
        )
    settings.database_url = f"sqlite:{found}"
    return found
