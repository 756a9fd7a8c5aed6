"""Search as IronClaw v1.3 ranks a Reborn workspace (docs/ironclaw/reborn.md §5.2-5.3).

Terms are the maximal runs of characters Rust's ``char::is_alphanumeric`` accepts
(Unicode Alphabetic or Numeric: ``regex``'s properties, which Python's ``str.isalnum``
does not match), any of which may match (``a | b``; PostgreSQL drops English stop words).
Rows are ranked by ``ts_rank`` then path; each chunk adds ``1 / (60 + rank)`` in f32 to its
document, which keeps its best chunk; scores are divided by the best one and sorted by score,
then path.  There is no vector leg: Reborn stores no embeddings.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from uuid import UUID

import regex

from memfs.db.calls import RunDb
from memfs.db.capabilities import FullTextSearch
from memfs.ironclaw.numbers import f32, f32_div
from memfs.search.engine import SearchOutcome
from memfs.search.fusion import SearchResult

_TERM = regex.compile(r"[\p{Alphabetic}\p{N}]+")
#: IronClaw's per-document reciprocal rank constant.
RRF_K = 60
#: memory_search's default and largest result count, and its least candidate count.
DEFAULT_LIMIT = 5
MAX_LIMIT = 20
MIN_CANDIDATES = 20
#: Ids of result chunks (a chunk is a path here).
_CHUNK_IDS = uuid.UUID("7c0e1d52-3b8f-4a61-9e2d-0f5b6a4c8d13")


def terms(query: str) -> list[str]:
    return _TERM.findall(query)


class RebornSearch:
    """``SearchTree``'s engine for a Reborn mount (full-text only, as IronClaw's)."""

    def __init__(
        self, store: FullTextSearch, run_db: RunDb, document_id: Callable[[str], UUID]
    ) -> None:
        self.store = store
        self.run_db = run_db
        #: The id the mount knows a document path by (its tree keys documents by id).
        self.document_id = document_id
        self.searches = 0

    async def search(
        self, query: str, *, limit: int | None = None, mode: str = "hybrid"
    ) -> SearchOutcome:
        self.searches += 1
        wanted = max(1, min(limit or DEFAULT_LIMIT, MAX_LIMIT))
        candidates = max(wanted, MIN_CANDIDATES)
        rows = await self.run_db(self.store.search, terms(query.strip()), candidates)
        best: dict[str, tuple[float, int, str, int]] = {}  # path -> score, rank, text, index
        for row in rows:
            if row.kind != "memory_chunk" or not row.relative:
                continue  # keeps its rank number: the next chunk does not move up
            score, rank, text, index = best.get(row.relative, (f32(0.0), row.rank, "", 0))
            score = f32(score + f32_div(1.0, float(RRF_K + row.rank)))
            if row.rank <= rank or not text:
                rank, text, index = row.rank, row.content, row.chunk_index or 0
            best[row.relative] = (score, rank, text, index)
        top = max((entry[0] for entry in best.values()), default=f32(1.0))
        ordered = sorted(best.items(), key=lambda item: (-item[1][0], item[0]))[:wanted]
        results = [
            SearchResult(
                uuid.uuid5(_CHUNK_IDS, f"{path}.chunks/{index}"),
                self.document_id(path),
                path,
                index,
                text,
                f32_div(score, top),
                rank,
                None,
            )
            for path, (score, rank, text, index) in ordered
        ]
        note = None if mode != "vector" else "Reborn memory has no embeddings: full-text only"
        return SearchOutcome(query, results, "fts", "per-document RRF (IronClaw v1.3)", note)
