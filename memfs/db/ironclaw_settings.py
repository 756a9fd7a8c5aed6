"""Reading IronClaw's ``settings`` table (its setup wizard writes embedding and search keys).

Read only: memfs never writes IronClaw's settings.  Rows are per owner
(``user_id`` = IronClaw's owner id), one JSON value per dotted key.
"""

from __future__ import annotations

from typing import Any

import psycopg

from memfs.ironclaw.settings import SETTINGS_KEYS


def read_ironclaw_settings(conn: psycopg.Connection[tuple[Any, ...]], owner: str) -> dict[str, Any]:
    """The keys memfs resolves (``SETTINGS_KEYS``) for ``owner``; {} without the table."""
    row = conn.execute("SELECT to_regclass('settings') IS NOT NULL").fetchone()
    if not (row and row[0]):
        return {}
    rows = conn.execute(
        "SELECT key, value FROM settings WHERE user_id = %s AND key = ANY(%s)",
        (owner, list(SETTINGS_KEYS)),
    ).fetchall()
    return {key: value for key, value in rows}


def onboarding_completed(conn: psycopg.Connection[tuple[Any, ...]], owner: str) -> bool:
    """Whether IronClaw recorded ``owner``'s onboarding as done (it then leaves
    ``BOOTSTRAP.md`` out of the system prompt); False without the table or the key."""
    row = conn.execute("SELECT to_regclass('settings') IS NOT NULL").fetchone()
    if not (row and row[0]):
        return False
    found = conn.execute(
        "SELECT value FROM settings WHERE user_id = %s AND key = 'profile_onboarding_completed'",
        (owner,),
    ).fetchone()
    return found is not None and found[0] in (True, "true")
