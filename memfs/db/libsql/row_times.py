"""Times in IronClaw's libSQL rows, and the version token the model compares.

IronClaw's timestamps there are the text ``strftime('%Y-%m-%dT%H:%M:%fZ', 'now')`` gives
(UTC, milliseconds), set by SQL (``NOW``). The model tells a row's versions apart by a
timestamp; two writes within one millisecond would look like one, so a row's token is
``updated_at`` plus ``version % 1000`` microseconds (``token``): within a millisecond the
versions differ, and a guard compares both parts.  A leaf: the row stores and the kept
history below ``memfs.db`` read times through it, and it imports nothing of theirs.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

log = logging.getLogger(__name__)

#: IronClaw's table.
TABLE = "root_filesystem_entries"
#: SQL's now as IronClaw writes it.
NOW = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def token(updated_at: str, version: int) -> datetime:
    """The model's version token of a row."""
    try:
        if isinstance(updated_at, str) and len(updated_at) == 24 and updated_at[10] == "T":
            at = datetime.fromisoformat(updated_at)  # IronClaw's own: 50 times strptime's speed
            if at.tzinfo is not UTC:
                raise ValueError(updated_at)
        else:
            at = datetime.strptime(updated_at, _TIME_FORMAT).replace(tzinfo=UTC)
    except (TypeError, ValueError):
        log.warning("a row's updated_at %r is not IronClaw's format", updated_at)
        at = datetime(1970, 1, 1, tzinfo=UTC)
    return at + timedelta(microseconds=version % 1000)


def parse_time(value: str) -> datetime:
    """A time IronClaw wrote, as a datetime."""
    return token(value, 0)


def as_text(value: datetime | None) -> str | None:
    """A time as IronClaw writes it (``memfs migrate`` carries the source's)."""
    if value is None:
        return None
    at = value.astimezone(UTC)
    return f"{at.strftime('%Y-%m-%dT%H:%M:%S')}.{at.microsecond // 1000:03d}Z"
