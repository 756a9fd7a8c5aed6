"""``memfs search QUERY``: the same engine as ``.search/``, without a mount."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import trio

from memfs.config import Settings
from memfs.db import open_database
from memfs.embeddings import Embedder, EmbeddingSettings
from memfs.errors import EXIT_USAGE, CommandError
from memfs.search import SearchConfig, SearchOutcome
from memfs.search.rankings import search_engine

T = TypeVar("T")


async def _in_thread(fn: Callable[..., T], *args: Any) -> T:
    return await trio.to_thread.run_sync(functools.partial(fn, *args))


def run_search(settings: Settings, query: str, *, limit: int, mode: str) -> SearchOutcome:
    """Run one search against the workspace and return its outcome."""
    database = open_database(settings, read_only=True)
    try:
        workspace = database.workspace(settings)
        ironclaw_settings = database.ironclaw_settings(settings.user_id)
        config = SearchConfig.resolve(ironclaw_settings)
        embedding = EmbeddingSettings.resolve(ironclaw_settings)
        if mode == "vector" and workspace.embeddings is None:
            raise CommandError(
                "--vector: IronClaw's Reborn memory keeps no embeddings; search without --vector",
                EXIT_USAGE,
            )
        if mode == "vector" and embedding is None:
            raise CommandError(
                "--vector needs an embedding provider (EMBEDDING_ENABLED=true and its "
                "settings; see `memfs status`), or search without --vector",
                EXIT_USAGE,
            )

        async def go() -> SearchOutcome:
            keeps_vectors = embedding is not None and workspace.embeddings is not None
            embedder = Embedder(embedding) if keeps_vectors and embedding else None
            if embedder is not None:
                embedder.requests_failed_fast = True
            try:
                engine = search_engine(
                    workspace.ranking, _in_thread, embedder=embedder, config=config,
                    read_scopes=settings.read_scopes,
                )  # fmt: skip
                return await engine.search(query, limit=limit, mode=mode)
            finally:
                if embedder is not None:
                    await embedder.aclose()

        return trio.run(go)
    finally:
        database.close()


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
