"""IronClaw's result fusion (``src/workspace/search.rs``): RRF or weighted, max-normalised.

Scores are computed in 32-bit float as IronClaw does.  IronClaw sorts equal scores in hash
map order (no defined order); memfs breaks ties deterministically: better FTS rank, then
better vector rank, then path, then chunk index.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from uuid import UUID

from memfs.search.config import SearchConfig


def f32(value: float) -> float:
    result: float = struct.unpack("<f", struct.pack("<f", value))[0]
    return result


@dataclass(frozen=True)
class Hit:
    """One chunk as returned by one retrieval method (rank is 1-based)."""

    chunk_id: UUID
    document_id: UUID
    path: str
    chunk_index: int
    content: str
    rank: int


@dataclass(frozen=True)
class SearchResult:
    """One fused result: per chunk, not deduplicated per document, as in IronClaw."""

    chunk_id: UUID
    document_id: UUID
    path: str
    chunk_index: int
    content: str
    score: float
    fts_rank: int | None
    vector_rank: int | None

    @property
    def is_hybrid(self) -> bool:
        return self.fts_rank is not None and self.vector_rank is not None


def fuse(fts: list[Hit], vector: list[Hit], config: SearchConfig) -> list[SearchResult]:
    """Combine the two ranked lists into at most ``config.limit`` results."""
    if config.limit <= 0:
        return []
    by_chunk: dict[UUID, dict[str, Hit]] = {}
    for method, hits in (("fts", fts), ("vector", vector)):
        for hit in hits:
            by_chunk.setdefault(hit.chunk_id, {})[method] = hit
    scored: list[SearchResult] = []
    for chunk_id, methods in by_chunk.items():
        any_hit = methods.get("fts") or methods["vector"]
        fts_rank = methods["fts"].rank if "fts" in methods else None
        vector_rank = methods["vector"].rank if "vector" in methods else None
        if config.fusion == "weighted":
            score = 0.0
            if fts_rank is not None:
                score = f32(score + f32(config.fts_weight * f32(1.0 / fts_rank)))
            if vector_rank is not None:
                score = f32(score + f32(config.vector_weight * f32(1.0 / vector_rank)))
        else:
            score = 0.0
            for rank in (fts_rank, vector_rank):
                if rank is not None:
                    score = f32(score + f32(1.0 / f32(config.rrf_k + rank)))
        scored.append(
            SearchResult(
                chunk_id, any_hit.document_id, any_hit.path, any_hit.chunk_index,
                any_hit.content, score, fts_rank, vector_rank,
            )
        )  # fmt: skip
    top = max((r.score for r in scored), default=0.0)
    if top > 0:
        scored = [_with_score(r, f32(r.score / top)) for r in scored]
    if config.min_score > 0:
        scored = [r for r in scored if r.score >= config.min_score]
    scored.sort(key=_order)
    return scored[: config.limit]


def _with_score(result: SearchResult, score: float) -> SearchResult:
    return SearchResult(
        result.chunk_id, result.document_id, result.path, result.chunk_index,
        result.content, score, result.fts_rank, result.vector_rank,
    )  # fmt: skip


def _order(result: SearchResult) -> tuple[float, float, float, str, int]:
    return (
        -result.score,
        result.fts_rank if result.fts_rank is not None else math.inf,
        result.vector_rank if result.vector_rank is not None else math.inf,
        result.path,
        result.chunk_index,
    )
