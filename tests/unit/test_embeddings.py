"""Embedding providers and client against a fake server speaking the real HTTP APIs."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from memfs.embeddings import Embedder, EmbeddingSettings
from memfs.embeddings.config import EmbeddingConfigError, normalize_base_url
from memfs.embeddings.providers import (
    AuthFailed,
    DimensionMismatch,
    HttpError,
    TextTooLong,
    Unreachable,
    parse_retry_after,
)
from tests.fake_embeddings import FakeEmbeddingServer, embed_text, signature_at


@pytest.fixture
def server() -> Iterator[FakeEmbeddingServer]:
    with FakeEmbeddingServer(dimension=32) as fake:
        yield fake


def settings(
    server: FakeEmbeddingServer, provider: str = "openai", **extra: object
) -> EmbeddingSettings:
    base = dict(
        provider=provider, model="fake-model", dimension=32, base_url=server.url,
        api_key="test-key" if provider == "openai" else None, timeout=5.0, max_retries=3,
        batch_size=64, max_retry_wait=5.0,
    )  # fmt: skip
    base.update(extra)
    return EmbeddingSettings(**base)  # type: ignore[arg-type]


async def test_openai_wire_format(server: FakeEmbeddingServer) -> None:
    embedder = Embedder(settings(server))
    vectors = await embedder.embed_many(["deploy schedule", "dark mode"])
    assert vectors == [embed_text("deploy schedule", 32), embed_text("dark mode", 32)]
    [request] = server.requests
    assert request["path"] == "/v1/embeddings"
    assert request["auth"] == "Bearer test-key"
    assert request["body"] == {"model": "fake-model", "input": ["deploy schedule", "dark mode"]}
    await embedder.aclose()


async def test_base_url_ending_in_v1_is_not_doubled(server: FakeEmbeddingServer) -> None:
    embedder = Embedder(settings(server, base_url=server.url + "/v1"))
    await embedder.embed_query("x")
    assert server.requests[0]["path"] == "/v1/embeddings"
    await embedder.aclose()


async def test_ollama_wire_format(server: FakeEmbeddingServer) -> None:
    embedder = Embedder(settings(server, provider="ollama"))
    assert await embedder.embed_query("hello") == embed_text("hello", 32)
    [request] = server.requests
    assert request["path"] == "/api/embed" and request["auth"] is None
    assert request["body"] == {"model": "fake-model", "input": ["hello"]}
    await embedder.aclose()


async def test_batching_and_cache(server: FakeEmbeddingServer) -> None:
    embedder = Embedder(settings(server, batch_size=64))
    texts = [f"text number {i}" for i in range(150)] + ["text number 0"]
    vectors = await embedder.embed_many(texts)
    assert len(server.requests) == 3  # 150 distinct texts in batches of 64
    assert [len(r["body"]["input"]) for r in server.requests] == [64, 64, 22]
    assert vectors[0] == vectors[-1]
    again = await embedder.embed_many(texts[:10])
    assert len(server.requests) == 3 and again == vectors[:10]  # served from the LRU
    await embedder.aclose()


async def test_rate_limit_honours_retry_after(server: FakeEmbeddingServer) -> None:
    embedder = Embedder(settings(server))
    server.fail(429, times=1, retry_after="1")
    started = time.monotonic()
    assert await embedder.embed_query("q") == embed_text("q", 32)
    assert time.monotonic() - started >= 1.0
    assert len(server.requests) == 2
    await embedder.aclose()


async def test_server_errors_are_retried_with_backoff(server: FakeEmbeddingServer) -> None:
    embedder = Embedder(settings(server), backoff_base=0.05)
    server.fail(500, times=2)
    assert await embedder.embed_query("q") == embed_text("q", 32)
    assert len(server.requests) == 3
    server.fail(500, times=10)
    with pytest.raises(HttpError, match="Status 500"):
        await embedder.embed_query("other")
    assert len(server.requests) == 3 + 4  # first try + 3 retries
    await embedder.aclose()


async def test_auth_failure_is_not_retried(server: FakeEmbeddingServer) -> None:
    embedder = Embedder(settings(server, api_key="wrong"))
    with pytest.raises(AuthFailed):
        await embedder.embed_query("q")
    assert len(server.requests) == 1
    await embedder.aclose()


async def test_hanging_server_times_out(server: FakeEmbeddingServer) -> None:
    embedder = Embedder(settings(server, timeout=0.5, max_retries=0))
    server.hang(3.0)
    started = time.monotonic()
    with pytest.raises(Unreachable):
        await embedder.embed_query("q")
    assert time.monotonic() - started < 2.0
    await embedder.aclose()


async def test_wrong_dimension_is_refused(server: FakeEmbeddingServer) -> None:
    embedder = Embedder(settings(server))
    server.wrong_dimension()
    with pytest.raises(DimensionMismatch, match="33-dimension"):
        await embedder.embed_query("q")
    await embedder.aclose()


async def test_text_too_long_gets_no_request(server: FakeEmbeddingServer) -> None:
    embedder = Embedder(settings(server))
    assert await embedder.embed_many(["x" * 32_001, "ok"]) == [None, embed_text("ok", 32)]
    assert server.requests[0]["body"]["input"] == ["ok"]
    with pytest.raises(TextTooLong):
        await embedder.embed_query("é" * 16_001)
    await embedder.aclose()


def test_retry_after_parsing() -> None:
    assert parse_retry_after("7") == 7
    assert parse_retry_after(None) == 60
    assert parse_retry_after("soon") == 60
    assert parse_retry_after("99999") == 3600
    assert parse_retry_after("Sun, 22 Nov 2026 10:00:30 GMT", now=1795341600.0) == 30


def test_settings_from_ironclaw_env() -> None:
    assert EmbeddingSettings.from_env({}) is None  # EMBEDDING_ENABLED defaults to false
    assert (
        EmbeddingSettings.from_env({"EMBEDDING_ENABLED": "true", "EMBEDDING_PROVIDER": "openai"})
        is None
    )
    s = EmbeddingSettings.from_env(
        {"EMBEDDING_ENABLED": "true", "EMBEDDING_PROVIDER": "openai", "OPENAI_API_KEY": "k"}
    )
    assert s is not None and (s.model, s.dimension, s.base_url) == (
        "text-embedding-3-small",
        1536,
        "https://api.openai.com",
    )
    o = EmbeddingSettings.from_env(
        {
            "EMBEDDING_ENABLED": "1",
            "EMBEDDING_PROVIDER": "ollama",
            "EMBEDDING_MODEL": "nomic-embed-text",
        }
    )
    assert o is not None and (o.base_url, o.dimension) == ("http://localhost:11434", 768)
    n = EmbeddingSettings.from_env({"EMBEDDING_ENABLED": "true", "NEARAI_API_KEY": "n"})
    assert n is not None and (n.provider, n.base_url) == ("nearai", "https://cloud-api.near.ai")
    with pytest.raises(EmbeddingConfigError):
        EmbeddingSettings.from_env({"EMBEDDING_ENABLED": "true", "EMBEDDING_CACHE_SIZE": "0"})
    assert normalize_base_url("example.com/") == "https://example.com"


async def test_one_refused_text_does_not_block_its_batch(server: FakeEmbeddingServer) -> None:
    """A provider refusing one text (over its token limit) isolates it: the rest embed."""
    server.reject_marker = "TOO-LONG-FOR-THE-MODEL"
    texts = [f"note number {i}" for i in range(200)]
    texts[137] = "TOO-LONG-FOR-THE-MODEL " + texts[137]
    embedder = Embedder(settings(server))
    vectors = await embedder.embed_many(texts)
    assert vectors[137] is None
    assert sum(v is not None for v in vectors) == 199
    assert vectors[0] == embed_text("note number 0", 32)
    sent = len(server.requests)
    assert sent <= 4 + 2 * 7  # 4 batches of 64, then halving down to the one text
    again = await embedder.embed_many([texts[137], "note number 5"])
    assert again[0] is None and len(server.requests) == sent  # refused once, not retried
    await embedder.aclose()


async def test_outages_still_retry_and_raise(server: FakeEmbeddingServer) -> None:
    server.fail(500, times=10)
    embedder = Embedder(settings(server, max_retries=1), backoff_base=0.01)
    with pytest.raises(HttpError):
        await embedder.embed_many(["a", "b"])
    await embedder.aclose()


async def test_bedrock_titan_requests_are_sigv4_signed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret-example")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with FakeEmbeddingServer(aws=("AKIDEXAMPLE", "secret-example", "eu-west-1")) as fake:
        env = {
            "EMBEDDING_ENABLED": "true", "EMBEDDING_PROVIDER": "bedrock",
            "BEDROCK_REGION": "eu-west-1", "MEMFS_BEDROCK_ENDPOINT": fake.url,
        }  # fmt: skip
        config = EmbeddingSettings.resolve({}, env)
        assert config is not None
        assert (config.model, config.dimension) == ("amazon.titan-embed-text-v2:0", 1024)
        embedder = Embedder(config)
        vectors = await embedder.embed_many(["deploy schedule", "dark mode"])
        assert vectors == [embed_text("deploy schedule", 1024), embed_text("dark mode", 1024)]
        first = fake.requests[0]
        assert first["path"] == "/model/amazon.titan-embed-text-v2%3A0/invoke"
        assert first["body"] == {
            "inputText": "deploy schedule",
            "dimensions": 1024,
            "normalize": True,
        }
        assert first["auth"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
        await embedder.aclose()
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret")
    with FakeEmbeddingServer(aws=("AKIDEXAMPLE", "secret-example", "eu-west-1")) as fake:
        env["MEMFS_BEDROCK_ENDPOINT"] = fake.url
        config = EmbeddingSettings.resolve({}, env)
        assert config is not None
        embedder = Embedder(config)
        with pytest.raises(AuthFailed):
            await embedder.embed_query("x")
        await embedder.aclose()


def test_the_fake_bedrock_checks_a_signature_at_its_own_second() -> None:
    """A request signed seconds before it arrives still verifies; a wrong key never does.

    The fake used to re-sign at the current second, so a request whose second ticked over
    on the way got 403 (CI, once in many runs).  Signing 5 s in the past reproduced it
    every time; this test fails on that verifier.
    """
    import datetime

    import httpx
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    past = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=5)
    stamp = past.strftime("%Y%m%dT%H%M%SZ")
    body = b'{"inputText": "late", "dimensions": 32, "normalize": true}'
    with FakeEmbeddingServer(aws=("AKIDEXAMPLE", "secret-example", "eu-west-1")) as fake:
        url = fake.url + "/model/amazon.titan-embed-text-v2%3A0/invoke"
        for secret, status in (("secret-example", 200), ("wrong-secret", 403)):
            request = AWSRequest(
                method="POST", url=url, data=body,
                headers={"Content-Type": "application/json", "Accept": "application/json"},
            )  # fmt: skip
            signature_at(Credentials("AKIDEXAMPLE", secret), "eu-west-1", request, stamp)
            headers = dict(request.headers.items())
            response = httpx.post(url, content=body, headers=headers, timeout=10)
            assert response.status_code == status, (secret, response.text)


def test_bedrock_dimensions_are_ironclaws() -> None:
    env = {"EMBEDDING_ENABLED": "true", "EMBEDDING_PROVIDER": "bedrock"}
    assert EmbeddingSettings.resolve({}, {**env, "EMBEDDING_DIMENSION": "256"}).dimension == 256  # type: ignore[union-attr]
    with pytest.raises(EmbeddingConfigError, match="256, 512, or 1024"):
        EmbeddingSettings.resolve({}, {**env, "EMBEDDING_DIMENSION": "1536"})


def test_nearai_session_token_where_ironclaw_keeps_it(tmp_path: object) -> None:
    from pathlib import Path

    home = Path(str(tmp_path))
    env = {"EMBEDDING_ENABLED": "true", "HOME": str(home)}
    assert EmbeddingSettings.resolve({}, env) is None  # no key, no token anywhere
    (home / ".ironclaw").mkdir()
    (home / ".ironclaw" / "session.json").write_text(
        '{"session_token": "sess_file", "created_at": "2026-01-01T00:00:00Z"}'
    )
    from_file = EmbeddingSettings.resolve({}, env)
    assert from_file is not None and from_file.api_key == "sess_file"
    assert from_file.base_url == "https://private.near.ai"
    stored = {"nearai.session_token": {"session_token": "sess_db", "created_at": "x"}}
    assert EmbeddingSettings.resolve(stored, env).api_key == "sess_db"  # type: ignore[union-attr]
    with_env = EmbeddingSettings.resolve(stored, {**env, "NEARAI_SESSION_TOKEN": "sess_env"})
    assert with_env is not None and with_env.api_key == "sess_env"
    keyed = EmbeddingSettings.resolve(stored, {**env, "NEARAI_API_KEY": "k"})
    assert keyed is not None and keyed.base_url == "https://cloud-api.near.ai"


def test_settings_table_wins_over_environment() -> None:
    db = {
        "embeddings.enabled": True,
        "embeddings.provider": "ollama",
        "embeddings.model": "nomic-embed-text",
        "ollama_base_url": "http://127.0.0.1:9",
    }
    got = EmbeddingSettings.resolve(db, {"EMBEDDING_ENABLED": "false"})
    assert got is not None
    assert (got.provider, got.model, got.dimension) == ("ollama", "nomic-embed-text", 768)
    assert got.base_url == "http://127.0.0.1:9"
    with pytest.raises(EmbeddingConfigError):
        EmbeddingSettings.resolve({}, {"EMBEDDING_ENABLED": "yes"})
