"""How fast other writers' changes show up in a mount: trigger + LISTEN vs polling, and
on IronClaw's libSQL files, Reborn and legacy (polling, woken by a watch on the file).

    .venv/bin/python benchmarks/bench_coherence.py [--events 60] [--libsql-documents 100000]

An SQL writer (as the agent would) inserts, updates and deletes documents; the clock runs
until the mount shows the new state (a file appears, ``cat`` shows new content even
though the kernel had it cached, a file disappears).  On libSQL the writer does IronClaw's
puts in ``BEGIN IMMEDIATE`` on a file already holding ``--libsql-documents`` documents.
Not part of CI.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_core import quantile  # noqa: E402
from memfs.daemon import is_mounted  # noqa: E402
from memfs.db.embedded import start_embedded  # noqa: E402


def row(label: str, values: list[float]) -> str:
    """A table row: p50, p95 and the most, in milliseconds."""
    p50, p95, most = (v * 1e3 for v in (quantile(values, 0.5), quantile(values, 0.95), max(values)))
    return f"{label:<34}{p50:>9.1f}{p95:>9.1f}{most:>9.1f}"


def read(path: Path) -> str | None:
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


def wait(check: object, timeout: float = 10.0) -> float:
    started = time.perf_counter()
    while not check():  # type: ignore[operator]
        if time.perf_counter() - started > timeout:
            raise RuntimeError("change never showed up")
        time.sleep(0.001)
    return time.perf_counter() - started


@contextmanager
def mounted(base: Path, name: str, url: str, *extra: str) -> Iterator[Path]:
    """A memfs mount of ``url`` at ``base/name`` for the block (its log beside it)."""
    mnt = base / name
    mnt.mkdir()
    env = dict(os.environ, XDG_RUNTIME_DIR=str(base / "run"))
    args = [sys.executable, "-m", "memfs", "--log-level", "warning", "mount", "-f",
            "--database-url", url, str(mnt), *extra]  # fmt: skip
    with open(base / f"{name}.log", "ab") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    try:
        deadline = time.monotonic() + 300
        while not is_mounted(mnt):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"the mount {mnt} did not come up; see {base}/{name}.log")
            time.sleep(0.05)
        yield mnt
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        if is_mounted(mnt):
            subprocess.run(["fusermount3", "-u", "-z", str(mnt)], check=False)


def measure(url: str, base: Path, events: int, no_trigger: bool) -> dict[str, list[float]]:
    timings: dict[str, list[float]] = {"insert": [], "update": [], "delete": []}
    folder = "mnt-poll" if no_trigger else "mnt-trigger"
    extra = ["--no-trigger"] if no_trigger else []
    with (
        mounted(base, folder, url, *extra) as mnt,
        psycopg.connect(url, autocommit=True) as conn,
    ):
        for i in range(events):
            name = f"e{i}-{int(no_trigger)}.md"
            conn.execute(
                "INSERT INTO memory_documents (user_id, path, content) "
                "VALUES ('default', %s, 'v1')",
                (name,),
            )
            t = wait(lambda n=name: read(mnt / n) == "v1")
            timings["insert"].append(t)
            conn.execute("UPDATE memory_documents SET content = 'v2' WHERE path = %s", (name,))
            timings["update"].append(wait(lambda n=name: read(mnt / n) == "v2"))
            conn.execute("DELETE FROM memory_documents WHERE path = %s", (name,))
            timings["delete"].append(wait(lambda n=name: not (mnt / n).exists()))
    return timings


def measure_libsql(base: Path, events: int, documents: int) -> dict[str, list[float]]:
    from benchmarks.bench_libsql import _fill
    from memfs.db.reborn import layout
    from memfs.db.reborn.layout import RebornScope
    from tests.ironclaw_libsql import reborn_local_dev

    scope = RebornScope()  # what a mount of the file shows by default
    db = reborn_local_dev(base / "reborn-local-dev.db")
    _fill(db, scope, documents)
    timings: dict[str, list[float]] = {"insert": [], "update": [], "delete": []}
    keys = layout.dumps(scope.keys())
    now = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"
    with mounted(base, "mnt-libsql", f"sqlite:{db}") as mnt:
        conn = sqlite3.connect(db, isolation_level=None, timeout=5)
        for i in range(events):
            name = f"e{i}.md"
            path = scope.row(name)
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(
                "INSERT INTO root_filesystem_entries (path, contents, content_type, kind, "
                f"indexed, version, updated_at) VALUES (?, ?, 'application/json', "
                f"'memory_document', ?, 1, {now})", (path, b"v1", keys),
            )  # fmt: skip
            conn.execute("COMMIT")
            timings["insert"].append(wait(lambda n=name: read(mnt / n) == "v1"))
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(f"UPDATE root_filesystem_entries SET contents = ?, version = version + "
                         f"1, updated_at = {now} WHERE path = ?", (b"v2", path))  # fmt: skip
            conn.execute("COMMIT")
            timings["update"].append(wait(lambda n=name: read(mnt / n) == "v2"))
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("DELETE FROM root_filesystem_entries WHERE path = ?", (path,))
            conn.execute("COMMIT")
            timings["delete"].append(wait(lambda n=name: not (mnt / n).exists()))
        conn.close()
    return timings


def measure_libsql_legacy(base: Path, events: int, documents: int) -> dict[str, list[float]]:
    """The same on IronClaw v1.0's legacy file: its writes as its engine makes them (get or
    create, update with its clock's ``updated_at``, delete), each in ``BEGIN IMMEDIATE``."""
    import uuid

    from tests.ironclaw_libsql import legacy_ironclaw_db

    db = legacy_ironclaw_db(base / "legacy" / "ironclaw.db")
    now = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"
    with sqlite3.connect(db) as conn:
        conn.executemany(
            "INSERT INTO memory_documents (id, user_id, agent_id, path, content, metadata) "
            "VALUES (?, 'default', NULL, ?, ?, '{}')",
            ((str(uuid.uuid4()), f"f{n % 100}/doc{n}.md", f"Document {n}\n")
             for n in range(documents)),
        )  # fmt: skip
    timings: dict[str, list[float]] = {"insert": [], "update": [], "delete": []}
    with mounted(base, "mnt-legacy", f"sqlite:{db}") as mnt:
        conn = sqlite3.connect(db, isolation_level=None, timeout=5)

        def put(sql: str, params: tuple[object, ...]) -> None:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(sql, params)
            conn.execute("COMMIT")

        for i in range(events):
            name = f"e{i}.md"
            insert = ("INSERT INTO memory_documents (id, user_id, agent_id, path, content, "
                      "metadata) VALUES (?, 'default', NULL, ?, 'v1', '{}')")  # fmt: skip
            put(insert, (str(uuid.uuid4()), name))
            timings["insert"].append(wait(lambda n=name: read(mnt / n) == "v1"))
            put(f"UPDATE memory_documents SET content = 'v2', updated_at = {now} WHERE path = ?",
                (name,))  # fmt: skip
            timings["update"].append(wait(lambda n=name: read(mnt / n) == "v2"))
            put("DELETE FROM memory_documents WHERE path = ?", (name,))
            timings["delete"].append(wait(lambda n=name: not (mnt / n).exists()))
        conn.close()
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=60)
    parser.add_argument("--libsql-documents", type=int, default=1000,
                        help="documents the libSQL file holds beside the changed ones")  # fmt: skip
    args = parser.parse_args()
    base = Path(os.environ.get("MEMFS_BENCH_DIR", "/var/tmp/memfs-bench-coherence"))
    shutil.rmtree(base, ignore_errors=True)
    (base / "run").mkdir(parents=True)
    url, server = start_embedded(base / "pgdata", database="coherence", cleanup_mode="delete")
    try:
        print(f"{'external change -> visible':<34}{'p50 ms':>9}{'p95 ms':>9}{'max ms':>9}")
        for no_trigger in (False, True):
            mode = "polling (1 s)" if no_trigger else "trigger + LISTEN"
            events = max(10, args.events // 4) if no_trigger else args.events
            for op, values in measure(url, base, events, no_trigger).items():
                label = f"{mode}: {op}"
                print(row(label, values))
        timings = measure_libsql(base, max(10, args.events // 2), args.libsql_documents)
        for op, values in timings.items():
            label = f"libSQL ({args.libsql_documents} docs): {op}"
            print(row(label, values))
        timings = measure_libsql_legacy(base, max(10, args.events // 2), args.libsql_documents)
        for op, values in timings.items():
            label = f"legacy libSQL ({args.libsql_documents} docs): {op}"
            print(row(label, values))
    finally:
        server.cleanup()


if __name__ == "__main__":
    main()
