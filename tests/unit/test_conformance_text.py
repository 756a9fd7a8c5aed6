"""Chunker and path normalisation against IronClaw's own outputs (every vector)."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from memfs.ironclaw.chunker import ChunkConfig, chunk_document, chunk_streaming
from memfs.paths import normalize_path
from tests.conformance import load

CHUNKER = load("chunker.json")
PATHS = load("normalize_path.json")["cases"]


def _f32(bits: str) -> float:
    value: float = struct.unpack("<f", struct.pack("<I", int(bits, 16)))[0]
    return value


def _config(raw: dict[str, Any]) -> ChunkConfig:
    return ChunkConfig(
        raw["chunk_size"], _f32(raw["overlap_percent_f32_bits"]), raw["min_chunk_size"]
    )


def test_vector_counts() -> None:
    assert len(CHUNKER["cases"]) == 301 and len(CHUNKER["overlap_table"]) == 1206
    assert len(PATHS) == 2000


@pytest.mark.parametrize("case", CHUNKER["cases"], ids=[c["id"] for c in CHUNKER["cases"]])
def test_chunker_matches_ironclaw(case: dict[str, Any]) -> None:
    config = _config(case["config"])
    assert (config.overlap_words, config.step) == (case["overlap_words"], case["step"])
    assert chunk_document(case["text"], config) == case["chunks"]
    # The streaming chunker (documents over 1 MiB) gives the same chunks.
    if config.step > 0 or case["chunks"] == [] or len(case["chunks"]) == 1:
        assert chunk_streaming(case["text"], config) == case["chunks"]


def test_overlap_arithmetic_matches_ironclaw() -> None:
    mismatches = []
    for row in CHUNKER["overlap_table"]:
        config = ChunkConfig(row["chunk_size"], _f32(row["overlap_percent_f32_bits"]))
        if (config.overlap_words, config.step) != (row["overlap_words"], row["step"]):
            mismatches.append(row)
        clamped = ChunkConfig.with_overlap(row["chunk_size"], _f32(row["overlap_percent_f32_bits"]))
        want = row["with_overlap"]
        if (clamped.overlap_words, clamped.step) != (want["overlap_words"], want["step"]):
            mismatches.append(row)
    assert mismatches == []


def test_normalize_path_matches_ironclaw() -> None:
    wrong = [c for c in PATHS if normalize_path(c["input"]) != c["normalize_path"]]
    assert wrong == []
    assert all(c["normalize_directory"] == c["normalize_path"] for c in PATHS)
