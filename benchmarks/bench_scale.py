"""memfs at 100,000 documents beside the same tree on the local disk, on every engine.

    .venv/bin/python benchmarks/bench_scale.py [--docs 100000]
        [--engines legacy reborn libsql libsql-legacy]
        [--agent-every 0.5] [--base /var/tmp/memfs-bench-scale]

Makes a corpus of ``--docs`` Markdown files (IronClaw's kinds of documents, 0.5-3 KB, every
thousandth 50-100 KB: about 200 MB at 100,000) on the local disk, then for each engine
builds the workspace through SQL as the agent leaves it (legacy: rows, then ``memfs
reindex`` chunks them; Reborn on PostgreSQL and on IronClaw's libSQL file: document and
chunk rows in IronClaw's shapes, chunked by memfs's IronClaw chunker), mounts it and runs,
beside the local directory in the same run:

* mount until the first ``ls`` answers; ``find -type f``; ``ls -lR``; a ``stat`` of every
  file; ``grep -r`` cold (after the mount, with the page cache dropped for both) and warm;
  read-all (``cat`` of every file); 200 appends (``>>``) and 200 temp-file + rename saves;
  ``.search`` (``ls`` + ``cat`` of the first result) p50 over ``--queries`` queries of two
  words of the corpus's small vocabulary (every document holds most of them: the costliest
  queries, as IronClaw's any-term search ranks every chunk that matches), and p50 over as
  many queries of a word one document holds (appended through the mount first);
* the daemon's RSS (now and peak) and the synchronous requests it answered per file for
  the warm ``grep -r`` (its own counters, ``memfs stats``: every request but ``release``,
  ``releasedir`` and ``forget``, which the kernel does not wait for);
* with the agent writing meanwhile (an update through SQL every ``--agent-every`` seconds,
  as IronClaw's own write leaves it); for the engines without a change feed (Reborn,
  the libSQL files) the cost of one poll when nothing changed and when the agent did (the
  mount's own fingerprint and ``(path, version)`` queries, timed against the database).
  ``libsql-legacy`` is IronClaw v1.0's ``ironclaw.db`` with embeddings disabled (no vector
  index; ``bench_libsql_legacy.py`` measures the file with one).

Every workload's output is checked against the local directory's. Prints one table per
engine and the ratios. Not part of CI: about 20 minutes per engine at 100,000 documents on
2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_core import WORDS, sh, timed  # noqa: E402
from memfs.daemon import is_mounted  # noqa: E402
from memfs.db.embedded import ensure_database, start_embedded  # noqa: E402
from memfs.db.reborn import layout  # noqa: E402
from memfs.db.reborn.layout import RebornScope  # noqa: E402
from memfs.ironclaw.chunker import chunk_document  # noqa: E402
from memfs.stats import requests_by_op  # noqa: E402

USER = "default"
SCOPE = RebornScope(user_id=USER)
#: Requests the kernel sends without waiting for the answer.
ASYNC_OPS = {"release", "releasedir", "forget", "batch_forget"}
ENGINES = ("legacy", "reborn", "libsql", "libsql-legacy")


def drop_page_cache() -> None:
    subprocess.run(["sync"], check=False, timeout=300)
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError:
        print("  (cannot drop the page cache here: 'cold' runs are warm for the local disk)")


# -- the corpus ---------------------------------------------------------------------------


def make_corpus(root: Path, count: int, seed: int = 11) -> dict[str, str]:
    """IronClaw's kinds of documents spread as a long-lived memory spreads them."""
    rng = random.Random(seed)
    docs: dict[str, str] = {}
    for name in ("MEMORY.md", "USER.md", "SOUL.md", "AGENTS.md", "IDENTITY.md"):
        docs[name] = ""
    n = 0
    while len(docs) < count:
        n += 1
        kind = rng.random()
        if kind < 0.4:
            path = f"daily/{2020 + n % 7}/{1 + n % 12:02d}/{n}.md"
        elif kind < 0.9:
            path = f"projects/p{rng.randrange(400)}/notes-{n}.md"
        else:
            path = f"context/t{rng.randrange(50)}/topic-{n}.md"
        docs[path] = ""
    total = 0
    for i, path in enumerate(docs):
        size = rng.randint(500, 3000) if i % 1000 else rng.randint(50_000, 100_000)
        lines = [f"# {path}"]
        length = 0
        while length < size:
            line = "- " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 14)))
            lines.append(line)
            length += len(line) + 1
        text = "\n".join(lines) + "\n"
        docs[path] = text
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        total += len(text.encode())
    print(f"corpus: {len(docs)} documents, {total / 1e6:.0f} MB in {root}")
    return docs


