"""Embedding settings, resolved as IronClaw resolves them (its ``settings`` table, then env).

IronClaw's resolution rules live in ``memfs.ironclaw.settings``; this module adds what a
provider needs to be called: base URLs, credentials (API keys, a NEAR AI session token,
AWS credentials for Bedrock) and memfs's own client knobs (``MEMFS_EMBEDDING_*``).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memfs.ironclaw.settings import (
    KNOWN_DIMENSIONS,
    ConfigError,
    EmbeddingsConfig,
    optional_env,
    resolve_embeddings,
)

log = logging.getLogger(__name__)

EmbeddingConfigError = ConfigError
BEDROCK_DEFAULT_REGION = "us-east-1"

__all__ = ["KNOWN_DIMENSIONS", "EmbeddingConfigError", "EmbeddingSettings", "normalize_base_url"]


def normalize_base_url(url: str) -> str:
    """Prepend ``https://`` to a schemeless base and drop trailing slashes, as IronClaw does."""
    url = url.strip()
    if "://" not in url:
        url = "https://" + url
    return url.rstrip("/")


def _ironclaw_dir(env: Mapping[str, str]) -> Path:
    base = optional_env(env, "IRONCLAW_BASE_DIR")
    return Path(base) if base else Path(env.get("HOME", str(Path.home()))) / ".ironclaw"


def nearai_session_token(env: Mapping[str, str], db: Mapping[str, Any]) -> tuple[str, str] | None:
    """A NEAR AI session token where IronClaw keeps one, and where it was found.

    In IronClaw's order: ``NEARAI_SESSION_TOKEN``; its ``settings`` table
    (``nearai.session_token``, a session object or a bare string); then
    ``~/.ironclaw/session.json``.  Its encrypted secrets store cannot be read without its
    master key and is not consulted.
    """
    token = optional_env(env, "NEARAI_SESSION_TOKEN")
    if token:
        return token, "NEARAI_SESSION_TOKEN"
    stored = db.get("nearai.session_token")
    if isinstance(stored, dict) and isinstance(stored.get("session_token"), str):
        return stored["session_token"], "settings table (nearai.session_token)"
    if isinstance(stored, str) and stored:
        return stored, "settings table (nearai.session_token)"
    path = _ironclaw_dir(env) / "session.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if isinstance(data, dict) and isinstance(data.get("session_token"), str):
        return data["session_token"], str(path)
    return None


@dataclass(frozen=True)
class EmbeddingSettings:
    """Which provider to call and how (memfs's own knobs have ``MEMFS_EMBEDDING_*`` names)."""

    provider: str  # "openai" (OpenAI-compatible), "nearai", "ollama" or "bedrock"
    model: str
    dimension: int
    base_url: str
    api_key: str | None
    cache_size: int = 10_000
    timeout: float = 30.0
    max_retries: int = 5
    batch_size: int = 64
    max_retry_wait: float = 60.0
    #: Bedrock: the AWS region and named profile (credentials come from AWS's usual chain).
    region: str | None = None
    profile: str | None = None
    #: Where the credential came from (for ``memfs status``; never the secret itself).
    credential_source: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> EmbeddingSettings | None:
        return cls.resolve({}, env)

    @classmethod
    def resolve(
        cls, db: Mapping[str, Any], env: Mapping[str, str] | None = None
    ) -> EmbeddingSettings | None:
        """None when embeddings are off or cannot be used, as in IronClaw: search is FTS."""
        env = os.environ if env is None else env
        config = resolve_embeddings(db, env)
        if not config.enabled:
            return None
        return cls.for_config(config, db, env)

    @classmethod
    def for_config(
        cls, config: EmbeddingsConfig, db: Mapping[str, Any], env: Mapping[str, str]
    ) -> EmbeddingSettings | None:
        knobs = _client_knobs(env)
        common: dict[str, Any] = {
            "model": config.model,
            "dimension": config.dimension,
            "cache_size": max(config.cache_size, 1),
        }
        # IronClaw dispatches on the exact provider string; anything unknown is OpenAI-compatible.
        if config.provider == "ollama":
            return cls(
                provider="ollama", base_url=normalize_base_url(config.ollama_base_url),
                api_key=None, **common, **knobs,
            )  # fmt: skip
        if config.provider == "nearai":
            api_key = optional_env(env, "NEARAI_API_KEY")
            source = "NEARAI_API_KEY" if api_key else None
            if api_key is None:
                found = nearai_session_token(env, db)
                if found is None:
                    log.warning(
                        "NEAR AI embeddings need NEARAI_API_KEY or a session token "
                        "(NEARAI_SESSION_TOKEN, IronClaw's settings or ~/.ironclaw/session.json): "
                        "embeddings disabled"
                    )
                    return None
                api_key, source = found
            default = (
                "https://cloud-api.near.ai"
                if source == "NEARAI_API_KEY"
                else ("https://private.near.ai")
            )
            base = optional_env(env, "NEARAI_BASE_URL") or default
            return cls(
                provider="nearai", base_url=normalize_base_url(base), api_key=api_key,
                credential_source=source, **common, **knobs,
            )  # fmt: skip
        if config.provider == "bedrock":
            region = optional_env(env, "BEDROCK_REGION") or BEDROCK_DEFAULT_REGION
            base = optional_env(env, "MEMFS_BEDROCK_ENDPOINT") or (
                f"https://bedrock-runtime.{region}.amazonaws.com"
            )
            return cls(
                provider="bedrock", base_url=normalize_base_url(base), api_key=None,
                region=region, profile=optional_env(env, "AWS_PROFILE"),
                credential_source="AWS credential chain", **common, **knobs,
            )  # fmt: skip
        api_key = optional_env(env, "OPENAI_API_KEY")
        if api_key is None:
            if config.provider == "openai":
                log.warning("EMBEDDING_PROVIDER=openai needs OPENAI_API_KEY: embeddings off")
            else:
                log.warning(
                    "EMBEDDING_PROVIDER=%r is not a provider IronClaw knows (openai, nearai, "
                    "ollama, bedrock); IronClaw sends it to its OpenAI-compatible client, which "
                    "needs OPENAI_API_KEY (and EMBEDDING_BASE_URL for a server other than "
                    "OpenAI's): embeddings off",
                    config.provider,
                )
            return None
        base = config.openai_base_url or "https://api.openai.com"
        return cls(
            provider="openai", base_url=normalize_base_url(base), api_key=api_key,
            credential_source="OPENAI_API_KEY", **common, **knobs,
        )  # fmt: skip


def _client_knobs(env: Mapping[str, str]) -> dict[str, Any]:
    def number(name: str, default: str, kind: type) -> Any:
        raw = env.get(name, default)
        try:
            return kind(raw)
        except ValueError:
            raise ConfigError(name, f"must be a number, got '{raw}'") from None

    return {
        "timeout": number("MEMFS_EMBEDDING_TIMEOUT", "30", float),
        "max_retries": number("MEMFS_EMBEDDING_RETRIES", "5", int),
        "batch_size": max(number("MEMFS_EMBEDDING_BATCH", "64", int), 1),
        "max_retry_wait": number("MEMFS_EMBEDDING_MAX_WAIT", "60", float),
    }
