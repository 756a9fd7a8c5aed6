"""The search engine of a layout's ranking rule (``memfs.db.workspace.Ranking``)."""

from __future__ import annotations

from collections.abc import Sequence

from memfs.db.calls import RunDb
from memfs.db.workspace import FullTextRanking, HybridRanking, Ranking
from memfs.embeddings import Embedder
from memfs.search.config import SearchConfig
from memfs.search.engine import SearchEngine
from memfs.search.reborn import RebornSearch


def search_engine(
    ranking: Ranking,
    run_db: RunDb,
    *,
    embedder: Embedder | None = None,
    config: SearchConfig | None = None,
    read_scopes: Sequence[str] = (),
) -> SearchEngine | RebornSearch:
    """What answers ``.search`` and ``memfs search`` on this layout: IronClaw v1.0's hybrid
    search over chunks (with the embedder, the configured fusion and every read scope),
    or v1.3 Reborn's full-text ranking of documents (no vectors, the primary scope)."""
    match ranking:
        case HybridRanking(store=store):
            return SearchEngine(
                store, run_db, embedder=embedder, config=config, read_scopes=read_scopes
            )
        case FullTextRanking(store=store, document_id=document_id):
            return RebornSearch(store, run_db, document_id)
