"""Fusion against IronClaw's own outputs: every RRF and weighted case, bit for bit."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from memfs.ironclaw.numbers import f32_bits, parse_f32
from memfs.search.config import SearchConfig
from memfs.search.fusion import Hit, fuse
from tests.conformance import load

CASES = load("fusion.json")["cases"]


def _hits(items: list[dict[str, Any]]) -> list[Hit]:
    return [
        Hit(
            uuid.UUID(int=i["chunk_id"]), uuid.UUID(int=i["document_id"]), i["document_path"],
            0, i["content"], i["rank"],
        )
        for i in items
    ]  # fmt: skip


def _config(raw: dict[str, Any]) -> SearchConfig:
    def exact(name: str) -> float:
        value = parse_f32(repr(float(raw[name])))
        assert f32_bits(value) == int(raw[f"{name}_f32_bits"], 16), name
        return value

    return SearchConfig(
        limit=raw["limit"],
        rrf_k=raw["rrf_k"],
        min_score=exact("min_score"),
        fusion=raw["fusion_strategy"],
        fts_weight=exact("fts_weight"),
        vector_weight=exact("vector_weight"),
    )


def test_every_strategy_is_covered() -> None:
    strategies = {c["config"]["fusion_strategy"] for c in CASES}
    assert strategies == {"rrf", "weighted"} and len(CASES) == 400


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_fusion_matches_ironclaw(case: dict[str, Any]) -> None:
    out = fuse(_hits(case["fts"]), _hits(case["vector"]), _config(case["config"]))
    expected = case["results"]
    assert [f32_bits(r.score) for r in out] == [int(e["score_bits"], 16) for e in expected]
    got_ids = [r.chunk_id.int for r in out]
    want_ids = [e["chunk_id"] for e in expected]
    cutoff = case["cutoff_tie"]
    free = {i for group in case["tie_groups"] for i in group}
    if cutoff:
        free |= set(cutoff["candidates"])
    for position, (got, want) in enumerate(zip(got_ids, want_ids, strict=True)):
        if want not in free:
            assert got == want, f"position {position}"
    for group in case["tie_groups"]:
        if cutoff and set(group) & set(cutoff["candidates"]):
            continue
        assert {i for i in got_ids if i in group} == set(group)
    if cutoff:
        kept = [i for i in got_ids if i in cutoff["candidates"]]
        assert len(kept) == len([i for i in want_ids if i in cutoff["candidates"]])
    by_id = {e["chunk_id"]: e for e in expected}
    for r in out:
        want = by_id.get(r.chunk_id.int)
        if want is None:
            assert cutoff and r.chunk_id.int in cutoff["candidates"]
            continue
        assert (r.fts_rank, r.vector_rank) == (want["fts_rank"], want["vector_rank"])
        assert r.document_id.int == want["document_id"]
        assert (r.path, r.content) == (want["document_path"], want["content"])
