"""Embedding providers over httpx, speaking IronClaw's wire formats
(docs/ironclaw/legacy.md §6.2-6.3).

* OpenAI-compatible (and NEAR AI): ``POST <base>/v1/embeddings`` with a bearer token, body
  ``{"model", "input": [...]}``, vectors from ``data[].embedding`` in array order.
* Ollama: ``POST <base>/api/embed``, body ``{"model", "input": [...]}``, vectors from
  ``embeddings``.
* Bedrock (Titan v2): a SigV4-signed ``POST <endpoint>/model/<id>/invoke`` per text.

Unlike IronClaw, every provider checks the dimension of what it gets back, and a base URL
that already ends in ``/v1`` is not given a second one.
"""

from __future__ import annotations

import email.utils
import json
import time
import urllib.parse
from typing import Any

import httpx

from memfs.embeddings.config import EmbeddingSettings

#: IronClaw refuses longer inputs (bytes of UTF-8); the chunk then keeps a NULL embedding.
MAX_INPUT_BYTES = 32_000


class EmbeddingError(Exception):
    """The provider did not give us embeddings."""

    retryable = False
    #: The provider refused these inputs (not the credentials, not an outage): splitting the
    #: batch finds the one text it refuses, which then keeps a NULL embedding.
    rejects_input = False


class AuthFailed(EmbeddingError):
    pass


class RateLimited(EmbeddingError):
    retryable = True

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class HttpError(EmbeddingError):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"Status {status}: {body[:300]}")
        self.status = status
        self.retryable = status >= 500 or status == 408
        self.rejects_input = status in (400, 413, 422)


class Unreachable(EmbeddingError):
    """Timeouts, refused connections, resets."""

    retryable = True


class InvalidResponse(EmbeddingError):
    pass


class DimensionMismatch(EmbeddingError):
    pass


class TextTooLong(EmbeddingError):
    rejects_input = True


def parse_retry_after(value: str | None, now: float | None = None) -> float:
    """Seconds to wait: integer seconds or an HTTP date, capped at 3600; 60 if absent."""
    if not value:
        return 60.0
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            moment = email.utils.parsedate_to_datetime(value).timestamp()
        except (TypeError, ValueError):
            return 60.0
        seconds = moment - (time.time() if now is None else now)
    return min(max(seconds, 0.0), 3600.0)


class Provider:
    """Turns a batch of texts into vectors with one HTTP request."""

    def __init__(self, settings: EmbeddingSettings) -> None:
        self.settings = settings
        self.model = settings.model
        self.dimension = settings.dimension

    @property
    def url(self) -> str:
        raise NotImplementedError

    def headers(self) -> dict[str, str]:
        return {}

    def vectors(self, payload: Any) -> list[Any]:
        raise NotImplementedError

    async def embed(self, client: httpx.AsyncClient, texts: list[str]) -> list[list[float]]:
        for text in texts:
            if len(text.encode("utf-8")) > MAX_INPUT_BYTES:
                raise TextTooLong(f"input of {len(text.encode())} bytes > {MAX_INPUT_BYTES}")
        try:
            response = await client.post(
                self.url, json={"model": self.model, "input": texts}, headers=self.headers()
            )
        except (httpx.TimeoutException, httpx.TransportError) as exc:
            raise Unreachable(f"{type(exc).__name__}: {exc}") from exc
        if response.status_code == 401:
            raise AuthFailed("the provider refused the API key (401)")
        if response.status_code == 429:
            wait = parse_retry_after(response.headers.get("retry-after"))
            raise RateLimited(f"rate limited; retry after {wait:.0f}s", wait)
        if not response.is_success:
            raise HttpError(response.status_code, response.text)
        try:
            vectors = self.vectors(response.json())
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidResponse(f"unexpected response: {exc}") from exc
        if len(vectors) != len(texts):
            raise InvalidResponse(f"asked for {len(texts)} embeddings, got {len(vectors)}")
        return [self._checked(vector) for vector in vectors]

    def _checked(self, vector: Any) -> list[float]:
        if not isinstance(vector, list) or len(vector) != self.dimension:
            size = len(vector) if isinstance(vector, list) else "no"
            raise DimensionMismatch(
                f"{self.model} returned a {size}-dimension vector; configured dimension is "
                f"{self.dimension} (EMBEDDING_DIMENSION)"
            )
        return [float(x) for x in vector]


