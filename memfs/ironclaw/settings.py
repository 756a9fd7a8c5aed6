"""IronClaw's configuration resolution: its ``settings`` table first, then the environment.

IronClaw (v1.0) resolves each embedding and search setting as: a value in its ``settings``
table (written by its setup wizard) that differs from the built-in default wins and the
environment variable is not read at all; otherwise the environment variable, parsed with
Rust's strict rules (no trimming; ``EMBEDDING_ENABLED`` only ``true``/``1``/``false``/``0``
in any case; integers by ``u32::from_str``); otherwise the default.  An empty variable counts
as unset.  A value IronClaw would reject is a configuration error here too.

Each resolved value carries where it came from, for ``memfs status``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from memfs.ironclaw.numbers import USIZE_MAX, parse_f32, parse_unsigned

Source = Literal["settings table", "environment", "default"]

#: IronClaw's dimension for each model name it knows (exact, case-sensitive match).
KNOWN_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
    "amazon.titan-embed-text-v2:0": 1024,
    "nomic-embed-text": 768,
    "mxbai-embed-large": 1024,
    "all-minilm": 384,
}
DEFAULT_MODEL = "text-embedding-3-small"
BEDROCK_DEFAULT_MODEL = "amazon.titan-embed-text-v2:0"
BEDROCK_DIMENSIONS = (256, 512, 1024)
DEFAULT_OLLAMA_URL = "http://localhost:11434"

#: The ``settings`` keys memfs reads (IronClaw's dotted Settings paths).
SETTINGS_KEYS = (
    "embeddings.enabled",
    "embeddings.provider",
    "embeddings.model",
    "search.fusion_strategy",
    "search.rrf_k",
    "search.fts_weight",
    "search.vector_weight",
    "ollama_base_url",
    "nearai.session_token",
)


class ConfigError(ValueError):
    """A setting IronClaw would refuse; the message is IronClaw's wording."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"Invalid configuration value for {key}: {message}")
        self.key = key


def default_dimension_for_model(model: str) -> int:
    return KNOWN_DIMENSIONS.get(model, 1536)


def optional_env(env: Mapping[str, str], key: str) -> str | None:
    """An environment variable, with the empty string treated as unset (as IronClaw)."""
    value = env.get(key)
    return value if value else None


@dataclass
class Sources:
    """Where each effective setting came from (``memfs status`` prints them)."""

    by_name: dict[str, Source] = field(default_factory=dict)

    def note(self, name: str, source: Source) -> None:
        self.by_name[name] = source


def _db_text(value: Any) -> str | None:
    """IronClaw's conversion of a settings-table JSON value to the text it then parses."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return repr(value) if isinstance(value, float) else str(value)
    return str(value)


def _db_value(db: Mapping[str, Any], key: str, parse: Any) -> Any:
    """A settings-table value parsed as its Settings field; unparseable ones are ignored."""
    text = _db_text(db.get(key))
    if text is None:
        return None
    try:
        return parse(text)
    except ValueError:
        return None  # IronClaw logs a warning and keeps the default


def _parse_bool(text: str) -> bool:
    if text in ("true", "false"):
        return text == "true"
    raise ValueError(text)


@dataclass(frozen=True)
class _Layers:
    """Where a setting comes from, in IronClaw's order: its settings table, then the
    environment, then the default; each setting's source noted in ``sources``."""

    env: Mapping[str, str]
    sources: Sources

    def db_first(self, db_value: Any, default: Any, key: str, parse: Any, name: str) -> Any:
        if db_value is not None and db_value != default:
            self.sources.note(name, "settings table")
            return db_value
        raw = optional_env(self.env, key)
        if raw is None:
            self.sources.note(name, "default")
            return default
        try:
            value = parse(raw)
        except ValueError as exc:
            raise ConfigError(key, str(exc)) from None
        self.sources.note(name, "environment")
        return value


def _env_bool(raw: str) -> bool:
    lowered = raw.lower()
    if lowered in ("true", "1"):
        return True
    if lowered in ("false", "0"):
        return False
    raise ValueError(f"must be 'true' or 'false', got '{raw}'")


def _u32(text: str) -> int:
    return parse_unsigned(text)


def _usize(text: str) -> int:
    return parse_unsigned(text, USIZE_MAX)


@dataclass(frozen=True)
class SearchSettings:
    """The resolved fusion settings (IronClaw's ``WorkspaceSearchConfig``)."""

    fusion: str
    rrf_k: int
    fts_weight: float
    vector_weight: float
    sources: Sources = field(compare=False, default_factory=Sources)


