"""IronClaw's hybrid search over one workspace (docs/ironclaw/legacy.md §5).

Full-text (``plainto_tsquery('english')``, ``ts_rank_cd``) and exact cosine vector search,
50 candidates each, fused by RRF (k = 60) or weighted fusion, max-normalised, per chunk.
One difference, on purpose: if the query cannot be embedded, IronClaw fails the whole
search; memfs returns the full-text results and says so in ``SearchOutcome.note``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import trio
from pgvector import Vector

from memfs.db.calls import RunDb
from memfs.db.capabilities import ChunkHit, ChunkSearch
from memfs.embeddings.client import Embedder
from memfs.embeddings.providers import EmbeddingError
from memfs.search.config import SearchConfig
from memfs.search.fusion import Hit, SearchResult, fuse

log = logging.getLogger(__name__)

MODES = ("hybrid", "fts", "vector")


@dataclass(frozen=True)
class SearchOutcome:
    query: str
    results: list[SearchResult]
    mode: str  # what actually ran: "hybrid", "fts" or "vector"
    fusion: str
    note: str | None = None

    def describe(self) -> str:
        text = {
            "hybrid": f"hybrid full-text + vector ({self.fusion})",
            "fts": "full-text only",
            "vector": "vector only",
        }[self.mode]
        return f"{text}; {self.note}" if self.note else text


#: Files IronClaw reads from the primary scope only (exact case); search drops them when
#: they come from a read scope.
IDENTITY_FILES = frozenset(
    {"IDENTITY.md", "SOUL.md", "AGENTS.md", "USER.md", "TOOLS.md", "BOOTSTRAP.md"}
)


def _hits(rows: list[ChunkHit], primary: str) -> list[Hit]:
    """Ranked hits; a read scope's document is named as the mount shows it, under
    ``.scopes/<user>/``, so its result never clashes with a primary document's path."""
    return [
        Hit(
            r.chunk_id,
            r.document_id,
            r.path if r.user_id == primary else f".scopes/{r.user_id}/{r.path}",
            r.chunk_index,
            r.content,
            rank,
        )
        for rank, r in enumerate(rows, 1)
    ]


#: How long a search waits for the provider to embed its query before it goes on with
#: full-text results alone (the provider's retries are for the background worker).
QUERY_EMBEDDING_DEADLINE = 3.0
#: After a query embedding timed out, searches skip the provider for this long (seconds).
PROVIDER_BACKOFF = 30.0


def _secondary_identity(path: str) -> bool:
    if not path.startswith(".scopes/"):
        return False
    return path.split("/", 2)[2] in IDENTITY_FILES


class SearchEngine:
    def __init__(
        self,
        store: ChunkSearch,
        run_db: RunDb,
        *,
        embedder: Embedder | None = None,
        config: SearchConfig | None = None,
        read_scopes: Sequence[str] = (),
    ) -> None:
        self.store = store
        #: Every scope searched, the primary first (IronClaw searches all read scopes).
        self.users = [store.scope.user_id, *(u for u in read_scopes if u != store.scope.user_id)]
        self.run_db = run_db
        self.embedder = embedder
        self.config = config or SearchConfig()
        self.searches = 0
        self._embedding_down_until = float("-inf")

    async def search(
        self, query: str, *, limit: int | None = None, mode: str = "hybrid"
    ) -> SearchOutcome:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        config = self.config if limit is None else self.config.with_limit(limit)
        self.searches += 1
        note = None
        use_fts = config.use_fts and mode != "vector"
        use_vector = config.use_vector and mode != "fts"
        vector: list[float] | None = None
        if use_vector and self.embedder is None:
            use_vector = False
            if mode == "vector":
                note = "no embedding provider is configured"
        elif use_vector and trio.current_time() < self._embedding_down_until:
            note = "the embedding provider did not answer moments ago; searched full-text only"
            use_vector = False
        elif use_vector and self.embedder is not None:
            try:
                with trio.fail_after(QUERY_EMBEDDING_DEADLINE):
                    vector = await self.embedder.embed_query(query)
            except (EmbeddingError, trio.TooSlowError) as exc:
                reason = str(exc) or f"no answer within {QUERY_EMBEDDING_DEADLINE:.0f}s"
                log.warning("query embedding failed, searching full-text only: %s", reason)
                note = f"the query could not be embedded ({reason})"
                use_vector = False
                if isinstance(exc, trio.TooSlowError):
                    # The kernel runs lookups in one directory one at a time: searches
                    # queued behind this one must not each wait for a silent provider.
                    self._embedding_down_until = trio.current_time() + PROVIDER_BACKOFF
        if not use_vector and not use_fts:
            use_fts = True  # vector-only was asked for but is impossible: say so, fall back
        fts_rows = (
            await self.run_db(self.store.search_fts, query, config.pre_fusion_limit, self.users)
            if use_fts and query.strip()
            else []
        )
        vector_rows = (
            await self.run_db(
                self.store.search_vector, Vector(vector), config.pre_fusion_limit, self.users
            )
            if use_vector and vector is not None
            else []
        )
        primary = self.users[0]
        results = fuse(_hits(fts_rows, primary), _hits(vector_rows, primary), config)
        # As IronClaw: identity files of read scopes are dropped after fusion.
        results = [r for r in results if not _secondary_identity(r.path)]
        ran = "hybrid" if use_fts and use_vector else ("fts" if use_fts else "vector")
        return SearchOutcome(query, results, ran, config.fusion, note)