# -- the workspace, as the agent leaves it -------------------------------------------------


def _reborn_rows(docs: dict[str, str]) -> Iterator[tuple[str, bytes, str, str]]:
    keys = SCOPE.keys()
    for relative, text in docs.items():
        yield SCOPE.row(relative), text.encode(), "memory_document", layout.dumps(keys)
        for index, chunk in enumerate(chunk_document(text)):
            indexed = {**keys, "chunk_index": index, "content": chunk,
                       "doc_relative_path": relative}  # fmt: skip
            yield (SCOPE.row(layout.chunk_path(relative, index)), chunk.encode(),
                   "memory_chunk", layout.dumps(indexed))  # fmt: skip


def fill_legacy(url: str, docs: dict[str, str]) -> None:
    from memfs.config import Settings
    from memfs.db import open_database
    from tests.conftest import apply_ironclaw_migrations

    apply_ironclaw_migrations(url)
    open_database(Settings(database_url=url)).close()
    statement = "COPY memory_documents (user_id, path, content) FROM STDIN"
    with psycopg.connect(url) as conn, conn.cursor() as cur, cur.copy(statement) as copy:
        for path, text in docs.items():
            copy.write_row((USER, path, text))
    for command in ("reindex", "init"):  # chunks; the change feed's trigger, as a user would
        subprocess.run([sys.executable, "-m", "memfs", command, "--database-url", url],
                       check=True, timeout=7200, cwd=ROOT)  # fmt: skip


def fill_reborn(url: str, docs: dict[str, str]) -> None:
    from tests.model.test_reborn_store import reborn_schema

    reborn_schema(url)
    statement = ("COPY root_filesystem_entries (path, contents, kind, content_type, indexed, "
                 "version) FROM STDIN")  # fmt: skip
    with psycopg.connect(url) as conn, conn.cursor() as cur, cur.copy(statement) as copy:
        for path, contents, kind, indexed in _reborn_rows(docs):
            copy.write_row((path, contents, kind, "application/json", indexed, 1))


def fill_libsql(file: Path, docs: dict[str, str]) -> None:
    from tests.ironclaw_libsql import reborn_local_dev

    reborn_local_dev(file)
    with sqlite3.connect(file) as conn:
        conn.executemany(
            "INSERT INTO root_filesystem_entries (path, contents, content_type, kind, indexed, "
            "version, updated_at) VALUES (?, ?, 'application/json', ?, ?, 1, "
            "strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))",
            ((p, c, k, i) for p, c, k, i in _reborn_rows(docs)),
        )


def fill_libsql_legacy(file: Path, docs: dict[str, str]) -> None:
    """IronClaw v1.0's ``ironclaw.db`` as it leaves it with embeddings disabled (no vector
    index: IronClaw's writes there are plain SQLite's): documents and their chunks."""
    from tests.ironclaw_libsql import legacy_ironclaw_db

    legacy_ironclaw_db(file)
    documents, chunks = [], []
    for path, text in docs.items():
        doc_id = str(uuid.uuid4())
        documents.append((doc_id, USER, path, text))
        chunks.extend((str(uuid.uuid4()), doc_id, index, chunk)
                      for index, chunk in enumerate(chunk_document(text)))  # fmt: skip
    with sqlite3.connect(file) as conn:
        conn.executemany("INSERT INTO memory_documents (id, user_id, agent_id, path, content, "
                         "metadata) VALUES (?, ?, NULL, ?, ?, '{}')", documents)  # fmt: skip
        conn.executemany("INSERT INTO memory_chunks (id, document_id, chunk_index, content) "
                         "VALUES (?, ?, ?, ?)", chunks)  # fmt: skip