def resolve_search(db: Mapping[str, Any], env: Mapping[str, str]) -> SearchSettings:
    """Fusion strategy, k and weights, as IronClaw resolves them."""
    sources = Sources()
    layers = _Layers(env, sources)
    raw_strategy = layers.db_first(
        _db_value(db, "search.fusion_strategy", str), "rrf",
        "SEARCH_FUSION_STRATEGY", str, "search fusion",
    )  # fmt: skip
    strategy = str(raw_strategy).lower()
    if strategy not in ("rrf", "weighted"):
        raise ConfigError(
            "SEARCH_FUSION_STRATEGY", f"must be 'rrf' or 'weighted', got '{strategy}'"
        )
    rrf_k = layers.db_first(
        _db_value(db, "search.rrf_k", _u32), 60, "SEARCH_RRF_K", _u32, "search k"
    )
    defaults = (0.5, 0.5) if strategy == "rrf" else (0.3, 0.7)
    weights = []
    for name, key, env_key, default in (
        ("fts weight", "search.fts_weight", "SEARCH_FTS_WEIGHT", defaults[0]),
        ("vector weight", "search.vector_weight", "SEARCH_VECTOR_WEIGHT", defaults[1]),
    ):
        value = _db_value(db, key, parse_f32)
        if value is not None:
            sources.note(name, "settings table")
        else:
            raw = optional_env(env, env_key)
            if raw is None:
                value = parse_f32(repr(default))
                sources.note(name, "default")
            else:
                try:
                    value = parse_f32(raw)
                except ValueError as exc:
                    raise ConfigError(env_key, str(exc)) from None
                sources.note(name, "environment")
        if not math.isfinite(value) or value < 0:
            raise ConfigError(env_key, "must be a finite, non-negative float")
        weights.append(value)
    if strategy == "weighted" and weights[0] == 0 and weights[1] == 0:
        raise ConfigError(
            "SEARCH_FTS_WEIGHT/SEARCH_VECTOR_WEIGHT",
            "weighted fusion requires at least one non-zero weight",
        )
    return SearchSettings(strategy, int(rrf_k), weights[0], weights[1], sources)


@dataclass(frozen=True)
class EmbeddingsConfig:
    """The resolved embedding settings (IronClaw's ``EmbeddingsConfig``)."""

    enabled: bool
    provider: str
    model: str
    dimension: int
    cache_size: int
    ollama_base_url: str
    openai_base_url: str | None
    sources: Sources = field(compare=False, default_factory=Sources)


def resolve_embeddings(db: Mapping[str, Any], env: Mapping[str, str]) -> EmbeddingsConfig:
    """IronClaw's ``resolve_embeddings_config``, in its order (so the same error wins)."""
    sources = Sources()
    layers = _Layers(env, sources)
    provider = str(
        layers.db_first(
            _db_value(db, "embeddings.provider", str), "nearai",
            "EMBEDDING_PROVIDER", str, "embedding provider",
        )
    )  # fmt: skip
    if provider == "bedrock":
        model = optional_env(env, "EMBEDDING_MODEL")
        sources.note("embedding model", "environment" if model else "default")
        model = model or BEDROCK_DEFAULT_MODEL
    else:
        model = str(
            layers.db_first(
                _db_value(db, "embeddings.model", str), DEFAULT_MODEL,
                "EMBEDDING_MODEL", str, "embedding model",
            )
        )  # fmt: skip
    db_ollama = _db_text(db.get("ollama_base_url"))
    if db_ollama:
        ollama = db_ollama
        sources.note("ollama url", "settings table")
    else:
        ollama = optional_env(env, "OLLAMA_BASE_URL") or DEFAULT_OLLAMA_URL
        sources.note("ollama url", "environment" if ollama != DEFAULT_OLLAMA_URL else "default")
    dimension = layers.db_first(
        None, default_dimension_for_model(model), "EMBEDDING_DIMENSION", _usize,
        "embedding dimension",
    )  # fmt: skip
    if provider == "bedrock" and dimension not in BEDROCK_DIMENSIONS:
        raise ConfigError(
            "EMBEDDING_DIMENSION",
            "Bedrock Titan v2 embeddings support only 256, 512, or 1024 dimensions",
        )
    enabled = layers.db_first(
        _db_value(db, "embeddings.enabled", _parse_bool), False,
        "EMBEDDING_ENABLED", _env_bool, "embeddings enabled",
    )  # fmt: skip
    cache_size = layers.db_first(None, 10_000, "EMBEDDING_CACHE_SIZE", _usize, "embedding cache")
    if cache_size == 0:
        raise ConfigError("EMBEDDING_CACHE_SIZE", "must be at least 1")
    return EmbeddingsConfig(
        enabled=bool(enabled),
        provider=provider,
        model=model,
        dimension=int(dimension),
        cache_size=int(cache_size),
        ollama_base_url=ollama,
        openai_base_url=optional_env(env, "EMBEDDING_BASE_URL"),
        sources=sources,
    )
