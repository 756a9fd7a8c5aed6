"""IronClaw's libSQL file as the target of ``memfs migrate`` (a Reborn workspace copied
in, one document per ``BEGIN IMMEDIATE`` transaction)."""

from __future__ import annotations

from pathlib import Path

from memfs.db.libsql.connection import NotIronClawFile
from memfs.db.libsql.files import layout_of_file
from memfs.db.reborn.layout import RebornScope
from memfs.db.reborn.libsql.rows import SqliteRows, open_file
from memfs.db.reborn.store import RebornStore
from memfs.db.reborn.target import ImportTarget
from memfs.errors import DatabaseError


class LibsqlTarget(ImportTarget):
    """Where ``memfs migrate`` writes: ``scope`` of IronClaw's libSQL file at ``path``,
    which IronClaw must have created (memfs never creates IronClaw's file)."""

    def __init__(self, path: Path, scope: RebornScope) -> None:
        try:
            layout = layout_of_file(path)
        except NotIronClawFile as exc:
            raise DatabaseError(f"the target cannot be used: {exc}") from None
        if layout != "reborn":
            raise DatabaseError(
                f"the target {path} holds no IronClaw Reborn tables: start IronClaw >= 1.1 "
                "with it once, then migrate"
            )
        self.scope = scope
        self._file = open_file(path)
        self._store = RebornStore(self._file, scope, rows=SqliteRows(self._file))

    def close(self) -> None:
        self._file.close()