# -- the agent, writing meanwhile ---------------------------------------------------------


class Agent(threading.Thread):
    """Updates one document every ``every`` seconds through SQL, as IronClaw's write leaves
    the row (content replaced; on Reborn the version goes up)."""

    def __init__(self, engine: str, where: str, paths: list[str], every: float) -> None:
        super().__init__(daemon=True)
        self.engine, self.where, self.paths, self.every = engine, where, paths, every
        self.stopping = threading.Event()
        self.writes = 0
        self.rng = random.Random(5)

    def run(self) -> None:
        if self.engine.startswith("libsql"):
            conn: Any = sqlite3.connect(self.where, timeout=5, isolation_level=None)
        else:
            conn = psycopg.connect(self.where, autocommit=True)
        with conn:
            while not self.stopping.wait(self.every):
                path = self.rng.choice(self.paths)
                self.write(conn, path, f"- the agent noted {self.writes}\n")
                self.writes += 1

    def write(self, conn: Any, path: str, line: str) -> None:
        if self.engine == "legacy":
            conn.execute("UPDATE memory_documents SET content = content || %s "
                         "WHERE user_id = %s AND path = %s", (line, USER, path))  # fmt: skip
        elif self.engine == "libsql-legacy":  # IronClaw v1.0's update of the content
            conn.execute("UPDATE memory_documents SET content = content || ?, updated_at = "
                         "strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE user_id = ? AND path = ?",
                         (line, USER, path))  # fmt: skip
        elif self.engine == "reborn":
            conn.execute("UPDATE root_filesystem_entries SET contents = contents || %s, "
                         "version = version + 1, updated_at = now() WHERE path = %s",
                         (line.encode(), SCOPE.row(path)))  # fmt: skip
        else:
            conn.execute(
                "UPDATE root_filesystem_entries SET contents = CAST(contents || ? AS BLOB), "
                "version = version + 1, updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') "
                "WHERE path = ?",
                (line.encode(), SCOPE.row(path)),
            )

    def stop(self) -> int:
        self.stopping.set()
        self.join(timeout=30)
        return self.writes


def poll_cost(engine: str, where: str) -> dict[str, float]:
    """What one poll of the mount costs at this size, in ms (median of 5): its fingerprint
    of the scope (every poll), every document's version (what a poll reads when the
    fingerprint moved, before the rows that differ), and the whole list (a mount's load)."""
    from memfs.db.libsql.connection import LibsqlFile
    from memfs.db.reborn.libsql.rows import SqliteRows, open_file
    from memfs.db.reborn.postgres.rows import PostgresRows

    rows: Any
    conn: Any
    if engine == "libsql-legacy":
        return _legacy_poll_cost(Path(where))
    if engine == "libsql":
        opened: LibsqlFile = open_file(Path(where))
        rows, conn = SqliteRows(opened), opened.connection()
    else:
        rows, conn = PostgresRows(), psycopg.connect(where, autocommit=True)

    def median(work: Callable[[], object]) -> float:
        taken = []
        for _ in range(5):
            started = time.perf_counter()
            work()
            taken.append((time.perf_counter() - started) * 1000)
        return round(statistics.median(taken), 1)

    return {
        "fingerprint_ms": median(lambda: rows.fingerprint(conn, SCOPE.prefix)),
        "document_list_ms": median(lambda: rows.documents(conn, SCOPE.prefix)),
        "document_versions_ms": median(lambda: rows.versions(conn, SCOPE.prefix)),
    }


