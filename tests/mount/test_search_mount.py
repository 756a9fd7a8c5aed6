"""``.search/`` through a real mount, with real programs, and the ``memfs search`` CLI."""

from __future__ import annotations

import errno
import json
import mmap
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.fake_embeddings import FakeEmbeddingServer
from tests.mounting import Mount, memfs_env, wait_reindex_queue_empty

pytestmark = pytest.mark.mount

DOCS = {
    "MEMORY.md": "The deploy schedule moved: deploy on Tuesday, never deploy on Friday.\n",
    "daily/2026-03-03.md": "[09:00:00] talked about the deploy schedule with the team\n",
    "projects/alpha/notes.md": "Alpha uses Postgres 100% of the time; snake_case names.\n",
    "USER.md": "Prefers dark mode. Café ☕ every morning.\n",
}


def populate(mount: Mount) -> None:
    for rel, text in DOCS.items():
        path = mount.path(rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_search_directory_with_real_tools(mounted: Mount, work_dir: Path) -> None:
    populate(mounted)
    mnt = mounted.path()
    assert ".search" not in os.listdir(mnt)  # never listed, so never crawled
    assert os.listdir(mnt / ".search") == ["README.md"]
    assert "memfs search" in (mnt / ".search/README.md").read_text()
    query = mnt / ".search" / "deploy schedule"
    listing = mounted.run("ls", str(query)).stdout.decode().split("\n")
    assert listing[:2] == ["01-MEMORY.md", "02-daily\u22152026-03-03.md"]
    first = (query / "01-MEMORY.md").read_text()
    header, _, chunk = first.partition("---\n")
    assert "source: MEMORY.md" in header and "fts_rank: 1" in header
    assert "score: 1.000000" in header and "chunk_index: 0" in header
    assert "search: full-text only" in header
    assert chunk == DOCS["MEMORY.md"]
    stat = (query / "01-MEMORY.md").stat()
    assert stat.st_size == len(first.encode())
    time.sleep(1.1)
    assert (query / "01-MEMORY.md").stat().st_mtime_ns == stat.st_mtime_ns  # stable
    grep = mounted.run("grep", "-l", "Tuesday", *sorted(str(p) for p in query.iterdir()))
    assert grep.stdout.decode().strip().endswith("01-MEMORY.md")
    copy = work_dir / "search-copy"
    mounted.run("cp", "-r", str(query), str(copy))
    assert (copy / "01-MEMORY.md").read_text() == first
    mounted.run("rsync", "-a", f"{query}/", str(work_dir / "search-rsync"))
    assert (work_dir / "search-rsync" / "01-MEMORY.md").read_text() == first
    mounted.run("tar", "cf", str(work_dir / "search.tar"), "-C", str(query), ".")
    with (
        open(query / "01-MEMORY.md", "rb") as handle,
        mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped,
    ):
        assert mapped[:] == first.encode()
    # grep -r and find over the mount never enter .search
    assert b".search" not in mounted.run("grep", "-rl", "deploy", ".").stdout
    assert b".search" not in mounted.run("find", ".").stdout
    # read-only
    with pytest.raises(OSError) as info:
        (query / "01-MEMORY.md").write_text("x")
    assert info.value.errno == errno.EROFS
    with pytest.raises(OSError) as info:
        os.unlink(query / "01-MEMORY.md")
    assert info.value.errno == errno.EROFS


def test_query_names_options_and_probes(mounted: Mount) -> None:
    populate(mounted)
    search = mounted.path(".search")
    assert os.listdir(search / "deploy schedule --limit=1") == ["01-MEMORY.md"]
    assert len(os.listdir(search / "deploy --fts")) == 2
    assert os.listdir(search / "100%") == ["01-projects\u2215alpha\u2215notes.md"]
    assert os.listdir(search / "snake_case") == ["01-projects\u2215alpha\u2215notes.md"]
    assert os.listdir(search / "Café ☕") == ["01-USER.md"]
    assert os.listdir(search / '"deploy" schedule\'s') == [
        "01-MEMORY.md",
        "02-daily\u22152026-03-03.md",
    ]
    assert os.listdir(search / ("deploy " * 140).strip()) != []  # 979 bytes: over NAME_MAX
    with pytest.raises(OSError) as info:
        os.listdir(search / ("x" * 5000))  # past FUSE's name limit (1 KiB, or 4 KiB on 6.13+)
    assert info.value.errno == errno.ENAMETOOLONG
    note = (search / "dark mode --vector" / "01-USER.md").read_text()
    assert "no embedding provider is configured" in note
    log_before = mounted.log().count("search '")
    for probe in (".git", "HEAD", ".hg", "foo~", "RCS"):
        assert not (search / probe).exists()
    assert mounted.log().count("search '") == log_before  # probes ran no search


@pytest.fixture
def fake_server() -> Iterator[FakeEmbeddingServer]:
    with FakeEmbeddingServer(dimension=32) as server:
        yield server


def embedding_env(work_dir: Path, server: FakeEmbeddingServer) -> dict[str, str]:
    return memfs_env(
        work_dir / "runtime",
        EMBEDDING_ENABLED="true",
        EMBEDDING_PROVIDER="openai",
        OPENAI_API_KEY="test-key",
        EMBEDDING_BASE_URL=server.url,
        EMBEDDING_MODEL="fake-model",
        EMBEDDING_DIMENSION="32",
    )


def test_hybrid_search_through_the_mount_and_cli(
    database_url: str,
    sql_conn: psycopg.Connection[Any],
    mount_factory: Any,
    fake_server: FakeEmbeddingServer,
    work_dir: Path,
) -> None:
    env = embedding_env(work_dir, fake_server)
    mount = mount_factory(database_url, env=env)
    populate(mount)
    wait_reindex_queue_empty(sql_conn)  # chunks exist before they can be embedded
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        row = sql_conn.execute(
            "SELECT count(*) FILTER (WHERE embedding IS NULL) FROM memory_chunks"
        )
        if row.fetchone() == (0,):
            break
        time.sleep(0.1)
    assert sql_conn.execute(
        "SELECT count(*) FROM memory_chunks WHERE embedding IS NULL"
    ).fetchone() == (0,)
    result = (mount.path(".search") / "deploy schedule" / "01-MEMORY.md").read_text()
    assert "vector_rank: " in result and "vector_rank: -" not in result
    assert "search: hybrid full-text + vector (rrf)" in result
    cli = subprocess.run(
        [sys.executable, "-m", "memfs", "search", "deploy", "schedule", "--json", "--limit", "2",
         "--database-url", database_url],
        env=env, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    payload = json.loads(cli.stdout)
    assert payload["details"]["search"] == "hybrid"
    assert [r["path"] for r in payload["items"]] == ["MEMORY.md", "daily/2026-03-03.md"]
    long_query = ("deploy schedule " * 700)[:10_000]
    cli = subprocess.run(
        [sys.executable, "-m", "memfs", "search", long_query, "--database-url", database_url],
        env=env, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert "MEMORY.md" in cli.stdout
    # The provider goes down: search falls back to full-text and says so.
    fake_server.fail(500, times=10_000)
    fallback = (mount.path(".search") / "Tuesday" / "01-MEMORY.md").read_text()
    assert "full-text only; the query could not be embedded" in fallback


def test_searches_under_pressure_answer_in_time_in_parallel_and_never_keep_a_stale_empty(
    database_url: str,
    sql_conn: psycopg.Connection[Any],
    mount_factory: Any,
    fake_server: FakeEmbeddingServer,
    work_dir: Path,
) -> None:
    env = embedding_env(work_dir, fake_server)
    env["MEMFS_SEARCH_TIMEOUT"] = "6"
    mount = mount_factory(database_url, env=env)
    mnt = mount.path()
    (mnt / "a.md").write_text("seed\n")
    wait_reindex_queue_empty(sql_conn)
    # A provider that hangs: the kernel runs lookups in one directory one at a time, so
    # the first search falls back to full-text after the query-embedding deadline (3 s)
    # and the four queued behind it skip the provider instead of waiting 3 s each.
    fake_server.hang(60, times=100)
    started = time.monotonic()
    procs = [
        subprocess.Popen(["ls", str(mnt / ".search" / query)], stdout=subprocess.PIPE)
        for query in ("seed", "seeds", "seeded", "Seed", "SEED")
    ]
    outputs = [p.communicate(timeout=30)[0].decode() for p in procs]
    elapsed = time.monotonic() - started
    assert all(p.returncode == 0 for p in procs)
    assert outputs == ["01-a.md\n"] * 5
    assert elapsed < 6, f"5 parallel searches took {elapsed:.1f}s"
    fake_server.heal()
    # A backlog: this mount's new document cannot be re-chunked yet.  The empty answer
    # is not kept: once the backlog clears, the same query finds it.
    with psycopg.connect(database_url) as holder:
        # Chunks can be read (searches work) but not written: re-chunking cannot finish.
        holder.execute("LOCK TABLE memory_chunks IN EXCLUSIVE MODE")
        (mnt / "b.md").write_text("zebra crossing\n")
        query = mnt / ".search" / "zebra"
        assert os.listdir(query) == []
        assert "re-chunking still under way, not kept" in mount.log()
        holder.rollback()
    wait_reindex_queue_empty(sql_conn, timeout=20)
    time.sleep(2.5)  # the incomplete answer's short life
    assert [name.endswith("b.md") for name in os.listdir(query)] == [True]


def test_a_search_past_its_deadline_fails_with_etimedout_and_a_log_line(
    database_url: str,
    sql_conn: psycopg.Connection[Any],
    mount_factory: Any,
    fake_server: FakeEmbeddingServer,
    work_dir: Path,
) -> None:
    env = embedding_env(work_dir, fake_server)
    env["MEMFS_SEARCH_TIMEOUT"] = "1"
    mount = mount_factory(database_url, env=env)
    fake_server.hang(60, times=100)  # the query embedding alone outlasts the budget
    started = time.monotonic()
    with pytest.raises(OSError) as info:
        os.listdir(mount.path() / ".search" / "anything at all")
    assert info.value.errno == errno.ETIMEDOUT
    assert time.monotonic() - started < 4
    assert "search 'anything at all' gave no answer within 1.0s" in mount.log()


def test_search_results_follow_this_mounts_writes_at_once_and_other_writers_by_the_feed(
    engine: Any, sql_conn: psycopg.Connection[Any], database_url: str, mount_factory: Any
) -> None:
    """Results are kept for ``ls`` then ``cat`` (30 s), but not past a change: this mount's
    own save shows at the next lookup, another writer's once the change feed brings it."""
    engine.prepare(database_url)
    mnt = mount_factory(database_url).path()
    (mnt / "first.md").write_text("the zebra crossing\n")
    query = mnt / ".search" / "zebra"
    assert sorted(os.listdir(query)) == ["01-first.md"]
    (mnt / "second.md").write_text("a zebra again, and zebra\n")
    names = sorted(os.listdir(query))
    assert len(names) == 2 and {n.split("-", 1)[1] for n in names} == {"first.md", "second.md"}
    os.unlink(mnt / "first.md")
    assert [n.split("-", 1)[1] for n in os.listdir(query)] == ["second.md"]
    engine.agent_writes(sql_conn, database_url, {"agent.md": "the agent saw a zebra\n"})
    deadline = time.monotonic() + 15  # its chunks come from a `memfs reindex` run after it
    while "agent.md" not in {n.split("-", 1)[1] for n in os.listdir(query)}:
        assert time.monotonic() < deadline, "another writer's document never showed in .search"
        time.sleep(0.1)
