"""IronClaw's result fusion (``src/workspace/search.rs``): RRF or weighted, max-normalised.

Scores are computed in 32-bit float as IronClaw does.  IronClaw sorts equal scores in hash
map order (no defined order); memfs breaks ties deterministically: better FTS rank, then
better vector rank, then path, then chunk index.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from memfs.ironclaw.numbers import f32, f32_div
from memfs.search.config import SearchConfig


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
    """Combine the two ranked lists into at most ``config.limit`` results.

    Mirrors IronClaw's accumulation exactly: FTS hits first, then vector hits; a chunk
    seen again adds its score again and takes the later rank, while path and content stay
    those of its first appearance.  Every step is rounded to f32.
    """
    if config.limit <= 0:
        return []
    k = f32(float(config.rrf_k))
    entries: dict[UUID, list[Any]] = {}  # chunk id -> [first hit, score, fts rank, vec rank]
    for slot, weight, hits in ((2, config.fts_weight, fts), (3, config.vector_weight, vector)):
        for hit in hits:
            rank = f32(float(hit.rank))
            if config.fusion == "weighted":
                score = f32(f32(weight) * f32_div(1.0, rank))
            else:
                score = f32_div(1.0, f32(k + rank))
            entry = entries.get(hit.chunk_id)
            if entry is None:
                entry = entries[hit.chunk_id] = [hit, score, None, None]
            else:
                entry[1] = f32(entry[1] + score)
            entry[slot] = hit.rank
    scored = [
        SearchResult(
            chunk_id, hit.document_id, hit.path, hit.chunk_index, hit.content, score,
            fts_rank, vector_rank,
        )
        for chunk_id, (hit, score, fts_rank, vector_rank) in entries.items()
    ]  # fmt: skip
    top = _f32_max(r.score for r in scored)
    if top is not None and top > 0:
        scored = [_with_score(r, f32_div(r.score, top)) for r in scored]
    min_score = f32(config.min_score)
    if min_score > 0:
        scored = [r for r in scored if r.score >= min_score]
    scored.sort(key=_order)
    return scored[: config.limit]


def _f32_max(scores: Iterable[float]) -> float | None:
    """Rust's ``reduce(f32::max)``: NaN loses against any number."""
    top: float | None = None
    for score in scores:
        if top is None or math.isnan(top) or (not math.isnan(score) and score > top):
            top = score
    return top


def _with_score(result: SearchResult, score: float) -> SearchResult:
    return SearchResult(
        result.chunk_id, result.document_id, result.path, result.chunk_index,
        result.content, score, result.fts_rank, result.vector_rank,
    )  # fmt: skip


def _order(result: SearchResult) -> tuple[float, float, float, str, int]:
    score = result.score
    return (
        -score if not math.isnan(score) else 0.0,
        result.fts_rank if result.fts_rank is not None else math.inf,
        result.vector_rank if result.vector_rank is not None else math.inf,
        result.path,
        result.chunk_index,
    )