def _legacy_poll_cost(file: Path) -> dict[str, float]:
    """``poll_cost`` on the legacy file, through memfs's store of it."""
    from memfs.config import Settings
    from memfs.db import open_libsql

    database = open_libsql(file)
    settings = Settings(user_id=USER)
    settings.given.add("user_id")
    store: Any = database.workspace(settings).documents

    def median(work: Callable[[], object]) -> float:
        taken = []
        for _ in range(5):
            store._fingerprints.clear()  # read again each time, as after a change
            started = time.perf_counter()
            work()
            taken.append((time.perf_counter() - started) * 1000)
        return round(statistics.median(taken), 1)

    try:
        return {"fingerprint_ms": median(store.fingerprint),
                "document_list_ms": median(store.load_documents),
                "document_versions_ms": median(store.document_versions)}  # fmt: skip
    finally:
        database.close()


# -- the mount ----------------------------------------------------------------------------


class Daemon:
    def __init__(self, mountpoint: Path, url: str, log: Path, runtime: Path) -> None:
        self.mountpoint, self.url, self.log, self.runtime = mountpoint, url, log, runtime
        self.env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime),
                    "XDG_STATE_HOME": str(runtime / "state")}  # fmt: skip
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> float:
        """Seconds from the command until the first ``ls`` of the root answers."""
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        self.runtime.mkdir(parents=True, exist_ok=True, mode=0o700)
        started = time.perf_counter()
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "memfs", "--log-level", "warning", "mount", "-f",
                 "--database-url", self.url, "--user-id", USER, str(self.mountpoint)],
                stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=self.env,
            )  # fmt: skip
        deadline = time.monotonic() + 600
        while True:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("mount failed: " + self.log.read_text()[-2000:])
            if is_mounted(self.mountpoint):
                try:
                    if os.listdir(self.mountpoint):
                        return time.perf_counter() - started
                except OSError:
                    pass
            time.sleep(0.005)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=300)
        if is_mounted(self.mountpoint):
            subprocess.run(["fusermount3", "-u", "-z", str(self.mountpoint)], check=False)

    def rss_mb(self) -> tuple[float, float]:
        assert self.proc is not None
        fields = {}
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            fields[key] = value
        return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024

    def requests(self) -> dict[str, float]:
        result = subprocess.run(
            [sys.executable, "-m", "memfs", "stats", "--json", str(self.mountpoint)],
            capture_output=True, text=True, timeout=60, check=True, env=self.env, cwd=ROOT,
        )  # fmt: skip
        return requests_by_op(json.loads(result.stdout)["items"])


@contextmanager
def embedded_server(base: Path) -> Iterator[str]:
    admin, server = start_embedded(base / "pgdata", database="postgres", cleanup_mode="delete")
    try:
        yield admin
    finally:
        server.cleanup()


# -- workloads ----------------------------------------------------------------------------


def read_workloads(root: Path, files: list[str]) -> dict[str, Callable[[], tuple[float, str]]]:
    """Outputs that the agent's appends meanwhile do not change (counts, not bytes)."""
    return {
        "find -type f": lambda: timed(
            lambda: str(len(sh("find . -type f -name '*.md'", root).split()))
        ),
        "ls -lR": lambda: timed(lambda: sh("ls -lR | grep -c '\\.md$'", root).strip()),
        "stat every file": lambda: timed(
            lambda: str(sum(1 for f in files if os.stat(root / f).st_size))
        ),
    }


def grep_count(root: Path) -> str:
    return sh("grep -r --include='*.md' -l 'vector' . | wc -l", root).strip()


def read_all(root: Path) -> str:
    return sh("find . -type f -name '*.md' -print0 | xargs -0 cat >/dev/null && echo read", root)


