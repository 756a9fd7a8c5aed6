"""IronClaw's fusion unit vectors (ironclaw-facts §5.4) and SEARCH_* parsing."""

from __future__ import annotations

import uuid

import pytest

from memfs.ironclaw.numbers import f32
from memfs.search.config import SearchConfig, SearchConfigError
from memfs.search.fusion import Hit, fuse

IDS = {name: uuid.uuid5(uuid.NAMESPACE_OID, name) for name in "abcsxyz"}


def hits(*names_and_ranks: tuple[str, int]) -> list[Hit]:
    return [Hit(IDS[n], IDS[n], f"{n}.md", 0, n, rank) for n, rank in names_and_ranks]


def scores(results: list[object]) -> dict[str, float]:
    return {r.path[0]: round(r.score, 5) for r in results}  # type: ignore[attr-defined]


RRF = SearchConfig()


def test_rrf_hybrid_boost() -> None:
    out = fuse(hits(("a", 1), ("b", 2)), hits(("a", 1), ("c", 2)), RRF)
    assert scores(out) == {"a": 1.0, "b": 0.49194, "c": 0.49194}
    assert out[0].is_hybrid and (out[0].fts_rank, out[0].vector_rank) == (1, 1)


def test_rrf_duplicate_chunks_merged() -> None:
    out = fuse(hits(("x", 1), ("s", 2)), hits(("y", 1), ("s", 3)), RRF)
    assert scores(out) == {"s": 1.0, "x": 0.51226, "y": 0.51226}
    assert [r.path for r in out] == ["s.md", "x.md", "y.md"]  # ties: FTS rank first (ours)


def test_min_score_and_limits() -> None:
    three = hits(("a", 1), ("b", 50), ("c", 100))
    kept = fuse(three, [], SearchConfig(min_score=0.5))
    assert [round(r.score, 5) for r in kept] == [1.0, 0.55455]
    assert len(fuse(three, [], SearchConfig(min_score=1.0))) == 1
    assert fuse(three, [], SearchConfig(limit=0)) == []
    assert [r.score for r in fuse(hits(("a", 7)), [], RRF)] == [1.0]
    assert fuse([], [], RRF) == []


def test_weighted_fusion() -> None:
    equal = SearchConfig(fusion="weighted", fts_weight=1, vector_weight=1)
    out = fuse(hits(("a", 1), ("b", 2)), hits(("a", 1), ("c", 2)), equal)
    assert scores(out) == {"a": 1.0, "b": 0.25, "c": 0.25}
    skewed = SearchConfig(fusion="weighted", fts_weight=2, vector_weight=0.5)
    out = fuse(hits(("x", 2)), hits(("y", 2)), skewed)
    assert [(r.path, round(r.score, 5)) for r in out] == [("x.md", 1.0), ("y.md", 0.25)]
    defaults = SearchConfig.from_env({"SEARCH_FUSION_STRATEGY": "weighted"})
    assert (defaults.fts_weight, defaults.vector_weight) == (f32(0.3), f32(0.7))  # IronClaw: f32
    out = fuse(hits(("a", 1), ("b", 3)), [], defaults)
    assert scores(out) == {"a": 1.0, "b": 0.33333}


def test_larger_k_flattens_scores() -> None:
    low = fuse(hits(("a", 1), ("b", 2)), [], SearchConfig(rrf_k=1))
    high = fuse(hits(("a", 1), ("b", 2)), [], SearchConfig(rrf_k=600))
    assert low[1].score < high[1].score


def test_search_env() -> None:
    assert SearchConfig.from_env({}) == SearchConfig()
    cfg = SearchConfig.from_env({"SEARCH_RRF_K": "10", "SEARCH_FTS_WEIGHT": "2"})
    assert (cfg.rrf_k, cfg.fts_weight, cfg.vector_weight) == (10, 2.0, 0.5)
    assert SearchConfig.from_env({"SEARCH_FUSION_STRATEGY": "WEIGHTED"}).fusion == "weighted"
    for bad in (
        {"SEARCH_FUSION_STRATEGY": "max"},
        {"SEARCH_FTS_WEIGHT": "-1"},
        {"SEARCH_VECTOR_WEIGHT": "inf"},
        {"SEARCH_FTS_WEIGHT": "nan"},
        {
            "SEARCH_FUSION_STRATEGY": "weighted",
            "SEARCH_FTS_WEIGHT": "0",
            "SEARCH_VECTOR_WEIGHT": "0",
        },
        {"SEARCH_RRF_K": "ten"},
    ):
        with pytest.raises(SearchConfigError):
            SearchConfig.from_env(bad)
