"""Where IronClaw's tables are looked for, whatever the database role is called.

PostgreSQL's default ``search_path`` is ``"$user", public``.  For a role named ``memfs``
its first entry is memfs's own schema once that exists, so every unqualified name (all
of IronClaw's tables, and ``current_schema()``) would resolve there: IronClaw's tables
created in the wrong schema, or not found ("no IronClaw Reborn tables").  memfs keeps the
session's path as the server gives it, minus its own schema.
"""

from __future__ import annotations

from typing import Any

import psycopg

#: memfs's own schema (its tables are always named with it).
MEMFS_SCHEMA = "memfs"


def pinned_search_path(conn: psycopg.Connection[Any]) -> str | None:
    """The session's ``search_path`` without memfs's schema, or None if it does not name it."""
    row = conn.execute("SELECT current_user, current_setting('search_path')").fetchone()
    assert row is not None
    user, path = str(row[0]), str(row[1])
    entries = [entry.strip() for entry in path.split(",") if entry.strip()]

    def is_memfs(entry: str) -> bool:
        name = entry.strip('"')
        return name == MEMFS_SCHEMA or (name == "$user" and user == MEMFS_SCHEMA)

    if not any(is_memfs(entry) for entry in entries):
        return None
    return ",".join(entry for entry in entries if not is_memfs(entry)) or "public"


def pin(conn: psycopg.Connection[Any]) -> str | None:
    """Set this session's path to ``pinned_search_path`` if needed; returns what was set."""
    path = pinned_search_path(conn)
    if path is not None:
        conn.execute("SELECT set_config('search_path', %s, false)", (path,))
    return path


def pin_session(conn: psycopg.Connection[Any]) -> None:
    """``pin``, as a pool's ``configure`` callback."""
    pin(conn)


def as_option(path: str) -> str:
    """``path`` as a libpq ``options`` switch (spaces and backslashes escaped)."""
    escaped = path.replace("\\", "\\\\").replace(" ", "\\ ")
    return f"-c search_path={escaped}"
