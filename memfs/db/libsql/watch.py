"""A wake-up for polling IronClaw's libSQL file: every commit (IronClaw's or another
mount's) writes the file's ``-wal``, which inotify reports through ``watchfiles``.

Only a hint: the poll that follows reads ``PRAGMA data_version`` and, if it moved, the
scope's fingerprint (``SqliteRows.fingerprint``); the once-a-second poll stays, so a lost
event costs at most that second.  ``watchfiles``'s default debounce (1.6 s) is replaced by
``DEBOUNCE_MS`` so other writers' changes show within half a second.  The files are only
watched, never opened (a plain ``open``/``close`` of a SQLite file would drop this
process's locks on it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import watchfiles

log = logging.getLogger(__name__)

#: How long changes are gathered before the poll is woken, in milliseconds.
DEBOUNCE_MS = 50
#: How often watchfiles checks for the end of a burst of changes, in milliseconds.
STEP_MS = 20
#: How long the watch thread waits before it looks whether it is still wanted: the
#: cancellation of the task waits for it (watchfiles' 5 s default held an unmount 4 s).
RUST_TIMEOUT_MS = 200


async def wake_on_commits(database: Path, wake: Callable[[], None]) -> None:
    """Call ``wake`` after each burst of writes to ``database`` or its ``-wal``, for as
    long as the task runs."""
    names = {database.name, database.name + "-wal"}

    def ours(change: watchfiles.Change, path: str) -> bool:
        return Path(path).name in names

    try:
        async for _ in watchfiles.awatch(
            database.parent, watch_filter=ours, debounce=DEBOUNCE_MS, step=STEP_MS,
            rust_timeout=RUST_TIMEOUT_MS, recursive=False,
        ):  # fmt: skip
            wake()
    except (OSError, RuntimeError) as exc:  # inotify limits: the once-a-second poll stays
        log.warning("cannot watch %s for other writers (%s): polling once a second", database,
                    exc)  # fmt: skip
