"""Settings resolution against IronClaw's own resolver outputs (every executed entry)."""

from __future__ import annotations

from typing import Any

import pytest

from memfs.ironclaw.numbers import f32_bits
from memfs.ironclaw.settings import (
    ConfigError,
    default_dimension_for_model,
    resolve_embeddings,
    resolve_search,
)
from tests.conformance import load

ENTRIES = [e for e in load("config.json")["entries"] if e["derived_by"] == "run"]
SEARCH = [e for e in ENTRIES if e["setting"].startswith("SEARCH_")]
EMBEDDINGS = [e for e in ENTRIES if e["setting"].startswith("EMBEDDING_")]
DIMENSIONS = [e for e in ENTRIES if e["setting"] == "default_dimension_for_model"]


def test_every_executed_entry_is_used() -> None:
    defaults = [e for e in ENTRIES if e["setting"].endswith("::default")]
    assert len(SEARCH) + len(EMBEDDINGS) + len(DIMENSIONS) + len(defaults) == len(ENTRIES)
    assert len(ENTRIES) == 146


@pytest.mark.parametrize("entry", SEARCH, ids=[e["id"] for e in SEARCH])
def test_search_settings_match_ironclaw(entry: dict[str, Any]) -> None:
    inputs, want = entry["input"], entry["result"]
    if "error" in want:
        with pytest.raises(ConfigError) as caught:
            resolve_search(inputs["db_settings"], inputs["env"])
        assert str(caught.value) == want["error"]
        return
    got = resolve_search(inputs["db_settings"], inputs["env"])
    assert got.fusion == {"Rrf": "rrf", "WeightedScore": "weighted"}[want["strategy"]]
    assert got.rrf_k == want["rrf_k"]
    assert f32_bits(got.fts_weight) == int(want["fts_bits"], 16)
    assert f32_bits(got.vector_weight) == int(want["vector_bits"], 16)


@pytest.mark.parametrize("entry", EMBEDDINGS, ids=[e["id"] for e in EMBEDDINGS])
def test_embedding_settings_match_ironclaw(entry: dict[str, Any]) -> None:
    inputs, want = entry["input"], entry["result"]
    if "error" in want:
        with pytest.raises(ConfigError) as caught:
            resolve_embeddings(inputs["db_settings"], inputs["env"])
        assert str(caught.value) == want["error"]
        return
    got = resolve_embeddings(inputs["db_settings"], inputs["env"])
    assert (got.enabled, got.provider, got.model, got.dimension, got.cache_size) == (
        want["enabled"], want["provider"], want["model"], want["dimension"], want["cache_size"],
    )  # fmt: skip


@pytest.mark.parametrize("entry", DIMENSIONS, ids=[e["id"] for e in DIMENSIONS])
def test_default_dimensions_match_ironclaw(entry: dict[str, Any]) -> None:
    assert default_dimension_for_model(entry["input"]["model"]) == entry["result"]["dimension"]


def test_sources_name_the_settings_table_first() -> None:
    got = resolve_embeddings(
        {"embeddings.enabled": True, "embeddings.model": "text-embedding-3-large"},
        {"EMBEDDING_ENABLED": "false", "EMBEDDING_PROVIDER": "ollama"},
    )
    assert got.sources.by_name["embeddings enabled"] == "settings table"
    assert got.sources.by_name["embedding model"] == "settings table"
    assert got.sources.by_name["embedding provider"] == "environment"
    assert got.sources.by_name["embedding dimension"] == "default"
