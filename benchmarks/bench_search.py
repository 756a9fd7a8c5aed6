"""`.search` latency next to the same hybrid SQL run directly; write-to-searchable latency.

    .venv/bin/python benchmarks/bench_search.py [--sizes 1000 10000] [--queries 40]

Uses the embedded PostgreSQL and the loopback fake embedding server from the tests (the
real OpenAI HTTP API, deterministic vectors), so hybrid search runs end to end.  Not CI.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pgvector import Vector  # noqa: E402

from benchmarks.bench_core import WORDS, generate_corpus, quantile  # noqa: E402
from memfs.config import Settings  # noqa: E402
from memfs.daemon import is_mounted  # noqa: E402
from memfs.db import FileAttrs, Scope, open_database  # noqa: E402
from memfs.db.embedded import start_embedded  # noqa: E402
from tests.fake_embeddings import FakeEmbeddingServer, embed_text  # noqa: E402

DIM = 64


def load_corpus(url: str, corpus: Path) -> int:
    db = open_database(Settings(database_url=url))
    store = db.store(Scope("default"))
    items = []
    for path in sorted(corpus.rglob("*.md")):
        items.append((None, str(path.relative_to(corpus)), path.read_text(), FileAttrs()))
    for start in range(0, len(items), 200):
        store.commit_documents(items[start : start + 200])
    db.close()
    return len(items)


def wait_embedded(url: str, timeout: float = 900) -> float:
    started = time.monotonic()
    with psycopg.connect(url, autocommit=True) as conn:
        while time.monotonic() - started < timeout:
            row = conn.execute(
                "SELECT count(*) FROM memory_chunks WHERE embedding IS NULL"
            ).fetchone()
            if row == (0,):
                return time.monotonic() - started
            time.sleep(0.5)
    raise RuntimeError("embeddings did not finish")


def run_size(
    size: int, queries: int, base: Path, server: FakeEmbeddingServer, admin: str, pg: object
) -> None:
    corpus = base / f"corpus{size}"
    generate_corpus(corpus, size, seed=size)
    db = f"search{size}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")  # type: ignore[arg-type]
        conn.execute(f"CREATE DATABASE {db}")  # type: ignore[arg-type]
    url = pg.get_uri(database=db)  # type: ignore[attr-defined]
    loaded = load_corpus(url, corpus)
    env = dict(os.environ)
    env.update(
        EMBEDDING_ENABLED="true", EMBEDDING_PROVIDER="openai", OPENAI_API_KEY="test-key",
        EMBEDDING_BASE_URL=server.url, EMBEDDING_MODEL="fake", EMBEDDING_DIMENSION=str(DIM),
        XDG_RUNTIME_DIR=str(base / "run"), MEMFS_SEARCH_TTL="0.001",
    )  # fmt: skip
    mnt = base / f"mnt{size}"
    mnt.mkdir()
    log = open(base / f"memfs{size}.log", "ab")  # noqa: SIM115
    level = os.environ.get("BENCH_LOG", "warning")
    proc = subprocess.Popen(
        [sys.executable, "-m", "memfs", "--log-level", level, "mount", "-f",
         "--database-url", url, str(mnt)], stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not is_mounted(mnt):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("mount failed")
            time.sleep(0.05)
        backfill = wait_embedded(url)
        with psycopg.connect(url, autocommit=True) as conn:
            chunks = conn.execute("SELECT count(*) FROM memory_chunks").fetchone()[0]  # type: ignore[index]
        rng = random.Random(size)
        terms = [f"{rng.choice(WORDS)} {rng.choice(WORDS)}" for _ in range(queries)]
        mount_times, sql_times, embed_times = [], [], []
        db_handle = open_database(Settings(database_url=url))
        store = db_handle.search_store(Scope("default"))
        for i, term in enumerate(terms):
            name = f"{term} --limit={10 + i % 5}"  # a fresh name each time: no cache hits
            started = time.perf_counter()
            results = os.listdir(mnt / ".search" / name)
            if results:
                (mnt / ".search" / name / sorted(results)[0]).read_bytes()
            mount_times.append(time.perf_counter() - started)
            started = time.perf_counter()
            vector = embed_text(term, DIM)
            embed_times.append(time.perf_counter() - started)
            started = time.perf_counter()
            fts = store.search_fts(term, 50)
            vec = store.search_vector(Vector(vector), 50)
            sql_times.append(time.perf_counter() - started)
            assert fts or vec or not results
        db_handle.close()
        # write-to-searchable: a new file with a unique word, then poll .search for it
        fts_latency, vector_latency = [], []
        with psycopg.connect(url, autocommit=True) as conn:
            for i in range(10):
                token = f"zqxtoken{i}x{size}"
                started = time.perf_counter()
                (mnt / f"fresh-{i}.md").write_text(f"{token} appears here\n")
                poll = 0
                while not os.listdir(mnt / ".search" / f"{token} --limit={poll % 90 + 1} --fts"):
                    poll += 1
                fts_latency.append(time.perf_counter() - started)
                while conn.execute(
                    "SELECT c.embedding IS NULL FROM memory_chunks c JOIN memory_documents d "
                    "ON d.id = c.document_id WHERE d.path = %s",
                    (f"fresh-{i}.md",),
                ).fetchone() != (False,):
                    time.sleep(0.005)
                vector_latency.append(time.perf_counter() - started)
        ms = 1000
        print(
            f"\n## {loaded} documents, {chunks} chunks (initial embedding backfill {backfill:.1f}s)"
        )
        print(f"{'measure':<46}{'p50 ms':>9}{'p95 ms':>9}")
        rows = [
            (".search query through the mount (ls + cat)", mount_times),
            ("same hybrid SQL run directly (FTS + vector)", sql_times),
            ("  of which: query embedding (fake, in-process)", embed_times),
            ("write -> found by .search (full-text)", fts_latency),
            ("write -> chunk embedded (vector-searchable)", vector_latency),
        ]
        for label, values in rows:
            p50, p95 = quantile(values, 0.5) * ms, quantile(values, 0.95) * ms
            print(f"{label:<46}{p50:>9.1f}{p95:>9.1f}")
        print("write -> found (full-text), every sample, ms:", [round(v * ms) for v in fts_latency])
        ratio = statistics.median(mount_times) / statistics.median(sql_times)
        print(f"ratio .search / direct SQL (p50): {ratio:.2f}x")
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        if is_mounted(mnt):
            subprocess.run(["fusermount3", "-u", "-z", str(mnt)], check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--queries", type=int, default=40)
    args = parser.parse_args()
    base = Path(os.environ.get("MEMFS_BENCH_DIR", "/var/tmp/memfs-bench-search"))
    shutil.rmtree(base, ignore_errors=True)
    (base / "run").mkdir(parents=True)
    admin, pg = start_embedded(base / "pgdata", database="postgres", cleanup_mode="delete")
    try:
        with FakeEmbeddingServer(dimension=DIM, api_key="test-key") as server:
            for size in args.sizes:
                run_size(size, args.queries, base, server, admin, pg)
    finally:
        pg.cleanup()  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
