"""Faults planted in a real daemon, to show the history checker catches what it names.

``python -m tests.history.planted FAULT memfs-arguments...`` runs ``memfs`` with one fault:

* ``no-version``: an overwrite keeps no version row (both layouts);
* ``no-guard``: the one-round-trip save's guard is gone (legacy: ``memfs.expect`` on the
  row; Reborn: the compare-and-swap on ``version``), so a save decided on a stale row
  overwrites another writer's change as if it were the row it read;
* ``unconditional-delete``: a deferred removal deletes the row whatever its version.

Test tooling only: the faults are monkeypatches applied before ``memfs.cli.main`` runs.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any


def _no_version() -> None:
    from memfs.db.reborn.store import RebornStore
    from memfs.db.store import MetaStore

    MetaStore._maybe_save_version = lambda *args, **kwargs: None  # type: ignore[method-assign]

    def no_reborn_version(self: Any, conn: Any, relative: str, old: bytes) -> Any:
        return conn.execute("SELECT 0")

    RebornStore._version_query = no_reborn_version  # type: ignore[method-assign]


def _no_guard() -> None:
    from memfs.db.reborn.store import RebornStore
    from memfs.db.store import MetaStore

    MetaStore._expect_row = lambda *args, **kwargs: None  # type: ignore[method-assign]
    real = RebornStore._update_query

    def unguarded(self: Any, conn: Any, full: str, data: bytes, version: int) -> Any:
        conn.execute(
            "UPDATE root_filesystem_entries SET version = %s - 0 WHERE path = %s "
            "AND kind = 'memory_document'",
            (version, full),
        )  # the row now answers the version the save read, whatever was written since
        return real(self, conn, full, data, version)

    RebornStore._update_query = unguarded  # type: ignore[method-assign]


def _unconditional_delete() -> None:
    from memfs.db import deferred
    from memfs.db.deferred import DeferringStore, Delete

    real = DeferringStore.defer

    def defer(self: Any, *changes: deferred.Change) -> None:
        real(self, *(dataclasses.replace(c, seen=None) if isinstance(c, Delete) else c
                     for c in changes))  # fmt: skip

    DeferringStore.defer = defer  # type: ignore[method-assign]


FAULTS = {"no-version": _no_version, "no-guard": _no_guard,
          "unconditional-delete": _unconditional_delete}  # fmt: skip


def main() -> int:
    fault = sys.argv.pop(1)
    FAULTS[fault]()
    from memfs.cli import main as memfs_main

    return memfs_main()


if __name__ == "__main__":
    sys.exit(main())
