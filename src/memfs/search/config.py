"""Search settings: IronClaw's ``SearchConfig`` defaults and its ``SEARCH_*`` variables."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace


class SearchConfigError(ValueError):
    """A ``SEARCH_*`` variable has a value IronClaw would also reject."""


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
        """Read IronClaw's `SEARCH_FUSION_STRATEGY`, `SEARCH_RRF_K` and `SEARCH_*_WEIGHT`.

        Weights default to 0.5/0.5 for RRF and 0.3/0.7 for weighted fusion; they must be
        finite and >= 0, and weighted fusion with both weights 0 is rejected, as in IronClaw.
        """
        env = os.environ if env is None else env
        fusion = env.get("SEARCH_FUSION_STRATEGY", "rrf").strip().lower() or "rrf"
        if fusion not in ("rrf", "weighted"):
            raise SearchConfigError(
                f"SEARCH_FUSION_STRATEGY must be 'rrf' or 'weighted', not {fusion!r}"
            )
        defaults = (0.5, 0.5) if fusion == "rrf" else (0.3, 0.7)
        fts_weight = _weight(env, "SEARCH_FTS_WEIGHT", defaults[0])
        vector_weight = _weight(env, "SEARCH_VECTOR_WEIGHT", defaults[1])
        if fusion == "weighted" and fts_weight == 0 and vector_weight == 0:
            raise SearchConfigError("weighted fusion needs a weight above 0")
        try:
            rrf_k = int(env.get("SEARCH_RRF_K", "60"))
        except ValueError:
            raise SearchConfigError("SEARCH_RRF_K must be an integer") from None
        return cls(rrf_k=rrf_k, fusion=fusion, fts_weight=fts_weight, vector_weight=vector_weight)


def _weight(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SearchConfigError(f"{name} must be a number, not {raw!r}") from None
    if not math.isfinite(value) or value < 0:
        raise SearchConfigError(f"{name} must be finite and >= 0, not {raw!r}")
    return value
