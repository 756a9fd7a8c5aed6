"""Faults planted in a real daemon, to show the history checker catches what it names.

``python -m tests.history.planted FAULT memfs-arguments...`` runs ``memfs`` with one fault:

* ``no-version``: an overwrite keeps no version row (both layouts);
* ``unconditional-delete``: a deferred removal deletes the row whatever its version;
* ``prepared``: server-side prepared statements as before (psycopg's default threshold),
  the cause of defect 1 (a pipeline aborted by a guard left the connection unable to run
  a statement psycopg believed prepared);
* ``no-target-guard``: a file renamed onto a name first deletes whatever rows are there
  (the guard that refuses a rename onto a row the mount did not show, gone: the old code);
* ``hang-rename``: a rename onto ``x.md`` never answers (a deadlock's symptom).

Test tooling only: the faults are monkeypatches applied before ``memfs.cli.main`` runs.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any


def _no_version() -> None:
    from memfs.db.legacy.postgres.store import MetaStore
    from memfs.db.reborn.store import RebornStore

    MetaStore._maybe_save_version = lambda *args, **kwargs: None  # type: ignore[method-assign]

    def no_reborn_version(self: Any, conn: Any, relative: str, old: bytes) -> Any:
        return conn.execute("SELECT 0")

    RebornStore._version_query = no_reborn_version  # type: ignore[method-assign]


def _unconditional_delete() -> None:
    from memfs.db import deferred
    from memfs.db.deferred import DeferringStore, Delete

    real = DeferringStore.defer

    def defer(self: Any, *changes: deferred.Change) -> None:
        real(self, *(dataclasses.replace(c, seen=None) if isinstance(c, Delete) else c
                     for c in changes))  # fmt: skip

    DeferringStore.defer = defer  # type: ignore[method-assign]


def _no_target_guard() -> None:
    from memfs.db.legacy.postgres.store import MetaStore
    from memfs.db.reborn.store import RebornStore

    legacy = MetaStore.rename_document

    def legacy_rename(self: Any, doc_id: Any, new_path: str, *args: Any, **kwargs: Any) -> Any:
        with self.pool.connection() as conn:
            conn.execute(
                "DELETE FROM memory_documents WHERE user_id = %s AND agent_id IS NOT DISTINCT "
                "FROM %s AND path = %s AND id <> %s",
                (self.scope.user_id, self.scope.agent_id, new_path, doc_id),
            )
        return legacy(self, doc_id, new_path, *args, **kwargs)

    reborn = RebornStore.rename_document

    def reborn_rename(self: Any, doc_id: Any, new_path: str, *args: Any, **kwargs: Any) -> Any:
        full = self.scope.row(new_path)
        with self.pool.connection() as conn:
            conn.execute(
                "DELETE FROM root_filesystem_entries WHERE path = %(p)s OR "
                "(path >= %(p)s || '.' AND path < %(p)s || '/')",
                {"p": full},
            )
        return reborn(self, doc_id, new_path, *args, **kwargs)

    MetaStore.rename_document = legacy_rename  # type: ignore[method-assign]
    RebornStore.rename_document = reborn_rename  # type: ignore[method-assign]


def _prepared() -> None:
    import memfs.db

    real = memfs.db._connect_kwargs

    def connect_kwargs(*args: Any, **kwargs: Any) -> dict[str, Any]:
        found = real(*args, **kwargs)
        found.pop("prepare_threshold", None)
        return found

    memfs.db._connect_kwargs = connect_kwargs


def _hang_rename() -> None:
    """A rename onto x.md never answers (as the lock-order deadlock left emacs's)."""
    import trio

    from memfs.vfs import Filesystem

    real = Filesystem.rename

    async def rename(self: Any, old_parent: int, old_name: str, new_parent: int,
                     new_name: str, **kwargs: Any) -> None:  # fmt: skip
        if new_name == "x.md":
            await trio.sleep_forever()
        await real(self, old_parent, old_name, new_parent, new_name, **kwargs)

    Filesystem.rename = rename  # type: ignore[method-assign]


FAULTS = {"prepared": _prepared, "no-version": _no_version,
          "unconditional-delete": _unconditional_delete,
          "no-target-guard": _no_target_guard, "hang-rename": _hang_rename}  # fmt: skip


def main() -> int:
    fault = sys.argv.pop(1)
    FAULTS[fault]()
    from memfs.cli import main as memfs_main

    return memfs_main()


if __name__ == "__main__":
    sys.exit(main())
