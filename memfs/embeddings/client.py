"""The embedding client: batching, an LRU cache, timeouts and retries with backoff.

Better than IronClaw (which makes one request per chunk, no timeout, no retry): texts are
sent in batches, each request has a timeout, retryable failures (429, 5xx, timeouts,
resets) are retried with exponential backoff that honours ``Retry-After``, and results are
cached under IronClaw's key (SHA-256 of model, a NUL byte, and the text).
"""

from __future__ import annotations

import hashlib
import logging
import random
from collections import OrderedDict

import httpx
import trio

from memfs.embeddings.config import EmbeddingSettings
from memfs.embeddings.providers import (
    MAX_INPUT_BYTES,
    EmbeddingError,
    Provider,
    RateLimited,
    TextTooLong,
    make_provider,
)

log = logging.getLogger(__name__)


class EmbeddingCache:
    """LRU of vectors keyed like IronClaw's ``CachedEmbeddingProvider``."""

    def __init__(self, capacity: int) -> None:
        self.capacity = max(capacity, 1)
        self._entries: OrderedDict[bytes, list[float]] = OrderedDict()

    @staticmethod
    def key(model: str, text: str) -> bytes:
        return hashlib.sha256(model.encode() + b"\x00" + text.encode()).digest()

    def get(self, key: bytes) -> list[float] | None:
        vector = self._entries.get(key)
        if vector is not None:
            self._entries.move_to_end(key)
        return vector

    def put(self, key: bytes, vector: list[float]) -> None:
        self._entries[key] = vector
        self._entries.move_to_end(key)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


class Embedder:
    """Embeds texts through one provider; safe to share between trio tasks."""

    def __init__(
        self,
        settings: EmbeddingSettings,
        *,
        provider: Provider | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        backoff_base: float = 0.5,
    ) -> None:
        self.settings = settings
        self.provider = provider or make_provider(settings)
        self.cache = EmbeddingCache(settings.cache_size)
        self.backoff_base = backoff_base
        self.requests = 0
        #: Cache keys of texts the provider refused; never sent again by this process.
        self.rejected: set[bytes] = set()
        #: Give up at once when the provider refuses the connection (a command-line search
        #: falls back to full-text at once; background work keeps retrying).
        self.requests_failed_fast = False
        self.client = httpx.AsyncClient(
            timeout=httpx.Timeout(settings.timeout), transport=transport
        )

    @property
    def dimension(self) -> int:
        return self.provider.dimension

    async def aclose(self) -> None:
        await self.client.aclose()

    async def embed_query(self, text: str) -> list[float]:
        """One vector for a search query; raises ``EmbeddingError`` on failure."""
        vector = (await self.embed_many([text]))[0]
        if vector is None:
            raise TextTooLong(f"query longer than {MAX_INPUT_BYTES} bytes")
        return vector

    async def embed_many(self, texts: list[str]) -> list[list[float] | None]:
        """Vectors in input order; None for texts over IronClaw's 32,000-byte limit."""
        model = self.provider.model
        out: list[list[float] | None] = [None] * len(texts)
        missing: dict[bytes, list[int]] = {}
        for index, text in enumerate(texts):
            if len(text.encode("utf-8")) > MAX_INPUT_BYTES:
                continue
            key = EmbeddingCache.key(model, text)
            cached = self.cache.get(key)
            if cached is not None:
                out[index] = cached
            else:
                missing.setdefault(key, []).append(index)
        keys = [k for k in missing if k not in self.rejected]
        size = self.settings.batch_size
        for start in range(0, len(keys), size):
            batch = keys[start : start + size]
            vectors = await self._isolating([texts[missing[k][0]] for k in batch])
            for key, vector in zip(batch, vectors, strict=True):
                if vector is None:
                    self.rejected.add(key)
                    continue
                self.cache.put(key, vector)
                for index in missing[key]:
                    out[index] = vector
        return out

    async def _isolating(self, texts: list[str]) -> list[list[float] | None]:
        """One request for the batch; if the provider refuses its input, halve it until the
        refused texts are alone, so one bad text does not keep the others unembedded.

        A refused text gets None (its chunk keeps a NULL embedding, as IronClaw leaves it)
        and is logged once.  Outages and credential errors still raise.
        """
        try:
            return list(await self._request(texts))
        except EmbeddingError as exc:
            if not exc.rejects_input:
                raise
            if len(texts) == 1:
                preview = texts[0][:60].replace("\n", " ")
                log.warning(
                    "the embedding provider refused one text (%d bytes, %r...): %s; its chunk "
                    "keeps no embedding",
                    len(texts[0].encode("utf-8")), preview, exc,
                )  # fmt: skip
                return [None]
        half = len(texts) // 2
        return [*await self._isolating(texts[:half]), *await self._isolating(texts[half:])]

    async def _request(self, texts: list[str]) -> list[list[float]]:
        attempt = 0
        while True:
            self.requests += 1
            try:
                return await self.provider.embed(self.client, texts)
            except EmbeddingError as exc:
                if not exc.retryable or attempt >= self.settings.max_retries:
                    raise
                if isinstance(exc.__cause__, httpx.ConnectError) and self.requests_failed_fast:
                    raise  # nothing listens there: a waiting search gains nothing by retrying
                if isinstance(exc, RateLimited):
                    wait = min(exc.retry_after, self.settings.max_retry_wait)
                else:
                    wait = min(self.backoff_base * 2**attempt, self.settings.max_retry_wait)
                    wait *= 0.5 + random.random() / 2  # jitter
                log.warning(
                    "embedding request failed (%s); retry %d/%d in %.1fs",
                    exc, attempt + 1, self.settings.max_retries, wait,
                )  # fmt: skip
                attempt += 1
                await trio.sleep(wait)
