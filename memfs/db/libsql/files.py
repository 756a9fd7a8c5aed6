"""Where IronClaw keeps its libSQL memory, and which layout a file holds
(docs/ironclaw/libsql.md §0, §2, §8; requirement 1).

Reborn (v1.1+): ``<home>/<subdir>/reborn-local-dev.db`` for the profiles that keep memory
in an embedded libSQL file, ``local-dev`` (IronClaw's default) among them; ``<home>`` is
``IRONCLAW_REBORN_HOME`` or ``~/.ironclaw/reborn``, the profile ``IRONCLAW_REBORN_PROFILE``,
else ``[boot].profile`` of ``<home>/config.toml``, else ``local-dev``.  Legacy (≤ v1.0):
``LIBSQL_PATH``, else ``$IRONCLAW_BASE_DIR/ironclaw.db``, else ``~/.ironclaw/ironclaw.db``.
A file's layout is told by its tables, never by its name.
"""

from __future__ import annotations

import os
import sqlite3
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

Layout = Literal["reborn", "legacy"]

REBORN_FILE = "reborn-local-dev.db"
DEFAULT_PROFILE = "local-dev"
#: The profiles keeping memory in the embedded libSQL file, and the folder under the home
#: each keeps it in (the others use PostgreSQL).
LIBSQL_PROFILES = {
    "local-dev": "local-dev",
    "local-dev-yolo": "local-dev",
    "hosted-single-tenant-volume": "hosted-single-tenant-volume",
    "hosted-single-tenant-volume-sandboxed": "hosted-single-tenant-volume-sandboxed",
    "hosted-single-tenant-volume-sandboxed-railway": "hosted-single-tenant-volume-sandboxed",
}
#: The columns of IronClaw's Reborn entries table, in its order.
REBORN_COLUMNS = ("path", "contents", "is_dir", "created_at", "updated_at", "content_type",
                  "kind", "indexed", "version")  # fmt: skip


class NoIronClawFile(Exception):
    """IronClaw's configuration names no usable libSQL file (one line for the user)."""


def reborn_home(env: Mapping[str, str]) -> Path:
    """IronClaw's Reborn home: ``IRONCLAW_REBORN_HOME`` (absolute, no ``..``, not ``/``)
    or ``~/.ironclaw/reborn``."""
    given = env.get("IRONCLAW_REBORN_HOME")
    if given:
        home = Path(given)
        if not home.is_absolute() or ".." in home.parts or home == Path("/"):
            raise NoIronClawFile(
                f"IRONCLAW_REBORN_HOME={given!r} is not a home IronClaw accepts "
                "(absolute, no '..', not '/')"
            )
        return home
    return Path(env.get("HOME") or Path.home()) / ".ironclaw" / "reborn"


def reborn_profile(env: Mapping[str, str], home: Path) -> str:
    """The profile IronClaw starts with: the environment, ``[boot].profile``, the default."""
    given = env.get("IRONCLAW_REBORN_PROFILE")
    if given:
        return given
    config = home / "config.toml"
    try:
        with config.open("rb") as handle:
            boot = tomllib.load(handle).get("boot", {})
    except FileNotFoundError:
        return DEFAULT_PROFILE
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise NoIronClawFile(f"{config}: cannot read IronClaw's profile: {exc}") from None
    profile = boot.get("profile") if isinstance(boot, dict) else None
    return profile if isinstance(profile, str) and profile else DEFAULT_PROFILE


def reborn_file(env: Mapping[str, str]) -> Path | None:
    """The Reborn libSQL file IronClaw's configuration names (None: its profile keeps
    memory in PostgreSQL); the file may not exist yet."""
    home = reborn_home(env)
    subdir = LIBSQL_PROFILES.get(reborn_profile(env, home))
    return home / subdir / REBORN_FILE if subdir is not None else None


def legacy_file(env: Mapping[str, str]) -> Path:
    """The legacy (≤ v1.0) libSQL file IronClaw would open."""
    given = env.get("LIBSQL_PATH")
    if given:
        return Path(given)
    return _base_dir(env) / "ironclaw.db"


def _base_dir(env: Mapping[str, str]) -> Path:
    base = env.get("IRONCLAW_BASE_DIR")
    return Path(base) if base else Path(env.get("HOME") or Path.home()) / ".ironclaw"


def _dotenv_value(path: Path, key: str) -> str | None:
    """``key``'s value in a dotenv file (``KEY=value``, ``export KEY="value"``), if set."""
    try:
        lines = path.read_text("utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    for line in lines:
        name, sep, value = line.strip().removeprefix("export ").partition("=")
        if sep and name.strip() == key:
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            return value or None
    return None


def turso_primary(env: Mapping[str, str]) -> str | None:
    """The Turso primary a legacy file replicates (``LIBSQL_URL`` in IronClaw's
    environment, or in its ``~/.ironclaw/.env``), if any: IronClaw then opens the file as
    an embedded replica, where a local write would diverge from the primary."""
    return env.get("LIBSQL_URL") or _dotenv_value(_base_dir(env) / ".env", "LIBSQL_URL")


def default_file(env: Mapping[str, str] | None = None) -> Path | None:
    """IronClaw's libSQL file on this machine, if one exists: Reborn first, then legacy."""
    env = os.environ if env is None else env
    reborn = reborn_file(env)
    if reborn is not None and reborn.is_file():
        return reborn
    legacy = legacy_file(env)
    return legacy if legacy.is_file() else None


def layout_of(conn: sqlite3.Connection) -> Layout | None:
    """Which IronClaw layout the file holds, by its tables (None: neither)."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "root_filesystem_entries" in tables:
        columns = tuple(r[1] for r in conn.execute("PRAGMA table_info(root_filesystem_entries)"))
        return "reborn" if columns == REBORN_COLUMNS else None
    if {"_migrations", "memory_documents"} <= tables:
        return "legacy"
    return None


def layout_of_file(path: Path) -> Layout | None:
    """Which IronClaw layout the file at ``path`` holds, read through a connection of its
    own, closed after (``NotIronClawFile`` if there is no such file to open)."""
    from memfs.db.libsql.connection import LibsqlFile

    try:
        probe = LibsqlFile(path, read_only=True)
        try:
            return layout_of(probe.connection())
        finally:
            probe.close()
    except sqlite3.Error as exc:
        exc.memfs_path = path  # type: ignore[attr-defined]  # the file the CLI's line names
        raise
