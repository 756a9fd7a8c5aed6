"""``memfs search QUERY``: the same engine as ``.search/``, without a mount."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import trio

from memfs.config import Settings
from memfs.db import Database, RebornStore, legacy_scope, open_database, reborn_scope
from memfs.db.reborn.search_store import RebornSearchStore
from memfs.embeddings import Embedder, EmbeddingSettings
from memfs.errors import EXIT_USAGE, CommandError
from memfs.search import SearchConfig, SearchEngine, SearchOutcome
from memfs.search.reborn import RebornSearch

T = TypeVar("T")


async def _in_thread(fn: Callable[..., T], *args: Any) -> T:
    return await trio.to_thread.run_sync(functools.partial(fn, *args))


def run_search(settings: Settings, query: str, *, limit: int, mode: str) -> SearchOutcome:
    """Run one search against the workspace and return its outcome."""
    database = open_database(settings, read_only=True)
    if database.reborn:
        try:
            return _reborn_search(database, settings, query, limit=limit, mode=mode)
        finally:
            database.close()
    try:
        ironclaw_settings = database.ironclaw_settings(settings.user_id)
        config = SearchConfig.resolve(ironclaw_settings)
        embedding = EmbeddingSettings.resolve(ironclaw_settings)
        if mode == "vector" and embedding is None:
            raise CommandError(
                "--vector needs an embedding provider (EMBEDDING_ENABLED=true and its "
                "settings; see `memfs status`), or search without --vector",
                EXIT_USAGE,
            )
        store = database.search_store(legacy_scope(settings))

        async def go() -> SearchOutcome:
            embedder = Embedder(embedding) if embedding else None
            if embedder is not None:
                embedder.requests_failed_fast = True
            try:
                engine = SearchEngine(
                    store, _in_thread, embedder=embedder, config=config,
                    read_scopes=settings.read_scopes,
                )  # fmt: skip
                return await engine.search(query, limit=limit, mode=mode)
            finally:
                if embedder is not None:
                    await embedder.aclose()

        return trio.run(go)
    finally:
        database.close()


def _reborn_search(
    database: Database, settings: Settings, query: str, *, limit: int, mode: str
) -> SearchOutcome:
    """IronClaw v1.3's ranking of a Reborn workspace (full-text only: it has no vectors)."""
    if mode == "vector":
        raise CommandError(
            "--vector: IronClaw's Reborn memory keeps no embeddings; search without --vector",
            EXIT_USAGE,
        )
    scope = reborn_scope(settings)
    documents = RebornStore(database.pool, scope)
    engine = RebornSearch(RebornSearchStore(database.pool, scope), _in_thread, documents.id_of)
    return trio.run(functools.partial(engine.search, query, limit=limit, mode=mode))


def print_outcome(outcome: SearchOutcome, *, as_json: bool) -> None:
    if as_json:
        payload = {
            "command": "search",
            "details": {
                "query": outcome.query,
                "search": outcome.mode,
                "fusion": outcome.fusion,
                "note": outcome.note,
            },
            "counts": {"results": len(outcome.results)},
            "problems": [],
            "items": [
                {
                    "path": r.path,
                    "score": r.score,
                    "fts_rank": r.fts_rank,
                    "vector_rank": r.vector_rank,
                    "chunk_index": r.chunk_index,
                    "document_id": str(r.document_id),
                    "chunk_id": str(r.chunk_id),
                    "content": r.content,
                }
                for r in outcome.results
            ],
        }
        json.dump(payload, sys.stdout, ensure_ascii=False, indent=2)
        sys.stdout.write("\n")
        return
    sys.stdout.write(f"# {len(outcome.results)} results ({outcome.describe()})\n")
    for index, r in enumerate(outcome.results, 1):
        ranks = f"fts {r.fts_rank or '-'}, vector {r.vector_rank or '-'}"
        preview = " ".join(r.content.split())[:160]
        sys.stdout.write(
            f"{index:2d}. {r.path} [chunk {r.chunk_index}] {r.score:.4f} ({ranks})\n    {preview}\n"
        )
