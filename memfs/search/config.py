"""Search settings: IronClaw's ``SearchConfig`` defaults and its ``SEARCH_*`` variables."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from memfs.ironclaw.settings import ConfigError, resolve_search

SearchConfigError = ConfigError


@dataclass(frozen=True)
class SearchConfig:
    """IronClaw's defaults (``src/workspace/search.rs``)."""

    limit: int = 10
    rrf_k: int = 60
    use_fts: bool = True
    use_vector: bool = True
    min_score: float = 0.0
    pre_fusion_limit: int = 50
    fusion: str = "rrf"  # or "weighted"
    fts_weight: float = 0.5
    vector_weight: float = 0.5

    def with_limit(self, limit: int) -> SearchConfig:
        return replace(self, limit=limit)

    def fts_only(self) -> SearchConfig:
        return replace(self, use_fts=True, use_vector=False)

    def vector_only(self) -> SearchConfig:
        return replace(self, use_fts=False, use_vector=True)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> SearchConfig:
        return cls.resolve({}, env)

    @classmethod
    def resolve(cls, db: Mapping[str, Any], env: Mapping[str, str] | None = None) -> SearchConfig:
        """IronClaw's fusion settings: its ``settings`` table, then ``SEARCH_*``, then defaults.

        Weights are f32 (default 0.5/0.5 for RRF, 0.3/0.7 for weighted), finite and >= 0;
        weighted fusion with both weights 0 is refused, as in IronClaw.
        """
        env = os.environ if env is None else env
        resolved = resolve_search(db, env)
        return cls(
            rrf_k=resolved.rrf_k,
            fusion=resolved.fusion,
            fts_weight=resolved.fts_weight,
            vector_weight=resolved.vector_weight,
        )
