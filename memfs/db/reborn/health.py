"""What ``memfs doctor`` reads and mends in a Reborn workspace (``root_filesystem_entries``).

The path is the table's key, so a path cannot be duplicated.  A document's chunks are the
``memory_chunk`` rows under ``<document>.chunks/``; an orphan is a chunk row, a ``.meta``
sidecar or memfs's attribute row whose document is gone (IronClaw's own delete removes
the sidecars with the document; a delete by SQL may not).
"""

from __future__ import annotations

from memfs.chunker import DEFAULT_CONFIG, ChunkConfig, chunk_document
from memfs.db.health import Duplicate, invalid_indexes, rebuild_index
from memfs.db.reborn import layout
from memfs.db.reborn.store import RebornStore

_TABLE = "root_filesystem_entries"


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

    def _rows(self) -> list[tuple[str, str, bytes]]:
        """(relative path, kind, contents) of every file row of the scope."""
        prefix = self.store.scope.prefix
        with self.store.pool.connection() as conn:
            rows = conn.execute(
                f"SELECT path, kind, contents FROM {_TABLE} WHERE path >= %(p)s || '/' "
                "AND path < %(p)s || '0' AND NOT is_dir ORDER BY path",
                {"p": prefix},
                binary=True,
            ).fetchall()
        return [(path[len(prefix) + 1 :], kind, bytes(data)) for path, kind, data in rows]

    def duplicate_paths(self) -> list[Duplicate]:
        return []  # the path is the key

    def separate_duplicates(self) -> list[str]:
        return []

    def stale_chunks(self) -> list[str]:
        """Documents whose chunk rows are not what IronClaw's indexer makes of the content
        under its effective metadata, rows 0..n-1."""
        rows = self._rows()
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
        rows = self._rows()
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
        verb = "DELETE" if delete else "SELECT count(*)"
        with self.store.pool.connection() as conn:
            cur = conn.execute(
                f"{verb} FROM memfs.reborn_attrs a WHERE a.path >= %(p)s || '/' "
                "AND a.path < %(p)s || '0' AND NOT EXISTS "
                f"(SELECT 1 FROM {_TABLE} e WHERE e.path = a.path)",
                {"p": self.store.scope.prefix},
            )
            if delete:
                return int(cur.rowcount)
            row = cur.fetchone()
            return int(row[0]) if row else 0

    def orphans(self) -> dict[str, int]:
        found = {"chunk_rows": len(self._orphan_rows())}
        if self.has_sidecars:
            found["reborn_attrs"] = self._orphan_attrs(delete=False)
        return found

    def drop_orphans(self) -> dict[str, int]:
        orphans = self._orphan_rows()
        with self.store.pool.connection() as conn:
            dropped = conn.execute(
                f"DELETE FROM {_TABLE} WHERE path = ANY(%s) AND kind = %s",
                ([self.store.scope.row(r) for r in orphans], layout.CHUNK_KIND),
            ).rowcount
        found = {"chunk_rows": dropped}
        if self.has_sidecars:
            found["reborn_attrs"] = self._orphan_attrs(delete=True)
        return found

    def invalid_indexes(self) -> list[str]:
        return invalid_indexes(self.store.pool, [_TABLE])

    def rebuild_index(self, name: str) -> None:
        rebuild_index(self.store.pool, name)
