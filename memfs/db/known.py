"""What a mount last saw of its documents, so a save can be one round trip.

IronClaw's write decides on the stored row: its content hash (is this a change, does a
version repeat the last one), its metadata and its folder's ``.config`` metadata
(versioning, indexing, a JSON schema).  Asking costs a round trip before the write can be
sent.  A mount usually knows the answers already: it wrote the row itself, or just read
it.  ``KnownRows`` keeps them, and the one-round-trip save sends its statements with a
guard (``memfs.expect``) that fails the transaction if the row is not as remembered; the
save is then made the careful way.  So this is only ever a guess that the server checks.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

#: md5 of the text of ``'{}'::jsonb``: the metadata of a row memfs inserts.
EMPTY_METADATA_MD5 = hashlib.md5(b"{}").hexdigest()
#: Rows remembered per mount (least recently used go first).
CAPACITY = 20_000


@dataclass(frozen=True)
class KnownRow:
    """A document row as this mount last saw it."""

    path: str
    updated_at: datetime
    #: IronClaw's content hash (``sha256:…``) of the stored content.
    stored_hash: str
    own: Any
    own_md5: str
    folder: Any
    folder_md5: str | None


@dataclass(frozen=True)
class KnownFolder:
    """The nearest ``.config`` metadata for a set of candidate config paths (None: none)."""

    metadata: Any
    md5: str | None


class KnownRows:
    """Rows and folder configs this mount last saw; every entry is checked by the server."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        self.capacity = capacity
        self._rows: OrderedDict[UUID, KnownRow] = OrderedDict()
        self._folders: OrderedDict[tuple[str, ...], KnownFolder] = OrderedDict()

    def row(self, doc_id: UUID) -> KnownRow | None:
        found = self._rows.get(doc_id)
        if found is not None:
            self._rows.move_to_end(doc_id)
        return found

    def folder(self, configs: list[str]) -> KnownFolder | None:
        return self._folders.get(tuple(configs))

    def remember(self, doc_id: UUID, row: KnownRow, configs: list[str]) -> None:
        self._rows[doc_id] = row
        self._rows.move_to_end(doc_id)
        self.remember_folder(configs, KnownFolder(row.folder, row.folder_md5))
        while len(self._rows) > self.capacity:
            self._rows.popitem(last=False)

    def remember_folder(self, configs: list[str], folder: KnownFolder) -> None:
        key = tuple(configs)
        self._folders[key] = folder
        self._folders.move_to_end(key)
        while len(self._folders) > self.capacity:
            self._folders.popitem(last=False)

    def forget(self, doc_id: UUID) -> None:
        self._rows.pop(doc_id, None)

    def forget_folders(self) -> None:
        """A ``.config`` document changed: every folder answer may be stale."""
        self._folders.clear()
