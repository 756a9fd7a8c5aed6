"""What ``memfs doctor`` reads and mends in a Reborn workspace (``root_filesystem_entries``),
on PostgreSQL or in IronClaw's libSQL file (through the engine's ``RebornRows``).

The path is the table's key, so a path cannot be duplicated.  A document's chunks are the
``memory_chunk`` rows under ``<document>.chunks/``; an orphan is a chunk row, a ``.meta``
sidecar or memfs's attribute row whose document is gone (IronClaw's own delete removes
the sidecars with the document; a delete by SQL may not).
"""

from __future__ import annotations

from memfs.db.health import Duplicate, rebuild_index
from memfs.db.reborn import layout
from memfs.db.reborn.store import RebornStore
from memfs.ironclaw.chunker import DEFAULT_CONFIG, ChunkConfig, chunk_document


class RebornHealth:
    """Checks of one Reborn workspace."""

    def __init__(
        self, store: RebornStore, *, has_sidecars: bool,
        chunk_config: ChunkConfig = DEFAULT_CONFIG,
    ) -> None:  # fmt: skip
        self.store = store
        #: Whether memfs's own schema (attributes) exists to be checked.
        self.has_sidecars = has_sidecars
        self.chunk_config = chunk_config

    def _file_rows(self) -> list[tuple[str, str | None, bytes]]:
        """(relative path, kind, contents) of every file row of the scope."""
        prefix = self.store.scope.prefix
        with self.store.rows.read_connection(self.store.pool) as conn:
            rows = self.store.rows.file_rows(conn, prefix)
        return [(path[len(prefix) + 1 :], kind, data) for path, kind, data in rows]

    def duplicate_paths(self) -> list[Duplicate]:
        return []  # the path is the key

    def separate_duplicates(self) -> list[str]:
        return []

    def stale_chunks(self) -> list[str]:
        """Documents whose chunk rows are not what IronClaw's indexer makes of the content
        under its effective metadata, rows 0..n-1."""
        rows = self._file_rows()
        found = {relative: data for relative, _, data in rows}
        chunks: dict[str, dict[int, str]] = {}
        for relative, kind, data in rows:
            owner, sep, index = relative.rpartition(".chunks/")
            if kind == layout.CHUNK_KIND and sep and index.isdigit():
                chunks.setdefault(owner, {})[int(index)] = data.decode("utf-8", "replace")
        stale = []
        for relative, kind, data in rows:
            if kind != layout.DOCUMENT_KIND or not layout.is_listed(relative):
                continue
            indexed = self.store.effective_metadata(found, relative).indexed
            text = data.decode("utf-8", "replace")
            expected = chunk_document(text, self.chunk_config) if indexed else []
            stored = chunks.get(relative, {})
            if [stored.get(i) for i in range(len(stored))] != expected or (
                sorted(stored) != list(range(len(stored)))
            ):
                stale.append(relative)
        return stale

    def _orphan_rows(self) -> list[str]:
        rows = self._file_rows()
        documents = {r for r, kind, _ in rows if kind == layout.DOCUMENT_KIND}
        orphans = []
        for relative, kind, _ in rows:
            owner, sep, _ = relative.rpartition(".chunks/")
            if kind == layout.CHUNK_KIND and sep and owner not in documents:
                orphans.append(relative)
        return orphans

    def _orphan_attrs(self, delete: bool) -> int:
        if not self.has_sidecars:
            return 0
        rows, prefix = self.store.rows, self.store.scope.prefix
        with rows.plain_transaction(self.store.pool) as conn:
            return rows.orphan_attrs(conn, prefix, delete=delete)

    def orphans(self) -> dict[str, int]:
        found = {"chunk_rows": len(self._orphan_rows())}
        if self.has_sidecars:
            found["reborn_attrs"] = self._orphan_attrs(delete=False)
        return found

    def drop_orphans(self) -> dict[str, int]:
        orphans = [self.store.scope.row(r) for r in self._orphan_rows()]
        with self.store.rows.plain_transaction(self.store.pool) as conn:
            dropped = self.store.rows.delete_chunk_rows(conn, orphans)
        found = {"chunk_rows": dropped}
        if self.has_sidecars:
            found["reborn_attrs"] = self._orphan_attrs(delete=True)
        return found

    def invalid_indexes(self) -> list[str]:
        return self.store.rows.invalid_indexes(self.store.pool)

    def rebuild_index(self, name: str) -> None:
        rebuild_index(self.store.pool, name)
