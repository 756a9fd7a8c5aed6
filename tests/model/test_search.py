"""The search engine and background embedder on a real database with a fake provider."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from typing import Any

import psycopg
import pytest
import trio

from memfs.db import Database, EmbeddingStore, Scope
from memfs.db.calls import DatabaseCalls
from memfs.db.capabilities import MissingPage
from memfs.embeddings import Embedder, EmbeddingSettings
from memfs.embeddings.worker import EmbeddingWorker
from memfs.ironclaw.numbers import f32
from memfs.search import SearchEngine
from memfs.tree import ROOT_INODE, SyntheticDir
from memfs.vfs import Filesystem, SearchTree
from tests.fake_embeddings import FakeEmbeddingServer

DOCS = {
    "MEMORY.md": "The deploy schedule moved: deploy on Tuesday, never deploy on Friday.",
    "daily/2026-03-03.md": "[09:00:00] talked about the deploy schedule with the team",
    "projects/alpha/notes.md": "Alpha uses Postgres. Schedule review next week.",
    "USER.md": "Prefers dark mode and short answers.",
}


@pytest.fixture
def server() -> Iterator[FakeEmbeddingServer]:
    with FakeEmbeddingServer(dimension=32) as fake:
        yield fake


def embedding_settings(server: FakeEmbeddingServer, **extra: Any) -> EmbeddingSettings:
    values: dict[str, Any] = dict(
        provider="openai", model="fake-model", dimension=32, base_url=server.url,
        api_key="test-key", timeout=2.0, max_retries=1, batch_size=16, max_retry_wait=1.0,
    )  # fmt: skip
    values.update(extra)
    return EmbeddingSettings(**values)


async def write(fs: Filesystem, path: str, text: str) -> None:
    parent = fs.state.tree.root
    *dirs, name = path.split("/")
    for part in dirs:
        child = parent.children.get(part)
        if child is None:
            child = await fs.mkdir(parent.ino, part, 0o755)
        parent = child  # type: ignore[assignment]
    fh, _ = await fs.create(parent.ino, name, 0o644, os.O_WRONLY)
    await fs.write(fh, 0, text.encode())
    await fs.release(fh)


async def until(check: Any, seconds: float = 10.0) -> None:
    with trio.fail_after(seconds):
        while not await check():
            await trio.sleep(0.05)


@pytest.fixture
async def world(
    database: Database, server: FakeEmbeddingServer
) -> AsyncIterator[tuple[Filesystem, SearchEngine, EmbeddingWorker]]:
    scope, calls = Scope("default"), DatabaseCalls()
    embedder = Embedder(embedding_settings(server), backoff_base=0.01)
    engine = SearchEngine(database.search_store(scope), calls, embedder=embedder)
    worker = EmbeddingWorker(database.embedding_store(scope), embedder, calls)
    fs = Filesystem(
        database.store(scope), calls=calls, extensions=[SearchTree(engine)],
        on_changed=worker.notify,
    )  # fmt: skip
    await fs.load()
    async with trio.open_nursery() as nursery:
        await nursery.start(worker.run)
        yield fs, engine, worker
        nursery.cancel_scope.cancel()
    await embedder.aclose()


async def missing(fs: Filesystem) -> int:
    chunks = EmbeddingStore(fs.store.pool, fs.store.scope)  # type: ignore[attr-defined]
    return (await fs.lookups.db.run_db(chunks.count_chunks))[1]


async def test_fts_ranking_matches_ts_rank_cd_and_is_scoped(
    database: Database, sql_conn: psycopg.Connection[Any]
) -> None:
    store = database.store(Scope("default"))
    fs = Filesystem(store)
    await fs.load()
    for path, text in DOCS.items():
        await write(fs, path, text)
    other = Filesystem(database.store(Scope("someone-else")))
    await other.load()
    await write(other, "secret.md", "deploy deploy deploy schedule")
    engine = SearchEngine(database.search_store(Scope("default")), fs.lookups.calls)
    outcome = await engine.search("deploy schedule")
    expected = sql_conn.execute(
        "SELECT d.path FROM memory_chunks c JOIN memory_documents d ON d.id = c.document_id, "
        "plainto_tsquery('english', 'deploy schedule') q WHERE d.user_id = 'default' "
        "AND c.content_tsv @@ q ORDER BY ts_rank_cd(c.content_tsv, q) DESC, d.path"
    ).fetchall()
    assert [r.path for r in outcome.results] == [p for (p,) in expected]
    assert [r.path for r in outcome.results] == ["MEMORY.md", "daily/2026-03-03.md"]
    assert outcome.mode == "fts" and outcome.results[0].score == 1.0
    assert [r.fts_rank for r in outcome.results] == [1, 2]
    assert all(r.path != "secret.md" for r in outcome.results)
    assert (await engine.search("   ")).results == []
    assert (await engine.search('qu"ote 100% ü_ber ∕')).results == []


async def test_hybrid_search_after_background_embedding(
    world: tuple[Filesystem, SearchEngine, EmbeddingWorker], sql_conn: psycopg.Connection[Any]
) -> None:
    fs, engine, _ = world
    for path, text in DOCS.items():
        await write(fs, path, text)

    async def embedded() -> bool:
        return await missing(fs) == 0

    await until(embedded)
    dims = sql_conn.execute("SELECT DISTINCT vector_dims(embedding) FROM memory_chunks").fetchall()
    assert dims == [(32,)]
    outcome = await engine.search("deploy schedule")
    assert outcome.mode == "hybrid" and outcome.note is None
    top = outcome.results[0]
    assert top.path == "MEMORY.md" and top.is_hybrid and top.score == 1.0
    assert any(r.path == "USER.md" and r.fts_rank is None for r in outcome.results)
    raw = {r.path: _rrf(r.fts_rank, r.vector_rank) for r in outcome.results}
    best = max(raw.values())
    for r in outcome.results:  # every score is IronClaw's RRF, max-normalised
        assert r.score == pytest.approx(raw[r.path] / best, rel=1e-6)
    vector_only = await engine.search("dark mode answers", mode="vector")
    assert vector_only.mode == "vector" and vector_only.results[0].path == "USER.md"
    assert all(r.fts_rank is None for r in vector_only.results)
    fts_only = await engine.search("deploy schedule", mode="fts", limit=1)
    assert [r.vector_rank for r in fts_only.results] == [None] and len(fts_only.results) == 1


def _rrf(fts: int | None, vector: int | None) -> float:
    score = 0.0
    for rank in (fts, vector):
        if rank is not None:
            score = f32(score + f32(1 / f32(60 + rank)))
    return score


async def test_provider_outage_writes_succeed_fts_works_embeddings_fill_in(
    world: tuple[Filesystem, SearchEngine, EmbeddingWorker],
    server: FakeEmbeddingServer,
    sql_conn: psycopg.Connection[Any],
) -> None:
    fs, engine, worker = world
    server.fail(500, times=10_000)
    for path, text in DOCS.items():
        await write(fs, path, text)  # commits never wait for the provider
    assert set(dict(sql_conn.execute("SELECT path, 1 FROM memory_documents"))) == set(DOCS)
    outcome = await engine.search("deploy schedule")
    assert outcome.mode == "fts" and "could not be embedded" in (outcome.note or "")
    assert [r.path for r in outcome.results][:2] == ["MEMORY.md", "daily/2026-03-03.md"]
    assert await missing(fs) == len(DOCS)
    assert not worker.healthy
    server.heal()

    async def recovered() -> bool:
        return await missing(fs) == 0

    await until(recovered, 15)
    assert (await engine.search("deploy schedule")).mode == "hybrid"


async def test_embeddings_are_written_only_for_unchanged_chunks(
    database: Database, server: FakeEmbeddingServer, sql_conn: psycopg.Connection[Any]
) -> None:
    store = database.store(Scope("default"))
    fs = Filesystem(store)
    await fs.load()
    await write(fs, "a.md", "first text")
    embedder = Embedder(embedding_settings(server))
    chunks = database.embedding_store(Scope("default"))
    worker = EmbeddingWorker(chunks, embedder, fs.lookups.calls)
    rows = await fs.lookups.db.run_db(
        chunks.chunks_missing_embeddings, MissingPage(None, 10, 32_000)
    )
    vectors = await embedder.embed_many([t for _, t in rows])
    sql_conn.execute("UPDATE memory_chunks SET content = 'changed meanwhile'")
    from pgvector import Vector

    items = [(cid, text, Vector(v)) for (cid, text), v in zip(rows, vectors, strict=True) if v]
    assert await fs.lookups.db.run_db(chunks.write_embeddings, items) == 0
    assert await worker.drain(None) == 1
    await embedder.aclose()


async def test_dimensions_are_never_mixed(
    database: Database, server: FakeEmbeddingServer, sql_conn: psycopg.Connection[Any]
) -> None:
    store = database.store(Scope("default"))
    fs = Filesystem(store)
    await fs.load()
    await write(fs, "old.md", "embedded by another model")
    sql_conn.execute("UPDATE memory_chunks SET embedding = array_fill(0.1, ARRAY[16])::vector")
    await write(fs, "new.md", "fresh chunk")
    embedder = Embedder(embedding_settings(server))
    worker = EmbeddingWorker(database.embedding_store(Scope("default")), embedder, fs.lookups.calls)
    async with trio.open_nursery() as nursery:
        await nursery.start(worker.run)
    assert not worker.enabled and "16" in (worker.last_error or "")
    assert await missing(fs) == 1  # new.md stays NULL rather than mixing 32 with 16
    engine = SearchEngine(
        database.search_store(Scope("default")), fs.lookups.calls, embedder=embedder
    )
    outcome = await engine.search("fresh chunk")  # the 16-dim chunk is skipped, no error
    assert outcome.mode == "hybrid" and [r.path for r in outcome.results] == ["new.md"]
    await embedder.aclose()


async def test_search_directory_in_the_model(
    world: tuple[Filesystem, SearchEngine, EmbeddingWorker],
) -> None:
    fs, engine, _ = world
    for path, text in DOCS.items():
        await write(fs, path, text)
    root = await fs.lookup(ROOT_INODE, ".search")
    assert isinstance(root, SyntheticDir) and sorted(root.children) == ["README.md"]
    assert ".search" not in [name for _, name, _ in fs.readdir(fs.opendir(ROOT_INODE), 0)]
    before = engine.searches
    query = await fs.lookup(root.ino, "deploy schedule --fts --limit=2")
    names = sorted(query.children)  # type: ignore[attr-defined]
    assert names == ["01-MEMORY.md", "02-daily\u22152026-03-03.md"]
    again = await fs.lookup(root.ino, "deploy schedule --fts --limit=2")
    assert again is query and engine.searches == before + 1  # cached: ls then cat agree
    for probe in (".git", "HEAD", "x~", "#auto#", ".dir-locals.el"):
        with pytest.raises(Exception, match="ENOENT"):
            await fs.lookup(root.ino, probe)
    assert engine.searches == before + 1


async def test_read_scopes_are_searched_as_ironclaw_does(
    database: Database, sql_conn: psycopg.Connection[Any]
) -> None:
    """Every read scope is searched (``user_id = ANY``); their identity files are dropped."""
    store = database.store(Scope("default"))
    fs = Filesystem(store)
    await fs.load()
    await write(fs, "notes.md", "deploy schedule for the primary")
    team = Filesystem(database.store(Scope("team")))
    await team.load()
    await write(team, "MEMORY.md", "team deploy schedule, shared")
    await write(team, "SOUL.md", "deploy schedule soul of the team")
    await write(team, "daily/2026-03-03.md", "deploy schedule talk")
    stranger = Filesystem(database.store(Scope("stranger")))
    await stranger.load()
    await write(stranger, "MEMORY.md", "deploy schedule secret")
    searches = database.search_store(Scope("default"))
    alone = await SearchEngine(searches, fs.lookups.calls).search("deploy schedule")
    assert [r.path for r in alone.results] == ["notes.md"]
    both = await SearchEngine(searches, fs.lookups.calls, read_scopes=["team"]).search(
        "deploy schedule"
    )
    assert sorted(r.path for r in both.results) == [
        ".scopes/team/MEMORY.md",
        ".scopes/team/daily/2026-03-03.md",
        "notes.md",
    ]
    assert all("secret" not in r.content for r in both.results)
