"""LRU cache of document contents, bounded by bytes and keyed by (document id, version)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime
from uuid import UUID


class ContentCache:
    """Committed document bytes, so re-opening an unchanged document costs no SQL."""

    def __init__(
        self,
        capacity_bytes: int,
        on_leave: Callable[[UUID, datetime, bytes], None] | None = None,
        on_put: Callable[[UUID, datetime, bytes], None] | None = None,
    ) -> None:
        self.capacity = capacity_bytes
        #: Told of every entry leaving (replaced, dropped or evicted): the merge bases at
        #: that version keep its bytes (``SaverBases.superseded``).
        self._on_leave = on_leave
        #: Told of every entry put (the mount served or wrote it): ``SaverBases.served``.
        self._on_put = on_put
        self.used = 0
        self._entries: OrderedDict[UUID, tuple[datetime, bytes]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, doc_id: UUID, version: datetime | None) -> bytes | None:
        entry = self._entries.get(doc_id)
        if entry is None or version is None or entry[0] != version:
            self.misses += 1
            return None
        self._entries.move_to_end(doc_id)
        self.hits += 1
        return entry[1]

    def holds(self, doc_id: UUID, version: datetime | None) -> bool:
        """Whether ``get`` would hit (without counting or reordering)."""
        entry = self._entries.get(doc_id)
        return entry is not None and version is not None and entry[0] == version

    def accepts(self, size: int) -> bool:
        """Whether content of ``size`` bytes is kept: not above a quarter of the capacity,
        so one huge document neither evicts everything else nor costs a second copy."""
        return size <= self.capacity // 4

    def put(self, doc_id: UUID, version: datetime, data: bytes) -> None:
        self.drop(doc_id)
        if self._on_put is not None:
            self._on_put(doc_id, version, data)
        if not self.accepts(len(data)):
            return
        self._entries[doc_id] = (version, data)
        self.used += len(data)
        while self.used > self.capacity:
            gone, (at, evicted) = self._entries.popitem(last=False)
            self.used -= len(evicted)
            self._left(gone, at, evicted)

    def drop(self, doc_id: UUID | None) -> None:
        if doc_id is None:
            return
        entry = self._entries.pop(doc_id, None)
        if entry is not None:
            self.used -= len(entry[1])
            self._left(doc_id, *entry)

    def _left(self, doc_id: UUID, version: datetime, data: bytes) -> None:
        if self._on_leave is not None:
            self._on_leave(doc_id, version, data)

    def __len__(self) -> int:
        return len(self._entries)
