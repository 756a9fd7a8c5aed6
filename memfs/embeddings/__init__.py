"""Embeddings over HTTP (OpenAI-compatible, NEAR AI, Ollama) and the background embedder."""

from __future__ import annotations

from memfs.embeddings.client import Embedder, EmbeddingCache
from memfs.embeddings.config import EmbeddingSettings
from memfs.embeddings.providers import EmbeddingError

__all__ = ["Embedder", "EmbeddingCache", "EmbeddingError", "EmbeddingSettings"]
