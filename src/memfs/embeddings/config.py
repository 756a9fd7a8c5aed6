"""Embedding settings from IronClaw's own environment variables (ironclaw-facts §6.1)."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass

log = logging.getLogger(__name__)

#: IronClaw's inferred dimensions; anything else defaults to 1536.
KNOWN_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
    "nomic-embed-text": 768,
    "mxbai-embed-large": 1024,
    "all-minilm": 384,
}
DEFAULT_MODEL = "text-embedding-3-small"


class EmbeddingConfigError(ValueError):
    """An embedding variable has a value IronClaw would also reject."""


def normalize_base_url(url: str) -> str:
    """Prepend ``https://`` to a schemeless base and drop trailing slashes, as IronClaw does."""
    url = url.strip()
    if "://" not in url:
        url = "https://" + url
    return url.rstrip("/")


@dataclass(frozen=True)
class EmbeddingSettings:
    """Which provider to call and how (memfs's own knobs have ``MEMFS_EMBEDDING_*`` names)."""

    provider: str  # "openai" (OpenAI-compatible), "nearai" or "ollama"
    model: str
    dimension: int
    base_url: str
    api_key: str | None
    cache_size: int = 10_000
    timeout: float = 30.0
    max_retries: int = 5
    batch_size: int = 64
    max_retry_wait: float = 60.0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> EmbeddingSettings | None:
        """None when embeddings are off, as IronClaw: then search is full-text only."""
        env = os.environ if env is None else env
        if env.get("EMBEDDING_ENABLED", "false").strip().lower() not in ("1", "true", "yes"):
            return None
        provider = env.get("EMBEDDING_PROVIDER", "nearai").strip().lower() or "nearai"
        model = env.get("EMBEDDING_MODEL", "").strip() or DEFAULT_MODEL
        raw_dim = env.get("EMBEDDING_DIMENSION", "").strip()
        dimension = int(raw_dim) if raw_dim else KNOWN_DIMENSIONS.get(model, 1536)
        cache_size = int(env.get("EMBEDDING_CACHE_SIZE", "10000"))
        if cache_size == 0:
            raise EmbeddingConfigError("EMBEDDING_CACHE_SIZE must be at least 1")
        api_key: str | None
        if provider == "ollama":
            base_url = normalize_base_url(env.get("OLLAMA_BASE_URL", "http://localhost:11434"))
            api_key = None
        elif provider == "nearai":
            api_key = env.get("NEARAI_API_KEY") or None
            default = "https://cloud-api.near.ai" if api_key else "https://private.near.ai"
            base_url = normalize_base_url(env.get("NEARAI_BASE_URL", default))
        else:
            provider = "openai"
            api_key = env.get("OPENAI_API_KEY") or None
            if api_key is None:
                log.warning("EMBEDDING_PROVIDER needs OPENAI_API_KEY: embeddings disabled")
                return None
            base_url = normalize_base_url(env.get("EMBEDDING_BASE_URL", "https://api.openai.com"))
        return cls(
            provider=provider,
            model=model,
            dimension=dimension,
            base_url=base_url,
            api_key=api_key,
            cache_size=max(cache_size, 1),
            timeout=float(env.get("MEMFS_EMBEDDING_TIMEOUT", "30")),
            max_retries=int(env.get("MEMFS_EMBEDDING_RETRIES", "5")),
            batch_size=max(int(env.get("MEMFS_EMBEDDING_BATCH", "64")), 1),
            max_retry_wait=float(env.get("MEMFS_EMBEDDING_MAX_WAIT", "60")),
        )