class OpenAICompatible(Provider):
    """OpenAI's API and compatible servers (NEAR AI uses the same wire format)."""

    @property
    def url(self) -> str:
        base = self.settings.base_url
        return f"{base}/embeddings" if base.endswith("/v1") else f"{base}/v1/embeddings"

    def headers(self) -> dict[str, str]:
        key = self.settings.api_key
        return {"Authorization": f"Bearer {key}"} if key else {}

    def vectors(self, payload: Any) -> list[Any]:
        return [item["embedding"] for item in payload["data"]]


class Ollama(Provider):
    @property
    def url(self) -> str:
        return f"{self.settings.base_url}/api/embed"

    def vectors(self, payload: Any) -> list[Any]:
        vectors: list[Any] = payload["embeddings"]
        return vectors


class Bedrock(Provider):
    """AWS Bedrock Titan text embeddings v2: one text per signed ``InvokeModel`` request.

    The body is Titan's (``inputText``, ``dimensions``, ``normalize: true``), as IronClaw
    sends it.  Credentials come from AWS's usual chain (environment, shared credentials and
    config files with ``AWS_PROFILE``, SSO, instance metadata) and every request is signed
    with SigV4, both by botocore (the ``memfs[bedrock]`` extra) rather than by hand.
    """

    def __init__(self, settings: EmbeddingSettings) -> None:
        super().__init__(settings)
        try:
            import botocore.session
        except ImportError:
            raise AuthFailed(
                "EMBEDDING_PROVIDER=bedrock needs botocore: pip install 'memfs[bedrock]'"
            ) from None
        self._session = botocore.session.Session(profile=settings.profile)

    @property
    def url(self) -> str:
        model = urllib.parse.quote(self.model, safe="")
        return f"{self.settings.base_url}/model/{model}/invoke"

    def _signed_headers(self, body: bytes) -> dict[str, str]:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        credentials = self._session.get_credentials()
        if credentials is None:
            raise AuthFailed("no AWS credentials found (environment, profile or instance role)")
        request = AWSRequest(
            method="POST", url=self.url, data=body,
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )  # fmt: skip
        SigV4Auth(credentials, "bedrock", self.settings.region or "us-east-1").add_auth(request)
        return dict(request.headers.items())

    async def embed(self, client: httpx.AsyncClient, texts: list[str]) -> list[list[float]]:
        vectors = []
        for text in texts:
            if len(text.encode("utf-8")) > MAX_INPUT_BYTES:
                raise TextTooLong(f"input of {len(text.encode())} bytes > {MAX_INPUT_BYTES}")
            payload = {"inputText": text, "dimensions": self.dimension, "normalize": True}
            body = json.dumps(payload).encode()
            try:
                response = await client.post(
                    self.url, content=body, headers=self._signed_headers(body)
                )
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                raise Unreachable(f"{type(exc).__name__}: {exc}") from exc
            if response.status_code in (401, 403):
                raise AuthFailed(f"Bedrock refused the credentials ({response.status_code})")
            if response.status_code == 429:
                raise RateLimited("Bedrock is throttling requests", 1.0)
            if not response.is_success:
                raise HttpError(response.status_code, response.text)
            try:
                vector = response.json()["embedding"]
            except (ValueError, KeyError, TypeError) as exc:
                raise InvalidResponse(f"unexpected response: {exc}") from exc
            vectors.append(self._checked(vector))
        return vectors


def make_provider(settings: EmbeddingSettings) -> Provider:
    if settings.provider == "ollama":
        return Ollama(settings)
    if settings.provider == "bedrock":
        return Bedrock(settings)
    return OpenAICompatible(settings)