def write_workloads(root: Path, files: list[str]) -> dict[str, tuple[float, str]]:
    rng = random.Random(3)
    small = [f for f in files if f.startswith("projects/")]
    chosen = rng.sample(small, 400)

    def appends() -> str:
        for n, path in enumerate(chosen[:200]):
            with open(root / path, "a", encoding="utf-8") as handle:
                handle.write(f"- appended {n}\n")
        return "200"

    def saves() -> str:
        for n, path in enumerate(chosen[200:]):
            target = root / path
            text = target.read_text(encoding="utf-8") + f"- saved {n}\n"
            temporary = target.with_name(f".{target.name}.tmp")
            temporary.write_text(text, encoding="utf-8")
            os.rename(temporary, target)
        return "200"

    return {"200 appends": timed(appends), "200 temp+rename saves": timed(saves)}


def common_queries(count: int) -> list[str]:
    """Two words of the corpus's vocabulary: nearly every chunk matches, and IronClaw's
    any-term search ranks every chunk that matches."""
    rng = random.Random(9)
    return [" ".join(rng.sample(WORDS, 2)) for _ in range(count)]


def rare_queries(root: Path, files: list[str], count: int) -> list[str]:
    """A word of one document each, as a person's or the agent's searches mostly are: each
    appended through the mount to a document of its own, then waited for (chunking runs
    after a pause in the saves, and a search on Reborn meanwhile builds the scope's index);
    the wait is not timed."""
    small = [f for f in files if f.startswith("projects/")][-count:]
    words = [f"quokka{i:04d}zz" for i in range(len(small))]
    for name, word in zip(small, words, strict=True):
        with open(root / name, "a", encoding="utf-8") as out:
            out.write(f"- {word}\n")
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        try:
            if os.listdir(root / ".search" / words[-1]) and os.listdir(root / ".search" / words[0]):
                break
        except OSError:
            pass
        time.sleep(2)
    else:
        print("  the rare words were not searchable after 600 s")
    return words


def search_p50(root: Path, queries: list[str]) -> float:
    taken = []
    for query in queries:
        started = time.perf_counter()
        try:
            names = sorted(os.listdir(root / ".search" / query))
            if names:
                (root / ".search" / query / names[0]).read_bytes()
        except OSError as exc:  # a query the database did not finish in time, say
            print(f"  .search {query!r}: {exc}")
            taken.append(float("inf"))
            continue
        taken.append((time.perf_counter() - started) * 1000)
    return statistics.median(taken)


def synchronous(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """The requests the kernel waited for, by operation, between two samples."""
    grown = {op: n - before.get(op, 0.0) for op, n in after.items() if op not in ASYNC_OPS}
    return {op: n for op, n in grown.items() if n}


def run_engine(engine: str, base: Path, corpus: Path, docs: dict[str, str], admin: str,
               every: float, queries: int) -> dict[str, Any]:  # fmt: skip
    print(f"\n== {engine} ==")
    started = time.perf_counter()
    if engine == "libsql":
        file = base / "libsql" / "reborn-local-dev.db"
        file.parent.mkdir(parents=True, exist_ok=True)
        fill_libsql(file, docs)
        url, where = f"sqlite:{file}", str(file)
    elif engine == "libsql-legacy":
        file = base / "libsql-legacy" / "ironclaw.db"
        fill_libsql_legacy(file, docs)
        url, where = f"sqlite:{file}", str(file)
    else:
        ensure_database(admin, f"scale_{engine}")
        url = f"postgresql://postgres@/scale_{engine}?host={base / 'pgdata'}"
        (fill_legacy if engine == "legacy" else fill_reborn)(url, docs)
        where = url
    print(f"  workspace built through SQL in {time.perf_counter() - started:.0f} s")
    result: dict[str, Any] = {"engine": engine}
    if engine != "legacy":
        result["poll"] = poll_cost(engine, where)
    files = sorted(docs)
    daemon = Daemon(base / f"mnt-{engine}", url, base / f"{engine}.log", base / "runtime")
    drop_page_cache()
    result["mount until the first ls"] = daemon.start()
    agent = Agent(engine, where, files, every)
    agent.start()
    try:
        mnt = daemon.mountpoint
        times: dict[str, tuple[float, float, bool]] = {}

        def beside(name: str, local: tuple[float, str], mine: tuple[float, str]) -> None:
            same = local[1] == mine[1]
            times[name] = (local[0], mine[0], same)
            ratio = mine[0] / max(local[0], 1e-6)
            print(
                f"  {name:24} local {local[0]:8.3f}  memfs {mine[0]:8.3f}  {ratio:6.1f}x  "
                f"{'same' if same else 'DIFFERENT: ' + local[1][:40] + ' / ' + mine[1][:40]}"
            )

        def counted(name: str, workload: Callable[[], tuple[float, str]]) -> tuple[float, str]:
            """``workload`` on the mount, with the requests it made the kernel wait for."""
            before = daemon.requests()
            outcome = workload()
            waited = synchronous(before, daemon.requests())
            result.setdefault("synchronous requests", {})[name] = waited
            print(f"  {name}: synchronous requests {waited}")
            return outcome

        drop_page_cache()
        beside("grep -r cold", timed(lambda: grep_count(corpus)),
               counted("grep -r cold", lambda: timed(lambda: grep_count(mnt))))  # fmt: skip
        local_reads, my_reads = read_workloads(corpus, files), read_workloads(mnt, files)
        for name, local in local_reads.items():
            beside(name, local(), counted(name, my_reads[name]))
        beside("grep -r warm", timed(lambda: grep_count(corpus)), timed(lambda: grep_count(mnt)))
        before = daemon.requests()
        mine = timed(lambda: grep_count(mnt))
        waited = synchronous(before, daemon.requests())
        per_file = sum(waited.values()) / len(files)
        result["synchronous requests (warm grep)"] = waited
        beside("grep -r warm (again)", timed(lambda: grep_count(corpus)), mine)
        beside("read all", timed(lambda: read_all(corpus)), timed(lambda: read_all(mnt)))
        local_writes = write_workloads(corpus, files)
        for name, mine_w in write_workloads(mnt, files).items():
            beside(name, local_writes[name], mine_w)
        result["times"] = times
        result["synchronous requests per file (warm grep)"] = round(per_file, 2)
        result[".search p50 ms"] = round(search_p50(mnt, common_queries(queries)), 1)
        result[".search p50 ms (a rare word)"] = round(
            search_p50(mnt, rare_queries(mnt, files, queries)), 1
        )
        result["rss_mb"], result["peak_rss_mb"] = daemon.rss_mb()
    finally:
        result["agent writes meanwhile"] = agent.stop()
        daemon.stop()
    print(json.dumps({k: v for k, v in result.items() if k != "times"}, indent=1))
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--engines", nargs="+", choices=ENGINES, default=list(ENGINES))
    parser.add_argument("--agent-every", type=float, default=0.5)
    parser.add_argument("--queries", type=int, default=20, help=".search queries timed")
    parser.add_argument("--base", type=Path, default=Path("/var/tmp/memfs-bench-scale"))
    args = parser.parse_args()
    shutil.rmtree(args.base, ignore_errors=True)
    args.base.mkdir(parents=True)
    corpus = args.base / "corpus"
    docs = make_corpus(corpus, args.docs)
    results = []
    with embedded_server(args.base) as admin:
        for engine in args.engines:
            # Each engine's writes start from the same corpus on both sides.
            shutil.rmtree(corpus)
            for path, text in docs.items():
                (corpus / path).parent.mkdir(parents=True, exist_ok=True)
                (corpus / path).write_text(text, encoding="utf-8")
            results.append(
                run_engine(engine, args.base, corpus, docs, admin, args.agent_every, args.queries)
            )
    (args.base / "results.json").write_text(json.dumps(results, indent=1))
    print(f"\nresults: {args.base / 'results.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
